#!/usr/bin/env bash
# make demo: the main job on a generated sample model.
set -euo pipefail
: "${PAGEIN:=build/pagein}" "${DEMO_MODEL:=build/demo/sample.safetensors}"
mkdir -p "$(dirname "$DEMO_MODEL")"
if [ ! -f "$DEMO_MODEL" ]; then
  echo "== generating the sample model: $DEMO_MODEL"
  "$PAGEIN" make-sample "$DEMO_MODEL"
fi
echo "== pagein inspect"
"$PAGEIN" inspect "$DEMO_MODEL" | head -40
echo "== pagein verify"
"$PAGEIN" verify "$DEMO_MODEL"
# ---- load engine (issue 4): every strategy cold and warm, with verdicts ----
echo "== pagein plan"
"$PAGEIN" plan "$DEMO_MODEL"
echo "== pagein bench load (cold = evicted with posix_fadvise(DONTNEED) before each run; median of ${DEMO_RUNS:-3})"
"$PAGEIN" bench load "$DEMO_MODEL" --runs "${DEMO_RUNS:-3}"
