"""Splits python/tests/test_*.py into two lists of about equal time for
make python-test's two pytest processes (mk/python.mk). WEIGHTS are the
seconds each file took in one measured run (pytest --durations=0, summed
per file, on a loaded 2-core machine); a file not listed counts 3 s.
Prints the two lists, one per line."""
import glob
import os
import sys

WEIGHTS = {
    "test_distributed.py": 237, "test_data_epochs.py": 105, "test_remote.py": 57,
    "test_fsspec.py": 43, "test_data.py": 41, "test_safetensors_api.py": 32,
    "test_torch.py": 19, "test_dataformats.py": 18, "test_lifetime.py": 15,
    "test_bench.py": 13, "test_pager_ahead.py": 12, "test_fork.py": 11,
    "test_args.py": 8, "test_gguf.py": 7, "test_data_resume_exact.py": 5,
}

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
files = sorted(glob.glob(os.path.join(here, "test_*.py")))
files.sort(key=lambda f: -WEIGHTS.get(os.path.basename(f), 3))
shards, load = [[], []], [0, 0]
for f in files:
    k = 0 if load[0] <= load[1] else 1
    shards[k].append(os.path.relpath(f, root))
    load[k] += WEIGHTS.get(os.path.basename(f), 3)
for s in shards:
    print(" ".join(sorted(s)))
sys.exit(0)
