# pagein bench gpu: runs on every machine (host-destination rows; GPU rows
# skipped with the reason when there is no CUDA device), JSON shape, usage
# errors, and src/gpu/cuda_api.h checked against a real cuda.h when one is
# installed (never a build dependency). Never timed here.
. "$REPO/tests/cli/lib.sh"
"$PAGEIN" make-sample "$TMP/m.safetensors" --layers 3 --hidden 128 -q || fail "make-sample"

# Without a driver the GPU rows are skipped, host rows run, exit 0.
expect_exit 0 env PAGEIN_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "$PAGEIN" bench gpu "$TMP/m.safetensors" \
  --runs 1 --no-fio --baselines-on-host --buffer-bytes 64K --buffers 3 --json
echo "$OUT_TXT" | grep -q "no usable CUDA device 0" || fail "no message saying the GPU is missing: $OUT_TXT"
echo "$OUT_TXT" | grep '^{' > "$TMP/b.json"
$PY - "$TMP/b.json" <<'PYEOF' || fail "bench gpu json: $OUT_TXT"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["gpu"]["available"] is False and "/nonexistent/libcuda.so.1" in j["gpu"]["why"], j["gpu"]
rows = {(r["name"], r["cache"]): r for r in j["rows"]}
assert set(n for n, _ in rows) == {"pagein", "pagein-host", "safetensors", "torch-load", "mmap-to"}, rows.keys()
for c in ("cold", "warm"):
    h = rows[("pagein-host", c)]
    assert h["ok"] and h["gbps"] > 0 and 0 <= h["first_layer_s"] <= h["seconds"], h
    assert 0 < h["pinned_bytes"] <= 3 * 65536, h     # the ring bounds pinned memory
    assert 0 < h["base_rss"] <= h["peak_rss"], h
    assert rows[("pagein", c)]["skipped"].startswith("no CUDA device"), rows[("pagein", c)]
    assert rows[("torch-load", c)]["skipped"] == "not a torch checkpoint"
    m = rows[("mmap-to", c)]
    import importlib.util
    if importlib.util.find_spec("torch"):             # the bench's default interpreter is this one
        assert m["ok"] and m["gbps"] > 0 and m["first_layer_s"] is not None, m
    else:
        assert m["skipped"] == "torch is not installed", m
assert j["limits"]["h2d_gbps"] is None and j["limits"]["host_copy_gbps"] > 0
assert j["bytes"] > 0 and j["tensors"] > 0
PYEOF

# Text output names the skipped rows.
expect_exit 0 env PAGEIN_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "$PAGEIN" bench gpu "$TMP/m.safetensors" \
  --runs 1 --no-fio --no-python --cache warm -q
expect_contains "pagein-host"
expect_contains "skipped: no CUDA device"

# Usage errors.
expect_exit 2 "$PAGEIN" bench gpu
expect_exit 2 "$PAGEIN" bench gpu "$TMP/m.safetensors" --device cuda:0
expect_exit 2 "$PAGEIN" bench gpu "$TMP/m.safetensors" --frobnicate
expect_exit 2 "$PAGEIN" bench gpu "$TMP/missing.safetensors"
expect_contains "missing.safetensors"
expect_exit 0 "$PAGEIN" bench gpu --help
expect_contains "pinned"

# The CUDA declarations against cuda.h (compile-only check).
for inc in /usr/local/cuda/include /usr/include; do
  if [ -f "$inc/cuda.h" ]; then
    cc -std=c11 -fsyntax-only -I"$inc" "$REPO/tools/cuda_decls_check.c" || fail "src/gpu/cuda_api.h disagrees with $inc/cuda.h"
    exit 0
  fi
done
echo "cuda.h not installed: the declaration check did not run (everything else passed)"
exit 0
