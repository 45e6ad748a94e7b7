#!/usr/bin/env bash
# index_cache_rewrite.test.sh - a cached tar or line index is not taken for
# a shard rewritten in place with its mtime restored (same device, inode,
# size and mtime: the identity the cache was keyed by). The cache now also
# holds the shard's ctime and a hash of 16 pieces of it; before, the tar's
# samples kept their old keys and the JSONL lines were cut at the old
# boundaries, exit 0.
set -u
. "$REPO/tests/cli/lib.sh"
cd "$TMP" || exit 1
$PY - <<'PY' || fail "writing the shards"
import io, tarfile
with open("a.jsonl", "wb") as f:
    for i in range(20000):
        f.write(b'{"i": %05d, "t": "%s"}\n' % (i, b"x" * 40))
with tarfile.open("s.tar", "w", format=tarfile.USTAR_FORMAT) as t:
    for i in range(3000):
        b = (b"v%05d" % i) * 60
        ti = tarfile.TarInfo("k%05d.txt" % i)
        ti.size, ti.mtime = len(b), 0
        t.addfile(ti, io.BytesIO(b))
PY
first() { "$PAGEIN" read-samples --dataset "$1" --order none --format jsonl --limit 1; }
count() { "$PAGEIN" read-samples --dataset "$1" --order none --check | sed -n 's/^\([0-9]*\) samples.*/\1/p'; }
l0=$(first a.jsonl) || fail "read a.jsonl"
t0=$(first s.tar) || fail "read s.tar"
[ -f a.jsonl.pagein-idx ] && [ -f s.tar.pagein-idx ] || fail "no index cached: $(ls)"
# in place, same size, mtime restored: the first two lines become one; the
# tar's keys k* become j* (header checksums rewritten by tarfile)
$PY - <<'PY' || fail "rewriting the shards"
import io, os, tarfile
for name in ("a.jsonl", "s.tar"):
    st = os.stat(name)
    if name == "a.jsonl":
        with open(name, "r+b") as f:
            b = f.read(200)
            f.seek(b.index(b"\n"))
            f.write(b" ")
    else:
        out = io.BytesIO()
        with tarfile.open(name) as src, tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for m in src.getmembers():
                data = src.extractfile(m).read()
                m.name = "j" + m.name[1:]
                t.addfile(m, io.BytesIO(data))
        data = out.getvalue()
        assert len(data) == st.st_size, (len(data), st.st_size)
        with open(name, "r+b") as f:
            f.write(data)
    os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(name).st_mtime_ns == st.st_mtime_ns and os.stat(name).st_size == st.st_size
PY
l1=$(first a.jsonl) || fail "read a.jsonl again"
t1=$(first s.tar) || fail "read s.tar again"
[ "$l1" != "$l0" ] || fail "a.jsonl: the first line is the old one: $l1"
[ "$(count a.jsonl)" = 19999 ] || fail "a.jsonl: $(count a.jsonl) lines after the rewrite, expected 19999"
# the key j00000 (base64 ajAwMDAw), not k00000 (azAwMDAw)
echo "$t1" | grep -q '"base64": "ajAwMDAw"' || fail "s.tar: the first sample keeps its old key: $(echo "$t1" | head -c 200)"
echo "index_cache_rewrite: ok"
