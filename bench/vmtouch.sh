#!/usr/bin/env bash
# bench/vmtouch.sh - warming a cold model into the page cache:
# `pagein warm` versus `vmtouch -t` versus `cat > /dev/null`, and a check
# that `pagein resident` and `vmtouch -v` agree after partial warming.
#
#   bash bench/vmtouch.sh [MODEL]        (default: build/demo/sample.safetensors,
#                                         generated with `pagein make-sample` if absent)
#   RUNS=5 PAGEIN=build/pagein THREADS=   environment knobs; QUICK=1 = one run, no verdict
#
# Each run evicts the model's files (posix_fadvise DONTNEED via `pagein
# evict`, checked to be 0% resident) before each tool, and the three tools
# take turns inside every run so drift on the shared machine hits all of
# them alike. Prints medians and the ratios; exit 0 if the targets hold
# (pagein warm >= 2x faster than vmtouch -t; residency agreement within 1%),
# 1 otherwise, 77 if vmtouch is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PAGEIN:=build/pagein}" "${RUNS:=5}" "${THREADS:=}" "${QUICK:=0}"
MODEL=${1:-${MODEL:-build/demo/sample.safetensors}}
PY=/usr/bin/python3
[ "$QUICK" = 1 ] && RUNS=1

[ "$QUICK" = 1 ] || bash scripts/deps.sh bench || true
command -v vmtouch >/dev/null || { echo "SKIP: vmtouch is not installed (Debian package vmtouch)"; exit 77; }
[ -x "$PAGEIN" ] || { echo "build pagein first (make)"; exit 2; }
if [ ! -e "$MODEL" ]; then
  mkdir -p "$(dirname "$MODEL")"
  echo "== generating $MODEL"
  "$PAGEIN" make-sample "$MODEL" >/dev/null
fi

mapfile -t FILES < <("$PAGEIN" resident --json "$MODEL" | $PY -c 'import json,sys
for f in json.load(sys.stdin)["files"]: print(f["path"])')
BYTES=$(stat -c %s "${FILES[@]}" | awk '{s+=$1} END {print s}')
WARM_ARGS=()
[ -n "$THREADS" ] && WARM_ARGS+=(--threads "$THREADS")

cold() {
  "$PAGEIN" evict -q "$MODEL"                 # tensor data
  "$PAGEIN" evict -q -p 0- "${FILES[@]}"      # whole files, headers too
  local pct
  pct=$(vmtouch "${FILES[@]}" | awk '/Resident Pages/ {print $NF}')
  [ "$pct" = "0%" ] || { echo "could not make $MODEL cold (vmtouch says $pct resident)" >&2; exit 2; }
}
# seconds CMD...: wall time of CMD in seconds
seconds() {
  local s e
  s=$(date +%s.%N)
  "$@" >/dev/null
  e=$(date +%s.%N)
  echo "$e - $s" | awk '{printf "%.4f\n", $1 - $3}'
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.4f\n", (a[NR/2]+a[NR/2+1])/2}'; }

echo "== pagein warm vs vmtouch -t vs cat, cold page cache, $RUNS runs"
echo "model: $MODEL (${#FILES[@]} file(s), $BYTES bytes)"
dev=$(stat -c %d "${FILES[0]}")
ra=$(cat "/sys/dev/block/$((dev >> 8)):$((dev & 255))/queue/read_ahead_kb" \
         "/sys/dev/block/$((dev >> 8)):$((dev & 255))/../queue/read_ahead_kb" 2>/dev/null | head -1 || true)
echo "kernel $(uname -r); filesystem $(stat -f -c %T "${FILES[0]}"); $(nproc) CPUs; read_ahead_kb ${ra:-?}"
P=() V=() C=()
for r in $(seq "$RUNS"); do
  cold; P+=("$(seconds "$PAGEIN" warm -q "${WARM_ARGS[@]}" "$MODEL")")
  cold; V+=("$(seconds vmtouch -q -t "${FILES[@]}")")
  cold; C+=("$(seconds cat "${FILES[@]}")")
  echo "run $r: pagein warm ${P[-1]} s, vmtouch -t ${V[-1]} s, cat ${C[-1]} s"
done
mp=$(printf '%s\n' "${P[@]}" | median)
mv=$(printf '%s\n' "${V[@]}" | median)
mc=$(printf '%s\n' "${C[@]}" | median)
gbs() { awk -v b="$BYTES" -v s="$1" 'BEGIN {printf "%.2f", b / s / 1e9}'; }
printf '\n| tool (cold, median of %s) | seconds | GB/s | vs vmtouch -t |\n|---|---|---|---|\n' "$RUNS"
printf '| `pagein warm` | %s | %s | %.2fx |\n' "$mp" "$(gbs "$mp")" "$(awk -v a="$mv" -v b="$mp" 'BEGIN {print a / b}')"
printf '| `vmtouch -t` | %s | %s | 1.00x |\n' "$mv" "$(gbs "$mv")"
printf '| `cat > /dev/null` | %s | %s | %.2fx |\n' "$mc" "$(gbs "$mc")" "$(awk -v a="$mv" -v b="$mc" 'BEGIN {print a / b}')"

echo
echo "== residency agreement after partial warming"
L=$("$PAGEIN" resident --json "$MODEL" | $PY -c 'import json,sys
d=json.load(sys.stdin); print(max([l["layer"] for l in d["layers"]] or [0]))')
half=$(( L / 2 ))
cold
"$PAGEIN" warm -q --layers "0-$half" "$MODEL"
read -r pr pt < <("$PAGEIN" resident --json "$MODEL" | $PY -c 'import json,sys
d=json.load(sys.stdin); print(d["resident_pages"], d["pages"])')
read -r vr vt < <(vmtouch -v "${FILES[@]}" | awk '/Resident Pages/ {split($3, a, "/"); print a[1], a[2]}')
diff=$(awk -v a="$pr" -v b="$vr" -v t="$vt" 'BEGIN {d = a - b; if (d < 0) d = -d; printf "%.3f", 100 * d / t}')
echo "warmed layers 0-$half of 0..$((L - 1)) (not the embedding or the head):"
echo "pagein resident: $pr of $pt pages; vmtouch -v: $vr of $vt pages; difference $diff% of the file"
"$PAGEIN" evict -q "$MODEL"

[ "$QUICK" = 1 ] && exit 0
ok=1
awk -v a="$mv" -v b="$mp" 'BEGIN {exit !(a / b >= 2)}' || { echo "TARGET MISSED: pagein warm < 2x faster than vmtouch -t"; ok=0; }
awk -v d="$diff" 'BEGIN {exit !(d <= 1)}' || { echo "TARGET MISSED: residency differs by more than 1%"; ok=0; }
[ "$pt" = "$vt" ] || { echo "page totals differ: pagein $pt, vmtouch $vt"; ok=0; }
[ $ok = 1 ] && echo "targets met" || exit 1
