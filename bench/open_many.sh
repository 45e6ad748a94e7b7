#!/usr/bin/env bash
# open_many.sh - opening a sharded model on a latency-bound filesystem:
# slowfs (tools/slowfs.sh, DELAY_US a request, default 1000) over 64 and
# about 1,000 safetensors shards, each opened lazily by build/bench/bench_open
# with the shards' headers read at once (the default) and one after another
# (PAGEIN_OPEN_DEPTH=1), cold (the first open on a fresh mount: the page
# cache of a FUSE mount goes with it) and warm (median of 9 more), without
# the metadata cache and (at once) with it filled by an open on an earlier
# mount; read requests (all opens) and the peak in flight from slowfs's
# counters. RUNS rounds, interleaved; prints one line per cell and round.
#   bash bench/open_many.sh            (RUNS=3 DELAY_US=1000)
#   HTTP=1 [HTTP_ONLY=1] bash bench/open_many.sh   (also over HTTP: below)
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
  [ "${HTTP_ONLY:-0}" = 1 ] && break
  for set in s64 s1k; do
    for cell in "32 0" "1 0" "32 1"; do
      set -- $cell; depth=$1 mc=$2
      export PAGEIN_META_CACHE=$mc PAGEIN_META_CACHE_DIR=$W/mc
      if [ "$mc" = 1 ]; then # the metadata cache filled by an open on an earlier mount
        rm -rf "$W/mc"
        bash "$REPO/tools/slowfs.sh" mount "$W/$set" "$W/mnt" --delay-us "$DELAY_US" >/dev/null
        "$B/bench/bench_open" "$W/mnt/" --iters 1 >/dev/null
        bash "$REPO/tools/slowfs.sh" umount "$W/mnt"
      fi
      bash "$REPO/tools/slowfs.sh" mount "$W/$set" "$W/mnt" --delay-us "$DELAY_US" >/dev/null
      cat "$W/mnt/.slowfs-stats" >/dev/null # resets the peak
      out=$(PAGEIN_OPEN_DEPTH=$depth "$B/bench/bench_open" "$W/mnt/" --iters 9)
      st=$(awk '/^peak_inflight/ {p = $2} /^requests/ {q = $2} END {print "read_requests", q, "peak_inflight", p}' "$W/mnt/.slowfs-stats")
      bash "$REPO/tools/slowfs.sh" umount "$W/mnt"
      echo "round $r $set depth $depth meta_cache $mc: $out $st"
    done
    unset PAGEIN_META_CACHE PAGEIN_META_CACHE_DIR
  done
done

# ---- over HTTP (HTTP=1): nginx with bench remote's pacing ----------------
# tests/remote/servers.sh's /delayed/ (DELAY_MS to first byte, default 20)
# serves the same two sets; each cell is one process: the first open (the
# index + every shard's header: cold) and the median of --iters more, with
# the metadata cache off (PAGEIN_META_CACHE=0) and on (an empty cache dir
# at the start: the first open fills it, the later ones use it: one 1-byte
# request per shard). Requests are counted in nginx's access log.
#   HTTP=1 bash bench/open_many.sh
if [ "${HTTP:-0}" = 1 ]; then
  S=$W/srv
  mkdir -p "$S/www"
  cp -r "$W/s64" "$W/s1k" "$S/www/"
  DELAY_MS=${DELAY_MS:-20} bash "$REPO/tests/remote/servers.sh" start "$S" $$ nginx delay >/dev/null || exit 77
  trap 'bash "$REPO/tests/remote/servers.sh" stop "$S"; rm -rf "$W"' EXIT
  . "$S/env"
  log=$S/logs/nginx-access.log
  echo "HTTP: ${DELAY_MS:-20} ms to first byte (nginx /delayed/)"
  for r in $(seq 1 "$RUNS"); do
    for set in s64 s1k; do
      for depth in ${DEPTHS:-32 64}; do
        for mc in 0 1; do
          rm -rf "$W/mc"
          b=$(wc -l < "$log")
          out=$(PAGEIN_META_CACHE=$mc PAGEIN_META_CACHE_DIR=$W/mc PAGEIN_OPEN_DEPTH=$depth \
                "$B/bench/bench_open" "$DELAY/$set/model.safetensors.index.json" --iters "${ITERS:-3}")
          m="settle-$RANDOM"; curl -s -o /dev/null "$HTTP/$m" || true
          for i in $(seq 1 100); do grep -q "$m" "$log" && break; sleep 0.05; done
          n=$(( $(wc -l < "$log") - b - 1 ))
          echo "round $r $set depth $depth meta_cache $mc: $out requests $n (over $(( ${ITERS:-3} + 1 )) opens)"
        done
      done
    done
  done
fi
