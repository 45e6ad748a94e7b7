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
if [ ! -d "$NM/parquet-wasm" ] || [ ! -d "$NM/apache-arrow" ]; then
  command -v npm >/dev/null || { echo "npm is not installed (Debian package npm)"; exit 77; }
  mkdir -p "$REPO/build/npm"
  timeout 300 npm install --prefix "$REPO/build/npm" --no-audit --no-fund parquet-wasm@0.8.0 apache-arrow@21.2.0 \
    > "$REPO/build/npm/parquet-npm.log" 2>&1 \
    || { echo "npm could not install parquet-wasm/apache-arrow (offline?): $(tail -1 "$REPO/build/npm/parquet-npm.log")"; exit 77; }
fi
rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp" || exit 1
NODE_PATH=$NM timeout 300 node "$HERE/gen.mjs" "$OUT.tmp" "${ROWS:-3000}" >/dev/null || { echo "gen.mjs failed"; exit 1; }
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
