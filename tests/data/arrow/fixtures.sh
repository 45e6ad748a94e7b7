#!/usr/bin/env bash
# fixtures.sh OUTDIR - writes the Arrow fixtures of tests/test_arrow.c into
# OUTDIR with gen.mjs (npm apache-arrow, installed into build/npm on first
# use, the way tests/remote/servers.sh installs s3rver; Debian's lz4 and zstd
# programs compress the bodies). Exit 77 with the reason on stdout when a
# piece is missing here (node, npm, lz4, zstd, or the registry is offline).
set -u
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
OUT=${1:?usage: fixtures.sh OUTDIR}
ARROW_VERSION=21.2.0
command -v node >/dev/null || { echo "node is not installed (Debian nodejs)"; exit 77; }
for p in lz4 zstd; do command -v $p >/dev/null || { echo "$p is not installed (Debian $p)"; exit 77; }; done
NPM=${ARROW_NPM:-$REPO/build/npm}
mkdir -p "$NPM" || exit 1
# looked at under the lock: another runner's npm may be writing the package
# (its package.json there before the rest of it)
if ! flock -w 600 "$NPM/.install.lock" test -f "$NPM/node_modules/apache-arrow/package.json"; then
  command -v npm >/dev/null || { echo "npm is not installed (Debian npm)"; exit 77; }
  # one npm at a time in build/npm (make check runs two test runners)
  flock -w 600 "$NPM/.install.lock" sh -c '[ -f "$1/node_modules/apache-arrow/package.json" ] ||
    timeout 300 npm install --prefix "$1" --no-audit --no-fund "apache-arrow@$2" > "$1/apache-arrow.log" 2>&1' _ "$NPM" "$ARROW_VERSION" \
    || { echo "npm could not install apache-arrow (offline?): $(tail -1 "$NPM/apache-arrow.log")"; exit 77; }
fi
# up to date: written by this gen.mjs and this script (OUT/done is the last
# thing written, so a half-written folder is never taken)
HERE=$REPO/tests/data/arrow
fresh() { [ -f "$OUT/done" ] && [ "$OUT/done" -nt "$HERE/gen.mjs" ] && [ "$OUT/done" -nt "$HERE/fixtures.sh" ]; }
fresh && exit 0
TMPOUT=$OUT.tmp.$$
rm -rf "$TMPOUT" && mkdir -p "$TMPOUT" || exit 1
ARROW_NPM=$NPM timeout 300 node "$HERE/gen.mjs" "$TMPOUT" > "$TMPOUT/gen.log" 2>&1
rc=$?
[ $rc = 0 ] || { echo "gen.mjs failed (exit $rc$([ $rc = 124 ] && echo ': timed out after 300 s')): $(tail -3 "$TMPOUT/gen.log")"; rm -rf "$TMPOUT"; exit 1; }
touch "$TMPOUT/done"
# into place; a fresh folder another runner put there first is kept (a
# test may be reading it), a stale one replaced
if ! mv -T "$TMPOUT" "$OUT" 2>/dev/null; then
  if fresh; then rm -rf "$TMPOUT"; else rm -rf "$OUT" && mv -T "$TMPOUT" "$OUT" 2>/dev/null || rm -rf "$TMPOUT"; fi
fi
[ -f "$OUT/done" ] || { echo "could not install the fixtures into $OUT"; exit 1; }
exit 0
