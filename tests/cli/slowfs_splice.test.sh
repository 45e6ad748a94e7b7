# tools/slowfs's reply paths give the backing files' bytes: spliced from the
# backing file (where a pipe holds 1 MiB; --force-splice: also elsewhere,
# libfuse splicing what a pipe holds and copying the rest from the
# descriptor) and pread + write (--no-splice). Sizes that are not page or
# request multiples, reads that start or end past EOF, a file cut short
# while open (read with O_DIRECT: the reply is short, never stale bytes);
# the stats line `splice` says which path served. Bytes and counts only,
# no timings.
. "$REPO/tests/cli/lib.sh"
export SLOWFS=$(dirname "$PAGEIN")/slowfs
r=$(bash "$REPO/tools/slowfs.sh" check) || { echo "$r"; exit 77; }
mkdir -p "$TMP/src"
$PY - "$TMP/src" <<'PY' || fail "writing the files"
import os, sys
for name, n in (("empty", 0), ("one", 1), ("page", 4095), ("mib", (1 << 20) + 13), ("big", 3 * (1 << 20) + 7),
                ("cut", 2 * (1 << 20) + 5)):
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(bytes((i * 131 + 7) & 255 for i in range(n)) if n < 65536 else os.urandom(n))
PY
can_splice=$($PY -c 'import fcntl, os
r, w = os.pipe()
try: print(int(fcntl.fcntl(r, 1031, (1 << 20) + 4 * 4096) >= (1 << 20) + 4 * 4096))
except OSError: print(0)')
MNT=$TMP/mnt
for mode in splice force-splice no-splice; do
  opt=; [ $mode != splice ] && opt=--$mode
  cp "$TMP/src/cut" "$TMP/src/cut.keep"
  bash "$REPO/tools/slowfs.sh" mount "$TMP/src" "$MNT" --delay-us 100 $opt > /dev/null || fail "mount ($mode)"
  case $mode in splice) want=$can_splice ;; force-splice) want=1 ;; *) want=0 ;; esac
  got=$(sed -n 's/^splice //p' "$MNT/.slowfs-stats")
  [ "$got" = "$want" ] || { bash "$REPO/tools/slowfs.sh" umount "$MNT"; fail "$mode: stats say splice '$got', expected $want"; }
  $PY - "$TMP/src" "$MNT" <<'PY'
import os, sys
src, mnt = sys.argv[1], sys.argv[2]
def rd(p, off, n, direct=False):
    fd = os.open(p, os.O_RDONLY)
    try:
        return os.pread(fd, n, off)
    finally:
        os.close(fd)
for name in ("empty", "one", "page", "mib", "big"):
    want = open(os.path.join(src, name), "rb").read()
    got = open(os.path.join(mnt, name), "rb").read()
    assert got == want, (name, len(got), len(want))
    n = len(want)
    for off, k in ((0, 1), (1, 4096), (n // 2 + 3, 1 << 20), (max(0, n - 5), 100), (n, 10), (n + 4096, 10)):
        assert rd(os.path.join(mnt, name), off, k) == want[off:off + k], (name, off, k)
# a file cut short while open, read with O_DIRECT (past the page cache, whose
# pages of the old file the kernel may keep): short replies of the bytes there
import mmap
cut = os.path.join(mnt, "cut")
keep = open(os.path.join(src, "cut.keep"), "rb").read()
fd = os.open(cut, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 1 << 20)
assert os.preadv(fd, [buf], 0) == 1 << 20 and buf[:] == keep[:1 << 20]
os.truncate(os.path.join(src, "cut"), 1000)
for off, want in ((0, 1000), (512, 488), (4096, 0), (1 << 20, 0)):
    n = os.preadv(fd, [buf], off)
    assert n == want and buf[:n] == keep[off:off + n], (off, n, want)
os.close(fd)
PY
  rc=$?
  bash "$REPO/tools/slowfs.sh" umount "$MNT"
  mv "$TMP/src/cut.keep" "$TMP/src/cut"
  [ $rc = 0 ] || fail "$mode: bytes through slowfs differ"
done
echo "slowfs_splice: ok (splice available: $can_splice)"
