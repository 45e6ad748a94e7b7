#!/usr/bin/env bash
# regen.sh [--check] - writes the committed Arrow and Parquet fixtures
# (tests/data/arrow/fixtures/, tests/data/parquet/fixtures/) again with the
# writers nobody here wrote: npm apache-arrow (tests/data/arrow/gen.mjs via
# fixtures.sh, bodies compressed by Debian's lz4 and zstd) and npm
# parquet-wasm (tests/data/parquet/gen.mjs via gen.sh), both installed into
# build/npm on first use. The tests read the committed files, so nothing
# needs node or npm at test time; run this after changing a gen.mjs and
# commit what it writes. Both writers are seeded: the same packages write
# the same bytes.
#
# --check: writes into a temporary folder and compares with the committed
# files instead (`make fixtures-check`, run by .ci/run); exit 1 naming what differs.
# Exit 77 with the reason when node, npm, lz4 or zstd cannot be had here.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
check=0
[ "${1:-}" = --check ] && check=1
W=$(mktemp -d "${TMPDIR:-/tmp}/pagein-regen-XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
out=$(bash "$REPO/tests/data/arrow/fixtures.sh" "$W/arrow" 2>&1); rc=$?
[ $rc = 0 ] || { echo "$out"; exit $rc; }
rm -f "$W/arrow/done" "$W/arrow/gen.log" # the script's own bookkeeping
out=$(bash "$REPO/tests/data/parquet/gen.sh" "$W/parquet" 2>&1); rc=$?
[ $rc = 0 ] || { echo "$out"; exit $rc; }
bad=0
for k in arrow parquet; do
  dst=$REPO/tests/data/$k/fixtures
  if [ $check = 1 ]; then
    diff -rq "$W/$k" "$dst" || bad=1
  else
    rm -rf "$dst" && cp -r "$W/$k" "$dst" || exit 1
    echo "regen.sh: wrote $dst ($(du -sh "$dst" | cut -f1))"
  fi
done
[ $bad = 0 ] || { echo "regen.sh: the committed fixtures differ from what the writers write (run tests/data/regen.sh and commit)"; exit 1; }
exit 0
