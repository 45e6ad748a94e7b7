#!/usr/bin/env bash
# Runs every tests/cli/*.test.sh with PAGEIN set to the tool, each under a
# timeout, in a fresh temp directory (TMP). A script exits 0 = pass,
# 77 = skip (it prints why), anything else = fail. A script that skips a
# part of itself says so with skip_part (lib.sh): the part is named on its
# line and counted in the closing one.
set -u
: "${PAGEIN:=build/pagein}"
PAGEIN=$(cd "$(dirname "$PAGEIN")" && pwd)/$(basename "$PAGEIN")
export PAGEIN
export REPO=$(cd "$(dirname "$0")/../.." && pwd)
export TESTDATA=${PAGEIN_TESTDATA:-$REPO/tests/data/real}
pass=0 fail=0 skip=0 pskip=0
# run.sh [NAME...]: only tests/cli/NAME.test.sh (make check runs a few)
if [ $# -gt 0 ]; then list=(); for n in "$@"; do list+=("$REPO/tests/cli/$n.test.sh"); done
else list=("$REPO"/tests/cli/*.test.sh); fi
for t in "${list[@]}"; do
  [ -e "$t" ] || { echo "FAIL cli/$(basename "$t" .test.sh) (no such test)"; fail=$((fail+1)); continue; }
  name=$(basename "$t" .test.sh)
  TMP=$(mktemp -d /tmp/pagein-cli-XXXXXX)
  t0=$(date +%s%N)
  # the metadata cache of a test goes to its TMP, never the user's ~/.cache
  out=$(cd "$TMP" && TMP=$TMP PAGEIN_META_CACHE_DIR=${PAGEIN_META_CACHE_DIR:-$TMP/.meta-cache} timeout 300 bash "$t" 2>&1)
  rc=$?
  parts=""
  [ -s "$TMP/.skipped-parts" ] && parts=$(paste -sd';' "$TMP/.skipped-parts")
  rm -rf "$TMP"
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  took=$(printf ' (%d.%d s)' $((ms / 1000)) $((ms % 1000 / 100)))
  if [ $rc -eq 0 ] && [ -n "$parts" ]; then
    echo "ok   cli/$name$took, SKIP (part): $parts"; pass=$((pass+1)); pskip=$((pskip+$(echo "$parts" | tr ';' '\n' | wc -l)))
  elif [ $rc -eq 0 ]; then echo "ok   cli/$name$took"; pass=$((pass+1))
  elif [ $rc -eq 77 ]; then echo "SKIP cli/$name: $(echo "$out" | tail -1)"; skip=$((skip+1))
  else echo "FAIL cli/$name (exit $rc)"; echo "$out" | tail -30 | sed 's/^/    /'; fail=$((fail+1)); fi
done
echo "$pass passed, $fail failed, $skip skipped$([ $pskip -gt 0 ] && echo ", $pskip parts skipped")"
[ $fail -eq 0 ]
