"""Errors raise pagein.Error subclasses carrying pagein's message."""
import errno
import os

import numpy as np
import pytest

import pagein
import stref


def test_exception_hierarchy():
    assert issubclass(pagein.FormatError, pagein.Error) and issubclass(pagein.FormatError, ValueError)
    assert issubclass(pagein.FileError, pagein.Error) and issubclass(pagein.FileError, OSError)
    assert issubclass(pagein.NotFoundError, pagein.Error) and issubclass(pagein.NotFoundError, KeyError)


def test_missing_file(tmp_path):
    p = str(tmp_path / "nope.safetensors")
    with pytest.raises(pagein.FileError) as ei:
        pagein.safe_open(p, framework="np")
    e = ei.value
    assert e.errno == errno.ENOENT and e.code == -errno.ENOENT
    assert e.filename == p
    assert "nope.safetensors" in e.detail


def test_directory_is_rejected(tmp_path):
    with pytest.raises(pagein.Error) as ei:
        pagein.safe_open(str(tmp_path), framework="np")
    assert str(tmp_path) in str(ei.value)


def test_missing_tensor(tmp_path):
    p = str(tmp_path / "a.safetensors")
    pagein.save_file({"a": np.zeros(3, np.float32)}, p)
    with pagein.safe_open(p, "np") as f:
        with pytest.raises(pagein.NotFoundError):
            f.get_tensor("b")
        with pytest.raises(KeyError):
            f.get_slice("b")


def test_bad_framework_and_device(tmp_path):
    p = str(tmp_path / "a.safetensors")
    pagein.save_file({"a": np.zeros(3, np.float32)}, p)
    with pytest.raises(pagein.FormatError):
        pagein.safe_open(p, framework="tf")
    with pytest.raises(pagein.FormatError):
        pagein.safe_open(p, framework="np", device="cuda:0")


@pytest.mark.parametrize("cut", [4, 20, 1])
def test_truncated_file(tmp_path, cut):
    p = str(tmp_path / "t.safetensors")
    stref.write(p, {"w": ("F32", [16], np.arange(16, dtype="<f4").tobytes())})
    size = os.path.getsize(p)
    os.truncate(p, cut if cut < 8 else size - cut)
    with pytest.raises(pagein.FormatError) as ei:
        pagein.safe_open(p, "np")
    e = ei.value
    assert e.code <= -30000 and e.error == pagein._pagein.strerror(e.code)
    assert "t.safetensors" in e.detail and e.detail in str(e)


def test_trailing_bytes_need_lenient(tmp_path):
    p = str(tmp_path / "t.safetensors")
    stref.write(p, {"w": ("F32", [4], np.arange(4, dtype="<f4").tobytes())})
    with open(p, "ab") as fh:
        fh.write(b"junk")
    with pytest.raises(pagein.FormatError):
        pagein.safe_open(p, "np")
    with pagein.safe_open(p, "np", lenient=True) as f:
        np.testing.assert_array_equal(f.get_tensor("w"), np.arange(4, dtype=np.float32))


def test_save_file_rejects_bad_input(tmp_path):
    p = str(tmp_path / "x.safetensors")
    with pytest.raises(pagein.FormatError):
        pagein.save_file({"a": np.array(["x"], dtype=object)}, p)
    with pytest.raises(pagein.FormatError):
        pagein.save_file({"a": np.zeros(2, np.float16).astype(np.longdouble)}, p)
    with pytest.raises(TypeError):
        pagein.save_file([np.zeros(2)], p)
    with pytest.raises(TypeError):
        pagein.save_file({"a": [1, 2]}, p)
    with pytest.raises(TypeError):
        pagein.save_file({"a": np.zeros(2)}, p, metadata={"k": 1})
    with pytest.raises(pagein.FileError):
        pagein.save_file({"a": np.zeros(2)}, str(tmp_path / "no" / "such" / "dir.safetensors"))
    assert not os.path.exists(p)


def test_read_only_arrays(tmp_path):
    p = str(tmp_path / "a.safetensors")
    pagein.save_file({"a": np.zeros(3, np.float32)}, p)
    with pagein.safe_open(p, "np") as f:
        a = f.get_tensor("a")
        with pytest.raises(ValueError):
            a[0] = 1
        b = pagein.safe_open(p, "np", copy=True).get_tensor("a")
        b[0] = 1
        assert b[0] == 1 and a[0] == 0


def test_paths_that_are_not_utf8(tmp_path):
    p = os.path.join(os.fsencode(str(tmp_path)), b"w\xff.safetensors")
    pagein.save_file({"a": np.arange(3, dtype=np.int32)}, p)  # bytes path
    assert os.path.exists(p)
    name = os.fsdecode(p)  # str with a surrogate escape
    with pagein.safe_open(name, "np") as f:
        assert f.get_tensor("a").tolist() == [0, 1, 2]
    with pagein.open_model(p) as m:
        assert m.tensors["a"].tolist() == [0, 1, 2]
    with pytest.raises(pagein.FileError) as ei:
        pagein.safe_open(os.path.join(os.fsencode(str(tmp_path)), b"x\xfe"), "np")
    assert ei.value.filename == os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"x\xfe"))
