#!/usr/bin/env bash
# bench/parquet_epoch.sh - the epoch targets on Parquet shards of
# tokenized text (bench/parquet_gen.mjs: npm parquet-wasm, SNAPPY, `input_ids:
# list<int32>` of 64-1024 token ids and `text: utf8` of about 400 bytes a row,
# row groups of GROUP_ROWS rows), whole epochs through the one pipeline
# (`pagein read-samples --dataset ... --check`), RUNS times interleaved,
# medians:
#   slowfs  tools/slowfs at DELAY_US a request (readahead RA_KB), cold each
#           time (page cache dropped): `cat` of every shard (sequential: the
#           limit of the bytes) against epochs in none and block order
#           (target: block >= 0.8x sequential); `warm`: the same block epoch
#           from the local files in the page cache (its CPU side: no waiting);
#           `later`: the second block epoch of one process (bench_pipe_epochs,
#           cold again: what a training run's epochs after its first take,
#           their memory reused; skipped without the binary)
#   http    nginx with `bench remote`'s pacing (tests/remote/servers.sh:
#           DELAY_MS before each first byte, RATE a connection): `pagein pull
#           -c CONNS` of every shard, one after the other, against epochs over
#           the URLs in none and block order (target: block >= 0.8x pull)
#   global  what global order costs on these shards: GLOBAL_LIMIT samples of
#           a global epoch (warm, local; --json counters): bytes fetched a
#           sample against the file's bytes a row (each sample brings the page
#           of each column holding it, and the column's dictionary)
#   jsonl   rows a second of a block-shuffled epoch of the same rows as
#           Parquet (columns text and input_ids) and as JSONL (the lines row:
#           one field, the line), warm, through the same pipeline: the CLI
#           (the pipeline alone) and Python's ShardDataset (rows handed to
#           Python: numpy arrays and str from Parquet; JSONL lines parsed
#           with json.loads into the same), and DuckDB (npm @duckdb/node-api,
#           bench/parquet_duckdb.mjs) aggregating every value of the same
#           columns of the same Parquet files on 1 thread and on all
#           (skipped, saying why, without npm)
# Usage: bench/parquet_epoch.sh [--json]   (env: SHARDS=4 ROWS=10000
#        GROUP_ROWS=1000 DELAY_US=1000 RA_KB=128 RATE=100m DELAY_MS=20 CONNS=16
#        RUNS=3 PARTS="slowfs http jsonl global" GLOBAL_LIMIT=640
#        WORK=/var/tmp/pagein-parquet-epoch
#        (kept: the shards are written once) PAGEIN=build/pagein)
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
PAGEIN=${PAGEIN:-$REPO/build/pagein}
SHARDS=${SHARDS:-4} ROWS=${ROWS:-10000} GROUP_ROWS=${GROUP_ROWS:-1000}
DELAY_US=${DELAY_US:-1000} RA_KB=${RA_KB:-128} CONNS=${CONNS:-16} RUNS=${RUNS:-3}
export RATE=${RATE:-100m} DELAY_MS=${DELAY_MS:-20}
PARTS=${PARTS:-slowfs http jsonl global}
GLOBAL_LIMIT=${GLOBAL_LIMIT:-640}
W=${WORK:-/var/tmp/pagein-parquet-epoch}
PY=/usr/bin/python3
JSON=0
[ "${1:-}" = --json ] && JSON=1
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
[ -x "$PAGEIN" ] || { echo "parquet_epoch.sh: $PAGEIN not built (make)"; exit 2; }

# ---- the shards (written once) ----
mkdir -p "$W/src"
tag="$SHARDS $ROWS $GROUP_ROWS"
if [ "$(cat "$W/src/tag" 2>/dev/null)" != "$tag" ]; then
  rm -f "$W/src/"*
  bash "$REPO/tests/data/parquet/gen.sh" "$REPO/build/parquet-fixtures" > /dev/null || { echo "parquet_epoch.sh: no npm parquet-wasm"; exit 2; }
  for i in $(seq 0 $((SHARDS - 1))); do
    n=$(printf '%05d' "$i")
    NODE_PATH=$REPO/build/npm/node_modules node "$REPO/bench/parquet_gen.mjs" "$W/src/tokens-$n.parquet" "$ROWS" \
      "$GROUP_ROWS" $((42 + i)) "$W/src/tokens-$n.jsonl" || exit 2
  done
  echo "$tag" > "$W/src/tag"
fi
PQ=$(cd "$W/src" && ls tokens-*.parquet)
JL=$(cd "$W/src" && ls tokens-*.jsonl)
pq_bytes=0
for f in $PQ; do pq_bytes=$((pq_bytes + $(stat -c %s "$W/src/$f"))); done
jl_bytes=0
for f in $JL; do jl_bytes=$((jl_bytes + $(stat -c %s "$W/src/$f"))); done
rows=$((SHARDS * ROWS))

drop() { $PY -c 'import os,sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"; }
secs() { echo "$EPOCHREALTIME"; }
results=()  # "part mode run seconds"
spec_of() { local d=$1 s="" f; shift; for f in "$@"; do s="$s${s:+$'\n'}$d/$f"; done; printf '%s' "$s"; }

# ---- slowfs ----
if [[ " $PARTS " = *" slowfs "* ]]; then
  MNT=$W/mnt
  export SLOWFS=${SLOWFS:-$(dirname "$PAGEIN")/slowfs}
  if r=$(bash "$REPO/tools/slowfs.sh" check); then
    bash "$REPO/tools/slowfs.sh" mount "$W/src" "$MNT" --delay-us "$DELAY_US" --ra-kb "$RA_KB" > /dev/null \
      || { echo "parquet_epoch.sh: slowfs did not mount"; exit 2; }
    trap 'bash "$REPO/tools/slowfs.sh" umount "$MNT"' EXIT
    spec=$(spec_of "$MNT" $PQ)
    EPOCHS_BIN=$(dirname "$PAGEIN")/bench/bench_pipe_epochs
    modes="sequential none block warm"
    [ -x "$EPOCHS_BIN" ] && modes="$modes later"
    for r in $(seq 1 "$RUNS"); do
      for mode in $modes; do
        for f in $PQ; do drop "$W/src/$f" "$MNT/$f"; done
        [ $mode = warm ] && cat "$W/src/"*.parquet > /dev/null
        t0=$(secs)
        if [ $mode = later ]; then  # its own time: epoch 1's (the page cache dropped before it)
          t=$("$EPOCHS_BIN" "$spec" block 2 $(for f in $PQ; do echo "$W/src/$f" "$MNT/$f"; done) | awk '$2 == 1 {print $4}')
          [ -n "$t" ] || exit 1
          results+=("slowfs later $r $t")
          continue
        elif [ $mode = sequential ]; then
          for f in $PQ; do cat "$MNT/$f" > /dev/null; done
        elif [ $mode = warm ]; then
          "$PAGEIN" read-samples --dataset "$(spec_of "$W/src" $PQ)" --order block --check > /dev/null || exit 1
        else
          "$PAGEIN" read-samples --dataset "$spec" --order $mode --check > /dev/null || exit 1
        fi
        t1=$(secs)
        results+=("slowfs $mode $r $($PY -c "print('%.6f' % ($t1 - $t0))")")
      done
    done
    bash "$REPO/tools/slowfs.sh" umount "$MNT"
    trap - EXIT
  else
    echo "parquet_epoch.sh: slowfs skipped ($r)" >&2
  fi
fi

# ---- http ----
if [[ " $PARTS " = *" http "* ]]; then
  D=$(mktemp -d /var/tmp/pagein-pq-http-XXXXXX)
  trap 'bash "$REPO/tests/remote/servers.sh" stop "$D" >/dev/null 2>&1; rm -rf "$D"' EXIT
  mkdir -p "$D/www"
  for f in $PQ; do ln "$W/src/$f" "$D/www/$f" 2>/dev/null || cp "$W/src/$f" "$D/www/$f"; done
  out=$(bash "$REPO/tests/remote/servers.sh" start "$D" $$ nginx delay 2>&1) || { echo "parquet_epoch.sh: servers: $out" >&2; exit 2; }
  . "$D/env"
  spec=$(spec_of "$DELAY" $PQ)
  for r in $(seq 1 "$RUNS"); do
    mkdir -p "$D/pull"
    t0=$(secs)
    for f in $PQ; do "$PAGEIN" pull --no-sync -q -c "$CONNS" "$DELAY/$f" "$D/pull/$f" || exit 1; done
    t1=$(secs)
    rm -rf "$D/pull"
    results+=("http pull $r $($PY -c "print('%.6f' % ($t1 - $t0))")")
    for mode in none block; do
      t0=$(secs)
      "$PAGEIN" read-samples --dataset "$spec" --order $mode --check > /dev/null || exit 1
      t1=$(secs)
      results+=("http $mode $r $($PY -c "print('%.6f' % ($t1 - $t0))")")
    done
  done
  bash "$REPO/tests/remote/servers.sh" stop "$D" > /dev/null 2>&1
  rm -rf "$D"
  trap - EXIT
fi

# ---- jsonl: the same rows, warm, the same pipeline ----
if [[ " $PARTS " = *" jsonl "* ]]; then
  pspec=$(spec_of "$W/src" $PQ)
  jspec=$(spec_of "$W/src" $JL)
  cat "$W/src/"tokens-* > /dev/null  # warm
  have_py=0
  [ -f "$REPO/build/python/pagein/__init__.py" ] && have_py=1
  have_duck=0
  if why=$(bash "$REPO/bench/duckdb_npm.sh"); then have_duck=1; else echo "parquet_epoch.sh: DuckDB skipped: $why" >&2; fi
  dfiles=$(for f in $PQ; do printf '%s,' "$W/src/$f"; done)
  for r in $(seq 1 "$RUNS"); do
    for kind in parquet jsonl; do
      [ $kind = parquet ] && s=$pspec || s=$jspec
      t0=$(secs)
      "$PAGEIN" read-samples --dataset "$s" --order block --check > /dev/null || exit 1
      t1=$(secs)
      results+=("cli $kind $r $($PY -c "print('%.6f' % ($t1 - $t0))")")
      if [ $have_py = 1 ]; then
        t=$(PYTHONPATH=$REPO/build/python $PY - "$kind" $(for f in $( [ $kind = parquet ] && echo $PQ || echo $JL); do echo "$W/src/$f"; done) <<'PY'
import json, sys, time
import numpy as np
from pagein.data import ShardDataset
kind, paths = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
n = toks = 0
if kind == "parquet":
    for row in ShardDataset(paths, shuffle="block", seed=1, columns=["text", "input_ids"]):
        ids, text = row["input_ids"], row["text"]
        n += 1
        toks += len(ids)
else:
    for row in ShardDataset(paths, shuffle="block", seed=1, data_format="lines"):
        o = json.loads(row["text"])
        ids, text = np.asarray(o["input_ids"], dtype=np.int32), o["text"]
        n += 1
        toks += len(ids)
print("%.6f %d %d" % (time.perf_counter() - t0, n, toks))
PY
)
        results+=("python $kind $r ${t%% *}")
      fi
    done
    if [ $have_duck = 1 ]; then  # one timed query per thread count and run (after one untimed)
      dj=$(NODE_PATH=$REPO/build/npm/node_modules node "$REPO/bench/parquet_duckdb.mjs" "${dfiles%,}" 1 1,0 text input_ids) &&
        for t in 1 all; do
          results+=("duckdb threads-$t $r $($PY -c 'import json,sys; print("%.6f" % json.loads(sys.argv[1])["threads"][sys.argv[2]]["median"])' "$dj" $t)")
        done
    fi
  done
fi

# ---- global: what it costs here ----
gcost=""
if [[ " $PARTS " = *" global "* ]]; then
  gcost=$("$PAGEIN" read-samples --dataset "$(spec_of "$W/src" $PQ)" --order global --limit "$GLOBAL_LIMIT" --json |
    $PY -c 'import json, sys; d = json.load(sys.stdin); print(d["samples"], d["units"], d["groups"], d["requests"], d["bytes_read"])')
fi

$PY - "$rows" "$pq_bytes" "$jl_bytes" "$SHARDS" "$GROUP_ROWS" "$DELAY_US" "$RA_KB" "$RATE" "$DELAY_MS" "$CONNS" "$JSON" \
  "$(cat /proc/loadavg | cut -d' ' -f1-3)" "$gcost" "${results[@]}" <<'PY'
import json, statistics, sys
rows, pqb, jlb, shards, grows, dus, ra, rate, dms, conns, js, load, gcost = sys.argv[1:14]
rows, pqb, jlb = int(rows), int(pqb), int(jlb)
res = {}
for line in sys.argv[14:]:
    part, mode, run, s = line.split()
    res.setdefault((part, mode), []).append(float(s))
med = {k: statistics.median(v) for k, v in res.items()}
out = {"rows": rows, "shards": int(shards), "group_rows": int(grows), "parquet_bytes": pqb, "jsonl_bytes": jlb,
       "slowfs_delay_us": int(dus), "slowfs_ra_kb": int(ra), "rate": rate, "delay_ms": int(dms), "conns": int(conns),
       "load": load, "runs": {"%s %s" % k: v for k, v in res.items()}, "median_s": {"%s %s" % k: v for k, v in med.items()}}
ratios = {}
if ("slowfs", "sequential") in med:
    for m in ("none", "block", "warm", "later"):
        if ("slowfs", m) in med: ratios["slowfs %s vs sequential" % m] = med[("slowfs", "sequential")] / med[("slowfs", m)]
if ("http", "pull") in med:
    for m in ("none", "block"):
        if ("http", m) in med: ratios["http %s vs pull" % m] = med[("http", "pull")] / med[("http", m)]
rps = {"%s %s" % k: rows / v for k, v in med.items() if k[0] in ("cli", "python", "duckdb")}
if ("cli", "parquet") in med:
    for t in ("1", "all"):
        if ("duckdb", "threads-" + t) in med:
            ratios["cli parquet vs duckdb %s thread%s" % (t, "" if t == "1" else "s")] = med[("duckdb", "threads-" + t)] / med[("cli", "parquet")]
out["ratios"], out["rows_per_second"] = ratios, rps
if gcost:
    n, units, parts, reqs, b = map(int, gcost.split())
    out["global"] = {"samples": n, "units": units, "parts": parts, "requests": reqs, "bytes_read": b,
                     "bytes_per_sample": b / n, "file_bytes_per_row": pqb / rows, "amplification": b / n / (pqb / rows)}
if js == "1":
    print(json.dumps(out, indent=1))
    sys.exit(0)
print("parquet_epoch: %d shards x %d rows (row groups of %d), Parquet %.1f MB, the same as JSONL %.1f MB; load %s" %
      (int(shards), rows // int(shards), int(grows), pqb / 1e6, jlb / 1e6, load))
print("%-7s %-11s %9s %9s %s" % ("part", "mode", "median s", "MB/s", "all runs"))
for (part, mode), v in sorted(res.items()):
    b = jlb if mode == "jsonl" else pqb
    print("%-7s %-11s %9.3f %9.1f %s" % (part, mode, med[(part, mode)], b / med[(part, mode)] / 1e6, " ".join("%.3f" % x for x in v)))
for k, v in ratios.items():
    print("  %-28s %.2fx" % (k, v))
for k, v in rps.items():
    print("  rows/s %-20s %10.0f" % (k, v))
if "global" in out:
    g = out["global"]
    print("  global order: %d samples fetched %.1f MB in %d parts (%d requests): %.0f bytes a sample, %.0fx the"
          " file's %.0f bytes a row" % (g["samples"], g["bytes_read"] / 1e6, g["parts"], g["requests"],
                                        g["bytes_per_sample"], g["amplification"], g["file_bytes_per_row"]))
PY
