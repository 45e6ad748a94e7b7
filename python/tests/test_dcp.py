"""torch Distributed Checkpoints: `pagein convert ckpt/ out.safetensors` (the
library's DCP reader) against torch's own DCP load of the same checkpoints
(tests/data/dcp, written by torch 1.13's writer on 2 and 4 gloo ranks; v2 is
the torch 2.x metadata layout). torch's DCP package is imported with the
Python 3.11 workaround of pagein._dcpcompat (docs/PYTHON.md)."""
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")

import pagein  # noqa: E402
from pagein import _dcpcompat  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FX = os.path.join(ROOT, "tests", "data", "dcp")
TOOL = os.path.join(os.environ.get("PAGEIN_BUILD", os.path.join(ROOT, "build")), "pagein")


def torch_load(path):
    """Every item of the checkpoint as torch loads it (no process group)."""
    dcp = _dcpcompat.import_torch_dcp()
    reader = dcp.FileSystemReader(path)
    md = reader.read_metadata()
    sd = {}
    for k, v in md.state_dict_metadata.items():
        if hasattr(v, "chunks"):
            sd[k] = torch.empty(v.size, dtype=v.properties.dtype)
    dcp.load_state_dict(sd, storage_reader=dcp.FileSystemReader(path), no_dist=True)
    return sd


@pytest.mark.parametrize("name", ["rank4", "rank2", "v2"])
def test_convert_equals_torch(tmp_path, name):
    if not os.access(TOOL, os.X_OK):
        pytest.skip("SKIP: %s is not built" % TOOL)
    if name == "v2":
        ref = torch_load(os.path.join(FX, "rank4"))  # same files, torch 2.x metadata torch 1.13 cannot read
    else:
        ref = torch_load(os.path.join(FX, name))
    out = str(tmp_path / "out.safetensors")
    r = subprocess.run([TOOL, "convert", os.path.join(FX, name), out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with pagein.safe_open(out, framework="pt") as f:
        keys = set(f.keys())
        assert keys == set(ref)
        for k, v in ref.items():
            got = f.get_tensor(k)
            assert got.dtype == v.dtype and tuple(got.shape) == tuple(v.shape), k
            assert torch.equal(got, v), k


def test_refuses_evil_metadata(tmp_path):
    if not os.access(TOOL, os.X_OK):
        pytest.skip("SKIP: %s is not built" % TOOL)
    d = tmp_path / "ckpt"
    d.mkdir()
    with open(os.path.join(FX, "bad", "evil.metadata"), "rb") as src:
        (d / ".metadata").write_bytes(src.read())
    r = subprocess.run([TOOL, "convert", str(d), str(tmp_path / "o.safetensors")], capture_output=True, text=True,
                       cwd=str(tmp_path))
    assert r.returncode != 0
    assert "refusing global" in r.stderr and "system" in r.stderr
    assert not os.path.exists(tmp_path / "PWNED_BY_DCP_METADATA")
    assert not os.path.exists(tmp_path / "o.safetensors")


@pytest.mark.parametrize("name", ["rank4", "rank2"])
def test_checkpoint_and_reader_equal_torch(name):
    import pagein.dcp
    path = os.path.join(FX, name)
    ref = torch_load(path)
    with pagein.dcp.open(path) as ck:
        assert set(ck.tensor_keys()) == set(ref)
        for k, v in ref.items():
            assert torch.equal(ck.get_tensor(k), v), k
        k = "rows.weight"
        s = ck.get_slice(k, (2, 1), (5, 3))
        assert torch.equal(s, ref[k][2:7, 1:4])
        nt = [k for k in ck.keys() if k not in ref]
        assert nt and all(ck.get_bytes(k)[:4] == b"PK\x03\x04" for k in nt)
    # torch's load_state_dict driving pagein's reader: plain tensors and bytes items
    dcp = _dcpcompat.import_torch_dcp()
    sd = {k: torch.zeros_like(v) for k, v in ref.items()}
    extra = "step" if name == "rank4" else "epoch"
    sd[extra] = None
    dcp.load_state_dict(sd, storage_reader=pagein.dcp.Reader(path), no_dist=True)
    for k, v in ref.items():
        assert torch.equal(sd[k], v), k
    assert sd[extra] == (7 if name == "rank4" else 3)


def test_v2_metadata_through_reader():
    import pagein.dcp
    with pagein.dcp.open(os.path.join(FX, "v2")) as ck:
        assert ck.chunks("cols.weight")[3] == ((0, 9), (4, 1))
        assert ck.info("cols.weight")[1] == "BF16"
