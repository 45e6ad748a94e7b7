"""pagein against the independent reader in stref.py: every tensor of every
real safetensors file and of generated files of every dtype is equal."""
import os

import numpy as np
import pytest

import pagein
import stref
from conftest import malformed_files, real_files

REAL = real_files("safetensors", ".safetensors")


def check_equal(got, ref_dtype, ref_shape, ref):
    assert isinstance(got, np.ndarray)
    assert not got.flags.writeable
    if stref.DTYPES[ref_dtype][1] is None:  # packed F4/F6: compare bytes
        assert got.dtype == np.uint8
        assert got.tobytes() == ref.tobytes()
        return
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert list(got.shape) == ref_shape
    assert got.tobytes() == ref.tobytes()


def test_real_files_exist():
    assert len(REAL) >= 10, REAL


@pytest.mark.parametrize("path", REAL, ids=[os.path.relpath(p, os.path.dirname(os.path.dirname(p))) for p in REAL])
def test_real_file_equals_reference(path):
    meta, ref = stref.read(path)
    with pagein.safe_open(path, framework="np") as f:
        assert f.keys() == sorted(ref)
        assert f.metadata() == (meta or None)
        for name, (dtype, shape, arr) in ref.items():
            got = f.get_tensor(name)
            check_equal(got, dtype, shape, arr)
            sl = f.get_slice(name)
            assert sl.get_dtype() == dtype
            assert sl.get_shape() == shape
            assert f.get_dtype(name) == dtype


def test_every_dtype_generated(tmp_path, rng):
    tensors = {}
    for i, dtype in enumerate(stref.DTYPES):
        shape = [3, 8] if dtype not in ("F6_E2M3", "F6_E3M2") else [2, 4]
        tensors["t%02d.%s" % (i, dtype.lower())] = (dtype, shape, stref.random_tensor(rng, dtype, shape))
    tensors["scalar"] = ("F32", [], stref.random_tensor(rng, "F32", []))
    tensors["empty"] = ("I64", [2, 0], b"")
    path = str(tmp_path / "every.safetensors")
    stref.write(path, tensors, {"format": "pt", "k": "v"})
    meta, ref = stref.read(path)
    with pagein.safe_open(path, "numpy") as f:
        assert f.metadata() == {"format": "pt", "k": "v"}
        assert len(f.keys()) == len(tensors)
        for name, (dtype, shape, arr) in ref.items():
            check_equal(f.get_tensor(name), dtype, shape, arr)
        # packed layouts: F4 [3, 8] -> uint8 [3, 4]; F6 [2, 4] -> uint8 [2, 3]
        assert f.get_tensor("t01.f4").shape == (3, 4)
        assert f.get_tensor("t02.f6_e2m3").shape == (2, 3)
        assert f.get_tensor("scalar").shape == ()
        assert f.get_tensor("empty").shape == (2, 0)


def test_save_file_read_by_reference(tmp_path, rng):
    arrays = {
        "b": rng.integers(0, 2, (4, 5)).astype(bool),
        "u8": rng.integers(0, 255, (7,)).astype(np.uint8),
        "i8": rng.integers(-100, 100, (2, 3)).astype(np.int8),
        "i16": rng.integers(-1000, 1000, (3, 3)).astype(np.int16),
        "u16": rng.integers(0, 60000, (3, 3)).astype(np.uint16),
        "f16": rng.standard_normal((4, 4)).astype(np.float16),
        "i32": rng.integers(-10**9, 10**9, (5,)).astype(np.int32),
        "u32": rng.integers(0, 2**32 - 1, (5,), dtype=np.uint64).astype(np.uint32),
        "f32": rng.standard_normal((6, 2, 3)).astype(np.float32),
        "c64": (rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex64),
        "f64": rng.standard_normal((2, 2)),
        "i64": rng.integers(-2**62, 2**62, (3,)),
        "u64": rng.integers(0, 2**63, (3,), dtype=np.uint64),
        "scalar": np.float32(3.5),
        "empty": np.zeros((0, 4), np.float32),
        "noncontig": rng.standard_normal((4, 6)).astype(np.float32)[:, ::2],
        "bigendian": rng.standard_normal((5,)).astype(">f4"),
    }
    path = str(tmp_path / "saved.safetensors")
    pagein.save_file(arrays, path, metadata={"format": "np"})
    meta, ref = stref.read(path)
    assert meta == {"format": "np"}
    assert set(ref) == set(arrays)
    for name, a in arrays.items():
        dtype, shape, got = ref[name]
        assert shape == list(np.shape(a))
        np.testing.assert_array_equal(got, np.asarray(a))
    # the official writer's layout: header padded to a multiple of 8 with
    # spaces, U64 first (dtype descending), then by name
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    assert n % 8 == 0
    assert raw[8:8 + n].rstrip(b" ").endswith(b"}")
    order = [k for k in __import__("json").loads(raw[8:8 + n]) if k != "__metadata__"]
    assert order[0] == "u64"
    # and pagein reads back the same
    got = pagein.load_file(path, framework="np")
    for name, a in arrays.items():
        np.testing.assert_array_equal(got[name], np.asarray(a))


def test_save_file_is_atomic_and_replaces(tmp_path):
    path = str(tmp_path / "x.safetensors")
    pagein.save_file({"a": np.arange(4, dtype=np.float32)}, path)
    pagein.save_file({"b": np.arange(3, dtype=np.int64)}, path)
    assert pagein.load_file(path, framework="np").keys() == {"b"}
    assert os.listdir(str(tmp_path)) == ["x.safetensors"]


@pytest.mark.parametrize("path", malformed_files("safetensors"), ids=os.path.basename)
def test_malformed_raise_format_error(path):
    with pytest.raises(pagein.FormatError) as ei:
        pagein.safe_open(path, framework="np")
    e = ei.value
    assert isinstance(e, pagein.Error) and isinstance(e, ValueError)
    assert e.code <= -30000
    assert e.detail and e.detail in str(e)
    assert os.path.basename(path) in e.detail
