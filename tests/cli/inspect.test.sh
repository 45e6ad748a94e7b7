# pagein inspect: text and the JSON contract (docs/CLI.md) on real files.
. "$REPO/tests/cli/lib.sh"
ST=$TESTDATA/safetensors
[ -d "$ST" ] || { echo "no test data at $ST"; exit 77; }
expect_exit 0 "$PAGEIN" inspect --help
expect_contains "usage: pagein inspect"
expect_exit 2 "$PAGEIN" inspect
expect_exit 2 "$PAGEIN" inspect --bogus "$ST/samples-2022/f.safetensors"
expect_exit 2 "$PAGEIN" inspect "$TMP/missing.safetensors"
expect_exit 1 "$PAGEIN" inspect "$ST/malformed/test_invalid_info.safetensors"
expect_contains "tensor 'test'"

expect_exit 0 "$PAGEIN" inspect "$ST/samples-2022/overall.safetensors"
expect_contains "format:      safetensors"
expect_contains "tensors:     9"
expect_contains "data starts at 534"
expect_contains "test = a"
expect_contains "U32"

# every valid real file: JSON parses and matches the header, checked in Python
for f in "$ST"/*.safetensors "$ST"/golden-rust-tests/*.safetensors "$ST"/samples-2022/*.safetensors; do
  "$PAGEIN" inspect --json "$f" > "$TMP/out.json" || fail "inspect --json $f"
  $PY - "$f" "$TMP/out.json" <<'PYEOF' || fail "JSON contract broken for $f"
import json, struct, sys
path, out = sys.argv[1], sys.argv[2]
j = json.load(open(out))
b = open(path, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n].decode('utf-8'))
meta = h.pop('__metadata__', None) or {}
assert j['format'] == 'safetensors'
assert j['data_start'] == 8 + n, (j['data_start'], n)
assert j['metadata'] == meta
assert len(j['tensors']) == len(h)
prev = -1
for t in j['tensors']:
    e = h[t['name']]
    assert t['dtype'] == e['dtype'] and t['shape'] == e['shape']
    assert t['offset'] == 8 + n + e['data_offsets'][0]
    assert t['nbytes'] == e['data_offsets'][1] - e['data_offsets'][0]
    assert isinstance(t['layer'], int)
    assert t['offset'] >= prev
    prev = t['offset']
PYEOF
done
# layer field on HF names
"$PAGEIN" inspect --json "$ST/ollama-minicpm3-tiny-f32.safetensors" > "$TMP/o.json"
$PY -c "
import json,sys
j=json.load(open('$TMP/o.json'))
L={t['name']:t['layer'] for t in j['tensors']}
assert L['model.embed_tokens.weight']==-1 and L['lm_head.weight']==-1
assert any(v==0 for k,v in L.items() if k.startswith('model.layers.0.'))
" || fail "layer field"
exit 0
