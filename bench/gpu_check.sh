#!/usr/bin/env bash
# gpu_check.sh - the one script to run on a machine with a CUDA GPU
# (docs/GPU.md, docs/BENCHMARKS.md "GPU staging"): build, the GPU tests,
# a generated model of SIZE (default 6G) plus a torch checkpoint of it,
# and `pagein bench gpu` cold and warm. Writes everything under OUT
# (default ./gpu-check) and prints a summary. Never part of `make test`.
#
#   bash bench/gpu_check.sh            # SIZE=6G RUNS=2 OUT=gpu-check DIR=/tmp/pagein-gpu
set -u
SIZE=${SIZE:-6G}
RUNS=${RUNS:-2}
OUT=${OUT:-gpu-check}
DIR=${DIR:-/tmp/pagein-gpu}
JOBS=${JOBS:-$(nproc)}
PY=${PY:-/usr/bin/python3}
mkdir -p "$OUT" "$DIR"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"

log "host: $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv | tee -a "$OUT/summary.txt"

log "build"
make -j"$JOBS" lib build/pagein build/tests/run python >"$OUT/build.log" 2>&1 || { log "build FAILED (see $OUT/build.log)"; exit 1; }

log "C tests"
build/tests/run gpu_cuda_bytes_equal gpu_no_cuda_errors gpu_host_safetensors_bytes_ring_bounded \
  gpu_host_layer_order_and_per_tensor_wait gpu_host_truncated_mid_stream gpu_host_loop_no_leak \
  gpu_host_gguf_quantized_blocks gpu_host_subset_caller_buffers gpu_host_alloc_failures \
  gpu_host_memory_file gpu_host_pinned_cache_reuse 2>&1 | tee "$OUT/ctests.txt" | tail -3 | tee -a "$OUT/summary.txt"

log "Python tests"
PYTHONPATH=build/python "$PY" -m pytest -q -p no:cacheprovider -rs python/tests/test_gpu.py 2>&1 | tee "$OUT/pytests.txt" | tail -4 | tee -a "$OUT/summary.txt"

log "model: $SIZE"
[ -f "$DIR/m.safetensors" ] || build/pagein make-sample "$DIR/m.safetensors" --size "$SIZE" -q
[ -f "$DIR/m.pt" ] || PYTHONPATH=build/python "$PY" - "$DIR/m.safetensors" "$DIR/m.pt" <<'PYEOF'
import sys, torch, pagein
with pagein.safe_open(sys.argv[1], framework="pt") as f:
    sd = {k: f.get_tensor(k).clone() for k in f.keys()}
torch.save(sd, sys.argv[2])
PYEOF

for m in m.safetensors m.pt; do
  log "bench gpu $m"
  build/pagein bench gpu "$DIR/$m" --runs "$RUNS" --json >"$OUT/bench-$m.json" 2>"$OUT/bench-$m.err"
  echo "exit $?" >>"$OUT/bench-$m.err"
  "$PY" - "$OUT/bench-$m.json" <<'PYEOF' | tee -a "$OUT/summary.txt"
import json, sys
j = json.load(open(sys.argv[1]))
print("gpu:", j["gpu"], "limits:", j["limits"], "load:", j["loadavg"])
for r in j["rows"]:
    if r["ok"]:
        print("%-12s %-5s %7.3fs %6.2f GB/s first %s rss %.0f MiB pinned %s" % (
            r["name"], r["cache"], r["seconds"], r["gbps"], r["first_layer_s"], r["peak_rss"] / 2**20,
            r["pinned_bytes"]))
    else:
        print("%-12s %-5s %s" % (r["name"], r["cache"], r["skipped"] or r["error"]))
PYEOF
done
log "done: $OUT"
