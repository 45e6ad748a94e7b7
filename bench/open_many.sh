#!/usr/bin/env bash
# open_many.sh - opening a sharded model on a latency-bound filesystem:
# slowfs (tools/slowfs.sh, DELAY_US a request, default 1000) over 64 and
# about 1,000 safetensors shards, each opened lazily by build/bench/bench_open
# with the shards' headers read at once (the default) and one after another
# (PAGEIN_OPEN_DEPTH=1), cold (the first open on a fresh mount: the page
# cache of a FUSE mount goes with it) and warm (median of 9 more). RUNS
# rounds, interleaved; prints one line per cell and round.
#   bash bench/open_many.sh            (RUNS=3 DELAY_US=1000)
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
B=${BUILD:-$REPO/build}
RUNS=${RUNS:-3}
DELAY_US=${DELAY_US:-1000}
PAGEIN=${PAGEIN:-$B/pagein}
export SLOWFS=${SLOWFS:-$B/slowfs}
bash "$REPO/tools/slowfs.sh" check || exit 77
W=$(mktemp -d /tmp/pagein-open-XXXXXX)
trap 'for m in "$W"/mnt*; do bash "$REPO/tools/slowfs.sh" umount "$m" 2>/dev/null; done; rm -rf "$W"' EXIT
"$PAGEIN" make-sample "$W/a.safetensors" --layers 62 --hidden 256 --dtype bf16 -q
"$PAGEIN" convert -q "$W/a.safetensors" "$W/s64/model.safetensors" --max-shard-size 1600KB
"$PAGEIN" make-sample "$W/b.safetensors" --layers 112 --hidden 32 --dtype bf16 -q
"$PAGEIN" convert -q "$W/b.safetensors" "$W/s1k/model.safetensors" --max-shard-size 1KB
echo "slowfs ${DELAY_US} us a request; $(ls "$W/s64" | grep -c 'safetensors$') and $(ls "$W/s1k" | grep -c 'safetensors$') shards"
for r in $(seq 1 "$RUNS"); do
  for set in s64 s1k; do
    for depth in 32 1; do
      bash "$REPO/tools/slowfs.sh" mount "$W/$set" "$W/mnt" --delay-us "$DELAY_US" >/dev/null
      cat "$W/mnt/.slowfs-stats" >/dev/null # resets the peak
      out=$(PAGEIN_OPEN_DEPTH=$depth "$B/bench/bench_open" "$W/mnt/" --iters 9)
      peak=$(awk '/^peak_inflight/ {print $2}' "$W/mnt/.slowfs-stats")
      bash "$REPO/tools/slowfs.sh" umount "$W/mnt"
      echo "round $r $set depth $depth: $out peak_inflight $peak"
    done
  done
done
