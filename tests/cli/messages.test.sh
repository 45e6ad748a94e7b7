# What a new user reads: FIFOs refused at once, directories and indexes
# pointed to `plan`, errors that say path and errno once, plurals, escapes
# in text output, present layers of a LoRA-like file, torch views' BYTES,
# valid JSON for any path bytes, framed read-samples (issues 17, 19).
. "$REPO/tests/cli/lib.sh"
T="timeout 20"
"$PAGEIN" make-sample m.safetensors --layers 4 --hidden 64 --vocab 128 -q || fail "make-sample"

# ---- FIFOs and devices: every command fails at once ----
mkfifo fifo
expect_exit 2 $T "$PAGEIN" inspect fifo
expect_contains "FIFO"
expect_exit 2 $T "$PAGEIN" verify fifo
expect_contains "FIFO"
expect_exit 2 $T "$PAGEIN" plan fifo
expect_contains "FIFO"
expect_exit 2 $T "$PAGEIN" inspect /dev/zero
expect_contains "character device"
if $PY -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")' 2>/dev/null && [ -S sock ]; then
  expect_exit 2 $T "$PAGEIN" inspect sock
  expect_contains "socket"
  expect_exit 2 $T "$PAGEIN" verify sock
  expect_contains "socket"
  expect_exit 1 $T "$PAGEIN" warm sock
  expect_contains "socket"
else
  echo "cannot create a unix socket here: socket checks skipped"
fi
expect_exit 2 $T "$PAGEIN" install fifo copy.safetensors
expect_contains "FIFO"
[ -e copy.safetensors ] && fail "install from a FIFO created its target"
expect_exit 2 $T "$PAGEIN" read-samples --records 4 fifo --ids
expect_contains "FIFO"
mkfifo q.idx && : > q.bin
expect_exit 2 $T "$PAGEIN" read-samples --megatron q --ids
expect_contains "FIFO"

# ---- directories and indexes ----
mkdir shard
"$PAGEIN" convert m.safetensors shard/model.safetensors --max-shard-size 100K -q || fail "convert"
expect_exit 2 $T "$PAGEIN" inspect shard
expect_contains "pagein plan shard"
expect_exit 2 $T "$PAGEIN" inspect shard/model.safetensors.index.json
expect_contains "pagein plan"
expect_contains "open_model"
expect_exit 0 $T "$PAGEIN" plan shard

# ---- path and errno once ----
expect_exit 2 $T "$PAGEIN" inspect missing.safetensors
[ "$(echo "$OUT_TXT" | grep -o "missing.safetensors" | wc -l)" = 1 ] || fail "path repeated: $OUT_TXT"
[ "$(echo "$OUT_TXT" | grep -o "No such file" | wc -l)" = 1 ] || fail "errno repeated: $OUT_TXT"
expect_exit 2 $T "$PAGEIN" plan missing.safetensors
[ "$(echo "$OUT_TXT" | grep -o "No such file" | wc -l)" = 1 ] || fail "errno repeated: $OUT_TXT"

# ---- a LoRA-like file (layers 30 and 31 only), names with control bytes ----
$PY - <<'PY'
import json, struct
def write(path, tensors, meta=None):
    hdr, off = {}, 0
    for name, shape in tensors:
        n = 4
        for d in shape: n *= d
        hdr[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    if meta: hdr["__metadata__"] = meta
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"\0" * off)
t = [("base_model.model.model.layers.%d.self_attn.%s.%s.weight" % (l, p, ab), [2, 4])
     for l in (30, 31) for p in ("q_proj", "v_proj") for ab in ("lora_A", "lora_B")]
write("lora.safetensors", t, {"note": "line1\nline2\tend"})
write("one.safetensors", [("tab\tname", [1])])
PY
expect_exit 0 $T "$PAGEIN" inspect lora.safetensors
expect_contains "2 layers (30-31)"
echo "$OUT_TXT" | grep -q "32 numbered layers" && fail "inspect counts absent layers: $OUT_TXT"
expect_contains 'line1\\nline2\\tend'
echo "$OUT_TXT" | grep -q "line1?line2" && fail "control bytes shown as '?': $OUT_TXT"
"$PAGEIN" inspect --json lora.safetensors | $PY -c '
import json, sys
d = json.load(sys.stdin)
assert d["layers"] == 32, d["layers"]  # unchanged meaning: highest index + 1
assert (d["layers_present"], d["layer_min"], d["layer_max"]) == (2, 30, 31), d
' || fail "inspect --json layer fields"
"$PAGEIN" inspect --json m.safetensors | $PY -c '
import json, sys
d = json.load(sys.stdin)
assert (d["layers"], d["layers_present"], d["layer_min"], d["layer_max"]) == (4, 4, 0, 3), d
' || fail "inspect --json layer fields of a full model"
expect_exit 0 $T "$PAGEIN" plan lora.safetensors
expect_contains "2 layers (30-31)"
[ "$(echo "$OUT_TXT" | grep -c "  layer ")" = 2 ] || fail "plan lists empty layers: $OUT_TXT"
"$PAGEIN" plan --json lora.safetensors | $PY -c '
import json, sys
d = json.load(sys.stdin)
assert (d["layers_present"], d["layer_min"], d["layer_max"]) == (2, 30, 31), d
assert [g["layer"] for g in d["layer_groups"] if 0 <= g["layer"] < d["layers"]] == [30, 31], d
' || fail "plan --json layers"
expect_exit 1 $T "$PAGEIN" warm --layers 0 lora.safetensors
expect_contains "2 layers (30-31)"
expect_exit 0 $T "$PAGEIN" inspect one.safetensors
expect_contains 'tab\\tname'
expect_contains "tensors:     1; no numbered layers"
expect_contains "F32               1 tensor "
expect_exit 0 $T "$PAGEIN" verify one.safetensors
expect_contains "OK (1 tensor)"

# ---- JSON for any path bytes ----
bad=$(printf 'bad\xe9\xff.safetensors')
cp m.safetensors "$bad"
for cmd in "inspect --json" "plan --json" "resident --json" "warm --json"; do
  "$PAGEIN" $cmd "$bad" > out.json || fail "$cmd on a non-UTF-8 path"
  $PY -c '
import json, sys
raw = open(sys.argv[1], "rb").read()
raw.decode("utf-8")  # strict: raises on raw non-UTF-8 bytes
d = json.loads(raw)
assert br"bad\u00e9\u00ff.safetensors" in raw, raw[:200]
' out.json || fail "$cmd: output is not valid UTF-8 JSON: $(head -c 300 out.json)"
done

# ---- torch views: BYTES marked as a storage span ----
if $PY -c 'import torch' 2>/dev/null; then
  $PY -c '
import torch
x = torch.arange(100.).reshape(10, 10)
torch.save({"base": x, "view": x[2:6, 3:7]}, "v.pt")
'
  expect_exit 0 $T "$PAGEIN" inspect v.pt
  echo "$OUT_TXT" | grep -E "^view +F32 +\[4,4\] +136\*" >/dev/null || fail "view row not marked: $OUT_TXT"
  echo "$OUT_TXT" | grep -E "^base +F32 +\[10,10\] +400 " >/dev/null || fail "base row marked: $OUT_TXT"
  expect_contains "span of storage"
  "$PAGEIN" inspect --json v.pt | $PY -c '
import json, sys
t = {x["name"]: x for x in json.load(sys.stdin)["tensors"]}
assert (t["view"]["nbytes"], t["view"]["own_nbytes"]) == (136, 64), t["view"]
assert (t["base"]["nbytes"], t["base"]["own_nbytes"]) == (400, 400), t["base"]
' || fail "torch own_nbytes"
else
  echo "torch not importable: torch BYTES check skipped"
fi

# ---- read-samples: framed output for variable-length samples ----
$PY - <<'PY'
import struct
lens = [3, 0, 2]; toks = [[1, 2, 3], [], [7, 8]]
S = len(lens); ptrs = [0, 12, 12]; docs = [0, 1, 3]
idx = b"MMIDIDX\0\0" + struct.pack("<QBQQ", 1, 4, S, len(docs))
idx += struct.pack("<3i", *lens) + struct.pack("<3q", *ptrs) + struct.pack("<3q", *docs)
open("g.idx", "wb").write(idx)
open("g.bin", "wb").write(b"".join(struct.pack("<%di" % len(t), *t) for t in toks))
PY
"$PAGEIN" read-samples --megatron g --in-order --format framed > g.framed || fail "framed"
$PY - g.framed <<'PY' || fail "framed output"
import struct, sys
b = open(sys.argv[1], "rb").read()
out, i = [], 0
while i < len(b):
    sid, n = struct.unpack_from("<QQ", b, i); i += 16
    out.append((sid, list(struct.unpack_from("<%di" % (n // 4), b, i)))); i += n
assert out == [(0, [1, 2, 3]), (1, []), (2, [7, 8])], out
PY
"$PAGEIN" read-samples --megatron g --in-order --format jsonl > g.jsonl || fail "jsonl"
$PY - g.jsonl <<'PY' || fail "jsonl output"
import base64, json, struct, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = [(r["id"], r["length"], list(struct.unpack("<%di" % (r["length"] // 4), base64.b64decode(r["base64"])))) for r in rows]
assert got == [(0, 12, [1, 2, 3]), (1, 0, []), (2, 8, [7, 8])], got
PY
"$PAGEIN" read-samples --megatron g --in-order --format raw > g.raw || fail "raw"
cmp -s g.raw g.bin || fail "raw differs from the data"
expect_exit 2 $T "$PAGEIN" read-samples --megatron g --format nope
expect_exit 2 $T "$PAGEIN" read-samples --megatron g --format framed --ids
# --align that is not a power of two from 8 to 2^30 is a usage error (exit 2)
"$PAGEIN" make-sample al.safetensors --size 1M -q || fail "make-sample for --align"
expect_exit 2 $T "$PAGEIN" convert al.safetensors al3.safetensors --align 3
expect_contains "power of two"
expect_exit 2 $T "$PAGEIN" make-sample al3.safetensors --size 1M --align 3
[ ! -e al3.safetensors ] || fail "an output was written for --align 3"
"$PAGEIN" convert al.safetensors al4k.safetensors --align 4096 -q || fail "--align 4096"
# make-sample --help states one size convention
"$PAGEIN" make-sample --help | grep -q "K, M," || fail "make-sample --help: size suffixes"
"$PAGEIN" make-sample --help | grep -q "1.3 GB = 1.3e9" && fail "make-sample --help still mixes 1.3 GB = 1.3e9 and 1024^n"
exit 0
