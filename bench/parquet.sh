#!/usr/bin/env bash
# bench/parquet.sh - decoding a SNAPPY Parquet shard's `input_ids:
# list<int32>` and `text: utf8` columns (issue #25's targets), in one run:
#   1. pagein's decode (decompress + levels + values into columns) against
#      libsnappy's own decompression of the same pages (bench_parquet);
#   2. against npm parquet-wasm (the Rust parquet crate in WebAssembly)
#      reading all rows of the same columns from the same bytes in memory.
# The file is written by npm parquet-wasm (bench/parquet_gen.mjs), installed
# into build/npm like the test fixtures. Warm: every reader has the file in
# memory. ROWS=20000 (about 18 MB), ITERS=10.
# usage: bash bench/parquet.sh [--json]
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
ROWS=${ROWS:-20000} ITERS=${ITERS:-10}
OUT=$REPO/build/bench-parquet
mkdir -p "$OUT"
bash "$REPO/tests/data/parquet/gen.sh" "$REPO/build/parquet-fixtures" >/dev/null  # installs the npm packages
F=$OUT/tokens-$ROWS.parquet
[ -f "$F" ] || NODE_PATH=$REPO/build/npm/node_modules node "$REPO/bench/parquet_gen.mjs" "$F" "$ROWS"
B=$REPO/build/bench/bench_parquet
[ -x "$B" ] || make -C "$REPO" -s build/bench/bench_parquet
pj=$("$B" "$F" --iters "$ITERS" --json input_ids text)
wj=$(NODE_PATH=$REPO/build/npm/node_modules node "$REPO/bench/parquet_wasm_read.mjs" "$F" "$ITERS" input_ids text)
/usr/bin/python3 - "$pj" "$wj" "${1:-}" <<'PY'
import json, sys
p, w, mode = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
r = {"file": p["file"], "rows": p["rows"], "values": p["values"], "pages_uncompressed": p["uncompressed"],
     "pagein_decode_s": p["decode_s"], "libsnappy_s": p["snappy_s"], "vs_libsnappy": p["ratio"],
     "parquet_wasm_s": w["median"], "vs_parquet_wasm": w["median"] / p["decode_s"],
     "pagein_decode_cpu_s": p["decode_cpu_s"], "parquet_wasm_cpu_s": w["cpu_median"],
     "vs_parquet_wasm_cpu": w["cpu_median"] / p["decode_cpu_s"], "kernel": p["kernel"]}
if mode == "--json":
    print(json.dumps(r))
else:
    print(f"bench/parquet.sh: {r['file']} ({r['rows']} rows, {r['values']} values, {r['pages_uncompressed']/1e6:.1f} MB of pages), medians, warm")
    print(f"  pagein decode            {r['pagein_decode_s']:.4f} s")
    print(f"  libsnappy alone          {r['libsnappy_s']:.4f} s   pagein at {r['vs_libsnappy']:.2f}x its throughput (target >= 0.70)")
    print(f"  parquet-wasm readParquet {r['parquet_wasm_s']:.4f} s   pagein {r['vs_parquet_wasm']:.2f}x faster (target >= 3)")
    print(f"  CPU time: pagein {r['pagein_decode_cpu_s']:.4f} s, parquet-wasm {r['parquet_wasm_cpu_s']:.4f} s: {r['vs_parquet_wasm_cpu']:.2f}x")
PY
