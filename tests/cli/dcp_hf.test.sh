# dcp_hf.test.sh - torch's safetensors flavour of a Distributed Checkpoint
# (DCP_SHARDING_INFO; fixtures by tests/data/dcp/hf/gen.py, following
# torch's _hf_utils.py): inspect lists the whole tensors, convert
# consolidates them (byte-identical to the script's own reconstruction),
# with --max-shard-size too, and a malformed checkpoint is refused naming
# the tensor and the file.
. "$REPO/tests/cli/lib.sh"
FX="$REPO/tests/data/dcp/hf"

expect_exit 0 "$PAGEIN" inspect "$FX/ckpt"
expect_contains "DCP_SHARDING_INFO"
expect_contains "rows.weight *F32 *\[8,6\]"
expect_contains "cols.weight *BF16 *\[4,8\]"
expect_contains "4 tensors (310 bytes)"
expect_exit 0 "$PAGEIN" inspect --json "$FX/ckpt"
expect_contains '"format":"dcp-safetensors"'

expect_exit 0 "$PAGEIN" convert "$FX/ckpt" "$TMP/out/model.safetensors"
expect_contains "4 tensors, 310 bytes"
cmp "$TMP/out/model.safetensors" "$FX/expected.safetensors" || fail "consolidated file differs from expected.safetensors"
expect_exit 0 "$PAGEIN" verify "$TMP/out/model.safetensors"

expect_exit 0 "$PAGEIN" convert --max-shard-size 100 "$FX/ckpt" "$TMP/sh/model.safetensors"
expect_contains "3 files"
expect_exit 0 "$PAGEIN" verify "$TMP/sh/model.safetensors.index.json"

# torch puts the ranks' files in sharded/ when it consolidates too
mkdir -p "$TMP/top/sharded" && cp "$FX"/ckpt/*.safetensors "$TMP/top/sharded/"
expect_exit 0 "$PAGEIN" inspect "$TMP/top"
expect_contains "4 tensors (310 bytes)"
# ... but a consolidated model beside sharded/ is that model, not the shards
cp "$FX/expected.safetensors" "$TMP/top/model-00001-of-00001.safetensors"
expect_exit 0 "$PAGEIN" convert "$TMP/top/model-00001-of-00001.safetensors" "$TMP/again.safetensors"
"$PAGEIN" inspect "$TMP/top" 2>&1 | grep -q "DCP_SHARDING_INFO" && fail "the consolidated model's directory was read as the shards"

expect_exit 1 "$PAGEIN" convert "$FX/bad_overlap" "$TMP/bad.safetensors"
expect_contains "'rows.weight'"
expect_contains "shard-00002-model-00001-of-00001.safetensors overlap"
[ ! -e "$TMP/bad.safetensors" ] || fail "output left behind"
expect_exit 1 "$PAGEIN" inspect "$FX/bad_gap"
expect_contains "gap of 12 elements"
exit 0
