#!/usr/bin/env bash
# arrow_shuffle.sh - an epoch over an Arrow IPC stream (a `datasets`-like
# shard written by npm apache-arrow: text, input_ids list<int32>, label; record
# batches of 1,000 rows) read four ways, cold each time (page cache dropped with
# posix_fadvise DONTNEED), on the local disk and through tools/slowfs (DELAY_US
# per read request):
#   sequential    cat of the file (the limit of the bytes)
#   block         the dataset table's pipeline, order block (whole batches,
#                 windows of 8 shuffled together): bench_arrow pipe
#   global        the pipeline, order global (a permutation of all rows; each
#                 read batch fetches the record batches of its rows), at the
#                 default read batch: window (8) x the rows of a record batch
#   global-256    the same with read batches of 256 rows (the default before
#                 the read batch was sized by group)
#   mmap-random   bench_arrow mmap-random: the file mapped, rows in a random
#                 order, each read through the mapping (what `datasets` does after
#                 .shuffle()); MMAP_ROWS rows, the epoch time extrapolated
# Usage: bench/arrow_shuffle.sh [ROWS] (default 100000, about 56 MB)
# Env: PAGEIN (default build/pagein), WORK (default /var/tmp/pagein-arrow-bench,
# kept), DELAY_US (1000), RA_KB (4: no read-around for page faults, as
# bench shuffle), MMAP_ROWS (3000), SLOWFS_ONLY=1, JSON=1.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
PAGEIN=${PAGEIN:-$REPO/build/pagein}
BENCH=$(dirname "$PAGEIN")/bench/bench_arrow
ROWS=${1:-100000}
W=${WORK:-/var/tmp/pagein-arrow-bench}
DELAY_US=${DELAY_US:-1000}
RA_KB=${RA_KB:-4}
MMAP_ROWS=${MMAP_ROWS:-3000}
PY=/usr/bin/python3
[ -x "$BENCH" ] || { echo "arrow_shuffle.sh: $BENCH not built (make)"; exit 2; }
mkdir -p "$W/src"
if [ ! -s "$W/src/bench.arrow" ] || [ "$(cat "$W/src/rows" 2>/dev/null)" != "$ROWS" ]; then
  out=$(bash "$REPO/tests/data/arrow/fixtures.sh" "$W/fx" 2>&1) || { echo "arrow_shuffle.sh: cannot write fixtures: $out"; exit 2; }
  ARROW_NPM=${ARROW_NPM:-$REPO/build/npm} node "$REPO/tests/data/arrow/gen.mjs" --bench "$W/src" "$ROWS" || exit 2
  echo "$ROWS" > "$W/src/rows"
fi
F=bench.arrow
SIZE=$(stat -c %s "$W/src/$F")

drop() { $PY -c 'import os,sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"; }
secs() { echo "$EPOCHREALTIME"; }
results=()
run() { # fs dir
  local fs=$1 d=$2 t0 t1 out rows
  for mode in sequential block global global-256 mmap-random; do
    drop "$W/src/$F" "$d/$F"
    t0=$(secs)
    case $mode in
      sequential) cat "$d/$F" > /dev/null; rows=$ROWS ;;
      block|global) "$BENCH" pipe "$d/$F" --order $mode > /dev/null || return 1; rows=$ROWS ;;
      global-256) "$BENCH" pipe "$d/$F" --order global --read-batch 256 > /dev/null || return 1; rows=$ROWS ;;
      mmap-random) "$BENCH" mmap-random "$d/$F" --rows "$MMAP_ROWS" > /dev/null || return 1; rows=$MMAP_ROWS ;;
    esac
    t1=$(secs)
    results+=("$fs $mode $rows $($PY -c "print('%.6f' % ($t1 - $t0))")")
  done
}
[ "${SLOWFS_ONLY:-0}" = 1 ] || run local "$W/src"
MNT=$W/mnt
if r=$(SLOWFS=$(dirname "$PAGEIN")/slowfs bash "$REPO/tools/slowfs.sh" check); then
  SLOWFS=$(dirname "$PAGEIN")/slowfs bash "$REPO/tools/slowfs.sh" mount "$W/src" "$MNT" --delay-us "$DELAY_US" --ra-kb "$RA_KB" > /dev/null \
    || { echo "slowfs did not mount"; exit 2; }
  trap 'bash "$REPO/tools/slowfs.sh" umount "$MNT"' EXIT
  run slowfs "$MNT"
else
  echo "slowfs: skipped ($r)" >&2
fi
$PY - "$SIZE" "$ROWS" "$DELAY_US" "${JSON:-0}" "${results[@]}" <<'PY'
import json, sys
size, rows, delay, js = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
res = [l.split() for l in sys.argv[5:]]
out = []
for fs, mode, n, s in res:
    n, s = int(n), float(s)
    rps = n / s if s > 0 else 0
    out.append({"fs": fs, "mode": mode, "rows": n, "seconds": s, "rows_per_second": rps,
                "epoch_seconds": rows / rps if rps else None})
for fs in sorted({o["fs"] for o in out}):
    m = {o["mode"]: o for o in out if o["fs"] == fs}
    for o in m.values():
        o["vs_mmap_random"] = o["rows_per_second"] / m["mmap-random"]["rows_per_second"]
        o["vs_sequential"] = o["rows_per_second"] / m["sequential"]["rows_per_second"]
if js:
    print(json.dumps({"bytes": size, "rows": rows, "delay_us": int(delay), "modes": out}, indent=1))
else:
    print("Arrow stream: %d rows, %.1f MB, record batches of 1000 rows; slowfs %s us a request" % (rows, size / 1e6, delay))
    print("%-7s %-12s %9s %10s %12s %10s %10s" % ("fs", "mode", "rows", "seconds", "rows/s", "x mmap", "x seq"))
    for o in out:
        print("%-7s %-12s %9d %10.3f %12.0f %10.1f %10.2f" % (o["fs"], o["mode"], o["rows"], o["seconds"],
              o["rows_per_second"], o["vs_mmap_random"], o["vs_sequential"]))
PY
