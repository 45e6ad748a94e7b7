#!/usr/bin/env bash
# The cache commands over a folder that is not a model (cli/cache.c): its
# files are opened at once (pagein_cache_open_many: strace sees the opens
# of one run on several threads) and `warm` reads them as one engine run
# (pagein_cache_warm_many: slowfs sees many reads in flight, where warming
# file by file kept one); every file is then resident (warm's report); a
# file that cannot be opened among them is named. Nothing is timed here: bench/open_many.sh RAW=1 has the
# figures.
set -u
. "$REPO/tests/cli/lib.sh"
N=64
mkdir -p "$TMP/plain/sub"
for i in $(seq 1 $N); do head -c $((8192 + i * 100)) /dev/urandom > "$TMP/plain/f$i.dat"; done
echo "not a model" > "$TMP/plain/sub/notes.txt"

# the opens of a walked folder run on several threads
if command -v strace >/dev/null && strace -qq -o /dev/null true 2>/dev/null; then
  strace -f -qq -e trace=openat -o "$TMP/st" "$PAGEIN" resident "$TMP/plain" >/dev/null 2>&1 || fail "resident under strace"
  tids=$(grep "plain/f[0-9]*\.dat\"" "$TMP/st" | awk '{print $1}' | sort -u | wc -l)
  echo "resident: the $N files opened on $tids threads"
  [ "$tids" -ge 2 ] || fail "the files of a folder were opened on $tids thread(s)"
  PAGEIN_OPEN_DEPTH=1 strace -f -qq -e trace=openat -o "$TMP/st1" "$PAGEIN" resident "$TMP/plain" >/dev/null 2>&1
  t1=$(grep "plain/f[0-9]*\.dat\"" "$TMP/st1" | awk '{print $1}' | sort -u | wc -l)
  [ "$t1" = 1 ] || fail "PAGEIN_OPEN_DEPTH=1: opened on $t1 threads"
else
  echo "strace cannot run here: the threads of the opens are not checked"
fi

# a file that cannot be opened is named; the others are still reported
chmod 000 "$TMP/plain/f7.dat"
if ! cat "$TMP/plain/f7.dat" >/dev/null 2>&1; then
  expect_exit 1 "$PAGEIN" resident "$TMP/plain"
  expect_contains "f7.dat"
fi
chmod 644 "$TMP/plain/f7.dat"

bash "$REPO/tools/slowfs.sh" check >/dev/null || { echo "slowfs part skipped: $(bash "$REPO/tools/slowfs.sh" check)"; exit 0; }
bash "$REPO/tools/slowfs.sh" mount "$TMP/plain" "$TMP/mnt" --delay-us 2000 >/dev/null || fail "slowfs mount"
trap 'bash "$REPO/tools/slowfs.sh" umount "$TMP/mnt"' EXIT
peak() { awk '/^peak_inflight/ {print $2}' "$TMP/mnt/.slowfs-stats"; }
peak >/dev/null
expect_exit 0 "$PAGEIN" warm --json "$TMP/mnt"
p=$(peak)
echo "warm of $N plain files on slowfs: peak $p reads in flight"
[ "$p" -ge 4 ] || fail "warm read the files one after another: peak $p in flight"
# warm's own report (a FUSE file's cache goes at its next open, so a later
# `resident` process would see none): every file resident
echo "$OUT_TXT" | $PY -c '
import json, sys
d = json.load(sys.stdin)
files = d["files"]
assert len(files) == '$((N + 1))', len(files)
cold = [f["path"] for f in files if f["resident_bytes"] != f["bytes"]]
assert not cold, cold
' || fail "not every file is resident after warm: $OUT_TXT"
echo "open_many_raw: ok"
