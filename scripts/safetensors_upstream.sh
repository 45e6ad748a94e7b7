#!/usr/bin/env bash
# scripts/safetensors_upstream.sh DIR - runs the safetensors package's own
# Python tests (DIR = a checkout's bindings/python/tests, which this tree
# does not include) against pagein through an import alias: a `safetensors`
# package whose modules are pagein, pagein.torch and pagein.numpy. Copies
# DIR into a temp folder (the tests write under ./tests/data), runs pytest
# there and prints its summary; exit status is pytest's. The frameworks
# pagein does not serve (flax, tensorflow: jax and h5py are imported at the
# top) are left out; mlx, paddle, cuda, mps, npu, hpu tests skip themselves.
# Results and every remaining difference: docs/PYTHON.md.
set -u
SRC=${1:?usage: safetensors_upstream.sh SAFETENSORS/bindings/python/tests}
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD_PY=${PAGEIN_BUILD_PY:-$REPO/build/python}
PY=${PY:-/usr/bin/python3}
W=$(mktemp -d /tmp/pagein-st-upstream-XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/alias/safetensors" "$W/run"
cp -a "$SRC" "$W/run/tests" || exit 2
for m in "" torch numpy; do
  f=$W/alias/safetensors/${m:-__init__}.py; mod=pagein${m:+.$m}
  printf 'import %s as _m\nfor _n in dir(_m):\n    if not _n.startswith("__"):\n        globals()[_n] = getattr(_m, _n)\n' "$mod" > "$f"
  [ -z "$m" ] && echo '__version__ = _m.__version__' >> "$f"
done
cd "$W/run" && PYTHONPATH="$W/alias:$BUILD_PY" PYTHONDONTWRITEBYTECODE=1 HOME="$W" \
  "$PY" -m pytest -q -p no:cacheprovider -rf --ignore=tests/test_flax_comparison.py \
  --ignore=tests/test_tf_comparison.py tests
