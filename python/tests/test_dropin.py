"""pagein.torch and pagein.numpy as drop-ins for safetensors.torch and
safetensors.numpy, and safe_open's device argument."""
import sys
import types

import numpy as np
import pytest

import pagein
import pagein.numpy as pnp
import stref


# ---- pagein.numpy ----------------------------------------------------------

def test_numpy_module_round_trip(tmp_path, rng):
    arrays = {"a": rng.standard_normal((3, 4)).astype(np.float32), "b": np.arange(5, dtype=np.int64),
              "s": np.array(2.5)}
    p = str(tmp_path / "n.safetensors")
    pnp.save_file(arrays, p, metadata={"format": "np"})
    meta, got = stref.read(p)
    assert meta == {"format": "np"}
    for k, v in arrays.items():
        np.testing.assert_array_equal(got[k][2], v)
    data = pnp.save(arrays, metadata={"format": "np"})
    assert data == open(p, "rb").read()  # same writer, same bytes
    for loaded in (pnp.load_file(p), pnp.load(data)):
        assert sorted(loaded) == sorted(arrays)
        for k, v in arrays.items():
            assert loaded[k].dtype == v.dtype and loaded[k].shape == v.shape
            np.testing.assert_array_equal(loaded[k], v)
    with pytest.raises(ValueError):
        pnp.save_file({"a": [1, 2]}, p)
    with pytest.raises(ValueError):
        pnp.save([1], p)


def test_load_bytes_outlives_its_source():
    data = pnp.save({"x": np.arange(6, dtype=np.int16).reshape(2, 3)})
    d = pnp.load(bytes(data))
    del data
    import gc
    gc.collect()
    np.testing.assert_array_equal(d["x"], np.arange(6).reshape(2, 3))
    with pytest.raises(pagein.FormatError):
        pnp.load(b"\x08\0\0\0\0\0\0\0{}      x")


# ---- pagein.torch ----------------------------------------------------------

@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_torch_module_round_trip(tmp_path, torch):
    import pagein.torch as ptt
    g = torch.Generator().manual_seed(3)
    tensors = {"w": torch.randn(4, 3, generator=g), "h": torch.randn(2, generator=g).half(),
               "b": torch.randn(2, 2, generator=g).to(torch.bfloat16), "i": torch.arange(7)}
    p = str(tmp_path / "t.safetensors")
    ptt.save_file(tensors, p, metadata={"format": "pt"})
    data = ptt.save(tensors, metadata={"format": "pt"})
    assert data == open(p, "rb").read()
    for loaded in (ptt.load_file(p), ptt.load_file(p, device="cpu"), ptt.load(data)):
        assert sorted(loaded) == sorted(tensors)
        for k, v in tensors.items():
            assert loaded[k].dtype == v.dtype and torch.equal(loaded[k], v), k
    t = ptt.load(data)["w"]
    t.add_(1)  # private and writable, as safetensors' load gives
    assert torch.equal(ptt.load(data)["w"], tensors["w"])


def test_torch_save_file_refuses_shared_and_noncontiguous(tmp_path, torch):
    import pagein.torch as ptt
    p = str(tmp_path / "s.safetensors")
    w = torch.zeros(4, 4)
    with pytest.raises(RuntimeError, match="share memory") as ei:
        ptt.save_file({"a": w, "b": w}, p)
    assert "'a', 'b'" in str(ei.value)
    with pytest.raises(RuntimeError, match="share memory"):
        ptt.save({"a": w, "row": w[1]})
    with pytest.raises(RuntimeError, match="share memory"):
        pagein.save_file({"a": w, "b": w.view(16)}, p)  # the generic save_file too
    # two halves of one buffer do not overlap: allowed, as in safetensors
    ptt.save_file({"top": w[:2], "bottom": w[2:]}, p)
    with pytest.raises(ValueError, match="non contiguous"):
        ptt.save_file({"t": torch.zeros(3, 2).t()}, p)
    with pytest.raises(ValueError):
        ptt.save_file({"x": np.zeros(2)}, p)
    import os
    assert not [f for f in os.listdir(str(tmp_path)) if f != "s.safetensors"]


def _tied_model(torch):
    m = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False), torch.nn.Linear(5, 2))
    m[1].weight = m[0].weight
    return m


def test_save_model_dedups_and_load_model_restores(tmp_path, torch):
    import pagein.torch as ptt
    torch.manual_seed(0)
    m = _tied_model(torch)
    p = str(tmp_path / "m.safetensors")
    ptt.save_model(m, p)
    with pagein.safe_open(p, "pt") as f:
        assert f.keys() == ["0.weight", "2.bias", "2.weight"]  # one copy of the tied pair
        assert f.metadata() == {"1.weight": "0.weight"}
    m2 = _tied_model(torch)
    missing, unexpected = ptt.load_model(m2, p)
    assert missing == [] and unexpected == []
    for k, v in m.state_dict().items():
        assert torch.equal(m2.state_dict()[k], v), k
    assert m2[1].weight.data_ptr() == m2[0].weight.data_ptr()  # still tied
    # strict: a model with another layout fails loudly, like torch
    other = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Identity(), torch.nn.Identity(),
                                torch.nn.Linear(5, 2))
    with pytest.raises(RuntimeError, match="Missing key.*3.weight(.|\n)*Unexpected key.*2.bias"):
        ptt.load_model(other, p)
    missing, unexpected = ptt.load_model(other, p, strict=False)
    assert missing == ["3.bias", "3.weight"] and sorted(unexpected) == ["2.bias", "2.weight"]
    # a file written with plain save_file (both tied names present) needs save_model
    with pytest.raises(RuntimeError, match="share memory"):
        ptt.save_file(m.state_dict(), str(tmp_path / "x.safetensors"))


# ---- devices ---------------------------------------------------------------

def test_parse_device_accepts_safetensors_spellings(torch):
    pd = pagein._parse_device
    assert pd("cpu") == ("cpu", None) and pd(None) == ("cpu", None) and pd("cpu:0") == ("cpu", None)
    assert pd(torch.device("cpu")) == ("cpu", None)
    assert pd("cuda:1") == ("cuda", 1) and pd(2) == ("cuda", 2) and pd(np.int32(3)) == ("cuda", 3)
    assert pd(torch.device("cuda", 4)) == ("cuda", 4) and pd("cuda")[0] == "cuda"
    for bad, exc in (("cuda:x", pagein.FormatError), ("cuda:-1", pagein.FormatError), ("mps", pagein.FormatError),
                     (-1, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(exc):
            pd(bad)


def _file(tmp_path):
    p = str(tmp_path / "d.safetensors")
    stref.write(p, {"a": ("F32", [2, 2], np.arange(4, dtype="<f4").tobytes()),
                    "b": ("I64", [3], np.arange(3, dtype="<i8").tobytes())})
    return p


def test_cuda_without_gpu_module_is_a_clear_error(tmp_path, monkeypatch, torch):
    p = _file(tmp_path)
    monkeypatch.setitem(sys.modules, "pagein._gpu", None)  # import fails
    for dev in ("cuda:0", 0, torch.device("cuda", 0)):
        with pytest.raises(pagein.Error) as ei:
            pagein.safe_open(p, "pt", device=dev)
        assert "CUDA device 'cuda:0' requested but" in str(ei.value)
    with pytest.raises(pagein.Error, match="CUDA device 'cuda:1' requested"):
        pagein.load_file(p, device="cuda:1")
    with pytest.raises(pagein.Error, match="CUDA device"):
        pagein.open_model(p, framework="pt", device=1)
    # the CPU path does not touch the GPU module
    assert pagein.load_file(p, device=torch.device("cpu"))["b"].tolist() == [0, 1, 2]


def test_cuda_devices_delegate_to_gpu_module(tmp_path, monkeypatch, torch):
    """Every CUDA load goes through pagein._gpu.load(source, names, index,
    framework); a fake module records the calls."""
    calls = []
    fake = types.ModuleType("pagein._gpu")

    def load(handle, names, device_index, framework):
        calls.append((handle.path, list(names), device_index, framework))
        return {n: torch.full((1,), float(device_index)) for n in names}

    fake.load = load
    monkeypatch.setitem(sys.modules, "pagein._gpu", fake)
    p = _file(tmp_path)
    got = pagein.load_file(p, device="cuda:3")
    assert [(c[0], sorted(c[1]), c[2], c[3]) for c in calls] == [(p, ["a", "b"], 3, "pt")] and got["a"].item() == 3.0
    calls.clear()
    import pagein.torch as ptt
    ptt.load_file(p, device=torch.device("cuda", 2))
    assert [(c[0], sorted(c[1]), c[2], c[3]) for c in calls] == [(p, ["a", "b"], 2, "pt")]
    calls.clear()
    with pagein.safe_open(p, "pt", device=5) as f:
        assert f.get_tensor("b").item() == 5.0
    assert calls == [(p, ["b"], 5, "pt")]
    calls.clear()
    with pagein.open_model(p, framework="pt", device="cuda:1") as m:
        assert sorted(n for _, layer in m.layers() for n in layer) == ["a", "b"]
    assert calls and all(c[2] == 1 for c in calls)
    with pytest.raises(pagein.FormatError):
        pagein.safe_open(p, "np", device="cuda:0")  # numpy lives on the CPU


def test_metadata_str_and_typed_for_safetensors(tmp_path):
    p = str(tmp_path / "m.safetensors")
    stref.write(p, {"a": ("F32", [1], b"\0" * 4)}, metadata={"format": "pt", "n": "3"})
    with pagein.safe_open(p, "np") as f:
        assert f.metadata() == {"format": "pt", "n": "3"}
        assert f.metadata_typed() == {"format": "pt", "n": "3"}
    stref.write(p, {"a": ("F32", [1], b"\0" * 4)})
    with pagein.safe_open(p, "np") as f:
        assert f.metadata() is None and f.metadata_typed() == {}


def test_safe_open_and_model_share_one_base(tmp_path):
    p = _file(tmp_path)
    assert issubclass(pagein.safe_open, pagein._Opened) and issubclass(pagein.Model, pagein._Opened)
    with pagein.safe_open(p) as f, pagein.open_model(p) as m:
        for o in (f, m):
            assert o.tensor_info("a")["nbytes"] == 16 and "a" in o and len(o) == 2
            np.testing.assert_array_equal(o.get_tensor("a"), np.arange(4, dtype=np.float32).reshape(2, 2))
