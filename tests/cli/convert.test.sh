# pagein convert without torch: GGUF <-> safetensors round trips on real
# files, page-aligned safetensors, refusals and usage errors. (Checkpoints
# are covered by `make torch-test`, which needs python3-torch.)
. "$REPO/tests/cli/lib.sh"
G=$TESTDATA/gguf/llama-2-tiny-random.gguf
S=$TESTDATA/safetensors/burn-mnist-f32.safetensors
[ -e "$G" ] && [ -e "$S" ] || { echo "real test data not found under $TESTDATA"; exit 77; }

expect_exit 0 "$PAGEIN" convert --help
expect_contains "max-shard-size"
expect_exit 2 "$PAGEIN" convert
expect_exit 2 "$PAGEIN" convert "$G" out.safetensors --dtype q4
expect_exit 2 "$PAGEIN" convert "$G" out.safetensors --bogus
expect_exit 2 "$PAGEIN" convert no-such-file.pt out.safetensors

# GGUF -> safetensors -> GGUF -> safetensors: the two safetensors files are identical
expect_exit 0 "$PAGEIN" convert "$G" a.safetensors
expect_contains "converted 12 tensors"
expect_exit 0 "$PAGEIN" convert -q a.safetensors b.gguf
expect_exit 0 "$PAGEIN" convert -q b.gguf c.safetensors
cmp a.safetensors c.safetensors || fail "GGUF round trip changed the safetensors bytes"
expect_exit 0 "$PAGEIN" inspect b.gguf
expect_contains "tensors:     12"

# quantized GGUF cannot become safetensors: refused, nothing written
Q=$TESTDATA/gguf/tinyllamas-stories-260k-q8_0.gguf
if [ -e "$Q" ]; then
  expect_exit 1 "$PAGEIN" convert "$Q" q.safetensors
  expect_contains "Q8_0"
  [ ! -e q.safetensors ] || fail "output left behind after a refused conversion"
fi

# safetensors -> page-aligned safetensors, same tensors; --json is valid JSON
expect_exit 0 "$PAGEIN" convert "$S" aligned.safetensors --align 4096 --json
echo "$OUT_TXT" | $PY -m json.tool > /dev/null || fail "--json output is not JSON"
$PY - "$S" aligned.safetensors <<'PYEOF' || fail "aligned copy differs"
import json, struct, sys
def rd(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    m = h.pop("__metadata__", None); d = b[8 + n:]
    return n, m, {k: (v["dtype"], v["shape"], d[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items()}
n0, m0, a = rd(sys.argv[1]); n1, m1, b = rd(sys.argv[2])
assert (8 + n1) % 4096 == 0, n1
assert a == b and m0 == m1
PYEOF

# --dtype bf16 from F32: every element is the rounded value
expect_exit 0 "$PAGEIN" convert -q "$S" bf16.safetensors --dtype bf16
$PY - "$S" bf16.safetensors <<'PYEOF' || fail "bf16 cast wrong"
import json, struct, sys
import numpy as np
def rd(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: (v["dtype"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
a, b = rd(sys.argv[1]), rd(sys.argv[2])
assert any(dt == "F32" for dt, _ in a.values())
for k, (dt, raw) in a.items():
    if dt != "F32":
        assert b[k] == (dt, raw), k  # non-float tensors are kept
        continue
    assert b[k][0] == "BF16"
    u = np.frombuffer(raw, dtype=np.uint32).astype(np.uint64)
    want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    assert np.array_equal(np.frombuffer(b[k][1], dtype=np.uint16), want), k
PYEOF

# sharding: index names every tensor
mkdir -p sh
expect_exit 0 "$PAGEIN" convert -q "$G" sh/model.safetensors --max-shard-size 300K
[ -e sh/model.safetensors.index.json ] || fail "no index written"
$PY -c "import json,sys; d=json.load(open('sh/model.safetensors.index.json')); assert len(d['weight_map'])==12 and len(set(d['weight_map'].values()))>1" || fail "bad index"
