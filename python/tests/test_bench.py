"""The benchmark runs (once, tiny, numpy only, never timed here)."""
import json
import subprocess
import sys

import numpy as np

import pagein


def test_bench_runs_on_a_tiny_model(tmp_path):
    p = str(tmp_path / "tiny.safetensors")
    pagein.save_file({"model.layers.%d.w" % i: np.full((64, 64), i, np.float32) for i in range(3)}, p)
    r = subprocess.run([sys.executable, "-m", "pagein.bench", p, "--framework", "np", "--json",
                        "--methods", "model:prefetch"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["tensors"] == 3 and out["tensor_bytes"] == 3 * 64 * 64 * 4
    assert [row["method"] for row in out["results"]] == ["model:prefetch"]
    for row in out["results"]:
        assert "error" not in row, row
        assert row["cold_s"] > 0 and row["warm_s"] > 0
