# pagein convert from GGUF: --dequantize to F32/F16/BF16 gives the values of
# the independent reference tests/dequant_ref.py; GGUF metadata reaches
# safetensors as __metadata__ strings (non-strings JSON-encoded, arrays too)
# and GGUF output keeps every key with its type and value (tokenizer arrays
# included), checked with the independent reader tests/gguf_ref.py;
# whatever cannot be carried is listed in the --json summary's "skipped".
. "$REPO/tests/cli/lib.sh"
Q=$TESTDATA/gguf/tinyllamas-stories-260k-q8_0.gguf
V=$TESTDATA/gguf/ggml-vocab-llama-spm.gguf
[ -e "$Q" ] && [ -e "$V" ] || { echo "real test data not found under $TESTDATA"; exit 77; }
$PY -c 'import numpy' 2>/dev/null || { echo "python3-numpy is not installed"; exit 77; }

# ---- quantized -> safetensors ---------------------------------------------------------
expect_exit 1 "$PAGEIN" convert "$Q" q.safetensors
expect_contains "dequantize"
expect_exit 2 "$PAGEIN" convert "$Q" q.safetensors --dequantize q4
mkdir ref
$PY "$REPO/tests/dequant_ref.py" gguf "$Q" ref > ref/list.txt || fail "dequant_ref.py failed"
for t in f32 f16 bf16; do
  expect_exit 0 "$PAGEIN" convert "$Q" "q-$t.safetensors" --dequantize $t --json
  echo "$OUT_TXT" | $PY -c "import json,sys; d=json.load(sys.stdin); assert d['dequantized'] == 37 and d['skipped'] == [], d['skipped']" \
    || fail "--dequantize $t: summary"
  $PY - "q-$t.safetensors" ref $t "$REPO/tests" <<'PYEOF' || fail "--dequantize $t: values differ from tests/dequant_ref.py"
import json, os, struct, sys
import numpy as np
sys.path.insert(0, sys.argv[4]); import dequant_ref
path, ref, t = sys.argv[1:4]
b = open(path, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); h.pop("__metadata__")
want_dt = {"f32": "F32", "f16": "F16", "bf16": "BF16"}[t]
checked = 0
for line in open(os.path.join(ref, "list.txt")):
    i, name, ty = line.split("\t"); ty = ty.strip()
    y = np.fromfile(os.path.join(ref, i + ".f32"), "<f4")
    e = h[name]; raw = b[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
    if ty == "F32":
        assert e["dtype"] == "F32", name  # plain tensors are kept
        assert raw == y.tobytes(), name
        continue
    assert e["dtype"] == want_dt, (name, e["dtype"])
    if t == "f32":
        want = y.view(np.uint32)
        got = np.frombuffer(raw, "<u4")
    elif t == "f16":
        want = y.astype("<f2").view(np.uint16); got = np.frombuffer(raw, "<u2")
    else:
        want = dequant_ref.to_bf16(y); got = np.frombuffer(raw, "<u2")
    assert np.array_equal(got, want), name
    checked += 1
assert checked == 37, checked
PYEOF
done

# ---- GGUF metadata as __metadata__ strings ----------------------------------------------
$PY - q-f32.safetensors "$Q" "$REPO/tests" <<'PYEOF' || fail "__metadata__ does not hold every GGUF key"
import json, struct, sys
sys.path.insert(0, sys.argv[3]); import gguf_ref
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; m = json.loads(b[8:8 + n])["__metadata__"]
g = gguf_ref.read(sys.argv[2])
assert len(g["meta"]) == 20 and set(m) == {e["key"] for e in g["meta"]}, sorted(m)
assert all(isinstance(v, str) for v in m.values())
assert m["general.architecture"] == "llama" and m["llama.block_count"] == "5"
eps = [e["value"] for e in g["meta"] if e["key"] == "llama.attention.layer_norm_rms_epsilon"][0]  # float.hex of the f32
assert struct.pack("<f", float(m["llama.attention.layer_norm_rms_epsilon"])) == struct.pack("<f", float.fromhex(eps))
tokens, scores, types = (json.loads(m["tokenizer.ggml." + k]) for k in ("tokens", "scores", "token_type"))
assert len(tokens) == len(scores) == len(types) == 512, (len(tokens), len(scores), len(types))
assert tokens[:3] == ["<unk>", "<s>", "</s>"] and types[:3] == [2, 3, 3]
assert all(isinstance(x, float) for x in scores)
PYEOF

# ---- GGUF -> GGUF keeps every key -------------------------------------------------------
# (tinyllamas' ffn_down rows of 172 are not whole Q8_0 blocks: copied in that
# old layout as they are, and also dequantized; the vocab file has no tensors)
expect_exit 0 "$PAGEIN" convert "$Q" q.gguf --json
echo "$OUT_TXT" | $PY -c "import json,sys; assert json.load(sys.stdin)['skipped'] == []" || fail "skipped not empty"
expect_exit 0 "$PAGEIN" convert "$Q" qd.gguf --dequantize f16 --json
echo "$OUT_TXT" | $PY -c "import json,sys; assert json.load(sys.stdin)['skipped'] == []" || fail "skipped not empty"
expect_exit 0 "$PAGEIN" convert "$V" v.gguf --json
$PY - "$Q" q.gguf "$REPO/tests" <<'PYEOF' || fail "GGUF -> GGUF changed tensor bytes"
import sys
sys.path.insert(0, sys.argv[3]); import gguf_ref
a, b = gguf_ref.read(sys.argv[1]), gguf_ref.read(sys.argv[2])
da, db = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
assert [(t["name"], t["type"], t["ne"]) for t in a["tensors"]] == [(t["name"], t["type"], t["ne"]) for t in b["tensors"]]
for x, y in zip(a["tensors"], b["tensors"]):
    assert da[x["offset"]:x["offset"] + x["nbytes"]] == db[y["offset"]:y["offset"] + y["nbytes"]], x["name"]
PYEOF
$PY - "$Q" q.gguf "$V" v.gguf "$REPO/tests" "$Q" qd.gguf <<'PYEOF' || fail "GGUF -> GGUF lost or changed metadata"
import struct, sys
sys.path.insert(0, sys.argv[5]); import gguf_ref

def full(path):
    """every key with its type and full value (arrays element by element)"""
    data = open(path, "rb").read(); r = gguf_ref.Reader(data)
    (v,) = struct.unpack_from("<I", data, 4)
    if v & 0xFFFF == 0: r.e = ">"; (v,) = struct.unpack_from(">I", data, 4)
    r.p = 8; r.v1 = v == 1; r.length(); nkv = r.length(); out = {}
    def val(t):
        if t == 8: return r.string()
        if t == 9:
            et = r.take("I"); c = r.length(); return (et, [val(et) for _ in range(c)])
        return r.value(t)
    for _ in range(nkv):
        k = r.string(); t = r.take("I"); out[k] = (t, val(t))
    return out
for src, dst in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4]), (sys.argv[6], sys.argv[7])):
    a, b = full(src), full(dst)
    assert a == b, (src, sorted(set(a) ^ set(b)), [k for k in a if k in b and a[k] != b[k]][:3])
    assert any(t == 9 for t, _ in a.values())
print("ok")
PYEOF

# ---- what cannot be carried is listed ----------------------------------------------------
$PY - <<'PYEOF' || fail "cannot write meta.safetensors"
import json, struct
h = json.dumps({"__metadata__": {"general.alignment": "64", "note": "kept"},
                "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
h += b" " * (-len(h) % 8)
open("meta.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<2f", 1, 2))
PYEOF
expect_exit 0 "$PAGEIN" convert meta.safetensors meta.gguf --json
echo "$OUT_TXT" | $PY -c "
import json,sys; s=json.load(sys.stdin)['skipped']
assert [e['name'] for e in s] == ['general.alignment'] and s[0]['reason'], s" || fail "skipped does not list general.alignment: $OUT_TXT"

# ---- big-endian quantized data: refused, named ------------------------------------------
$PY - <<'PYEOF' || fail "cannot write be.gguf"
import struct
def s(x): return struct.pack(">Q", len(x)) + x
kv = s(b"general.architecture") + struct.pack(">I", 8) + s(b"llama")
ti = s(b"w") + struct.pack(">I", 1) + struct.pack(">Q", 32) + struct.pack(">I", 8) + struct.pack(">Q", 0)
head = b"GGUF" + struct.pack(">I", 3) + struct.pack(">QQ", 1, 1) + kv + ti
head += b"\0" * (-len(head) % 32)
open("be.gguf", "wb").write(head + struct.pack(">e", 1.0) + bytes(range(32)) + b"\0" * 30)
PYEOF
expect_exit 0 "$PAGEIN" inspect be.gguf
expect_exit 1 "$PAGEIN" convert be.gguf be.safetensors --dequantize f32
expect_contains "big-endian"
[ ! -e be.safetensors ] || fail "output written for a refused conversion"
exit 0
