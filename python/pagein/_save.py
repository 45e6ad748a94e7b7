"""Writing safetensors files and the safetensors package's top level:
save_file, TensorSpec, serialize, serialize_file, deserialize, and the
shared-storage check safetensors.torch makes."""

import json as _json
import operator as _operator
import os as _os
import sys as _sys
from collections.abc import Mapping as _Mapping

import numpy as _np

from . import _pagein
from ._pagein import Error, FileError, FormatError
from ._tensor import _NAME, _DTYPE, _SHAPE, _NBYTES, _NP_TO_ST, _TORCH_NAMES, _import_torch


# ---- the safetensors package's top level: TensorSpec, serialize, ... -------

# TensorSpec's dtype names (the framework's spelling, as safetensors.torch
# passes them) -> the header code. The header codes are accepted too.
_SPEC_DTYPES = {
    "bool": "BOOL", "int8": "I8", "uint8": "U8", "int16": "I16", "uint16": "U16",
    "int32": "I32", "uint32": "U32", "int64": "I64", "uint64": "U64",
    "float16": "F16", "float32": "F32", "float64": "F64", "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3", "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2": "F8_E5M2",
    "float8_e5m2fnuz": "F8_E5M2FNUZ", "float8_e8m0fnu": "F8_E8M0", "float4_e2m1fn_x2": "F4",
    "complex64": "C64",
}


class TensorSpec:
    """One tensor for serialize() / serialize_file(): the safetensors API.

    TensorSpec(*, dtype, shape, data_ptr, data_len). dtype: "float32",
    "bfloat16", "float8_e4m3fn", ... (a framework's spelling) or the header
    code ("F32"); an unknown dtype raises SafetensorError here. shape: the
    element counts; for "float4_e2m1fn_x2" (two F4 values a byte) the
    storage shape a framework reports, whose last dimension is doubled.
    data_ptr, data_len: the address and byte length of the contiguous
    data, which must stay valid while serialize reads it. Properties:
    dtype (the header code), shape (list), data_ptr, data_len."""

    __slots__ = ("_dtype", "_shape", "_ptr", "_len")

    def __init__(self, *, dtype, shape, data_ptr, data_len):
        code = _SPEC_DTYPES.get(dtype) if isinstance(dtype, str) else None
        if code is None and isinstance(dtype, str) and dtype in _SPEC_DTYPES.values():
            code = dtype
        if code is None:
            raise Error("Unknown dtype %s. Supported dtypes: %s" % (_json.dumps(dtype) if isinstance(dtype, str)
                                                                   else repr(dtype), ", ".join(_SPEC_DTYPES)))
        shape = [_operator.index(d) for d in shape]
        if any(d < 0 for d in shape):
            raise OverflowError("TensorSpec: negative dimension in shape %r" % (shape,))
        if code == "F4" and shape:
            shape[-1] *= 2
        data_ptr, data_len = _operator.index(data_ptr), _operator.index(data_len)
        if data_ptr < 0 or data_len < 0:
            raise OverflowError("TensorSpec: data_ptr and data_len must be >= 0")
        object.__setattr__(self, "_dtype", code)
        object.__setattr__(self, "_shape", shape)
        object.__setattr__(self, "_ptr", data_ptr)
        object.__setattr__(self, "_len", data_len)

    def __setattr__(self, name, value):
        raise AttributeError("TensorSpec is immutable")

    @property
    def dtype(self):
        """The header code: "F32", "BF16", "F8_E5M2FNUZ", ..."""
        return self._dtype

    @property
    def shape(self):
        return list(self._shape)

    @property
    def data_ptr(self):
        return self._ptr

    @property
    def data_len(self):
        return self._len

    def __repr__(self):
        return "TensorSpec(dtype='%s', shape=%s, data_ptr=%d, data_len=%d)" % (self._dtype, self._shape,
                                                                             self._ptr, self._len)


def _spec_items(tensor_dict):
    """(name, dtype code, shape, buffer) for pagein's writer from a dict of
    TensorSpec (or of the older {"dtype", "shape", "data"} dicts)."""
    import ctypes
    if not isinstance(tensor_dict, _Mapping):
        raise TypeError("tensor_dict must be a dict of str to TensorSpec, not %s" % type(tensor_dict).__name__)
    items = []
    for name, spec in tensor_dict.items():
        if not isinstance(name, str):
            raise TypeError("tensor names must be str, got %r" % (name,))
        if isinstance(spec, TensorSpec):
            buf = (ctypes.c_ubyte * spec.data_len).from_address(spec.data_ptr) if spec.data_len else b""
            items.append((name, spec.dtype, tuple(spec.shape), memoryview(buf).cast("B")))
        elif isinstance(spec, _Mapping) and "data" in spec:
            dt = spec["dtype"]
            code = _SPEC_DTYPES.get(dt, dt)
            items.append((name, code, tuple(_operator.index(d) for d in spec["shape"]), memoryview(spec["data"]).cast("B")))
        else:
            raise TypeError("tensor %r: expected a TensorSpec, got %s" % (name, type(spec).__name__))
    return items


def _check_meta(metadata):
    if metadata is None:
        return None
    if not isinstance(metadata, _Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in metadata.items()):
        raise TypeError("metadata must be a dict of str to str")
    return dict(metadata)


def serialize_file(tensor_dict, filename, metadata=None):
    """Writes {name: TensorSpec} as a safetensors file (the safetensors
    API): the official layout, written atomically (temporary file, fsync,
    rename). Errors raise SafetensorError ("Error while serializing: ...")."""
    items = _spec_items(tensor_dict)
    metadata = _check_meta(metadata)
    try:
        _pagein.write(_os.fsdecode(_os.fspath(filename)), items, metadata, 0)
    except FileError:
        raise
    except Error as e:
        raise type(e)("Error while serializing: %s" % e) from None


def serialize(tensor_dict, metadata=None):
    """The bytes of a safetensors file of {name: TensorSpec} (the
    safetensors API)."""
    import tempfile
    shm = "/dev/shm" if _os.path.isdir("/dev/shm") and _os.access("/dev/shm", _os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="pagein-serialize-", dir=shm) as d:
        path = _os.path.join(d, "t.safetensors")
        serialize_file(tensor_dict, path, metadata)
        with open(path, "rb") as fh:
            return fh.read()


def deserialize(data):
    """The tensors of a safetensors file image (the safetensors API): a
    list, in file order, of (name, {"shape": [..], "dtype": "F32", "data":
    bytearray}). The image is validated as pagein_open_memory validates
    files; errors raise SafetensorError ("Error while deserializing: ...")."""
    try:
        src = _pagein.open_memory(data if isinstance(data, (bytes, bytearray, memoryview)) else bytes(data))
    except Error as e:
        raise type(e)("Error while deserializing: %s" % e) from None
    out = []
    for r in src.tensors():
        buf = bytearray(src.buffer(r[_NAME])) if r[_NBYTES] else bytearray()
        out.append((r[_NAME], {"shape": list(r[_SHAPE]), "dtype": r[_DTYPE], "data": buf}))
    return out


def _as_bytes(name, value):
    """(dtype name, shape, contiguous buffer) for a numpy array or torch tensor."""
    if isinstance(value, _np.ndarray) or _np.isscalar(value):
        a = _np.asarray(value)
        dt = a.dtype
        if dt.byteorder == ">" or (dt.byteorder == "=" and _sys.byteorder == "big"):
            a = a.astype(dt.newbyteorder("<"))
        st = _NP_TO_ST.get(a.dtype.newbyteorder("="))
        if st is None:
            raise FormatError("tensor %r: numpy dtype %s cannot be stored in safetensors" % (name, a.dtype))
        shape = a.shape
        if not a.flags.c_contiguous:
            a = a.copy(order="C")
        return st, shape, a.reshape(-1).view(_np.uint8) if a.size else b""
    mod = type(value).__module__
    if mod.startswith("torch"):
        torch = _import_torch()
        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous()
        st = None
        for k, v in _TORCH_NAMES.items():
            if getattr(torch, v, None) == t.dtype:
                st = k
                break
        if st is None:
            raise FormatError("tensor %r: torch dtype %s cannot be stored in safetensors" % (name, t.dtype))
        shape = tuple(t.shape)
        if t.numel() == 0:
            return st, shape, b""
        flat = t.reshape(-1)
        size = flat.element_size()
        raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(size)
        if flat.dtype.is_complex or raw is None:
            arr = flat.numpy()
        else:
            arr = flat.view(raw).numpy() if flat.dtype != raw else flat.numpy()
        if _sys.byteorder == "big":  # pragma: no cover
            arr = arr.byteswap()
        return st, shape, _np.ascontiguousarray(arr).view(_np.uint8)
    raise TypeError("tensor %r: expected a numpy array or a torch tensor, got %s" % (name, type(value).__name__))


def save_file(tensors, filename, metadata=None, *, align=0):
    """Writes a dict {name: numpy array or torch tensor} as a safetensors
    file with the official writer's layout, atomically (temporary file,
    fsync, rename). metadata: dict of str to str, stored as __metadata__.
    align=4096 pads the header so data starts page-aligned."""
    if not isinstance(tensors, _Mapping):
        raise TypeError("tensors must be a dict of name to array/tensor")
    _refuse_shared(tensors)
    items = []
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise TypeError("tensor names must be str, got %r" % (name,))
        st, shape, buf = _as_bytes(name, value)
        items.append((name, st, tuple(int(d) for d in shape), buf))
    if metadata is not None:
        if not isinstance(metadata, _Mapping):
            raise TypeError("metadata must be a dict of str to str")
        metadata = dict(metadata)
    _pagein.write(_os.fsdecode(_os.fspath(filename)), items, metadata, align)


def _save_bytes(tensors, metadata=None):
    """The bytes save_file would write (safetensors.torch.save /
    safetensors.numpy.save): written with the same writer to a private
    temporary directory (tmpfs when there is one), read back, removed."""
    import tempfile
    shm = "/dev/shm" if _os.path.isdir("/dev/shm") and _os.access("/dev/shm", _os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="pagein-save-", dir=shm) as d:
        path = _os.path.join(d, "t.safetensors")
        save_file(tensors, path, metadata)
        with open(path, "rb") as fh:
            return fh.read()


# ---- tensors sharing storage (as safetensors.torch finds them) ------------

def _storage_key(t):
    """(device, storage address, storage bytes) of a torch tensor, or None
    for tensors without storage (meta, empty)."""
    if t.device.type == "meta":
        return None
    try:
        st = t.untyped_storage()
        ptr, size = st.data_ptr(), st.nbytes()
    except AttributeError:  # torch < 2
        st = t.storage()
        ptr, size = st.data_ptr(), st.size() * t.element_size()
    if not ptr or not size:
        return None
    return (str(t.device), ptr, size)


def _shared_groups(tensors):
    """Sets of names (2 or more) whose torch tensors overlap in memory: those
    on one storage grouped, then split where their byte ranges do not
    overlap (two halves of one buffer are not shared)."""
    by_storage = {}
    for name, t in tensors.items():
        if type(t).__module__.split(".")[0] != "torch" or not hasattr(t, "data_ptr"):
            continue
        key = _storage_key(t)
        if key is not None:
            by_storage.setdefault(key, []).append(name)
    groups = []
    for names in by_storage.values():
        if len(names) < 2:
            continue
        spans = sorted((tensors[n].data_ptr(), tensors[n].data_ptr() + tensors[n].nelement() * tensors[n].element_size(), n)
                       for n in names)
        cur, end = None, None
        for lo, hi, n in spans:
            if cur is not None and lo < end:
                cur.add(n)
                end = max(end, hi)
            else:
                if cur is not None and len(cur) > 1:
                    groups.append(cur)
                cur, end = {n}, hi
        if cur is not None and len(cur) > 1:
            groups.append(cur)
    return groups


def _refuse_shared(tensors):
    failing = _shared_groups(tensors)
    if failing:
        raise RuntimeError(
            "Some tensors share memory, this will lead to duplicate memory on disk and potential differences "
            "when loading them again: %s.\nA potential way to correctly save your model is to use `save_model` "
            "(pagein.torch.save_model)." % sorted(sorted(g) for g in failing))
