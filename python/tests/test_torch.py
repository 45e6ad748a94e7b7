"""torch: tensors equal those saved with torch.save for every dtype torch
supports; save_file -> load_file round trips; zero copy; warnings."""
import os
import subprocess
import sys

import numpy as np
import pytest

import pagein
import stref

torch = pytest.importorskip("torch")

# Every safetensors dtype this torch can represent.
ST_TO_TORCH = {k: getattr(torch, v) for k, v in {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
    "F16": "float16", "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32",
    "C64": "complex64", "F64": "float64", "I64": "int64", "U64": "uint64",
    "F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3fn"}.items() if hasattr(torch, v)}


def make(dtype, shape, gen):
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=gen)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=gen) * 4).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), shape, generator=gen).to(dtype)


@pytest.fixture
def tensors():
    gen = torch.Generator().manual_seed(int(os.environ.get("PAGEIN_SEED", "1234")))
    out = {}
    for i, (st, dt) in enumerate(sorted(ST_TO_TORCH.items())):
        out["t.%s" % st.lower()] = make(dt, (3, 5), gen)
    out["scalar"] = torch.tensor(2.5)
    out["empty"] = torch.zeros((0, 3))
    out["model.layers.0.weight"] = make(torch.float32, (64, 32), gen)
    out["noncontig"] = make(torch.float32, (6, 4), gen).t()
    return out


def test_equal_to_torch_save(tmp_path, tensors):
    pt = str(tmp_path / "w.pt")
    st = str(tmp_path / "w.safetensors")
    torch.save(tensors, pt)
    pagein.save_file(tensors, st, metadata={"format": "pt"})
    ref = torch.load(pt)
    with pagein.safe_open(st, framework="pt") as f:
        assert f.metadata() == {"format": "pt"}
        assert sorted(f.keys()) == sorted(ref)
        for name, r in ref.items():
            t = f.get_tensor(name)
            assert t.dtype == r.dtype, name
            assert t.shape == r.shape, name
            assert torch.equal(t, r), name


def test_load_file_round_trip(tmp_path, tensors):
    st = str(tmp_path / "r.safetensors")
    pagein.save_file(tensors, st)
    got = pagein.load_file(st)
    assert set(got) == set(tensors)
    for k, v in tensors.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], v), k
    # and again through save_file of what load_file returned
    st2 = str(tmp_path / "r2.safetensors")
    pagein.save_file(got, st2)
    assert open(st, "rb").read() == open(st2, "rb").read()


def test_bf16_is_a_torch_dtype(tmp_path):
    st = str(tmp_path / "b.safetensors")
    x = torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16)
    pagein.save_file({"x": x}, st)
    with pagein.safe_open(st, "pt") as f:
        t = f.get_tensor("x")
        assert t.dtype == torch.bfloat16 and torch.equal(t, x)
        assert f.get_slice("x").get_dtype() == "BF16"


def test_f8(tmp_path, rng):
    st = str(tmp_path / "f8.safetensors")
    raw = bytes(range(0, 120, 10))
    stref.write(st, {"q": ("F8_E4M3", [3, 4], raw)})
    with pagein.safe_open(st, "pt") as f:
        t = f.get_tensor("q")
        assert f.get_dtype("q") == "F8_E4M3"
        if hasattr(torch, "float8_e4m3fn"):
            assert t.dtype == torch.float8_e4m3fn
            t = t.view(torch.uint8)
        else:  # torch < 2.1: the raw bytes, like numpy
            assert t.dtype == torch.uint8
        assert bytes(t.reshape(-1).numpy()) == raw and t.shape == (3, 4)


def test_zero_copy(tmp_path, tensors):
    st = str(tmp_path / "z.safetensors")
    pagein.save_file(tensors, st)
    with pagein.safe_open(st, "pt") as f:
        name = "model.layers.0.weight"
        t = f.get_tensor(name)
        assert t.data_ptr() == f._src.buffer(name).address
        assert f.get_tensor(name).data_ptr() == t.data_ptr()


def test_copy_gives_writable_tensors(tmp_path, tensors):
    st = str(tmp_path / "c.safetensors")
    pagein.save_file(tensors, st)
    with pagein.safe_open(st, "pt", copy=True) as f:
        t = f.get_tensor("model.layers.0.weight")
        t.add_(1)
        assert torch.equal(t, tensors["model.layers.0.weight"] + 1)
    assert torch.equal(pagein.load_file(st)["model.layers.0.weight"], tensors["model.layers.0.weight"])


def test_in_place_write_is_private(tmp_path, tensors):
    # torch has no read-only tensors: pagein maps copy-on-write for it, so an
    # in-place write works, stays in this process, and never reaches the file.
    st = str(tmp_path / "cow.safetensors")
    pagein.save_file(tensors, st)
    before = open(st, "rb").read()
    name = "model.layers.0.weight"
    with pagein.safe_open(st, "pt") as f:
        t = f.get_tensor(name)
        assert t.data_ptr() == f._src.buffer(name).address  # still zero-copy
        t.add_(1)
        t[0] = 7
        expect = tensors[name] + 1
        expect[0] = 7
        assert torch.equal(t, expect)
        with pagein.safe_open(st, "pt") as g:  # another reader sees the file
            assert torch.equal(g.get_tensor(name), tensors[name])
    assert open(st, "rb").read() == before
    with pagein.safe_open(st, "np") as f:  # numpy views stay read-only
        a = f.get_tensor(name)
        assert not a.flags.writeable
    m = pagein.open_model(st, "lazy", framework="pt")
    mt = m.tensors[name]
    mt.mul_(0)
    assert float(mt.abs().sum()) == 0.0
    del mt, m
    assert open(st, "rb").read() == before


def test_no_read_only_warning_escapes(tmp_path):
    st = str(tmp_path / "w.safetensors")
    pagein.save_file({"a": torch.ones(4)}, st)
    code = ("import pagein, warnings; warnings.simplefilter('error');"
            "f = pagein.safe_open(%r, 'pt'); print(f.get_tensor('a').sum().item())" % st)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "4.0"
    assert "not writable" not in r.stderr


def test_unaligned_and_legacy_files(tmp_path):
    # samples-2022/overall: U32/F64 data not aligned to their size (pre-2023
    # writer): zero copy is impossible for torch, pagein copies those.
    from conftest import testdata
    path = testdata("safetensors", "samples-2022", "overall.safetensors")
    _, ref = stref.read(path)
    with pagein.safe_open(path, "pt") as f:
        for name, (dtype, shape, arr) in ref.items():
            if dtype not in ST_TO_TORCH:
                with pytest.raises(pagein.FormatError):
                    f.get_tensor(name)
                continue
            t = f.get_tensor(name)
            np.testing.assert_array_equal(t.numpy(), arr)


def test_integer_types_torch_lacks(tmp_path):
    if hasattr(torch, "uint16"):
        pytest.skip("this torch has uint16")
    st = str(tmp_path / "u.safetensors")
    pagein.save_file({"u": np.arange(4, dtype=np.uint16)}, st)
    with pagein.safe_open(st, "pt") as f:
        with pytest.raises(pagein.FormatError, match="uint16"):
            f.get_tensor("u")
