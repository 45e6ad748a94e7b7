#!/usr/bin/env bash
# bench/parquet.sh - decoding a SNAPPY Parquet shard's `input_ids:
# list<int32>` and `text: utf8` columns (targets: >= 0.7x libsnappy's speed, >= 3x parquet-wasm's, <= 0.5x DuckDB's time), in one run:
#   1. pagein's decode (decompress + levels + values into columns) against
#      libsnappy's own decompression of the same pages (bench_parquet);
#   2. against npm parquet-wasm (the Rust parquet crate in WebAssembly)
#      reading all rows of the same columns from the same bytes in memory;
#   3. against DuckDB (npm @duckdb/node-api, its native library) aggregating
#      every value of the same columns of the same file (warm: page cache),
#      on 1 thread and on all, in the same run (bench/parquet_duckdb.mjs);
#      pagein's figure there is the decode into fresh columns each time
#      (bench_parquet's fresh_decode_s: new columns whose arrays come from
#      the memory policy's kept blocks, as a pipeline's next group does;
#      PAGEIN_MEM_KEEP=0 makes them fresh pages), the first such decode
#      (pages never touched before) and into reused ones. DuckDB is skipped, saying why, without npm.
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
dj='{}'
if why=$(bash "$REPO/bench/duckdb_npm.sh"); then
  dj=$(NODE_PATH=$REPO/build/npm/node_modules node "$REPO/bench/parquet_duckdb.mjs" "$F" "$ITERS" 1,0 input_ids text) || dj='{}'
else
  echo "bench/parquet.sh: DuckDB skipped: $why" >&2
fi
/usr/bin/python3 - "$pj" "$wj" "${1:-}" "$dj" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
p, w, mode, dk, load = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
r = {"file": p["file"], "rows": p["rows"], "values": p["values"], "pages_uncompressed": p["uncompressed"],
     "pagein_decode_s": p["decode_s"], "libsnappy_s": p["snappy_s"], "vs_libsnappy": p["ratio"],
     "parquet_wasm_s": w["median"], "vs_parquet_wasm": w["median"] / p["decode_s"],
     "pagein_decode_cpu_s": p["decode_cpu_s"], "parquet_wasm_cpu_s": w["cpu_median"],
     "vs_parquet_wasm_cpu": w["cpu_median"] / p["decode_cpu_s"], "kernel": p["kernel"], "load": load,
     "pagein_fresh_decode_s": p["fresh_decode_s"], "pagein_fresh_decode_cpu_s": p["fresh_decode_cpu_s"],
     "pagein_first_fresh_decode_s": p.get("first_fresh_decode_s", 0), "pagein_first_fresh_decode_cpu_s": p.get("first_fresh_decode_cpu_s", 0)}
if dk.get("threads"):
    d1, da = dk["threads"]["1"], dk["threads"]["all"]
    r.update({"duckdb_version": dk["version"], "duckdb_query": dk["query"], "duckdb_1_s": d1["median"],
              "duckdb_1_cpu_s": d1["cpu_median"], "duckdb_all_s": da["median"], "duckdb_all_threads": da["n"],
              # the target: pagein's decode at most 0.5x DuckDB on one thread
              "fresh_vs_duckdb_1": p["fresh_decode_s"] / d1["median"], "reused_vs_duckdb_1": p["decode_s"] / d1["median"],
              "fresh_vs_duckdb_1_cpu": p["fresh_decode_cpu_s"] / d1["cpu_median"]})
if mode == "--json":
    print(json.dumps(r))
else:
    print(f"bench/parquet.sh: {r['file']} ({r['rows']} rows, {r['values']} values, {r['pages_uncompressed']/1e6:.1f} MB of pages), medians, warm")
    print(f"  pagein decode            {r['pagein_decode_s']:.4f} s")
    print(f"  libsnappy alone          {r['libsnappy_s']:.4f} s   pagein at {r['vs_libsnappy']:.2f}x its throughput (target >= 0.70)")
    print(f"  parquet-wasm readParquet {r['parquet_wasm_s']:.4f} s   pagein {r['vs_parquet_wasm']:.2f}x faster (target >= 3)")
    print(f"  CPU time: pagein {r['pagein_decode_cpu_s']:.4f} s, parquet-wasm {r['parquet_wasm_cpu_s']:.4f} s: {r['vs_parquet_wasm_cpu']:.2f}x")
    print(f"  pagein decode, fresh columns each time {r['pagein_fresh_decode_s']:.4f} s (CPU {r['pagein_fresh_decode_cpu_s']:.4f} s); "
          f"the first, into pages never touched, {r['pagein_first_fresh_decode_s']:.4f} s (CPU {r['pagein_first_fresh_decode_cpu_s']:.4f} s)")
    if "duckdb_1_s" in r:
        print(f"  DuckDB {r['duckdb_version']}, 1 thread   {r['duckdb_1_s']:.4f} s (CPU {r['duckdb_1_cpu_s']:.4f} s); "
              f"all {r['duckdb_all_threads']} threads {r['duckdb_all_s']:.4f} s")
        print(f"  pagein / DuckDB 1 thread: fresh {r['fresh_vs_duckdb_1']:.2f}x, reused {r['reused_vs_duckdb_1']:.2f}x, "
              f"fresh CPU {r['fresh_vs_duckdb_1_cpu']:.2f}x (target <= 0.5x)")
    print(f"  load average {r['load']}")
PY
