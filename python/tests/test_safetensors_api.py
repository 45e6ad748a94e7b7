"""The safetensors package's public Python API on pagein (top level,
pagein.torch, pagein.numpy): every public name with a behaviour check,
written from safetensors' documentation and docstrings (the API of its
current release: TensorSpec, serialize/serialize_file/deserialize,
safe_open(..., backend=), get_tensors, offset_keys, _safe_open_handle, the
storage helpers of safetensors.torch). test_project_runs_unchanged runs a
user project written for safetensors (dropin_project.py) with the modules
swapped for pagein's; when the real safetensors package is importable the
same project runs on it too and the results are compared."""
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import pagein
import pagein.numpy as pnp
from conftest import HERE, REPO

torch = pytest.importorskip("torch")
import pagein.torch as ptt  # noqa: E402

BUILD_PY = os.path.join(REPO, "build", "python")


@pytest.fixture
def st_file(tmp_path):
    p = str(tmp_path / "m.safetensors")
    a = np.arange(50, dtype=np.float32).reshape(10, 5)
    pagein.save_file({"b": np.array([1, 2, 3], np.int64), "a": a}, p, metadata={"format": "np"})
    return p, a


# ---- top level ----------------------------------------------------------------

def test_safetensor_error_is_pagein_error():
    assert pagein.SafetensorError is pagein.Error and issubclass(pagein.SafetensorError, Exception)
    assert issubclass(pagein.SliceError, pagein.SafetensorError) and issubclass(pagein.SliceError, IndexError)
    assert issubclass(pagein.FileNotFoundError, FileNotFoundError) and issubclass(pagein.FileNotFoundError,
                                                                                  pagein.FileError)
    assert isinstance(pagein.__version__, str)


def test_tensor_spec():
    t = torch.arange(6, dtype=torch.float32)
    s = pagein.TensorSpec(dtype="float32", shape=t.shape, data_ptr=t.data_ptr(), data_len=24)
    assert (s.dtype, s.shape, s.data_ptr, s.data_len) == ("F32", [6], t.data_ptr(), 24)
    assert repr(s) == "TensorSpec(dtype='F32', shape=[6], data_ptr=%d, data_len=24)" % t.data_ptr()
    for name, code in [("bfloat16", "BF16"), ("float8_e5m2fnuz", "F8_E5M2FNUZ"), ("bool", "BOOL"),
                       ("complex64", "C64"), ("uint64", "U64"), ("F16", "F16")]:
        assert pagein.TensorSpec(dtype=name, shape=[1], data_ptr=0, data_len=0).dtype == code
    # F4 packs two values a byte: the storage shape's last dimension doubles
    assert pagein.TensorSpec(dtype="float4_e2m1fn_x2", shape=[3, 4], data_ptr=0, data_len=12).shape == [3, 8]
    with pytest.raises(pagein.SafetensorError, match="Unknown dtype"):
        pagein.TensorSpec(dtype="float31", shape=[1], data_ptr=0, data_len=4)
    with pytest.raises(TypeError):
        pagein.TensorSpec("float32", [1], 0, 4)  # keyword-only
    with pytest.raises(AttributeError):
        s.dtype = "F16"


def test_serialize_serialize_file_deserialize(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.array([True, False])
    specs = {"a": pagein.TensorSpec(dtype="float32", shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes),
             "b": pagein.TensorSpec(dtype="bool", shape=b.shape, data_ptr=b.ctypes.data, data_len=b.nbytes),
             "e": pagein.TensorSpec(dtype="int8", shape=[0, 3], data_ptr=0, data_len=0)}
    raw = pagein.serialize(specs, metadata={"k": "v"})
    assert isinstance(raw, bytes)
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"] == {"k": "v"} and header["a"]["dtype"] == "F32" and header["a"]["shape"] == [3, 4]
    got = pagein.deserialize(raw)
    assert sorted(x[0] for x in got) == ["a", "b", "e"]  # (safetensors: in no particular order)
    d = dict(got)
    assert d["a"]["dtype"] == "F32" and d["a"]["shape"] == [3, 4] and bytes(d["a"]["data"]) == a.tobytes()
    assert isinstance(d["a"]["data"], bytearray) and bytes(d["b"]["data"]) == b"\x01\x00"
    assert d["e"]["shape"] == [0, 3] and len(d["e"]["data"]) == 0
    p = str(tmp_path / "s.safetensors")
    assert pagein.serialize_file(specs, p, metadata={"k": "v"}) is None
    assert open(p, "rb").read() == raw  # same bytes as serialize
    np.testing.assert_array_equal(pnp.load_file(p)["a"], a)
    # a data_len that does not match the shape, bad bytes: SafetensorError
    with pytest.raises(pagein.SafetensorError, match="Error while serializing"):
        pagein.serialize({"x": pagein.TensorSpec(dtype="float32", shape=[4], data_ptr=a.ctypes.data, data_len=8)})
    with pytest.raises(pagein.SafetensorError, match="Error while deserializing"):
        pagein.deserialize(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    with pytest.raises(pagein.SafetensorError):
        pagein.deserialize(raw[:-1])


def test_safe_open_signature_keys_metadata_get_tensors(st_file):
    p, a = st_file
    with pagein.safe_open(p, "np", "cpu") as f:
        assert f.keys() == ["a", "b"]  # sorted
        assert f.offset_keys() == ["b", "a"]  # file order: the writer puts I64 before F32
        assert f.metadata() == {"format": "np"}
        d = f.get_tensors()
        assert list(d) == f.offset_keys()
        np.testing.assert_array_equal(d["a"], a)
        with pytest.raises(pagein.SafetensorError, match="File does not contain tensor nope"):
            f.get_tensor("nope")
    with pytest.raises(pagein.SafetensorError, match="File is closed"):
        f.keys()
    with pytest.raises(TypeError):
        pagein.safe_open(p, "np", "cpu", "pread")  # backend is keyword-only
    with pytest.raises(pagein.SafetensorError, match='backend "nope" is invalid'):
        pagein.safe_open(p, "np", backend="nope")


def test_missing_file_is_file_not_found(tmp_path):
    p = str(tmp_path / "notafile")
    with pytest.raises(FileNotFoundError) as e:
        pagein.safe_open(p, "pt")
    assert "No such file or directory" in str(e.value) and e.value.filename == p
    with pytest.raises(FileNotFoundError):
        ptt.load_file(p)
    with pytest.raises(FileNotFoundError):
        pnp.load_file(p)
    with pytest.raises(FileNotFoundError):
        pagein.open_model(p)  # the library's ENOENT, everywhere


@pytest.mark.parametrize("fw", ["np", "pt"])
@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_get_slice_bounds_and_empty_list(st_file, fw, backend):
    p, a = st_file
    with pagein.safe_open(p, fw, backend=backend) as f:
        s = f.get_slice("a")
        assert s.get_shape() == [10, 5] and s.get_dtype() == "F32"
        assert list(s[[]].shape) == [0, 5] and list(s[list()].shape) == [0, 5]
        np.testing.assert_array_equal(np.asarray(s[2:, -1]), a[2:, -1])
        np.testing.assert_array_equal(np.asarray(s[:, ::2]), a[:, ::2])
        for index, msg in [(slice(None, 20), "Error during slicing [:20] with shape [10, 5]: index 19 out of bounds "
                                             "for tensor dimension #0 of size 10"),
                           ((slice(2, None), 20), "Error during slicing [2:, 20] with shape [10, 5]: index 20 out of "
                                                  "bounds for tensor dimension #1 of size 5"),
                           ((slice(None), slice(None, 20)), "index 19 out of bounds for tensor dimension #1 of size 5"),
                           ((slice(2, None), -6), "Invalid index -6 for dimension 1 of size 5"),
                           ((0, 0, 0), "more slicing indexes than dimensions in tensor")]:
            with pytest.raises(pagein.SafetensorError) as e:
                s[index]
            assert msg in str(e.value) and isinstance(e.value, IndexError)
        with pytest.raises(pagein.SafetensorError, match="Non empty lists are not implemented"):
            s[[0, 1]]


@pytest.mark.parametrize("fw", ["np", "pt"])
def test_backend_pread_reads_private_copies(st_file, fw):
    p, a = st_file
    with pagein.safe_open(p, fw) as m, pagein.safe_open(p, fw, backend="pread") as r:
        for name in m.keys():
            x, y = m.get_tensor(name), r.get_tensor(name)
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        got = r.get_tensors()
        assert list(got) == m.offset_keys()
        t = got["a"]
        if fw == "np":
            assert not m.get_tensor("a").flags.writeable  # mapped: read-only view
            assert t.flags.writeable and t.base is not None and not np.shares_memory(t, m.get_tensor("a"))
        else:
            t.add_(1)  # private memory: the file and the mapping are untouched
    assert np.asarray(pnp.load_file(p)["a"]).sum() == a.sum()
    np.testing.assert_array_equal(pnp.load_file(p, backend="pread")["a"], a)
    assert torch.equal(ptt.load_file(p, backend="pread")["a"], torch.from_numpy(a))


def _bytes_of(t):
    if isinstance(t, np.ndarray):
        return t.shape, np.ascontiguousarray(t).tobytes()
    return tuple(t.shape), t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


@pytest.mark.parametrize("fw", ["np", "pt"])
def test_backend_pread_equals_mmap_on_real_files(fw):
    """Every real file (safetensors, GGUF with block types, big-endian GGUF)
    gives the same tensors, shapes and bytes through both backends."""
    from conftest import real_files
    paths = real_files("safetensors", ".safetensors") + real_files("gguf", ".gguf")
    assert paths
    for p in paths:
        with pagein.safe_open(p, fw) as m, pagein.safe_open(p, fw, backend="pread") as r:
            for k in m.offset_keys():
                try:
                    a = _bytes_of(m.get_tensor(k))
                except pagein.FormatError as e:  # a dtype this torch lacks: the same refusal
                    with pytest.raises(type(e)):
                        r.get_tensor(k)
                    continue
                assert a == _bytes_of(r.get_tensor(k)), (p, k)


def test_file_objects_and_safe_open_handle(st_file):
    p, a = st_file
    with open(p, "rb") as fh:
        with pagein.safe_open(fh, "np") as f:
            np.testing.assert_array_equal(f.get_tensor("a"), a)
        with pagein._safe_open_handle(fh, framework="np", device="cpu") as g:
            assert g.keys() == ["a", "b"] and g.offset_keys() == ["b", "a"]
    with pagein.safe_open(io.BytesIO(open(p, "rb").read()), "pt") as f:  # no name, no fileno: read into memory
        assert f.get_tensor("b").tolist() == [1, 2, 3]
    with pytest.raises(TypeError):
        pagein._safe_open_handle(p, framework="np")
    fsspec = pytest.importorskip("fsspec")
    with fsspec.filesystem("file").open(p, "rb") as fh, pagein._safe_open_handle(fh, "np") as g:
        np.testing.assert_array_equal(g.get_tensor("a"), a)
    import pagein.fsspec as _pfs  # noqa: F401 (registers "pagein")
    with fsspec.open("pagein://" + p) as fh, pagein.safe_open(fh, "np") as g:
        np.testing.assert_array_equal(g.get_tensor("a"), a)


def test_cuda_without_cuda_says_so(st_file):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    p, _ = st_file
    f = pagein.safe_open(p, "pt", device="cuda:0")  # opening works, as in safetensors
    assert f.keys() == ["a", "b"]
    for call in (lambda: f.get_tensor("a"), lambda: f.get_tensors(), lambda: f.get_slice("a")[:2]):
        with pytest.raises(pagein.DeviceError) as e:
            call()
        assert "CUDA is not available" in str(e.value) and isinstance(e.value, RuntimeError)
        assert not isinstance(e.value, pagein.FormatError)


# ---- pagein.torch ----------------------------------------------------------------

def test_storage_helpers():
    base = torch.zeros(10)
    v = base[2:5]
    assert ptt.storage_ptr(v) == ptt.storage_ptr(base) == base.data_ptr()
    assert ptt.storage_size(v) == ptt.storage_size(base) == 40
    assert ptt._end_ptr(v) == v.data_ptr() + 12
    e = torch.zeros(0)
    assert ptt._end_ptr(e) == e.data_ptr()
    meta = torch.zeros((2, 2), device="meta")
    assert ptt.storage_ptr(meta) == 0
    assert ptt._is_complete(meta) is True  # safetensors' answer
    assert ptt._is_complete(base) and not ptt._is_complete(v)
    assert ptt._SIZE[torch.bfloat16] == 2 and ptt._TYPES["BF16"] is torch.bfloat16 and ptt._getdtype("F32") is torch.float32


def test_find_shared_and_remove_duplicates():
    base = torch.zeros(10)
    sd = {"w": base, "v": base[:5], "tail": base[5:], "x": torch.ones(3), "m": torch.zeros(2, device="meta")}
    groups = ptt._find_shared_tensors(sd)
    # every tensor with storage is in one set, singletons included; halves
    # of one buffer that do not overlap are not shared with each other
    assert sorted(sorted(g) for g in groups) == [["tail", "v", "w"], ["x"]]
    assert ptt._filter_shared_not_shared([{"v", "tail"}], sd) == [{"v"}, {"tail"}]
    assert dict(ptt._remove_duplicate_names(sd)) == {"w": ["tail", "v"]}
    tied = {"a": base, "b": base, "c": torch.ones(1)}
    assert dict(ptt._remove_duplicate_names(tied)) == {"a": ["b"]}
    assert dict(ptt._remove_duplicate_names(tied, preferred_names=["b"])) == {"b": ["a"]}
    assert dict(ptt._remove_duplicate_names(tied, discard_names=["a"])) == {"b": ["a"]}
    with pytest.raises(RuntimeError, match="None is covering the entire storage"):
        ptt._remove_duplicate_names({"p": base[:5], "q": base[3:8]})
    assert ptt._duplicate_names(tied) == {"a": ["b"]}  # pagein's earlier helper


def test_torch_save_load_and_refusals(tmp_path):
    t = {"a": torch.arange(4, dtype=torch.float32), "h": torch.ones(2, dtype=torch.bfloat16)}
    raw = ptt.save(t, metadata={"m": "1"})
    back = ptt.load(raw)
    assert torch.equal(back["a"], t["a"]) and back["h"].dtype == torch.bfloat16
    assert set(ptt._view2torch(pagein.deserialize(raw))) == {"a", "h"}
    p = str(tmp_path / "t.safetensors")
    ptt.save_file(t, p)
    assert torch.equal(ptt.load_file(p)["a"], t["a"])
    with pytest.raises(ValueError, match="You are trying to save a sparse tensors"):
        ptt.save_file({"s": torch.zeros(2, 2).to_sparse()}, p)
    with pytest.raises(ValueError, match="non contiguous tensor"):
        ptt.save_file({"n": torch.zeros(3, 4).t()}, p)
    with pytest.raises(RuntimeError, match="Some tensors share memory"):
        ptt.save_file({"a": t["a"], "b": t["a"]}, p)
    with pytest.raises(ValueError, match="Expected a dict"):
        ptt.save_file([t["a"]], p)


def test_save_model_force_contiguous_default_and_load_model_backend(tmp_path):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.arange(12, dtype=torch.float32).reshape(3, 4).t())  # not contiguous

    p = str(tmp_path / "m.safetensors")
    ptt.save_model(M(), p)  # force_contiguous defaults to True, as in safetensors
    m = M()
    with torch.no_grad():
        m.w.zero_()
    missing, unexpected = ptt.load_model(m, p, backend="pread")
    assert list(missing) == [] and list(unexpected) == []
    assert torch.equal(m.w, torch.arange(12, dtype=torch.float32).reshape(3, 4).t())
    with pytest.raises(ValueError, match="force_contiguous=True"):
        ptt.save_model(M(), p, force_contiguous=False)


# ---- pagein.numpy ----------------------------------------------------------------

def test_numpy_module(tmp_path):
    arrs = {"x": np.arange(6, dtype=np.float64).reshape(2, 3), "y": np.zeros(2, np.uint8)}
    raw = pnp.save(arrs, metadata={"k": "v"})
    back = pnp.load(raw)
    np.testing.assert_array_equal(back["x"], arrs["x"])
    assert set(pnp._view2np(pagein.deserialize(raw))) == {"x", "y"}
    assert pnp._getdtype("F64") == np.float64 and pnp._getdtype("U8") == np.uint8
    assert pnp._is_little_endian(np.zeros(1, "<f4")) and not pnp._is_little_endian(np.zeros(1, ">f4"))
    p = str(tmp_path / "n.safetensors")
    pnp.save_file(arrs, p)
    np.testing.assert_array_equal(pnp.load_file(p, backend="pread")["x"], arrs["x"])
    with pytest.raises(ValueError, match="expected np.ndarray"):
        pnp.save_file({"x": [1]}, p)


# ---- a project written for safetensors, with the import swapped --------------------

_SWAP = ("import runpy, sys, pagein, pagein.torch, pagein.numpy\n"
         "sys.modules['safetensors'] = pagein\n"
         "sys.modules['safetensors.torch'] = pagein.torch\n"
         "sys.modules['safetensors.numpy'] = pagein.numpy\n"
         "sys.argv = [sys.argv[1], sys.argv[2]]\n"
         "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def _run_project(work, swap):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([BUILD_PY] + [x for x in [env.get("PYTHONPATH")] if x])
    script = os.path.join(HERE, "dropin_project.py")
    cmd = [sys.executable, "-c", _SWAP, script, work] if swap else [sys.executable, script, work]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def _raised(info, *classes):
    return info is not None and all(info[c] for c in classes)


def test_project_runs_unchanged(tmp_path):
    out = _run_project(str(tmp_path), swap=True)
    assert out["version_is_str"]
    assert out["load_file"] == {"a": ["torch.float32", [10, 5], 1225.0], "b": ["torch.int64", [3], 6.0],
                                "h": ["torch.bfloat16", [2, 2], 4.0]}
    assert out["keys"] == ["a", "b", "h"] and sorted(out["offset_keys"]) == ["a", "b", "h"]
    assert out["metadata"] == {"format": "pt", "who": "project"}
    assert out["get_tensor_a_sum"] == 1225.0 and out["get_tensors"] == ["a", "b", "h"] and out["pread_sum"] == 1225.0
    assert out["slice_shape_dtype"] == [[10, 5], "F32"] and out["slice_rows"][0][0] == 10.0
    assert out["slice_cols"] == 2 and out["slice_empty_list"] == [0, 5]
    assert _raised(out["slice_too_far"], "SafetensorError") and "dimension #0 of size 10" in out["slice_too_far"]["msg"]
    assert _raised(out["slice_bad_index"], "SafetensorError") and _raised(out["slice_negative"], "SafetensorError")
    assert _raised(out["slice_list"], "SafetensorError")
    assert _raised(out["missing_tensor"], "SafetensorError") and _raised(out["closed"], "SafetensorError")
    assert _raised(out["missing_file"], "FileNotFoundError") and out["bad_framework"]
    assert _raised(out["bad_backend"], "SafetensorError")
    assert out["handle_keys"] == ["a", "b", "h"] and out["handle_b"] == [1, 2, 3]
    assert out["numpy_file"] == {"x": ["float64", [2, 3], 15.0], "y": ["uint8", [2, 3], 0.0]}
    assert out["numpy_bytes"] == {"x": 15.0, "y": 0.0} and out["numpy_slice"] == [[3.0, 4.0]]
    assert out["save_load"] == [[0.0, 1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0, 9.0]]
    assert out["spec"] == ["F32", [6], 24] and out["deserialize"] == [["t", "F32", [6], 24]]
    assert out["serialize_file"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert _raised(out["unknown_dtype"], "SafetensorError") and _raised(out["bad_bytes"], "SafetensorError")
    assert out["storage_same"] and out["storage_size"] == 40 and out["end_ptr"] == 20
    assert out["shared_groups"] == [["other"], ["v", "w"]] and out["remove_dups"] == {"w": ["v"]}
    assert out["is_complete"] == [True, False, True]
    assert _raised(out["save_shared"], "RuntimeError") and _raised(out["save_noncontig"], "ValueError")
    assert _raised(out["save_sparse"], "ValueError") and _raised(out["save_not_tensor"], "ValueError")
    assert out["tied_keys"] == ["emb.weight"] and out["tied_meta"] == {"head.weight": "emb.weight"}
    assert out["load_model"] == [[], [], 66.0, True]


# Where pagein deliberately differs (docs/PYTHON.md): its errors are also
# pagein.Error (SafetensorError), and messages add context.
_DIFFERENT = {"missing_file": ("SafetensorError", "msg")}


def test_project_matches_real_safetensors(tmp_path):
    try:
        import safetensors  # noqa: F401
    except ImportError:
        pytest.skip("the safetensors package is not installed (Debian has no python3-safetensors)")
    os.makedirs(tmp_path / "p")
    os.makedirs(tmp_path / "s")
    ours = _run_project(str(tmp_path / "p"), swap=True)
    theirs = _run_project(str(tmp_path / "s"), swap=False)
    for k in theirs:
        a, b = ours[k], theirs[k]
        if isinstance(b, dict) and "msg" in b:
            skip = _DIFFERENT.get(k, ("msg",))
            a = {x: y for x, y in a.items() if x not in skip and x != "msg"}
            b = {x: y for x, y in b.items() if x not in skip and x != "msg"}
        assert a == b, k
