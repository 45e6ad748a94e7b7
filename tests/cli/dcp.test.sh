# dcp.test.sh - torch Distributed Checkpoints on the command line (the
# committed fixtures of tests/data/dcp, written by torch's own DCP writer):
# inspect lists the items, convert consolidates into one safetensors file
# or Hugging Face shards whose tensors verify and list, the directory is a
# model for plan/verify/warm/resident/evict/hash (each rank's file
# counting the tensors it holds bytes of), a rank's .distcp file gets advice, and an
# unsafe .metadata is refused without running anything.
. "$REPO/tests/cli/lib.sh"
FX="$REPO/tests/data/dcp"

expect_exit 0 "$PAGEIN" inspect "$FX/rank4"
expect_contains "torch Distributed Checkpoint"
expect_contains "rows.weight"
expect_contains "9 tensors (561 bytes), 2 non-tensor items"

expect_exit 0 "$PAGEIN" convert "$FX/rank4" "$TMP/out/model.safetensors"
expect_contains "9 tensors, 561 bytes, 2 non-tensor items skipped"
expect_exit 0 "$PAGEIN" inspect "$TMP/out/model.safetensors"
expect_contains "cols.weight"
expect_exit 0 "$PAGEIN" verify "$TMP/out/model.safetensors"

# Hugging Face shards plus the index, through the same engine run
expect_exit 0 "$PAGEIN" convert --max-shard-size 200 "$FX/rank4" "$TMP/sh/model.safetensors"
expect_contains "9 tensors, 561 bytes, 2 non-tensor items skipped, 3 files"
[ -f "$TMP/sh/model.safetensors.index.json" ] && [ -f "$TMP/sh/model-00003-of-00003.safetensors" ] ||
  fail "no shard set: $(ls "$TMP/sh")"
[ ! -e "$TMP/sh/model.safetensors" ] || fail "a single file beside the shards"
expect_exit 0 "$PAGEIN" verify "$TMP/sh/model.safetensors.index.json"
expect_exit 0 "$PAGEIN" plan "$TMP/sh/model.safetensors.index.json"
expect_contains "9 tensors"

# the directory is a model (the format table's DCP row): plan, verify,
# resident, warm, evict take it like a sharded checkpoint
expect_exit 0 "$PAGEIN" plan "$FX/rank4"
expect_contains "11 tensors"
expect_contains "__3_0.distcp"
# each rank's file counts the tensors with bytes in it (was "0 tensors")
expect_contains "__0_0.distcp (7.47 KiB, 11 tensors)"
expect_contains "__3_0.distcp (2.19 KiB, 3 tensors)"
expect_exit 0 "$PAGEIN" plan --json "$FX/rank4"
expect_contains '"tensors": 3, "tensor_bytes": 56, "format": "dcp"'
expect_exit 0 "$PAGEIN" verify "$FX/rank4" "$FX/v2"
expect_contains "rank4: OK (11 tensors in 4 files)"
expect_exit 0 "$PAGEIN" warm "$FX/rank4"
expect_exit 0 "$PAGEIN" resident "$FX/rank4"
expect_contains "resident"
expect_contains "__1_0.distcp: 120 B of tensor data, 120 B resident"
expect_contains "__3_0.distcp: 56 B of tensor data"
# a manifest lists every tensor, each piece of an assembled one under its file
cp -r "$FX/rank4" "$TMP/hashed"
expect_exit 0 "$PAGEIN" hash "$TMP/hashed"
expect_contains "20 tensors in 4 files"
grep -q "^tensor 3 320 24 [0-9a-f]* rows.weight@9,0$" "$TMP/hashed/.pagein-manifest" ||
  fail "no piece in the manifest: $(cat "$TMP/hashed/.pagein-manifest")"
grep -q "^tensor 0 3487 24 [0-9a-f]* layers.0.bias$" "$TMP/hashed/.pagein-manifest" || fail "no view in the manifest"
expect_exit 0 "$PAGEIN" hash --check "$TMP/hashed"
printf 'x' | dd of="$TMP/hashed/__1_0.distcp" bs=1 seek=330 conv=notrunc 2>/dev/null
expect_exit 1 "$PAGEIN" hash --check "$TMP/hashed"
expect_contains "__1_0.distcp: tensor 'rows.weight@3,0': data hash differs"
expect_exit 0 "$PAGEIN" evict "$FX/rank4"
mkdir -p "$TMP/past" && cp "$FX"/rank4/__* "$TMP/past/" && cp "$FX/bad/past_end.metadata" "$TMP/past/.metadata"
expect_exit 1 "$PAGEIN" verify "$TMP/past"
expect_contains "'blocks'"
expect_contains "__3_0.distcp"

expect_exit 2 "$PAGEIN" inspect "$FX/rank4/__0_0.distcp"
expect_contains "one rank's file of a torch Distributed Checkpoint"

mkdir -p "$TMP/evil" && cp "$FX/bad/evil.metadata" "$TMP/evil/.metadata"
(cd "$TMP" && "$PAGEIN" convert evil evil.safetensors) >"$TMP/evil.out" 2>&1 && fail "evil metadata converted"
grep -q "refusing global" "$TMP/evil.out" || fail "no refusal: $(cat "$TMP/evil.out")"
[ ! -e "$TMP/PWNED_BY_DCP_METADATA" ] && [ ! -e "$TMP/evil.safetensors" ] || fail "something ran or was written"
echo "dcp: inspect, convert (one file and shards), verify, the directory as a model (plan, verify, warm, resident, evict), refusals"
