# pagein make-sample: llama shape, determinism, dtypes, sizes, alignment.
. "$REPO/tests/cli/lib.sh"
expect_exit 0 "$PAGEIN" make-sample --help
expect_exit 2 "$PAGEIN" make-sample
expect_exit 2 "$PAGEIN" make-sample "$TMP/x.safetensors" --dtype q8
expect_exit 2 "$PAGEIN" make-sample "$TMP/x.safetensors" --layers
expect_exit 2 "$PAGEIN" make-sample "$TMP/x.safetensors" --hidden 7

expect_exit 0 "$PAGEIN" make-sample "$TMP/a.safetensors" --size 4M
expect_contains "wrote"
expect_exit 0 "$PAGEIN" make-sample "$TMP/b.safetensors" --size 4M -q
cmp "$TMP/a.safetensors" "$TMP/b.safetensors" || fail "make-sample is not deterministic"
expect_exit 0 "$PAGEIN" make-sample "$TMP/c.safetensors" --size 4M --seed 7 -q
cmp -s "$TMP/a.safetensors" "$TMP/c.safetensors" && fail "--seed has no effect"
size=$(stat -c %s "$TMP/a.safetensors")
[ "$size" -gt 3000000 ] && [ "$size" -lt 6000000 ] || fail "--size 4M gave $size bytes"
expect_exit 0 "$PAGEIN" verify "$TMP/a.safetensors"

for dt in bf16 f16 f32; do
  expect_exit 0 "$PAGEIN" make-sample "$TMP/$dt.safetensors" --layers 3 --hidden 64 --dtype $dt -q
  "$PAGEIN" inspect --json "$TMP/$dt.safetensors" > "$TMP/$dt.json" || fail "inspect $dt"
  $PY - "$TMP/$dt.json" "$TMP/$dt.safetensors" "$dt" <<'PYEOF' || fail "shape check $dt"
import json, sys, numpy as np
j = json.load(open(sys.argv[1])); raw = open(sys.argv[2], 'rb').read(); dt = sys.argv[3]
npdt = {'f16': np.float16, 'f32': np.float32}.get(dt)
T = {t['name']: t for t in j['tensors']}
assert len(T) == 3 + 9 * 3, len(T)
assert j['metadata']['format'] == 'pt'
H = 64
assert T['model.embed_tokens.weight']['shape'][1] == H
assert T['lm_head.weight']['shape'] == T['model.embed_tokens.weight']['shape']
for l in range(3):
    p = 'model.layers.%d.' % l
    assert T[p + 'self_attn.q_proj.weight']['shape'] == [H, H]
    inter = T[p + 'mlp.gate_proj.weight']['shape'][0]
    assert T[p + 'mlp.down_proj.weight']['shape'] == [H, inter]
    assert T[p + 'input_layernorm.weight']['shape'] == [H]
    assert T[p + 'self_attn.k_proj.weight']['layer'] == l
for t in j['tensors']:
    assert t['dtype'] == dt.upper()
    if npdt is None: continue
    a = np.frombuffer(raw[t['offset']:t['offset'] + t['nbytes']], dtype=npdt)
    if 'norm' in t['name']: assert (a == 1).all()
    else: assert np.abs(a).max() <= 0.05 and a.std() > 0.01, t['name']
PYEOF
done
expect_exit 0 "$PAGEIN" make-sample "$TMP/al.safetensors" --layers 1 --hidden 64 --align 4096 -q
"$PAGEIN" inspect --json "$TMP/al.safetensors" | $PY -c "import json,sys; assert json.load(sys.stdin)['data_start'] % 4096 == 0" || fail "--align"
# no temp files left behind
ls -a "$TMP" | grep -q '\.tmp-' && fail "temporary file left"
exit 0
