"""Shared fixtures for the pagein Python tests.

Run from the repository root (`make python-test` does): real test files are
found at tests/data/real, or at $PAGEIN_TESTDATA.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

# the metadata cache of the tests goes to a private directory, never the
# user's ~/.cache (a session-wide one, removed at exit)
if "PAGEIN_META_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile
    _mc = tempfile.mkdtemp(prefix="pagein-pytest-meta-")
    os.environ["PAGEIN_META_CACHE_DIR"] = os.path.join(_mc, "meta")
    atexit.register(shutil.rmtree, _mc, True)

TESTDATA = os.environ.get("PAGEIN_TESTDATA") or os.path.join(REPO, "tests", "data", "real")


def testdata(*parts):
    return os.path.join(TESTDATA, *parts)


def real_files(kind, ext):
    """Every file of a kind under the real test data, malformed/ excluded."""
    root = testdata(kind)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "malformed")
        out += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(ext)]
    return out


def malformed_files(kind):
    root = testdata(kind, "malformed")
    return sorted(os.path.join(root, f) for f in os.listdir(root)) if os.path.isdir(root) else []


@pytest.fixture
def rng(request):
    import numpy as np
    seed = int(os.environ.get("PAGEIN_SEED", "1234"))
    return np.random.default_rng(seed)


def mapped(path):
    """Number of mappings of path in this process."""
    real = os.path.realpath(path)
    with open("/proc/self/maps") as fh:
        return sum(1 for line in fh if line.rstrip("\n").endswith(" " + real))
