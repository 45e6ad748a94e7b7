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
#      DuckDB's `first` is the first query of a fresh process (node and
#      DuckDB loaded, the columns' types asked, then the query timed): the
#      peer of pagein's first decode, what a process reading the file once pays;
#   4. the pipeline (pagein_pipe_*, bench_pipe_epochs: the file as a dataset,
#      block order, every row handed out, no Python) decoding into its own
#      buffers, PIPE_EPOCHS epochs in one process, PIPE_RUNS processes (file
#      in the page cache): the first epoch of a process (the dataset's open,
#      the file's pread and fresh memory included: DuckDB's `first` is its
#      peer) and the later ones (memory reused: DuckDB's median is their
#      peer), wall and CPU (all threads), with the pipeline's default decode
#      threads and with PAGEIN_DECODE_THREADS=1.
# The file is written by npm parquet-wasm (bench/parquet_gen.mjs), installed
# into build/npm like the test fixtures. Warm: every reader has the file in
# memory. ROWS=20000 (about 18 MB), ITERS=10, PIPE_EPOCHS=5, PIPE_RUNS=3.
# usage: bash bench/parquet.sh [--json]
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
ROWS=${ROWS:-20000} ITERS=${ITERS:-10} PIPE_EPOCHS=${PIPE_EPOCHS:-5} PIPE_RUNS=${PIPE_RUNS:-3}
OUT=$REPO/build/bench-parquet
mkdir -p "$OUT"
bash "$REPO/tests/data/parquet/gen.sh" "$REPO/build/parquet-fixtures" >/dev/null  # installs the npm packages
F=$OUT/tokens-$ROWS.parquet
[ -f "$F" ] || NODE_PATH=$REPO/build/npm/node_modules node "$REPO/bench/parquet_gen.mjs" "$F" "$ROWS"
B=$REPO/build/bench/bench_parquet
[ -x "$B" ] || make -C "$REPO" -s build/bench/bench_parquet
pj=$("$B" "$F" --iters "$ITERS" --json input_ids text)
E=$REPO/build/bench/bench_pipe_epochs
[ -x "$E" ] || make -C "$REPO" -s build/bench/bench_pipe_epochs
ej=""  # "threads epoch seconds cpu" lines: the pipeline, default decode threads (d) and 1
for r in $(seq 1 "$PIPE_RUNS"); do
  for t in d 1; do
    if [ $t = d ]; then o=$("$E" "$F" block "$PIPE_EPOCHS"); else o=$(PAGEIN_DECODE_THREADS=1 "$E" "$F" block "$PIPE_EPOCHS"); fi
    ej="$ej$(echo "$o" | awk -v t=$t '$1 == "epoch" {print t, $2, $4, $5}')"$'\n'
  done
done
wj=$(NODE_PATH=$REPO/build/npm/node_modules node "$REPO/bench/parquet_wasm_read.mjs" "$F" "$ITERS" input_ids text)
dj='{}'
if why=$(bash "$REPO/bench/duckdb_npm.sh"); then
  dj=$(NODE_PATH=$REPO/build/npm/node_modules node "$REPO/bench/parquet_duckdb.mjs" "$F" "$ITERS" 1,0 input_ids text) || dj='{}'
else
  echo "bench/parquet.sh: DuckDB skipped: $why" >&2
fi
/usr/bin/python3 - "$pj" "$wj" "${1:-}" "$dj" "$(cut -d' ' -f1-3 /proc/loadavg)" "$ej" <<'PY'
import json, statistics, sys
p, w, mode, dk, load = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
pipe = {}  # "d"/"1" -> {"first": [(s, cpu)], "later": [(s, cpu)]}
for line in sys.argv[6].split("\n"):
    if line.strip():
        t, e, s, c = line.split()
        pipe.setdefault(t, {"first": [], "later": []})["first" if e == "0" else "later"].append((float(s), float(c)))
med = lambda xs: statistics.median(xs) if xs else 0.0
r = {"file": p["file"], "rows": p["rows"], "values": p["values"], "pages_uncompressed": p["uncompressed"],
     "pagein_decode_s": p["decode_s"], "libsnappy_s": p["snappy_s"], "vs_libsnappy": p["ratio"],
     "parquet_wasm_s": w["median"], "vs_parquet_wasm": w["median"] / p["decode_s"],
     "pagein_decode_cpu_s": p["decode_cpu_s"], "parquet_wasm_cpu_s": w["cpu_median"],
     "vs_parquet_wasm_cpu": w["cpu_median"] / p["decode_cpu_s"], "kernel": p["kernel"], "load": load,
     "pagein_fresh_decode_s": p["fresh_decode_s"], "pagein_fresh_decode_cpu_s": p["fresh_decode_cpu_s"],
     "pagein_first_fresh_decode_s": p.get("first_fresh_decode_s", 0), "pagein_first_fresh_decode_cpu_s": p.get("first_fresh_decode_cpu_s", 0)}
for t, k in (("d", "pipe"), ("1", "pipe_1")):
    for part in ("first", "later"):
        xs = pipe.get(t, {}).get(part, [])
        r[f"{k}_{part}_s"] = med([x[0] for x in xs])
        r[f"{k}_{part}_cpu_s"] = med([x[1] for x in xs])
if dk.get("threads"):
    d1, da = dk["threads"]["1"], dk["threads"]["all"]
    r.update({"duckdb_version": dk["version"], "duckdb_query": dk["query"], "duckdb_1_s": d1["median"],
              "duckdb_1_cpu_s": d1["cpu_median"], "duckdb_all_s": da["median"], "duckdb_all_threads": da["n"],
              # the target: pagein's decode at most 0.5x DuckDB on one thread
              "fresh_vs_duckdb_1": p["fresh_decode_s"] / d1["median"], "reused_vs_duckdb_1": p["decode_s"] / d1["median"],
              "fresh_vs_duckdb_1_cpu": p["fresh_decode_cpu_s"] / d1["cpu_median"]})
    if "first" in d1:  # the first query of a fresh process against pagein's first decode and first epoch
        r.update({"duckdb_1_first_s": d1["first"]["s"], "duckdb_1_first_cpu_s": d1["first"]["cpu_s"],
                  "duckdb_all_first_s": da["first"]["s"], "duckdb_all_first_cpu_s": da["first"]["cpu_s"],
                  "first_vs_duckdb_1_first": r["pagein_first_fresh_decode_s"] / d1["first"]["s"]})
    for k in ("pipe", "pipe_1"):
        r[f"{k}_later_vs_duckdb_1"] = r[f"{k}_later_s"] / d1["median"]
        if "first" in d1: r[f"{k}_first_vs_duckdb_1_first"] = r[f"{k}_first_s"] / d1["first"]["s"]
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
    if "duckdb_1_first_s" in r:
        print(f"  first of a process: DuckDB's first query 1 thread {r['duckdb_1_first_s']:.4f} s (CPU {r['duckdb_1_first_cpu_s']:.4f} s), "
              f"all {r['duckdb_all_first_s']:.4f} s; pagein's first decode {r['pagein_first_fresh_decode_s']:.4f} s: "
              f"{r['first_vs_duckdb_1_first']:.2f}x DuckDB's first on 1 thread")
    print(f"  the pipeline (bench_pipe_epochs, block order, {r['rows']} rows handed out), medians of {len(pipe.get('d', {}).get('first', []))} processes:")
    for k, what in (("pipe", "default decode threads"), ("pipe_1", "PAGEIN_DECODE_THREADS=1")):
        line = (f"    {what:24s} first epoch {r[k + '_first_s']:.4f} s (CPU {r[k + '_first_cpu_s']:.4f} s), "
                f"later {r[k + '_later_s']:.4f} s (CPU {r[k + '_later_cpu_s']:.4f} s)")
        if k + "_later_vs_duckdb_1" in r:
            line += f"; later {r[k + '_later_vs_duckdb_1']:.2f}x DuckDB 1 thread"
        if k + "_first_vs_duckdb_1_first" in r:
            line += f", first {r[k + '_first_vs_duckdb_1_first']:.2f}x DuckDB's first"
        print(line)
    print(f"  load average {r['load']}")
PY
