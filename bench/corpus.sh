#!/usr/bin/env bash
# bench/corpus.sh KIND DIR... - reads every file of a public corpus with
# pagein (Python, pagein.data.Dataset with format=KIND) and with a reference
# reader (npm parquet-wasm, the Rust parquet crate, for parquet; npm
# apache-arrow for arrow), compares every value of every row (canonical
# JSON, bench/corpus_ref.mjs) and prints one line per file (equal / differs
# / pagein error / reference error) and "N of M equal" over the files the
# reference reads. KIND: parquet or arrow. The corpora are fetched, never
# committed: apache/parquet-testing's data/ and apache/arrow-testing's
# data/arrow-ipc-stream/integration/*/ golden files.
# usage: bash bench/corpus.sh parquet parquet-testing/data
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
KIND=${1:?usage: corpus.sh parquet|arrow DIR...}
shift
PY=${PYTHON:-/usr/bin/python3}
PYPATH=${PAGEIN_PYTHONPATH:-$REPO/build/python} # the built module (a copy keeps a long run apart from rebuilds)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
eq=0 tot=0
case $KIND in parquet) pat='*.parquet' ;; *) pat='*.arrow_file *.stream *.arrow *.arrows *.feather *.ipc' ;; esac
for d in "$@"; do
  for f in $(cd "$d" && ls $pat 2>/dev/null | sort); do
    p=$d/$f
    if ! NODE_PATH=$REPO/build/npm/node_modules timeout 120 node "$REPO/bench/corpus_ref.mjs" "$KIND" "$p" > "$OUT/ref" 2> "$OUT/ref.err"; then
      echo "reference error  $f: $(tail -1 "$OUT/ref.err" | cut -c1-150)"; continue
    fi
    tot=$((tot + 1))
    if ! PYTHONPATH=$PYPATH timeout 300 "$PY" "$REPO/bench/corpus_pagein.py" "$KIND" "$p" > "$OUT/got" 2> "$OUT/got.err"; then
      echo "pagein error     $f: $(tail -1 "$OUT/got.err" | cut -c1-200)"; continue
    fi
    if cmp -s "$OUT/ref" "$OUT/got"; then
      echo "equal            $f"; eq=$((eq + 1))
    else
      echo "differs          $f: $(diff <(head -c 100000 "$OUT/ref") <(head -c 100000 "$OUT/got") | grep -m2 '^[<>]' | cut -c1-180 | tr '\n' ' ')"
    fi
  done
done
echo "$eq of $tot equal"
