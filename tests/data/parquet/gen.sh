#!/usr/bin/env bash
# gen.sh OUTDIR - writes the Parquet fixtures (gen.mjs) into OUTDIR, once:
# installs npm apache-arrow and parquet-wasm into build/npm on first use (as
# tests/remote/servers.sh installs s3rver). Exit 77 when node/npm or the
# packages cannot be had (the tests then skip with the reason on stdout).
set -u
OUT=$1
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
HERE=$REPO/tests/data/parquet
[ -f "$OUT/files.txt" ] && [ "$OUT/files.txt" -nt "$HERE/gen.mjs" ] && exit 0
command -v node >/dev/null || { echo "node is not installed (Debian package nodejs)"; exit 77; }
NM=$REPO/build/npm/node_modules
mkdir -p "$REPO/build/npm" || exit 1
# looked at under the lock: another runner's npm may be writing the packages
# (their folders there before the rest of them)
if ! flock -w 600 "$REPO/build/npm/.install.lock" sh -c '[ -d "$1/parquet-wasm" ] && [ -d "$1/apache-arrow" ]' _ "$NM"; then
  command -v npm >/dev/null || { echo "npm is not installed (Debian package npm)"; exit 77; }
  # one npm at a time in build/npm (make check runs two test runners)
  flock -w 600 "$REPO/build/npm/.install.lock" sh -c '{ [ -d "$1/node_modules/parquet-wasm" ] && [ -d "$1/node_modules/apache-arrow" ]; } ||
    timeout 300 npm install --prefix "$1" --no-audit --no-fund parquet-wasm@0.8.0 apache-arrow@21.2.0 > "$1/parquet-npm.log" 2>&1' _ "$REPO/build/npm" \
    || { echo "npm could not install parquet-wasm/apache-arrow (offline?): $(tail -1 "$REPO/build/npm/parquet-npm.log")"; exit 77; }
fi
T=$OUT.tmp.$$
rm -rf "$T" && mkdir -p "$T" || exit 1
NODE_PATH=$NM timeout 300 node "$HERE/gen.mjs" "$T" "${ROWS:-1000}" >/dev/null || { echo "gen.mjs failed"; rm -rf "$T"; exit 1; }
# into place; a fresh folder another runner put there first is kept (a test
# may be reading it), a stale one replaced
if ! mv -T "$T" "$OUT" 2>/dev/null; then
  if [ -f "$OUT/files.txt" ] && [ "$OUT/files.txt" -nt "$HERE/gen.mjs" ]; then rm -rf "$T"
  else rm -rf "$OUT" && mv -T "$T" "$OUT" 2>/dev/null || rm -rf "$T"; fi
fi
[ -f "$OUT/files.txt" ] || { echo "could not install the fixtures into $OUT"; exit 1; }
