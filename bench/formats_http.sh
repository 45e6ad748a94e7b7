#!/usr/bin/env bash
# bench/formats_http.sh - the dataset formats over HTTP with `bench remote`'s
# honest pacing (tests/remote/servers.sh: nginx's /delayed/, DELAY_MS before
# each request's first byte, RATE per connection): for records, webdataset,
# mds and lines shards (written by `pagein bench shuffle --formats
# --write-only`), `pagein pull` of the same shards (-c CONNS, one after the
# other) against a whole epoch through the one pipeline in none, block and
# global order (`pagein read-samples --dataset URLs --check`; the tar index
# is cached in a cache directory by a first, untimed open). Prints a table.
#
# Usage: bench/formats_http.sh   (env: SIZE=128M RATE=100m DELAY_MS=20 CONNS=16
#        PAGEIN=build/pagein FORMATS="records webdataset mds lines")
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
PAGEIN=${PAGEIN:-$REPO/build/pagein}
SIZE=${SIZE:-128M} CONNS=${CONNS:-16}
export RATE=${RATE:-100m} DELAY_MS=${DELAY_MS:-20}
FORMATS=${FORMATS:-records webdataset mds lines}
D=$(mktemp -d /var/tmp/pagein-fhttp-XXXXXX)
trap 'bash "$REPO/tests/remote/servers.sh" stop "$D" >/dev/null 2>&1; rm -rf "$D"' EXIT
# caches of this run stay in its temp folder, never the user's ~/.cache
export PAGEIN_META_CACHE_DIR=${PAGEIN_META_CACHE_DIR:-$D/meta-cache} HF_HOME=${HF_HOME:-$D/hf-home} XDG_CACHE_HOME=$D/xdg-cache
"$PAGEIN" bench shuffle --formats --write-only --dir "$D/www" --size "$SIZE" > /dev/null || exit 2
out=$(bash "$REPO/tests/remote/servers.sh" start "$D" $$ nginx delay 2>&1) || { echo "formats_http: servers: $out" >&2; exit 2; }
. "$D/env"
now() { date +%s.%N; }
printf '# %s per format, %s per connection, %s ms to first byte, pull -c %s\n' "$SIZE" "$RATE" "$DELAY_MS" "$CONNS"
printf '%-10s %-8s %9s %9s %8s\n' format mode seconds MiB/s "vs pull"
for fmt in $FORMATS; do
  extra=()
  case $fmt in
    records) files=$(cd "$D/www/records" && ls *.bin); extra=(--data-format records --record-size 32K) ;;
    webdataset) files=$(cd "$D/www/webdataset" && ls *.tar) ;;
    mds) files=$(cd "$D/www/mds" && ls *.mds) ;;
    lines) files=$(cd "$D/www/lines" && ls *.jsonl) ;;
  esac
  bytes=0 spec=""
  for f in $files; do
    bytes=$((bytes + $(stat -c %s "$D/www/$fmt/$f")))
    spec="$spec${spec:+$'\n'}$DELAY/$fmt/$f"
  done
  [ $fmt = mds ] && spec="$DELAY/mds/index.json"
  mkdir -p "$D/pull" "$D/cache"
  t0=$(now)
  for f in $files; do "$PAGEIN" pull --no-sync -q -c "$CONNS" "$DELAY/$fmt/$f" "$D/pull/$f" || exit 1; done
  t1=$(now)
  rm -rf "$D/pull"
  pull=$(echo "$t1 - $t0" | bc -l)
  printf '%-10s %-8s %9.3f %9.1f %8s\n' $fmt pull "$pull" "$(echo "$bytes / 1048576 / $pull" | bc -l)" 1.00x
  "$PAGEIN" read-samples --dataset "$spec" "${extra[@]}" --cache-dir "$D/cache" --check > /dev/null || exit 1
  for order in none block global; do
    t0=$(now)
    "$PAGEIN" read-samples --dataset "$spec" "${extra[@]}" --cache-dir "$D/cache" --order $order --check > /dev/null || exit 1
    t1=$(now)
    s=$(echo "$t1 - $t0" | bc -l)
    printf '%-10s %-8s %9.3f %9.1f %7.2fx\n' $fmt $order "$s" "$(echo "$bytes / 1048576 / $s" | bc -l)" "$(echo "$pull / $s" | bc -l)"
  done
done
