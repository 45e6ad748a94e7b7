#!/usr/bin/env bash
# matrix.sh - the storage matrix (docs/BENCHMARKS.md, "storage matrix"):
# `pagein bench load` (every strategy, cold) and `pagein bench shuffle` on
# storages built here: local ext4 (this machine's disk), tmpfs, and
# tools/slowfs at 0.2 ms and 1 ms a request with 4 KiB and 128 KiB
# readahead. Per cell: the best strategy, auto's choice, auto/best, and the
# access trace (requests, request-size histogram, mean/max in flight,
# latency percentiles, major faults). Writes OUT/load-CELL.json,
# OUT/shuffle-CELL.json, OUT/matrix.json and prints the table.
#
#   bench/matrix.sh [--size 256M] [--runs 1] [--out DIR] [--cells LIST] [--no-shuffle]
#                   [--shuffle-size 128M] [--only STRATEGIES]
# cells: ext4,tmpfs,slowfs-0.2ms-ra4k,slowfs-0.2ms-ra128k,slowfs-1ms-ra4k,slowfs-1ms-ra128k
# Needs root for the slowfs readahead setting (cells are skipped with a reason
# when FUSE is unavailable). `make bench` runs it with the defaults.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
PAGEIN=${PAGEIN:-$here/build/pagein}
export SLOWFS=${SLOWFS:-$here/build/slowfs}
size=256M runs=1 out=${OUT:-$here/build/matrix} cells=all shuffle=1 ssize=128M
only=lazy,populate,prefetch,read,auto,read1m
while [ $# -gt 0 ]; do
  case $1 in
    --size) size=$2; shift ;;
    --runs) runs=$2; shift ;;
    --out) out=$2; shift ;;
    --cells) cells=$2; shift ;;
    --no-shuffle) shuffle=0 ;;
    --shuffle-size) ssize=$2; shift ;;
    --only) only=$2; shift ;;
    -h|--help) sed -n 2,17p "$0"; exit 0 ;;
    *) echo "matrix.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
all="ext4 tmpfs slowfs-0.2ms-ra4k slowfs-0.2ms-ra128k slowfs-1ms-ra4k slowfs-1ms-ra128k"
[ "$cells" = all ] && cells=$all
cells=${cells//,/ }
mkdir -p "$out"
work=${WORK:-/var/tmp/pagein-matrix}
shm=/dev/shm/pagein-matrix.$$
mkdir -p "$work/src" "$shm"
mounted=""
cleanup() {
  for m in $mounted; do bash "$here/tools/slowfs.sh" umount "$m" 2>/dev/null; done
  rm -rf "$shm"
}
trap cleanup EXIT INT TERM
model=$work/src/model-$size.safetensors
[ -f "$model" ] || "$PAGEIN" make-sample "$model" --size "$size" -q || exit 2
echo "matrix: model $model ($(stat -c %s "$model") bytes), runs $runs, load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, kernel $(uname -r)"

for cell in $cells; do
  case $cell in
    ext4) path=$model; fsnote=$(stat -f -c %T "$work") ;;
    tmpfs) cp "$model" "$shm/"; path=$shm/$(basename "$model") ;;
    slowfs-*)
      d=${cell#slowfs-}; d=${d%%-*}; ra=${cell##*-ra}; ra=${ra%k}
      case $d in 0.2ms) us=200 ;; 1ms) us=1000 ;; *) us=${d%us} ;; esac
      mnt=$work/mnt-$cell
      if ! r=$(bash "$here/tools/slowfs.sh" check); then echo "$cell: skipped: $r"; continue; fi
      bash "$here/tools/slowfs.sh" mount "$work/src" "$mnt" --delay-us "$us" --ra-kb "$ra" >/dev/null || { echo "$cell: mount failed"; continue; }
      mounted="$mounted $mnt"
      path=$mnt/$(basename "$model") ;;
    *) echo "matrix: unknown cell $cell" >&2; continue ;;
  esac
  echo "== $cell: bench load"
  "$PAGEIN" bench load "$path" --json --cache cold --runs "$runs" --no-pipeline --no-fio -q --only "$only" \
    > "$out/load-$cell.json" || echo "$cell: bench load reported a failure (see $out/load-$cell.json)"
  if [ "$shuffle" = 1 ]; then
    echo "== $cell: bench shuffle"
    case $cell in
      ext4) sargs=(--dir "$work/shuffle") ;;
      tmpfs) sargs=(--dir "$shm/shuffle") ;;
      slowfs-*) sargs=(--dir "$work/shuffle" --slowfs-only --delay-us "$us" --slowfs-ra-kb "$ra" --slowfs-bin "$SLOWFS") ;;
    esac
    "$PAGEIN" bench shuffle "${sargs[@]}" --size "$ssize" --json > "$out/shuffle-$cell.json" \
      || echo "$cell: bench shuffle reported a failure"
  fi
  case $cell in
    slowfs-*) bash "$here/tools/slowfs.sh" umount "$mnt"; mounted=${mounted/ $mnt/} ;;
    tmpfs) rm -f "$path" ;;
  esac
done
python3 "$here/bench/matrix.py" "$out" $cells
