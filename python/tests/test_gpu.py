"""pagein._gpu: tensors through the pinned staging pipeline. Without a GPU
every load runs against host memory (DEVICE_HOST), which exercises the
whole C pipeline (ring, asynchronous copies, readiness) and the Python
glue; CUDA tests skip with the reason."""
import importlib
import os

import numpy as np
import pytest

import pagein
from conftest import testdata as _testdata

HOST = pagein._pagein.DEVICE_HOST


class _Lazy:
    """pagein._gpu, imported when a test runs and dropped from the package's
    attributes afterwards: test_dropin.py replaces sys.modules["pagein._gpu"]
    and pagein's `from . import _gpu` would find a leftover attribute
    first (this module is imported at collection, before those tests run)."""

    def __getattr__(self, name):
        if name not in ("load", "probe", "trim", "Loading", "DEVICE_HOST"):  # pytest's collection probes attributes
            raise AttributeError(name)
        return getattr(importlib.import_module("pagein._gpu"), name)


_gpu = _Lazy()


@pytest.fixture(autouse=True)
def _drop_gpu_attribute():
    yield
    if "_gpu" in vars(pagein):
        delattr(pagein, "_gpu")


def _write_model(path, layers=6, size=20000):
    rng = np.random.default_rng(3)
    t = {"model.embed_tokens.weight": rng.standard_normal((size // 4,), dtype=np.float32)}
    for i in range(layers):
        t["model.layers.%d.w" % i] = rng.integers(0, 255, (size // 100, 100), dtype=np.uint8)
        t["model.layers.%d.h" % i] = rng.standard_normal((7, size // 28), dtype=np.float32).astype(np.float16)
    t["lm_head.weight"] = rng.integers(-5, 5, (size // 8,), dtype=np.int64)
    pagein.save_file(t, path)
    return t


def test_host_numpy_all_tensors_equal(tmp_path):
    path = str(tmp_path / "m.safetensors")
    want = _write_model(path)
    st = {}
    got = _gpu.load(path, None, HOST, "np", buffer_bytes=8192, nbuffers=3, stats=st)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
        assert np.array_equal(got[k], v), k
    assert st["bytes"] == sum(v.nbytes for v in want.values())
    assert st["pinned_peak"] <= 3 * 8192 < st["bytes"]
    assert st["device_name"] == "host memory"
    assert 0 <= st["first_layer_seconds"] <= st["seconds"]


def test_host_per_tensor_waits(tmp_path):
    path = str(tmp_path / "m.safetensors")
    want = _write_model(path, layers=10, size=50000)
    with pagein.open_model(path, strategy="lazy") as m:
        with _gpu.load(m, None, HOST, "np", buffer_bytes=8192, nbuffers=2, wait=False) as ld:
            first = ld.wait("model.layers.0.w")  # returns while later layers may still be copied
            assert np.array_equal(first, want["model.layers.0.w"])
            assert ld.ready("model.layers.0.w") is True
            st = ld.stats()
            assert st["tensors"] == len(want) and st["ready"] >= 1
            got = ld.wait_all()
            assert ld.stats()["ready"] == len(want)
            with pytest.raises(pagein.NotFoundError):
                ld.wait("nope")
        with pytest.raises(ValueError):
            ld.wait("lm_head.weight")  # closed
    for k, v in want.items():
        assert np.array_equal(got[k], v), k
    # closed early, while running: no crash, the source stays usable
    ld = _gpu.load(path, None, HOST, "np", buffer_bytes=4096, nbuffers=2, wait=False)
    ld.close()
    del ld


def test_host_handles_and_subset(tmp_path):
    torch = pytest.importorskip("torch")
    path = str(tmp_path / "m.safetensors")
    want = _write_model(path, layers=3)
    names = ["lm_head.weight", "model.layers.1.h"]
    with pagein.safe_open(path, framework="pt") as f:
        got = _gpu.load(f, names, HOST, "pt")
    assert list(got) == names
    assert got["model.layers.1.h"].dtype == torch.float16
    assert np.array_equal(got["lm_head.weight"].numpy(), want["lm_head.weight"])
    with pagein.open_model(path, strategy="lazy") as m:
        got = _gpu.load(m, None, HOST, "torch")
    assert len(got) == len(want)
    for k, v in want.items():
        assert np.array_equal(got[k].numpy(), v), k


def test_host_torch_checkpoint_equals_torch_load(tmp_path):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(7)
    base = torch.randn(6, 5, generator=g)
    sd = {
        "w": torch.randn(40, 30, generator=g),
        "bf": torch.randn(3, 2, generator=g).to(torch.bfloat16),
        "i64": torch.arange(5),
        "t": base.t(),  # strided
        "rows": base[1:5:2],  # strided slice of a shared storage
        "base": base,
        "scalar": torch.tensor(1.5),
    }
    sd["tied"] = sd["w"]
    path = str(tmp_path / "ckpt.pt")
    torch.save(sd, path)
    ref = torch.load(path)
    with pagein.safe_open(path, framework="pt") as f:
        got = _gpu.load(f, None, HOST, "pt", buffer_bytes=4096, nbuffers=2)
    got_model = _gpu.load(path, None, HOST, "pt", buffer_bytes=4096, nbuffers=2)  # a path: opened as a model
    for g in (got, got_model):
        assert sorted(g) == sorted(ref)
        for k, v in ref.items():
            assert g[k].dtype == v.dtype and tuple(g[k].shape) == tuple(v.shape), k
            assert torch.equal(g[k], v), k
            assert g[k].is_contiguous()


def test_host_gguf_quantized_blocks():
    path = _testdata("gguf", "tinyllamas-stories-260k-q8_0.gguf")
    if not os.path.exists(path):
        pytest.skip("tests/data/real is missing")
    with pagein.safe_open(path, framework="np") as f:
        ref = {k: np.array(f.get_tensor(k)) for k in f.keys()}
        dtypes = {k: f.get_dtype(k) for k in f.keys()}
        got = _gpu.load(f, None, HOST, "np", buffer_bytes=4096, nbuffers=4)
    assert "Q8_0" in dtypes.values()
    for k, v in ref.items():
        assert got[k].shape == v.shape and np.array_equal(got[k], v), k


def test_truncated_file_names_file_and_tensor(tmp_path):
    path = str(tmp_path / "m.safetensors")
    _write_model(path, layers=8)
    with pagein.safe_open(path, framework="np") as f:
        os.truncate(path, 30000)
        with pytest.raises(pagein.Error) as e:
            _gpu.load(f, None, HOST, "np", buffer_bytes=4096, nbuffers=2)
        ld = _gpu.load(f, None, HOST, "np", buffer_bytes=4096, nbuffers=2, wait=False)
        with pytest.raises(pagein.Error) as e2:
            ld.wait("lm_head.weight")
        ld.close()
    assert e.value.error == pagein._pagein.strerror(-30000)
    assert path in e.value.detail and "tensor '" in e.value.detail
    assert e2.value.code == -30000


def test_argument_handling(tmp_path):
    path = str(tmp_path / "m.safetensors")
    _write_model(path, layers=1, size=1000)
    with pytest.raises(TypeError):
        _gpu.load(path, None, "cuda:0")
    with pytest.raises(TypeError):
        _gpu.load(path, None, True)
    with pytest.raises(ValueError):
        _gpu.load(path, None, -7)
    with pytest.raises(pagein.FormatError):
        _gpu.load(path, None, 0, "np")  # numpy cannot hold CUDA memory
    with pytest.raises(pagein.FormatError):
        _gpu.load(path, None, HOST, "jax")
    with pytest.raises(TypeError):
        _gpu.load(path, "lm_head.weight", HOST, "np")  # one str, not a list
    with pytest.raises(ValueError):
        _gpu.load(path, ["lm_head.weight", "lm_head.weight"], HOST, "np")
    with pytest.raises(pagein.NotFoundError):
        _gpu.load(path, ["nope"], HOST, "np")
    with pytest.raises(TypeError):
        _gpu.load(42, None, HOST, "np")
    with pytest.raises(pagein.FileError):
        _gpu.load(str(tmp_path / "missing.safetensors"), None, HOST, "np")
    assert _gpu.load(path, [], HOST, "np") == {}
    _gpu.trim()


def test_no_cuda_raises_with_reason(tmp_path, monkeypatch):
    path = str(tmp_path / "m.safetensors")
    _write_model(path, layers=1, size=1000)
    monkeypatch.setenv("PAGEIN_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")
    try:
        _gpu.probe(0)
    except pagein.Error as e:
        assert e.code == -30034  # PAGEIN_E_NO_CUDA
        assert "/nonexistent/libcuda.so.1" in e.detail
    else:
        pytest.skip("a CUDA driver is already loaded in this process")
    with pytest.raises(pagein.Error) as e:
        _gpu.load(path, None, 0, "pt")
    assert e.value.code == -30034 and "no CUDA driver" in str(e.value)


def _cuda_or_skip():
    try:
        info = _gpu.probe(0)
    except pagein.Error as e:
        pytest.skip("no CUDA device: %s" % e.detail)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch %s has no CUDA" % torch.__version__)
    return info, torch


def test_cuda_tensors_equal_cpu(tmp_path):
    info, torch = _cuda_or_skip()
    path = str(tmp_path / "m.safetensors")
    want = _write_model(path, layers=4, size=400000)
    got = _gpu.load(path, None, 0, "pt")
    for k, v in want.items():
        assert got[k].device.type == "cuda", k
        assert np.array_equal(got[k].cpu().numpy(), v), k


def test_safe_open_cuda_delegates_and_reports_no_cuda(tmp_path, monkeypatch):
    """The real delegation (safe_open / load_file / open_model with a CUDA
    device -> pagein._gpu.load): without a driver the error says why."""
    pytest.importorskip("torch")
    path = str(tmp_path / "m.safetensors")
    _write_model(path, layers=1, size=1000)
    monkeypatch.setenv("PAGEIN_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")
    try:
        _gpu.probe(0)
        pytest.skip("a CUDA driver is already loaded in this process")
    except pagein.Error:
        pass
    with pytest.raises(pagein.Error) as e:
        pagein.load_file(path, device="cuda:0")
    assert e.value.code == -30034 and "/nonexistent/libcuda.so.1" in e.value.detail
    with pagein.safe_open(path, framework="pt", device="cuda:0") as f:
        with pytest.raises(pagein.Error) as e:
            f.get_tensor("lm_head.weight")
    assert e.value.code == -30034


def test_cuda_torch_checkpoint_and_gguf_equal_cpu(tmp_path):
    info, torch = _cuda_or_skip()
    base = torch.randn(6, 5)
    sd = {"w": torch.randn(40, 30), "t": base.t(), "base": base, "bf": torch.randn(3, 2).to(torch.bfloat16)}
    path = str(tmp_path / "c.pt")
    torch.save(sd, path)
    got = _gpu.load(path, None, 0, "pt")
    for k, v in torch.load(path).items():
        assert got[k].device.type == "cuda" and torch.equal(got[k].cpu(), v), k
    g = _testdata("gguf", "tinyllamas-stories-260k-q8_0.gguf")
    if os.path.exists(g):
        with pagein.safe_open(g, framework="pt") as f:
            ref = {k: f.get_tensor(k).clone() for k in f.keys()}
            got = _gpu.load(f, None, 0, "pt")
        for k, v in ref.items():
            assert torch.equal(got[k].cpu(), v), k
