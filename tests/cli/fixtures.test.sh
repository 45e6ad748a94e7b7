#!/usr/bin/env bash
# cli: serial
# The committed Arrow and Parquet fixtures (tests/data/*/fixtures) are what
# their writers write: tests/data/regen.sh --check writes them again with
# npm apache-arrow and parquet-wasm into a temporary folder and compares
# every byte. Skips (77, with the reason) where node, npm, lz4 or zstd
# cannot be had; the other tests read the committed files and need none.
set -u
. "$REPO/tests/cli/lib.sh"
out=$(bash "$REPO/tests/data/regen.sh" --check 2>&1); rc=$?
[ $rc = 77 ] && { echo "$out"; exit 77; }
[ $rc = 0 ] || fail "regen.sh --check: $out"
echo "fixtures: the committed files are what the writers write"
