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
emit() { echo "$1"; [ -n "${JSON_OUT:-}" ] && echo "$1" >> "$JSON_OUT"; return 0; }
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

# ---- a plain folder (RAW=1): the cache commands on files that are no model --
# 1,000 files of 8-24 KiB on slowfs; `pagein resident` (opens only) and
# `pagein warm` (opens + one read each) with the files opened and read at
# once (the default: pagein_cache_open_many, pagein_cache_warm_many) and
# one after another (PAGEIN_OPEN_DEPTH=1 and warm --threads 1: what the commands
# did before, file by file); a fresh mount per cell; wall time of the
# command, slowfs's read requests and peak in flight.
if [ "${RAW:-0}" = 1 ]; then
  mkdir -p "$W/raw"
  for i in $(seq 1 1000); do head -c $((8192 + (i * 16411) % 16384)) /dev/urandom > "$W/raw/f$i.dat"; done
  for r in $(seq 1 "$RUNS"); do
    for cmd in resident warm; do
      for mode in many one; do
        bash "$REPO/tools/slowfs.sh" mount "$W/raw" "$W/mnt" --delay-us "$DELAY_US" >/dev/null
        cat "$W/mnt/.slowfs-stats" >/dev/null
        args=""; envs="PAGEIN_OPEN_DEPTH=0"
        [ "$mode" = one ] && envs="PAGEIN_OPEN_DEPTH=1" && [ "$cmd" = warm ] && args="--threads 1"
        t0=$(date +%s.%N)
        env $envs "$PAGEIN" "$cmd" -q $args "$W/mnt" >/dev/null
        t1=$(date +%s.%N)
        st=$(awk '/^peak_inflight/ {p = $2} /^requests/ {q = $2} END {print q, p}' "$W/mnt/.slowfs-stats")
        bash "$REPO/tools/slowfs.sh" umount "$W/mnt"
        set -- $st
        emit "{\"source\": \"slowfs\", \"set\": \"raw1000\", \"command\": \"$cmd\", \"mode\": \"$mode\", \"ms\": $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", (b - a) * 1000}'), \"read_requests\": $1, \"peak_in_flight\": $2, \"delay_us\": $DELAY_US}"
      done
    done
  done
fi

# ---- over HTTP (HTTP=1), S3 (S3=1), the Hub (HF=1) ------------------------
# HTTP: nginx with bench remote's pacing: tests/remote/servers.sh's /delayed/
# (DELAY_MS to first byte, default 20) serves the same two sets; each cell
# is one process: the first open (the index + every shard's header: cold)
# and the median of --iters more, with the metadata cache off
# (PAGEIN_META_CACHE=0) and on (an empty cache dir at the start: the first
# open fills it, the later ones use it: one request per shard of at most
# 64 KiB, its first bytes compared with the entry).
# Requests are counted in nginx's access log, the largest number in flight
# from its timing log (each request's end and duration).
# S3: s3rver (no pacing: it is a local node process; what the metadata
# cache changes is the number of round trips, counted as TCP connections
# with strace in a second run of the cell: every remote open is its own
# connection, a listing page one more). With the cache on, a warm open
# checks the entries with one ListObjectsV2 per 1,000 keys (vouch=1) or
# with one request per shard (PAGEIN_META_VOUCH=0, vouch=0).
# HF: nginx's Hub layout at a pinned commit (hf://org/NAME@<commit>):
# with the cache, a warm open makes no request.
# "vouch" says how a warm open checks its entries: 0 one request each, 1
# one listing (S3) or none (a pinned Hub commit), 2 none within the opt-in
# PAGEIN_META_TRUST_SECONDS (plain HTTP, 3600 here).
# Every cell prints one JSON line (JSON_OUT=FILE also collects them).
#   HTTP=1 S3=1 HF=1 [HTTP_ONLY=1] [SETS="s1k"] bash bench/open_many.sh
# peak_inflight LOG FROM_LINE: the most requests of LOG's lines after
# FROM_LINE that overlapped (start = end - duration)
peak_inflight() {
  tail -n +"$(( $2 + 1 ))" "$1" | grep -v settle- | /usr/bin/python3 -c '
import sys
ev = []
for l in sys.stdin:
    f = l.split()
    if len(f) < 2: continue
    end, dur = float(f[0]), float(f[1])
    ev += [(end - dur, 1), (end + 1e-4, -1)]
ev.sort()
cur = best = 0
for _, d in ev:
    cur += d; best = max(best, cur)
print(best)'
}
# cell_json SOURCE SET DEPTH MC VOUCH OUT REQUESTS PEAK OPENS
cell_json() {
  set -- "$@"
  local f w n; f=$(echo "$6" | awk '{print $2}'); w=$(echo "$6" | awk '{print $4}'); n=$(echo "$6" | awk '{print $6}')
  emit "{\"source\": \"$1\", \"set\": \"$2\", \"files\": ${n:-0}, \"open_depth\": $3, \"meta_cache\": $4, \"vouch\": $5, \"first_ms\": ${f:-null}, \"warm_median_ms\": ${w:-null}, \"requests\": $7, \"peak_in_flight\": $8, \"opens\": $9, \"delay_ms\": ${10}}"
}
DO_HTTP=${HTTP:-0} DO_S3=${S3:-0} DO_HF=${HF:-0} # servers.sh's env sets HTTP and S3 to URLs
if [ "$DO_HTTP" = 1 ] || [ "$DO_S3" = 1 ] || [ "$DO_HF" = 1 ]; then
  S=$W/srv
  mkdir -p "$S/www" "$S/s3" "$S/www/hf/org"
  # s3rver fails a listing of more than 1,000 keys (its MaxKeys bug,
  # jamhall/s3rver#814: HTTP 500 for every truncated page), so S3's large
  # set is 994 shards + the index (110 layers) instead of 1,011
  if [ "$DO_S3" = 1 ]; then
    "$PAGEIN" make-sample "$W/c.safetensors" --layers 110 --hidden 32 --dtype bf16 -q
    "$PAGEIN" convert -q "$W/c.safetensors" "$W/s994/model.safetensors" --max-shard-size 1KB
  fi
  s3set() { [ "$1" = s1k ] && echo s994 || echo "$1"; }
  want=""
  for set in ${SETS:-s64 s1k}; do
    [ "$DO_HTTP" = 1 ] && cp -r "$W/$set" "$S/www/"
    [ "$DO_S3" = 1 ] && cp -r "$W/$(s3set $set)" "$S/s3/"
    [ "$DO_HF" = 1 ] && cp -r "$W/$set" "$S/www/hf/org/"
  done
  [ "$DO_HTTP" = 1 ] && want="$want delay"
  [ "$DO_HF" = 1 ] && want="$want nginx"
  [ "$DO_S3" = 1 ] && want="$want s3"
  DELAY_MS=${DELAY_MS:-20} bash "$REPO/tests/remote/servers.sh" start "$S" $$ $want > "$W/servers.out" || { cat "$W/servers.out"; exit 77; }
  trap 'bash "$REPO/tests/remote/servers.sh" stop "$S"; rm -rf "$W"' EXIT
  . "$S/env"
  log=$S/logs/nginx-access.log tlog=$S/logs/nginx-timing.log
  settle() { local m="settle-$RANDOM"; curl -s -o /dev/null "$HTTP/$m" || true
    for i in $(seq 1 100); do grep -q "$m" "$log" && break; sleep 0.05; done; }
  STRACE=$(command -v strace || true)
  it=${ITERS:-3}
  for r in $(seq 1 "$RUNS"); do
    for set in ${SETS:-s64 s1k}; do
      if [ "$DO_HTTP" = 1 ]; then
        for depth in ${DEPTHS:-64}; do
          for mc in 0 1 2; do # 2: the cache and the opt-in PAGEIN_META_TRUST_SECONDS=3600 (vouch 2)
            rm -rf "$W/mc"; settle
            b=$(wc -l < "$log") bt=$(wc -l < "$tlog")
            trust=0; [ $mc = 2 ] && trust=3600
            out=$(PAGEIN_META_CACHE=$(( mc > 0 )) PAGEIN_META_TRUST_SECONDS=$trust PAGEIN_META_CACHE_DIR=$W/mc \
                  PAGEIN_OPEN_DEPTH=$depth "$B/bench/bench_open" "$DELAY/$set/model.safetensors.index.json" --iters "$it")
            settle
            n=$(( $(wc -l < "$log") - b - 1 ))
            cell_json http "$set" "$depth" $(( mc > 0 )) $(( mc == 2 ? 2 : 0 )) "$out" "$n" "$(peak_inflight "$tlog" "$bt")" $((it + 1)) "${DELAY_MS:-20}"
          done
        done
      fi
      if [ "$DO_S3" = 1 ]; then
        s3s=$(s3set "$set")
        for cell in "0 0" "1 0" "1 1"; do
          set -- $cell; mc=$1 vouch=$2
          envs="PAGEIN_META_CACHE=$mc PAGEIN_META_CACHE_DIR=$W/mc PAGEIN_META_VOUCH=$vouch AWS_ENDPOINT_URL=$S3 HOME=$W"
          rm -rf "$W/mc"
          out=$(env $envs "$B/bench/bench_open" "s3://bkt/$s3s/model.safetensors.index.json" --iters "$it")
          # the requests of one warm open (the cache now filled): connections under strace
          n=null
          if [ -n "$STRACE" ]; then
            env $envs "$STRACE" -f -qq -e trace=connect -o "$W/st" "$B/bench/bench_open" \
              "s3://bkt/$s3s/model.safetensors.index.json" --iters 1 >/dev/null
            n=$(grep -c 'connect(.*AF_INET' "$W/st") # first + 1 warm open
          fi
          cell_json s3 "$s3s" 64 "$mc" "$vouch" "$out" "$n" null 2 0
        done
        # what the one listing costs at this server (curl, median of 3)
        lt=$(for i in 1 2 3; do curl -s -o /dev/null -w '%{time_total}\n' --aws-sigv4 "aws:amz:us-east-1:s3" \
               -u S3RVER:S3RVER -H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
               "$S3/bkt/?delimiter=%2F&list-type=2&prefix=$s3s%2F"; done | sort -n | sed -n 2p)
        emit "{\"source\": \"s3\", \"set\": \"$s3s\", \"listing_ms_curl\": $(awk -v t="$lt" 'BEGIN {printf "%.1f", t * 1000}')}"
      fi
      if [ "$DO_HF" = 1 ]; then
        for mc in 0 1; do
          rm -rf "$W/mc"; settle
          b=$(wc -l < "$log") bt=$(wc -l < "$tlog")
          out=$(PAGEIN_META_CACHE=$mc PAGEIN_META_CACHE_DIR=$W/mc HF_ENDPOINT=$HTTP HOME=$W \
                "$B/bench/bench_open" "hf://org/$set@$HF_COMMIT/model.safetensors.index.json" --iters "$it")
          settle
          n=$(( $(wc -l < "$log") - b - 1 ))
          cell_json hf "$set" 64 "$mc" 1 "$out" "$n" "$(peak_inflight "$tlog" "$bt")" $((it + 1)) 0
        done
      fi
    done
  done
fi
