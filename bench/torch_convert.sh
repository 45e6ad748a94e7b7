#!/usr/bin/env bash
# torch_convert.sh [DIR] [GB] - times `pagein convert` against torch.load + a
# Python safetensors write on a ~1.3 GB torch.save checkpoint, with
# /usr/bin/time -v for peak RSS. Both runs read a warm page cache (the file
# is read once first) and write into DIR. Results: docs/BENCHMARKS.md.
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$REPO/build/bench-torch}
GB=${2:-1.3}
PAGEIN=${PAGEIN:-$REPO/build/pagein}
PY=/usr/bin/python3
mkdir -p "$DIR"
CK=$DIR/model.pt
[ -s "$CK" ] || $PY "$REPO/bench/torch_convert_gen.py" "$CK" "$GB"
echo "kernel $(uname -r), fs $(stat -f -c %T "$DIR"), checkpoint $(stat -c %s "$CK") bytes, warm page cache"
cat "$CK" > /dev/null
measure() { # label cmd...
  local label=$1; shift
  rm -f "$DIR/out.safetensors"
  /usr/bin/time -v "$@" 2> "$DIR/time.txt" > /dev/null
  local wall rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$DIR/time.txt")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$DIR/time.txt")
  printf '%-28s wall %-9s peak RSS %6d MiB\n' "$label" "$wall" $((rss / 1024))
}
for round in 1 2; do
  measure "pagein convert" "$PAGEIN" convert -q "$CK" "$DIR/out.safetensors"
  measure "torch.load + py writer" $PY "$REPO/bench/torch_convert_ref.py" "$CK" "$DIR/out.safetensors"
done
rm -f "$DIR/out.safetensors" "$DIR/time.txt"
