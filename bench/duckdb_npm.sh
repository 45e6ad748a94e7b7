#!/usr/bin/env bash
# bench/duckdb_npm.sh - installs npm @duckdb/node-api (DuckDB's native
# library; the peer of bench/parquet.sh and bench/parquet_epoch.sh) into
# build/npm once, under build/npm's install lock like the other npm peers
# (tests/data/parquet/gen.sh). Exit 0 when it is there, 77 with the reason
# on stdout when node/npm or the package cannot be had (offline).
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
VER=${DUCKDB_NPM_VERSION:-1.5.6-r.1}
NM=$REPO/build/npm/node_modules
command -v node >/dev/null || { echo "node is not installed (Debian package nodejs)"; exit 77; }
mkdir -p "$REPO/build/npm" || exit 1
flock -w 600 "$REPO/build/npm/.install.lock" sh -c '[ -f "$1/@duckdb/node-api/package.json" ]' _ "$NM" && exit 0
command -v npm >/dev/null || { echo "npm is not installed (Debian package npm)"; exit 77; }
flock -w 600 "$REPO/build/npm/.install.lock" sh -c '[ -f "$1/node_modules/@duckdb/node-api/package.json" ] ||
  timeout 300 npm install --prefix "$1" --no-audit --no-fund "@duckdb/node-api@$2" > "$1/duckdb-npm.log" 2>&1' \
  _ "$REPO/build/npm" "$VER" ||
  { echo "npm could not install @duckdb/node-api@$VER (offline?): $(tail -1 "$REPO/build/npm/duckdb-npm.log")"; exit 77; }
