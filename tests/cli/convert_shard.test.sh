# pagein convert --max-shard-size: sizes read as transformers reads them, and
# a sharded set written all or nothing (failure injection with RLIMIT_FSIZE,
# and a full 5 MB tmpfs when run as root): a failed conversion leaves no
# shard, index or temporary directory behind and an existing model intact;
# a successful one replaces every file of the old set.
. "$REPO/tests/cli/lib.sh"

# mkst FILE NAME:COUNT:VALUE...: a safetensors file of F32 vectors
mkst() {
  $PY - "$@" <<'PYEOF'
import json, struct, sys
out = sys.argv[1]; hdr = {}; data = b""
for spec in sys.argv[2:]:
    name, n, v = spec.split(":"); n = int(n)
    b = struct.pack("<%df" % n, *([float(v)] * n))
    hdr[name] = {"dtype": "F32", "shape": [n], "data_offsets": [len(data), len(data) + len(b)]}
    data += b
h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
open(out, "wb").write(struct.pack("<Q", len(h)) + h + data)
PYEOF
}
nshards() { $PY -c "import json,sys; print(len(set(json.load(open(sys.argv[1]))['weight_map'].values())))" "$1"; }
# state of a directory: names and checksums, sorted
snap() { (cd "$1" && find . -type f -o -type d | sort | while read -r f; do [ -f "$f" ] && echo "$f $(md5sum < "$f" | cut -c1-32)" || echo "$f/"; done); }

# ---- sizes: KB = 1000, KiB = K = 1024, plain = bytes, b = B (docs/CLI.md "Sizes") ----
mkst four.safetensors a:128:1 b:128:2 c:128:3 d:128:4   # 512 bytes each
for spec in "1KB 4" "1kB 4" "1KiB 2" "1K 2" "1024 2" "1000 4" "1Kb 4" "2KB 2"; do
  set -- $spec
  rm -rf s && mkdir s
  expect_exit 0 "$PAGEIN" convert -q four.safetensors s/model.safetensors --max-shard-size "$1"
  got=$(nshards s/model.safetensors.index.json)
  [ "$got" = "$2" ] || fail "--max-shard-size $1: $got shards, expected $2"
done
expect_exit 2 "$PAGEIN" convert four.safetensors s/x.safetensors --max-shard-size 5XB
expect_contains "max-shard-size"
expect_exit 2 "$PAGEIN" convert four.safetensors s/x.safetensors --max-output-size -1

# ---- all or nothing ---------------------------------------------------------------
# A and B: 5 shards each under the same names; B's third tensor is 1 MiB
mkst A.safetensors t0:65536:1 t1:65536:1 t2:65536:1 t3:65536:1 t4:65536:1
mkst B.safetensors t0:65536:2 t1:65536:2 t2:262144:2 t3:65536:2 t4:65536:2
mkst C.safetensors t0:65536:3 t1:196608:3 t2:196608:3
limited() { ( trap '' XFSZ; ulimit -f 512; exec "$@" ); }  # files over 512 KiB fail with EFBIG

# a failure into an empty directory leaves it empty
mkdir fresh
OUT_TXT=$(limited "$PAGEIN" convert -q B.safetensors fresh/model.safetensors --max-shard-size 300KB 2>&1); rc=$?
[ $rc -eq 2 ] || fail "failed sharded write exited $rc, expected 2: $OUT_TXT"
expect_contains "model-00003-of-00005"
[ -z "$(ls -A fresh)" ] || fail "a failed sharded write left files behind: $(ls -A fresh)"

# over an existing model: the old set stays intact, byte for byte
mkdir m
expect_exit 0 "$PAGEIN" convert -q A.safetensors m/model.safetensors --max-shard-size 300KB
[ "$(nshards m/model.safetensors.index.json)" = 5 ] || fail "A: expected 5 shards"
before=$(snap m)
OUT_TXT=$(limited "$PAGEIN" convert -q B.safetensors m/model.safetensors --max-shard-size 300KB 2>&1); rc=$?
[ $rc -eq 2 ] || fail "failed sharded write over a model exited $rc: $OUT_TXT"
[ "$(snap m)" = "$before" ] || fail "a failed write changed the existing model: $(snap m)"

# a successful write replaces every file; the new set reads back as B
expect_exit 0 "$PAGEIN" convert -q B.safetensors m/model.safetensors --max-shard-size 300KB
[ "$(ls -A m | grep -c '^\.')" = 0 ] || fail "temporary files left: $(ls -A m)"
$PY - m <<'PYEOF' || fail "the replaced set is not B"
import json, struct, sys, os
d = sys.argv[1]; idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
for name, fn in idx["weight_map"].items():
    b = open(os.path.join(d, fn), "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    s, e = h[name]["data_offsets"]
    assert struct.unpack_from("<f", b, 8 + n + s)[0] == 2.0, name
assert idx["metadata"]["total_size"] == 4 * (4 * 65536 + 262144)
PYEOF
# a smaller set replaces a larger one: no shard of the old set is left
expect_exit 0 "$PAGEIN" convert -q C.safetensors m/model.safetensors --max-shard-size 800KB
[ "$(nshards m/model.safetensors.index.json)" = 3 ] || fail "C: expected 3 shards"
[ "$(ls m | grep -c 'of-00005')" = 0 ] || fail "stale shards of the old set left: $(ls m)"
[ "$(ls m | wc -l)" = 4 ] || fail "expected 3 shards and the index: $(ls m)"
# a sharded set replaces a single file of the same name (loaders would prefer it)
mkdir one
expect_exit 0 "$PAGEIN" convert -q A.safetensors one/model.safetensors
expect_exit 0 "$PAGEIN" convert -q A.safetensors one/model.safetensors --max-shard-size 300KB
[ ! -e one/model.safetensors ] || fail "the old single file shadows the new sharded set"

# a failure while moving the set into place puts the old files back: the
# third name is taken by a directory, so the move stops there
mkdir rb
expect_exit 0 "$PAGEIN" convert -q A.safetensors rb/model.safetensors --max-shard-size 300KB
rm rb/model-00003-of-00005.safetensors && mkdir rb/model-00003-of-00005.safetensors && touch rb/model-00003-of-00005.safetensors/x
before=$(snap rb)
expect_exit 2 "$PAGEIN" convert -q B.safetensors rb/model.safetensors --max-shard-size 300KB
expect_contains "model-00003-of-00005"
[ "$(snap rb)" = "$before" ] || fail "a failed move did not restore the old files: $(snap rb)"

# a missing output directory is created
expect_exit 0 "$PAGEIN" convert -q A.safetensors new/deeper/model.safetensors --max-shard-size 300KB
[ -e new/deeper/model.safetensors.index.json ] || fail "output directory not created"

# ---- a 5 MB tmpfs ------------------------------------------------------------------
if [ "$(id -u)" != 0 ]; then
  skip_part "tmpfs: mounting a tmpfs needs root"
elif ! mkdir mnt || ! mount -t tmpfs -o size=5m tmpfs mnt 2>/dev/null; then
  skip_part "tmpfs: mount -t tmpfs failed (no CAP_SYS_ADMIN here)"
else
  trap 'umount mnt 2>/dev/null' EXIT
  mkst big.safetensors t0:400000:1 t1:400000:1 t2:400000:1 t3:400000:1 t4:400000:1   # 8 MB
  # refused before writing: the output does not fit
  expect_exit 2 "$PAGEIN" convert -q big.safetensors mnt/model.safetensors --max-shard-size 2MB
  expect_contains "free"
  [ -z "$(ls -A mnt)" ] || fail "refused write left files on the tmpfs: $(ls -A mnt)"
  # with the check lifted (--max-output-size), the disk fills: nothing is left
  expect_exit 2 "$PAGEIN" convert -q big.safetensors mnt/model.safetensors --max-shard-size 2MB --max-output-size 1TB
  expect_contains "No space left"
  [ -z "$(ls -A mnt)" ] || fail "ENOSPC left files on the tmpfs: $(ls -A mnt)"
  # over an existing model on the tmpfs: intact after ENOSPC
  mkst small.safetensors t0:200000:1 t1:200000:1 t2:200000:1
  expect_exit 0 "$PAGEIN" convert -q small.safetensors mnt/model.safetensors --max-shard-size 1MB
  before=$(snap mnt)
  expect_exit 2 "$PAGEIN" convert -q big.safetensors mnt/model.safetensors --max-shard-size 2MB --max-output-size 1TB
  [ "$(snap mnt)" = "$before" ] || fail "ENOSPC changed the existing model on the tmpfs"
  umount mnt; trap - EXIT
fi
exit 0
