# pagein inspect / verify / make-sample on GGUF files.
. "$REPO/tests/cli/lib.sh"
G="$TESTDATA/gguf"
[ -d "$G" ] || { echo "skip: no $G"; exit 77; }
for f in "$G"/*.gguf; do
  expect_exit 0 "$PAGEIN" inspect "$f"
  expect_contains "format:      gguf"
  expect_contains "gguf:        version"
  "$PAGEIN" inspect --json "$f" > out.json || fail "inspect --json $f"
  $PY - "$f" out.json <<'PY' || fail "inspect --json $f disagrees with tests/gguf_ref.py"
import json, os, subprocess, sys
d = json.load(open(sys.argv[2]))
ref = json.loads(subprocess.check_output(["/usr/bin/python3", os.environ["REPO"] + "/tests/gguf_ref.py", sys.argv[1]]))
assert d["format"] == "gguf"
assert d["version"] == ref["version"] and d["alignment"] == ref["alignment"], (d["version"], d["alignment"])
assert d["data_start"] == ref["data_start"]
assert len(d["metadata"]) == ref["n_kv"] and d["n_tensors"] == ref["n_tensors"]
assert list(d["metadata"]) == [m["key"] for m in ref["meta"]]
for m in ref["meta"]:
    v = d["metadata"][m["key"]]
    if m["type"] == 9:
        assert isinstance(v, list)
        n = m["value"]["count"]
        if n > 64:
            assert len(v) == 65 and v[-1] == {"...truncated": {"count": n, "shown": 64}}, m["key"]
        else:
            assert len(v) == n, m["key"]
    elif m["type"] == 8:
        assert isinstance(v, str)
    elif m["type"] in (6, 12):
        assert abs(v - float.fromhex(m["value"])) <= 1e-6 * abs(v), m["key"]
    elif m["type"] == 7:
        assert v is bool(m["value"])
    else:
        assert v == m["value"], m["key"]
for a, b in zip(ref["tensors"], d["tensors"]):
    assert a["name"] == b["name"] and a["ne"] == b["ne"] and a["offset"] == b["offset"], (a, b)
    assert a["type"] == b["ggml_type"] and a["nbytes"] == b["nbytes"] and b["shape"] == a["ne"][::-1]
PY
done
# --full=all: no truncation; --full: the first 1024 and a marker
"$PAGEIN" inspect --json --full=all "$G/ggml-vocab-llama-spm.gguf" | $PY -c '
import json, sys
d = json.load(sys.stdin)
assert len(d["metadata"]["tokenizer.ggml.tokens"]) == 32000
assert d["metadata"]["tokenizer.ggml.tokens"][1] == "<s>"' || fail "--full=all"
"$PAGEIN" inspect --json --full "$G/ggml-vocab-llama-spm.gguf" | $PY -c '
import json, sys
t = json.load(sys.stdin)["metadata"]["tokenizer.ggml.tokens"]
assert len(t) == 1025 and t[1] == "<s>" and t[-1] == {"...truncated": {"count": 32000, "shown": 1024}}, t[-1]' || fail "--full"
n=$("$PAGEIN" inspect --full "$G/ggml-vocab-llama-spm.gguf" | wc -c)
[ "$n" -lt 100000 ] || fail "inspect --full printed $n bytes: long arrays not summarised"
"$PAGEIN" inspect --full "$G/ggml-vocab-llama-spm.gguf" | grep -q "30976 more" || fail "--full text: no '... N more'"
expect_exit 0 "$PAGEIN" inspect --summary "$G/ggml-vocab-llama-spm.gguf"
expect_contains 'tokenizer.ggml.tokens = string\[32000\] \["<unk>", "<s>"'
expect_contains "31992 more"
# the malformed file: clear error, exit 1
expect_exit 1 "$PAGEIN" inspect "$G/malformed/ollama-test-truncated-6bytes.gguf"
expect_contains "truncated"
expect_exit 1 "$PAGEIN" verify "$G/malformed/ollama-test-truncated-6bytes.gguf"
expect_exit 0 "$PAGEIN" verify "$G"/*.gguf
# make-sample --format gguf, every data type
for dt in f32 f16 bf16 q8_0; do
  expect_exit 0 "$PAGEIN" make-sample s-$dt.gguf --format gguf --dtype $dt --size 3M --hidden 64 --layers 3 --seed 7
  expect_exit 0 "$PAGEIN" verify s-$dt.gguf
  "$PAGEIN" inspect --json s-$dt.gguf > s.json || fail "inspect s-$dt.gguf"
  $PY - s.json $dt <<'PY' || fail "make-sample --format gguf --dtype $dt"
import json, sys
d = json.load(open(sys.argv[1])); dt = sys.argv[2].upper()
m = d["metadata"]
assert m["general.architecture"] == "llama" and m["llama.block_count"] == 3 and m["llama.embedding_length"] == 64
assert d["n_tensors"] == 3 + 9 * 3 and d["layers"] == 3
names = [t["name"] for t in d["tensors"]]
assert names[0] == "token_embd.weight" and names[-1] == "output.weight" and "blk.2.ffn_down.weight" in names
types = {t["name"]: t["dtype"] for t in d["tensors"]}
assert types["blk.0.attn_q.weight"] == dt and types["blk.0.attn_norm.weight"] == "F32"
PY
  /usr/bin/python3 "$REPO/tests/gguf_ref.py" s-$dt.gguf > /dev/null || fail "gguf_ref.py cannot read s-$dt.gguf"
done
# same seed, same bytes
expect_exit 0 "$PAGEIN" make-sample again.gguf --format gguf --dtype q8_0 --size 3M --hidden 64 --layers 3 --seed 7 -q
cmp -s again.gguf s-q8_0.gguf || fail "make-sample --format gguf is not deterministic"
expect_exit 2 "$PAGEIN" make-sample x.safetensors --dtype q8_0
expect_exit 2 "$PAGEIN" make-sample x.gguf --format gguf --dtype q8_0 --hidden 40
expect_exit 2 "$PAGEIN" make-sample x.gguf --format onnx
