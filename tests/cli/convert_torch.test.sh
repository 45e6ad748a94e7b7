# pagein convert on torch.save checkpoints made here (needs python3-torch):
# shards follow the state-dict order (the pickle's key order, as
# transformers writes them), each layer in one shard; an expansion bomb (a
# 1 KB checkpoint holding a stride-0 view of 2^40 elements) is refused
# before anything is written, and inspect/verify warn about it.
. "$REPO/tests/cli/lib.sh"
$PY -c 'import torch' 2>/dev/null || { echo "python3-torch is not installed (scripts/deps.sh test installs it)"; exit 77; }

# ---- 12 layers: every layer lands in one shard, shards in state-dict order ----------
$PY - <<'PYEOF' || fail "cannot write the checkpoint"
import collections, torch
torch.manual_seed(0)
sd = collections.OrderedDict()
sd["model.embed_tokens.weight"] = torch.randn(64, 16)
for i in range(12):
    sd["model.layers.%d.self_attn.q_proj.weight" % i] = torch.randn(16, 16)
    sd["model.layers.%d.self_attn.q_proj.bias" % i] = torch.randn(16)
    sd["model.layers.%d.mlp.up_proj.weight" % i] = torch.randn(32, 16)
sd["model.norm.weight"] = torch.randn(16)
sd["lm_head.weight"] = torch.randn(64, 16)
torch.save(sd, "layers.pt")
PYEOF
mkdir sh
expect_exit 0 "$PAGEIN" convert -q layers.pt sh/model.safetensors --max-shard-size 8KB   # a layer is 3136 B
$PY - sh <<'PYEOF' || fail "shards do not follow the state-dict order, split a layer, or changed values"
import json, os, re, struct, sys, torch
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"]
sd = torch.load("layers.pt")
shard = {k: int(re.search(r"-(\d{5})-of-", v).group(1)) for k, v in idx.items()}
assert set(shard) == set(sd), "index names every tensor"
order = [shard[k] for k in sd]
assert order == sorted(order), "shard numbers follow the state-dict order: %s" % order
layers = {}
for k in sd:
    m = re.match(r"model\.layers\.(\d+)\.", k)
    if m:
        layers.setdefault(int(m.group(1)), set()).add(shard[k])
assert len(layers) == 12
split = {i: sorted(s) for i, s in layers.items() if len(s) > 1}
assert not split, "layers split across shards: %s" % split
assert len(set(shard.values())) >= 6, "more than one layer per shard at 8 KB?"
for k, fn in idx.items():
    b = open(os.path.join(d, fn), "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    s, e = h[k]["data_offsets"]
    assert b[8 + n + s:8 + n + e] == sd[k].contiguous().numpy().tobytes(), k
PYEOF

# ---- an expansion bomb ----------------------------------------------------------------
$PY -c "
import torch
torch.save({'bomb': torch.zeros(1).expand(2**20, 2**20), 'ok': torch.ones(4)}, 'bomb.pt')" || fail "cannot write bomb.pt"
[ "$(stat -c %s bomb.pt)" -lt 4096 ] || fail "bomb.pt is not tiny"
expect_exit 0 "$PAGEIN" inspect bomb.pt
expect_contains "warning: bomb.pt: tensor 'bomb' materialises to 4.00 TiB"
expect_exit 0 "$PAGEIN" inspect --json bomb.pt
expect_contains "warning"
expect_exit 0 "$PAGEIN" verify bomb.pt
expect_contains "warning: bomb.pt: tensor 'bomb' materialises to 4.00 TiB"
# refused up front (no disk here has 4 TiB free), in well under the timeout
expect_exit 2 timeout 20 "$PAGEIN" convert bomb.pt out.safetensors
expect_contains "the output needs 4398046"
expect_contains "nothing written"
expect_exit 2 timeout 20 "$PAGEIN" convert bomb.pt out.gguf
expect_exit 2 timeout 20 "$PAGEIN" convert bomb.pt sh2/model.safetensors --max-shard-size 1GB
[ -z "$(ls -A | grep -v -e '^bomb.pt$' -e '^layers.pt$' -e '^sh$' -e '^sh2$')" ] || fail "refused bomb left files: $(ls -A)"
[ -z "$(ls -A sh2 2>/dev/null)" ] || fail "refused sharded bomb left files: $(ls -A sh2)"
# a cap below the output refuses too (exit 1), a cap above lets a small file through
expect_exit 1 timeout 20 "$PAGEIN" convert bomb.pt out.safetensors --max-output-size 100GB
expect_contains "max-output-size"
expect_exit 0 "$PAGEIN" convert -q layers.pt ok.safetensors --max-output-size 1MB
expect_exit 1 "$PAGEIN" convert -q layers.pt ok2.safetensors --max-output-size 10KiB
[ ! -e ok2.safetensors ] || fail "refused output written"
# on a 5 MB tmpfs (root only): refused, nothing written
if [ "$(id -u)" = 0 ] && mkdir mnt && mount -t tmpfs -o size=5m tmpfs mnt 2>/dev/null; then
  trap 'umount mnt 2>/dev/null' EXIT
  expect_exit 2 timeout 20 "$PAGEIN" convert bomb.pt mnt/out.safetensors
  expect_contains "free"
  [ -z "$(ls -A mnt)" ] || fail "refused bomb left files on the tmpfs: $(ls -A mnt)"
  umount mnt; trap - EXIT
else
  skip_part "tmpfs: mounting a 5 MB tmpfs needs root (or mount -t tmpfs failed)"
fi
exit 0
