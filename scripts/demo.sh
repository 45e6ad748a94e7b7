#!/usr/bin/env bash
# make demo: the main job on a generated sample model.
#
# 1. generate the default sample (a 1.3 GB bf16 llama-shaped model, the
#    inference-service case that motivated pagein) if it is not there;
# 2. pagein inspect and pagein verify on it;
# 3. a full read of every tensor through pagein, cold (page cache dropped
#    with posix_fadvise DONTNEED) and warm, timed next to a plain read() of
#    the file (build/bench/bench_readall).
set -euo pipefail
: "${PAGEIN:=build/pagein}" "${DEMO_MODEL:=build/demo/sample.safetensors}"
BENCH_DIR=$(dirname "$PAGEIN")/bench
mkdir -p "$(dirname "$DEMO_MODEL")"
if [ ! -f "$DEMO_MODEL" ]; then
  echo "== generating the sample model: $DEMO_MODEL"
  "$PAGEIN" make-sample "$DEMO_MODEL"
fi
echo "== pagein inspect $DEMO_MODEL"
out=$("$PAGEIN" inspect "$DEMO_MODEL")
echo "$out" | head -40
echo "   ..."
echo "== pagein verify $DEMO_MODEL"
"$PAGEIN" verify "$DEMO_MODEL"
if [ -x "$BENCH_DIR/bench_readall" ]; then
  echo "== full read of every tensor: pagein (mmap) vs plain read(), cold and warm"
  "$BENCH_DIR/bench_readall" "$DEMO_MODEL"
fi
if [ -x "$BENCH_DIR/bench_parse" ]; then
  echo "== header parse (synthetic 20,000 tensors) and open + lookup of every tensor"
  "$BENCH_DIR/bench_parse" --iters 20 --file "$DEMO_MODEL"
fi

# ---- load engine: every strategy cold and warm, with verdicts ----
echo "== pagein plan"
"$PAGEIN" plan "$DEMO_MODEL"
echo "== pagein bench load (cold = evicted with posix_fadvise(DONTNEED) before each run; median of ${DEMO_RUNS:-3})"
"$PAGEIN" bench load "$DEMO_MODEL" --runs "${DEMO_RUNS:-3}"
