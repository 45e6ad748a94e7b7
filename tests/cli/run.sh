#!/usr/bin/env bash
# Runs every tests/cli/*.test.sh with PAGEIN set to the tool, each under a
# timeout, in a fresh temp directory (TMP). A script exits 0 = pass,
# 77 = skip (it prints why), anything else = fail. A script that skips a
# part of itself says so with skip_part (lib.sh): the part is named on its
# line and counted in the closing one.
#
# PAGEIN_CLI_JOBS=N (make cli-test passes the number of cores) runs N
# scripts at once; each result is printed when its script ends. A script
# whose assertions depend on when things happen (signals landing mid-write,
# a server's pacing against a client's time-out) says "# cli: serial" on a
# line of its own and runs alone, after the others.
set -u
: "${PAGEIN:=build/pagein}"
PAGEIN=$(cd "$(dirname "$PAGEIN")" && pwd)/$(basename "$PAGEIN")
export PAGEIN
export REPO=$(cd "$(dirname "$0")/../.." && pwd)
export TESTDATA=${PAGEIN_TESTDATA:-$REPO/tests/data/real}
JOBS=${PAGEIN_CLI_JOBS:-1}
case "$JOBS" in ''|*[!0-9]*|0) JOBS=1 ;; esac
# run.sh [NAME...]: only tests/cli/NAME.test.sh (make check runs a few)
if [ $# -gt 0 ]; then list=(); for n in "$@"; do list+=("$REPO/tests/cli/$n.test.sh"); done
else list=("$REPO"/tests/cli/*.test.sh); fi
RES=$(mktemp -d /tmp/pagein-cli-res-XXXXXX)
trap 'rm -rf "$RES"' EXIT

# run_one SCRIPT: runs it, prints its result lines in one write, and leaves
# pass/fail/skip and the number of skipped parts in $RES/NAME
run_one() {
  local t=$1 name TMP out rc parts ms took msg kind np=0
  name=$(basename "$t" .test.sh)
  if [ ! -e "$t" ]; then
    printf 'FAIL cli/%s (no such test)\n' "$name"; echo "fail 0" > "$RES/$name"; return
  fi
  TMP=$(mktemp -d /tmp/pagein-cli-XXXXXX)
  local t0; t0=$(date +%s%N)
  # the metadata cache of a test goes to its TMP, never the user's ~/.cache
  # the CPU time of the script and everything it waited for (bash's times),
  # printed beside the wall time: make test's budget is CPU on 2 cores
  out=$(cd "$TMP" && { TMP=$TMP PAGEIN_META_CACHE_DIR=${PAGEIN_META_CACHE_DIR:-$TMP/.meta-cache} timeout 300 bash "$t" 2>&1
        r=$?; times > "$TMP/.cpu-times"; exit $r; })
  rc=$?
  parts="" cpu=""
  [ -s "$TMP/.skipped-parts" ] && parts=$(paste -sd';' "$TMP/.skipped-parts")
  [ -s "$TMP/.cpu-times" ] && cpu=$(sed -n 2p "$TMP/.cpu-times" | tr 'ms' '  ' |
        awk '{ printf ", cpu %.1f s", $1 * 60 + $2 + $3 * 60 + $4 }')
  rm -rf "$TMP"
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  took=$(printf ' (%d.%d s%s)' $((ms / 1000)) $((ms % 1000 / 100)) "$cpu")
  if [ $rc -eq 0 ] && [ -n "$parts" ]; then
    np=$(echo "$parts" | tr ';' '\n' | wc -l)
    msg="ok   cli/$name$took, SKIP (part): $parts"; kind=pass
  elif [ $rc -eq 0 ]; then msg="ok   cli/$name$took"; kind=pass
  elif [ $rc -eq 77 ]; then msg="SKIP cli/$name: $(echo "$out" | tail -1)"; kind=skip
  else msg="FAIL cli/$name (exit $rc)"$'\n'"$(echo "$out" | tail -30 | sed 's/^/    /')"; kind=fail; fi
  # one script's lines at a time (a FAIL's tail is longer than one atomic write)
  { flock 9; printf '%s\n' "$msg"; } 9>>"$RES/.print"
  echo "$kind $np" > "$RES/$name"
}

par=() ser=()
for t in "${list[@]}"; do
  if [ "$JOBS" -gt 1 ] && [ -e "$t" ] && grep -qx '# cli: serial' "$t"; then ser+=("$t"); else par+=("$t"); fi
done
running=0
for t in "${par[@]}"; do
  if [ "$JOBS" -le 1 ]; then run_one "$t"; continue; fi
  while [ "$running" -ge "$JOBS" ]; do wait -n; running=$((running - 1)); done
  run_one "$t" &
  running=$((running + 1))
done
wait
for t in "${ser[@]}"; do run_one "$t"; done

pass=0 fail=0 skip=0 pskip=0
for f in "$RES"/*; do
  [ -e "$f" ] || continue
  read -r kind np < "$f"
  case $kind in pass) pass=$((pass+1)) ;; skip) skip=$((skip+1)) ;; *) fail=$((fail+1)) ;; esac
  pskip=$((pskip + np))
done
echo "$pass passed, $fail failed, $skip skipped$([ $pskip -gt 0 ] && echo ", $pskip parts skipped")"
[ $fail -eq 0 ]
