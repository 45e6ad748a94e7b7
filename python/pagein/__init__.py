"""pagein: load model weights from safetensors and GGUF files fast and safely.

A drop-in for ``safetensors.safe_open`` that hands out zero-copy, read-only
numpy arrays and torch tensors backed by the library's mapping:

    import pagein
    with pagein.safe_open("model.safetensors", framework="pt") as f:
        for name in f.keys():
            t = f.get_tensor(name)

plus ``load_file``/``save_file`` and ``open_model`` (shards, GGUF split sets,
load strategies, a layer-by-layer prefetching iterator). The whole public API
of the safetensors package is here (``SafetensorError``, ``TensorSpec``,
``serialize``, ``serialize_file``, ``deserialize``, ``safe_open(...,
backend="mmap"|"pread")`` over paths, URLs and file objects); ``pagein.torch``
and ``pagein.numpy`` mirror ``safetensors.torch`` and ``safetensors.numpy``,
so changing the import is enough. ``pagein.fsspec`` is an fsspec filesystem
on pagein's sources and range engine. See docs/PYTHON.md (with the list of
where pagein deliberately differs from safetensors).

Lifetime: every array or tensor keeps the file (its mapping) alive; closing
the file object or the model only drops the Python object's own reference,
and the mapping goes when the last array built on it goes.

Read-only memory and torch: numpy arrays are flagged read-only. torch has no
read-only tensors, so with framework="pt" the file is mapped copy-on-write
(MAP_PRIVATE): tensors are zero-copy and writable, an in-place write
(``t.add_(1)``) copies just the touched pages into this process, and the file
and every other reader never see it. Unwritten pages stay shared in the page
cache. Releasing pages (``evict()``, a prefetch budget) drops such private
writes. ``copy=True`` (or ``.clone()``) gives fully private tensors.
"""

import json as _json
import operator as _operator
import os as _os
import stat as _stat
import sys as _sys
import warnings as _warnings
from collections.abc import Mapping as _Mapping

import numpy as _np

from . import _pagein
from ._pagein import Error, FileError, FileNotFoundError, FormatError, NotFoundError

# The safetensors package's error class: code written for safetensors
# catches pagein's errors with `except safetensors.SafetensorError`.
SafetensorError = Error


def _os_error_str(self):
    """safetensors' wording, "No such file or directory: PATH", for
    pagein.FileNotFoundError (errno and filename stay set, as on any
    OSError; only the "[Errno 2] " prefix and the quotes go)."""
    if self.strerror and self.filename is not None:
        return "%s: %s" % (self.strerror, _os.fsdecode(self.filename) if isinstance(self.filename, bytes)
                           else self.filename)
    return OSError.__str__(self)


FileNotFoundError.__str__ = _os_error_str


def _with_note(exc, note):
    """exc with a hint as a PEP 678 note: shown under the traceback, not
    part of str(exc), whose words stay safetensors' own."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    return exc


class SliceError(Error, IndexError):
    """get_slice(name)[index] with an index outside the tensor (a
    pagein.Error, so also SafetensorError, and an IndexError); the message
    names the axis, worded as safetensors words it."""


_NO_CUDA = -30034  # PAGEIN_E_NO_CUDA


class DeviceError(Error, RuntimeError):
    """A device that cannot be used here (device="cuda:0" without CUDA);
    pagein.Error and RuntimeError (what torch raises for it)."""


__all__ = [
    # (pagein.FileNotFoundError stays out of *: it would shadow the builtin)
    "Error", "FormatError", "FileError", "NotFoundError", "SafetensorError",
    "SliceError", "DeviceError",
    "safe_open", "load_file", "save_file", "open_model", "Model",
    "serialize", "serialize_file", "deserialize", "TensorSpec",
    "dtype_info", "__version__",
]
# pagein.torch and pagein.numpy (the safetensors.torch / safetensors.numpy
# drop-ins) are submodules: `import pagein.torch`.

__version__ = _pagein.version

# Source tuple fields (see python/src/model.c tensor_tuple).
_NAME, _DTYPE, _SHAPE, _OFFSET, _NBYTES, _LAYER, _FILE, _FLAGS, _INDEX = range(9)

# ---------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------

# Safetensors/GGUF dtype name -> numpy dtype. Types numpy lacks (BF16, the F8
# family, F4/F6, ggml block types) come back as raw unsigned integers of the
# same width; the dtype name stays available through get_slice().get_dtype(),
# safe_open.get_dtype() and Model.dtype().
_NP_TYPES = {
    "BOOL": _np.bool_, "U8": _np.uint8, "I8": _np.int8,
    "I16": _np.int16, "U16": _np.uint16, "F16": _np.float16, "BF16": _np.uint16,
    "I32": _np.int32, "U32": _np.uint32, "F32": _np.float32,
    "C64": _np.complex64, "F64": _np.float64, "I64": _np.int64, "U64": _np.uint64,
    "F8_E5M2": _np.uint8, "F8_E4M3": _np.uint8, "F8_E8M0": _np.uint8,
    "F8_E4M3FNUZ": _np.uint8, "F8_E5M2FNUZ": _np.uint8,
}
# numpy dtype -> safetensors dtype name (for save_file).
_NP_TO_ST = {
    _np.dtype(_np.bool_): "BOOL", _np.dtype(_np.uint8): "U8", _np.dtype(_np.int8): "I8",
    _np.dtype(_np.int16): "I16", _np.dtype(_np.uint16): "U16", _np.dtype(_np.float16): "F16",
    _np.dtype(_np.int32): "I32", _np.dtype(_np.uint32): "U32", _np.dtype(_np.float32): "F32",
    _np.dtype(_np.complex64): "C64", _np.dtype(_np.float64): "F64",
    _np.dtype(_np.int64): "I64", _np.dtype(_np.uint64): "U64",
}
# torch dtype attribute names per safetensors dtype; missing attributes
# (older torch) are resolved at use.
_TORCH_NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
    "F16": "float16", "BF16": "bfloat16", "I32": "int32", "U32": "uint32",
    "F32": "float32", "C64": "complex64", "F64": "float64", "I64": "int64",
    "U64": "uint64", "F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3fn",
    "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
}
# Types whose torch equivalent, when this torch lacks it, is replaced by the
# raw bytes (uint8), like numpy. Integer types without a torch dtype raise.
_TORCH_RAW_OK = {"F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"}


def dtype_info(name):
    """(name, bits, block_elems, block_bytes, flags) of a dtype name, or None."""
    return _pagein.dtype_info(name)


def _np_layout(dtype, shape, nbytes):
    """numpy dtype and shape of a tensor's bytes as pagein hands them out."""
    t = _NP_TYPES.get(dtype)
    if t is not None:
        return _np.dtype(t), tuple(shape)
    # Packed types (F4, F6, ggml blocks): uint8, the innermost dimension
    # replaced by its byte length when whole rows are whole bytes.
    info = _pagein.dtype_info(dtype)
    if info is not None and shape:
        _, _, belems, bbytes, _ = info
        inner = shape[-1]
        if belems and inner % belems == 0:
            row = inner // belems * bbytes
            rows = 1
            for d in shape[:-1]:
                rows *= d
            if rows * row == nbytes:
                return _np.dtype(_np.uint8), tuple(shape[:-1]) + (row,)
    return _np.dtype(_np.uint8), (nbytes,)


# numpy (1.x) arrays have at most 32 dimensions; numpy and torch sizes are
# signed 64-bit. Headers the library accepts may exceed both (a zero-size
# tensor may have a dimension of 2**63 or more).
_NP_MAXDIMS = 32
_MAX_DIM = (1 << 63) - 1


def _representable(rec, fw="np"):
    """Raises FormatError naming the tensor when numpy (or torch) cannot
    hold its shape, instead of their own TypeError/ValueError."""
    name, shape = rec[_NAME], rec[_SHAPE]
    if fw == "np" and len(shape) > _NP_MAXDIMS:
        raise FormatError("tensor %r has %d dimensions; numpy arrays have at most %d"
                          % (name, len(shape), _NP_MAXDIMS))
    for i, d in enumerate(shape):
        if d > _MAX_DIM:
            raise FormatError("tensor %r: dimension %d is %d, more than numpy and torch can hold (2**63 - 1)"
                              % (name, i, d))


def _np_array(src, rec, buf=None):
    """Zero-copy read-only numpy array over one tensor (rec: tensor tuple).
    buf: the tensor's View when the caller already has it."""
    _representable(rec)
    dtype, shape, nbytes, flags = rec[_DTYPE], rec[_SHAPE], rec[_NBYTES], rec[_FLAGS]
    npdt, npshape = _np_layout(dtype, shape, nbytes)
    if flags & _pagein.TENSOR_SWAPPED:
        npdt = npdt.newbyteorder()
    if nbytes == 0:
        a = _np.empty(npshape, npdt)
    else:
        if buf is None:
            buf = src.buffer(rec[_NAME])
        if flags & _pagein.TENSOR_NONCONTIGUOUS:
            # A strided view of a PyTorch checkpoint (transpose, slice,
            # expand): the buffer spans the bytes it touches, starting at its
            # first element; numpy walks it with the saved strides, zero copy.
            strides = src.strides(rec[_NAME])
            if strides is None or npshape != tuple(shape):
                raise FormatError("tensor %r: strided %s data is not supported" % (rec[_NAME], dtype))
            base = _np.frombuffer(buf, dtype=npdt)
            a = _np.lib.stride_tricks.as_strided(base, shape=npshape,
                                                  strides=tuple(s * npdt.itemsize for s in strides),
                                                  writeable=False)
            return a
        a = _np.frombuffer(buf, dtype=npdt).reshape(npshape)
    a.flags.writeable = False
    return a


try:
    _byte_bounds = _np.byte_bounds
except AttributeError:  # numpy >= 2
    from numpy.lib.array_utils import byte_bounds as _byte_bounds


class _IndexTypeError(Error, TypeError):
    """An index get_slice does not take (pagein.Error and TypeError)."""


def _basic_index(index):
    """index as a tuple of numpy basic indexes (int, slice of ints, Ellipsis,
    None); TypeError naming anything else (non-empty lists, arrays, boolean
    masks, floats, ...). Slicing copies only the selected bytes, which
    advanced indexing would defeat, so it is refused rather than emulated.
    An empty list selects nothing along the first axis (safetensors' rule)."""
    if isinstance(index, list) and not index:
        index = slice(0, 0)
    items = index if isinstance(index, tuple) else (index,)
    out = []
    for it in items:
        if isinstance(it, list):
            if it:
                raise _with_note(_IndexTypeError("Non empty lists are not implemented"),
                                 "get_slice takes basic indexes: int, slice, Ellipsis, None; index the tensor "
                                 "from get_tensor() for advanced indexing")
            raise _IndexTypeError("Empty lists are only supported as the whole index (s[[]])")
        if it is Ellipsis or it is None:
            out.append(it)
        elif isinstance(it, slice):
            for part in (it.start, it.stop, it.step):
                if part is not None and (isinstance(part, (bool, _np.bool_)) or not hasattr(part, "__index__")):
                    raise TypeError("get_slice: slice bounds must be integers or None, not %s in %r"
                                    % (type(part).__name__, it))
            out.append(it)
        elif isinstance(it, (bool, _np.bool_)):
            raise TypeError("get_slice: boolean index %r is not supported (basic indexing only: "
                            "int, slice, Ellipsis, None)" % (it,))
        elif isinstance(it, _np.ndarray) or not hasattr(it, "__index__"):
            raise TypeError("get_slice: index of type %s is not supported (basic indexing only: "
                            "int, slice, Ellipsis, None); index the tensor from get_tensor() instead"
                            % type(it).__name__)
        else:
            out.append(_operator.index(it))
    if sum(1 for it in out if it is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    return tuple(out)


def _index_str(idx):
    """An index as safetensors prints it in slicing errors: "[2:, 20]"."""
    def one(it):
        if it is Ellipsis:
            return "..."
        if it is None:
            return "None"
        if isinstance(it, slice):
            a = "" if it.start is None else str(_operator.index(it.start))
            b = "" if it.stop is None else str(_operator.index(it.stop))
            return "%s:%s" % (a, b) if it.step is None else "%s:%s:%s" % (a, b, _operator.index(it.step))
        return str(it)
    return "[%s]" % ", ".join(one(it) for it in idx)


def _check_bounds(idx, shape):
    """Raises SliceError naming the axis when an integer or an explicit
    slice bound of idx lies outside its dimension (numpy would raise a bare
    IndexError for integers and clip slices silently); messages as
    safetensors words them."""
    shape = list(shape)
    used = sum(1 for it in idx if it is not None and it is not Ellipsis)
    where = "Error during slicing %s with shape %s: " % (_index_str(idx), shape)
    if used > len(shape):
        raise SliceError(where + "more slicing indexes than dimensions in tensor")
    axis = 0
    for it in idx:
        if it is None:
            continue
        if it is Ellipsis:
            axis += len(shape) - used
            continue
        dim = shape[axis]
        if isinstance(it, slice):
            step = 1 if it.step is None else _operator.index(it.step)
            for name, v in (("start", it.start), ("stop", it.stop)):
                if v is None:
                    continue
                v = _operator.index(v)
                if v < -dim:
                    raise SliceError("Invalid index %d for dimension %d of size %d (slice %s)" % (v, axis, dim, name))
                top = dim - 1 if (name == "start" and step < 0) else dim
                if v > top:
                    asked = v - 1 if name == "stop" else v
                    raise SliceError(where + "index %d out of bounds for tensor dimension #%d of size %d"
                                     % (asked, axis, dim))
        else:
            if it < -dim:
                raise SliceError("Invalid index %d for dimension %d of size %d" % (it, axis, dim))
            if it >= dim:
                raise SliceError(where + "index %d out of bounds for tensor dimension #%d of size %d"
                                 % (it, axis, dim))
        axis += 1


def _select(src, rec, index, data=None):
    """tensor[index] as numpy gives it for a basic index (an array, or a
    numpy scalar when every dimension gets an integer), as a private copy
    that read only the bytes it spans. -> (copy as an array, is_scalar).
    data: the tensor's bytes already read (backend="pread") instead of
    the mapping."""
    idx = _basic_index(index)
    _representable(rec)
    _check_bounds(idx, rec[_SHAPE])
    nbytes = rec[_NBYTES]
    buf = data if data is not None else (src.buffer(rec[_NAME]) if nbytes else None)
    view = _np_array(src, rec, buf)
    # Indexing with a trailing Ellipsis is the same selection but always an
    # array view (numpy gives a scalar copy for all-integer indexes).
    is_scalar = Ellipsis not in idx and None not in idx and sum(1 for i in idx if not isinstance(i, slice)) == view.ndim
    sel = view[idx if Ellipsis in idx else idx + (Ellipsis,)]
    if buf is not None and sel.size and data is None:
        lo, hi = _byte_bounds(sel)
        buf.willneed(lo - buf.address, hi - lo)
    return _np.array(sel, copy=True), is_scalar


_torch = None


def _import_torch():
    global _torch
    if _torch is None:
        try:
            import torch
        except ImportError as e:  # pragma: no cover - depends on the machine
            raise FormatError("framework 'pt' needs torch, which is not installed") from e
        _torch = torch
    return _torch


def _torch_dtype(dtype):
    torch = _import_torch()
    name = _TORCH_NAMES.get(dtype)
    t = getattr(torch, name, None) if name else None
    if t is not None:
        return t, False
    if name is None or dtype in _TORCH_RAW_OK:
        return torch.uint8, True  # raw bytes, like numpy
    raise FormatError("dtype %s needs torch.%s, which torch %s lacks (use framework='np')"
                      % (dtype, name, torch.__version__))


def _frombuffer(torch, buf, tdt):
    """torch.frombuffer over a View of a copy-on-write source: writable, so
    torch has nothing to warn about and in-place writes stay private."""
    return torch.frombuffer(buf, dtype=tdt)


def _torch_tensor(src, rec):
    """Zero-copy torch tensor over one tensor's bytes when possible: native
    byte order, aligned to its element size. Otherwise a private copy."""
    torch = _import_torch()
    dtype, shape, nbytes, flags = rec[_DTYPE], rec[_SHAPE], rec[_NBYTES], rec[_FLAGS]
    _representable(rec, "pt" if not flags & (_pagein.TENSOR_SWAPPED | _pagein.TENSOR_NONCONTIGUOUS) else "np")
    tdt, raw = _torch_dtype(dtype)
    if raw:
        npdt, shape = _np_layout(dtype, shape, nbytes)
        if npdt != _np.uint8:  # e.g. F8 is 1 byte: shape unchanged
            shape = tuple(rec[_SHAPE])
    if nbytes == 0:
        return torch.empty(tuple(shape), dtype=tdt)
    buf = src.buffer(rec[_NAME])
    itemsize = torch.empty((), dtype=tdt).element_size()
    if flags & _pagein.TENSOR_NONCONTIGUOUS and not flags & _pagein.TENSOR_SWAPPED \
            and not buf.address % itemsize:
        strides = src.strides(rec[_NAME])
        if strides is None or raw:
            raise FormatError("tensor %r: strided %s data is not supported" % (rec[_NAME], dtype))
        return _frombuffer(torch, buf, tdt).as_strided(tuple(shape), tuple(strides))
    if flags & _pagein.TENSOR_SWAPPED or buf.address % itemsize:
        a = _np.array(_np_array(src, rec), copy=True)
        if flags & _pagein.TENSOR_SWAPPED:
            a = a.astype(a.dtype.newbyteorder("="))
        return _np_to_torch_owned(a, tdt).reshape(tuple(shape))
    return _frombuffer(torch, buf, tdt).reshape(tuple(shape))


def _np_to_torch_owned(a, tdt):
    """torch tensor sharing a writable numpy array (reinterpreting its bytes as tdt)."""
    torch = _import_torch()
    if not a.flags.c_contiguous:
        a = a.copy(order="C")
    if a.dtype.kind == "u" and a.itemsize > 1:  # torch.from_numpy lacks uint16/32/64
        a = a.view("i%d" % a.itemsize)
    if a.ndim == 0:
        a = a.reshape(1)
        t = torch.from_numpy(a)
        return (t.view(tdt) if t.dtype != tdt else t).reshape(())
    t = torch.from_numpy(a)
    return t.view(tdt) if t.dtype != tdt else t


def _framework(framework):
    if framework in ("np", "numpy"):
        return "np"
    if framework in ("pt", "torch", "pytorch"):
        return "pt"
    raise FormatError("framework %s is invalid: pagein supports 'np'/'numpy' and 'pt'/'torch'/'pytorch'"
                      % (framework,))


# ---------------------------------------------------------------------------
# devices
# ---------------------------------------------------------------------------

def _cuda_current():
    """torch's current CUDA device when torch has set one up, else 0 (what
    "cuda" without an index means)."""
    torch = _sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return int(torch.cuda.current_device())
    except Exception:  # pragma: no cover - depends on the machine
        pass
    return 0


def _parse_device(device):
    """The one place a device argument is parsed. Accepts what safetensors
    accepts: "cpu", "cuda", "cuda:N", an int N (CUDA device N), a
    torch.device, or None (cpu). Returns ("cpu", None) or ("cuda", N)."""
    if device is None:
        return "cpu", None
    if isinstance(device, (bool, _np.bool_)):
        raise TypeError("device must be a str, an int or a torch.device, not bool")
    if isinstance(device, str):
        kind, sep, rest = device.partition(":")
        index = None
        if sep:
            if not (rest.isascii() and rest.isdigit()):
                raise FormatError("invalid device %r (use 'cpu', 'cuda', 'cuda:N', N or a torch.device)"
                                  % (device,))
            index = int(rest)
    elif type(device).__module__.split(".")[0] == "torch" and hasattr(device, "type") \
            and hasattr(device, "index"):
        kind, index = device.type, device.index
    else:
        try:
            index = _operator.index(device)
        except TypeError:
            raise TypeError("device must be a str, an int or a torch.device, not %s"
                            % type(device).__name__) from None
        if index < 0:
            raise ValueError("device index must be >= 0, not %d" % index)
        kind = "cuda"
    if kind == "cpu":
        return "cpu", None
    if kind == "cuda":
        return "cuda", _cuda_current() if index is None else index
    raise FormatError("device %s is invalid for pagein (use 'cpu', 'cuda', 'cuda:N', N or a torch.device)"
                      % (device,))


def _device_str(dev):
    return "cpu" if dev[0] == "cpu" else "cuda:%d" % dev[1]


def _gpu_loader(dev, fw):
    """pagein._gpu for a CUDA device (imported on first use), or None for
    the CPU. Raises pagein.Error when it cannot be used."""
    if dev[0] == "cpu":
        return None
    if fw == "np":
        raise FormatError("Device %s is not supported for framework numpy (numpy arrays live on the CPU; "
                          "use framework='pt' for CUDA)" % _device_str(dev))
    try:
        from . import _gpu
    except Exception as e:
        raise Error("CUDA device %r requested but pagein's GPU loader (pagein._gpu) cannot be used: %s: %s"
                    % (_device_str(dev), type(e).__name__, e)) from e
    return _gpu


def _convert(src, rec, fw, copy):
    """One tensor on the CPU: zero-copy unless copy."""
    if fw == "np":
        a = _np_array(src, rec)
        return _np.array(a, copy=True) if copy else a
    t = _torch_tensor(src, rec)
    return t.clone() if copy else t


# ---------------------------------------------------------------------------
# dtype conversion (get_tensor(name, dtype=...))
# ---------------------------------------------------------------------------

_OUT_NAMES = {"float32": "F32", "f32": "F32", "float": "F32", "float16": "F16", "f16": "F16", "half": "F16",
              "bfloat16": "BF16", "bf16": "BF16"}
_OUT_NP = {"F32": _np.float32, "F16": _np.float16, "BF16": _np.uint16}
_OUT_TORCH = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def _out_dtype(dtype):
    """"F32", "F16" or "BF16" for dtype="float32"|"float16"|"bfloat16" (also
    numpy and torch dtype objects of those types)."""
    key = dtype
    if not isinstance(dtype, str):
        key = str(dtype)
        if key.startswith("torch."):
            key = key[6:]
        else:
            try:
                key = _np.dtype(dtype).name
            except TypeError:
                pass
    out = _OUT_NAMES.get(key.lower()) if isinstance(key, str) else None
    if out is None:
        raise ValueError("dtype must be 'float32', 'float16' or 'bfloat16', not %r" % (dtype,))
    return out


def _f32_to_bf16(a):
    """float32 array -> bfloat16 bits (uint16), rounding to nearest even;
    NaN stays quiet NaN (ggml's rule)."""
    u = a.astype(_np.float32, copy=False).view(_np.uint32).astype(_np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(_np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r[nan] = ((u[nan] >> 16) | 64).astype(_np.uint16)
    return r


# Float types converted here, not by pagein_tensor_dequantize, when the
# tensor is a strided torch view (its bytes are not row-major).
_FLOAT_SRC = {"F32", "F16", "F64", "BF16"}


def _float_convert(src, rec, out):
    a = _np_array(src, rec)
    if rec[_DTYPE] == "BF16":
        a = (a.astype(_np.uint32) << 16).view(_np.float32)
    # Through float32 first, as the library does (F64 rounds to float, then
    # F16/BF16 round the float to nearest even).
    a = _np.asarray(a, _np.float32)
    if out == "BF16":
        return _f32_to_bf16(a)
    return _np.array(a, dtype=_OUT_NP[out])


def _dequantized(src, rec, out, fw):
    """Tensor rec's values as out ("F32", "F16", "BF16"): dequantized from
    GGUF block types or converted from float types, a private array or
    tensor of the logical shape."""
    _representable(rec)
    name, dt, shape = rec[_NAME], rec[_DTYPE], tuple(rec[_SHAPE])
    strided = rec[_FLAGS] & _pagein.TENSOR_NONCONTIGUOUS  # torch views: not row-major bytes
    if strided and dt in _FLOAT_SRC:
        a = _float_convert(src, rec, out).reshape(shape)
    else:
        a = _np.frombuffer(src.dequantize(name, out), _OUT_NP[out]).reshape(shape)
    if fw == "np":
        return a
    torch = _import_torch()
    return _np_to_torch_owned(_np.ascontiguousarray(a), getattr(torch, _OUT_TORCH[out])).reshape(shape)


# ---------------------------------------------------------------------------
# what safe_open and Model share
# ---------------------------------------------------------------------------

def _check_openable(path):
    """Refuses what is neither a regular file, a block device nor a
    directory before anything opens it: opening a FIFO for reading blocks
    until a writer comes, and a socket or character device is no model."""
    try:
        st = _os.stat(path)
    except OSError:
        return  # the library reports missing files with its own message
    m = st.st_mode
    if _stat.S_ISREG(m) or _stat.S_ISBLK(m) or _stat.S_ISDIR(m):
        return
    kind = ("a FIFO" if _stat.S_ISFIFO(m) else "a socket" if _stat.S_ISSOCK(m)
            else "a character device" if _stat.S_ISCHR(m) else "not a regular file")
    raise FormatError("%s: is %s, not a regular file; pagein reads regular files and block devices" % (path, kind))


def _is_url(path):
    """True for a URL one of this build's remote sources reads (docs/REMOTE.md):
    the library's rule (pagein_is_url, its source table), not a list here."""
    return _pagein.is_url(path)


# fsspec's protocol names whose scheme differs in pagein's URLs (fsspec
# conventions; pagein.fsspec uses them too)
_FSSPEC_ALIASES = {"s3a": "s3", "gcs": "gs"}


def _fsspec_url(url):
    """An fsspec URL with the scheme pagein reads: s3a:// -> s3://, gcs:// -> gs://."""
    scheme, sep, rest = url.partition("://")
    alias = _FSSPEC_ALIASES.get(scheme.lower()) if sep else None
    return "%s://%s" % (alias, rest) if alias else url


def _json_str(v):
    return v if isinstance(v, str) else _json.dumps(v, ensure_ascii=False)


class _Opened:
    """Base of safe_open and Model: one library Source, its tensor table,
    lifetime, typed metadata, tensor access (CPU or CUDA) and the page-cache
    calls. Subclasses open the Source and set _src, _recs, _by_name."""

    _what = "file"

    def _setup(self, framework, device, copy):
        self._src = None
        self._fw = _framework(framework)
        self._dev = _parse_device(device)
        self._gpu = _gpu_loader(self._dev, self._fw)
        self._device = _device_str(self._dev)
        self._copy = bool(copy)
        self._meta = None

    def _table(self, src):
        self._src = src
        self._recs = src.tensors()
        self._by_name = {r[_NAME]: r for r in self._recs}

    # -- lifetime --
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        """Drops this object's reference to the file or model. Arrays and
        tensors already handed out stay valid; the files are unmapped (and
        a pager stopped) when the last of them goes."""
        self._src = None

    def _source(self):
        if self._src is None:
            raise Error("File is closed (the %s was closed)" % self._what)
        return self._src

    def _rec(self, name):
        self._source()
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            raise NotFoundError("File does not contain tensor %s (no tensor named %r in %s)"
                                % (name, name, self._src.path)) from None

    # -- tensors --
    def _device_failed(self, exc):
        """Called when loading onto a CUDA device failed with exc: raises
        DeviceError saying CUDA is not available when that is the cause (no
        driver, no such device, torch without CUDA), as safetensors fails
        at the first tensor; returns otherwise (the caller re-raises)."""
        err = None
        try:
            _pagein.gpu_probe(self._dev[1])
        except Error as e:
            err = DeviceError("CUDA is not available: device %r was requested, but %s" % (self._device, e))
            src = e
        torch = _sys.modules.get("torch")
        if err is None and torch is not None and not torch.cuda.is_available():
            err = DeviceError("CUDA is not available: device %r was requested, but torch %s has no CUDA "
                              "support here (torch.cuda.is_available() is False)" % (self._device, torch.__version__))
            src = exc
        if err is None:
            return
        # the library's code and detail, as on every pagein.Error (PAGEIN_E_NO_CUDA otherwise)
        err.code = getattr(src, "code", _NO_CUDA)
        err.error = getattr(src, "error", "no CUDA")
        err.detail = getattr(src, "detail", str(err))
        raise err from exc

    def _to_device(self, t):
        """A CPU tensor moved to this object's CUDA device."""
        try:
            return t.to(self._device)
        except Exception as e:
            self._device_failed(e)
            raise

    def _tensors(self, recs):
        """{name: tensor} for tensor records on this object's device."""
        src = self._source()
        if self._gpu is not None:
            try:
                return self._gpu.load(src, [r[_NAME] for r in recs], self._dev[1], self._fw)
            except Exception as e:
                self._device_failed(e)
                raise
        pread = getattr(self, "_pread", None)
        if pread is not None:
            return self._pread_tensors(src, recs)
        return {r[_NAME]: _convert(src, r, self._fw, self._copy) for r in recs}

    def _pread_tensors(self, src, recs):
        """backend="pread": the tensors' bytes read through the source (the
        range engine: one run for all of them, many in flight) into private
        memory; the mapping is never touched for data. Byte-swapped and
        strided tensors (GGUF big-endian, PyTorch views) go the mapped way."""
        plain = [r for r in recs if r[_NBYTES] and not r[_FLAGS] & (_pagein.TENSOR_SWAPPED |
                                                                    _pagein.TENSOR_NONCONTIGUOUS)]
        data = {}
        if plain:
            parts, _ = _pagein.source_read_ranges([self._pread], [0] * len(plain), [r[_OFFSET] for r in plain],
                                                  [r[_NBYTES] for r in plain], writable=True)
            data = {r[_NAME]: b for r, b in zip(plain, parts)}
        out = {}
        for r in recs:
            b = data.get(r[_NAME])
            if b is None:
                out[r[_NAME]] = _convert(src, r, self._fw, self._copy)
            elif self._fw == "np":
                npdt, npshape = _np_layout(r[_DTYPE], r[_SHAPE], r[_NBYTES])
                _representable(r)
                out[r[_NAME]] = _np.frombuffer(b, dtype=npdt).reshape(npshape)
            else:
                _representable(r, "pt")
                tdt, raw = _torch_dtype(r[_DTYPE])
                shape = tuple(r[_SHAPE])
                if raw:  # as _torch_tensor: packed types keep numpy's byte layout
                    npdt, npshape = _np_layout(r[_DTYPE], r[_SHAPE], r[_NBYTES])
                    if npdt == _np.uint8:
                        shape = tuple(npshape)
                out[r[_NAME]] = _frombuffer(_import_torch(), b, tdt).reshape(shape)
        return out

    def get_tensor(self, name, dtype=None):
        """The tensor, zero-copy on the CPU unless copy=True. dtype=
        "float32", "float16" or "bfloat16" gives its values converted
        (GGUF block types dequantized as ggml does) in a private array."""
        rec = self._rec(name)
        if dtype is not None:
            t = _dequantized(self._src, rec, _out_dtype(dtype), self._fw)
            return self._to_device(t) if self._gpu is not None else t
        return self._tensors([rec])[name]

    def _typed_items(self):
        if self._meta is None:
            self._meta = self._source().metadata()
        return self._meta

    def metadata_typed(self):
        """Metadata with native types: GGUF values as int, float, bool, str
        and lists; safetensors __metadata__ as str. Keys in file order (for
        models, shard order; the first file holding a key wins). {} when
        there is none."""
        out = {}
        for k, v in self._typed_items():
            out.setdefault(k, v)
        return out

    def tensor_info(self, name):
        """dict: dtype, shape, offset (absolute), nbytes, layer, file."""
        r = self._rec(name)
        return {"dtype": r[_DTYPE], "shape": list(r[_SHAPE]), "offset": r[_OFFSET],
                "nbytes": r[_NBYTES], "layer": r[_LAYER], "file": r[_FILE]}

    def __contains__(self, name):
        return name in self._by_name

    def __len__(self):
        return len(self._recs)


# ---------------------------------------------------------------------------
# safe_open
# ---------------------------------------------------------------------------

class _Slice:
    """What safe_open.get_slice() returns: shape and dtype without reading
    data, and indexing that copies only the selected elements.

    For GGUF quantized (ggml block) tensors, whose bytes come out as uint8
    with the innermost dimension replaced by its bytes per row, the shape is
    that byte layout, which is what get_tensor() returns and indexing
    selects from (a Q8_0 [256, 256] slices as [256, 272]);
    safe_open.get_shape(name) and tensor_info() keep the element shape
    ([256, 256]) and get_dtype() the file's dtype ("Q8_0"). Every other
    dtype, safetensors' sub-byte F4/F6 included, reports the header's shape,
    as safetensors does."""

    def __init__(self, owner, rec):
        self._owner = owner
        self._rec = rec

    def _shape(self):
        rec = self._rec
        info = None if rec[_DTYPE] in _NP_TYPES else _pagein.dtype_info(rec[_DTYPE])
        if info is None or info[1] != 0:  # element types (safetensors' F4/F6 too, as safetensors says)
            return tuple(rec[_SHAPE])
        _representable(rec)  # ggml blocks (no bits per element): the bytes indexing selects
        return _np_layout(rec[_DTYPE], rec[_SHAPE], rec[_NBYTES])[1]

    def get_shape(self):
        return list(self._shape())

    def get_dtype(self):
        return self._rec[_DTYPE]

    @property
    def shape(self):
        return self._shape()

    @property
    def dtype(self):
        return self._rec[_DTYPE]

    def __len__(self):
        shape = self._shape()
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        _representable(self._rec)
        return shape[0]

    def __getitem__(self, index):
        """numpy's basic indexing (ints, negative ints, slices with any
        step, Ellipsis, None); all-integer indexes give a numpy scalar (np)
        or a 0-d tensor (pt), as numpy and torch do. Other indexes raise
        TypeError."""
        owner = self._owner
        src = owner._source()
        rec = self._rec
        data = None
        if getattr(owner, "_pread", None) is not None and rec[_NBYTES] and \
                not rec[_FLAGS] & (_pagein.TENSOR_SWAPPED | _pagein.TENSOR_NONCONTIGUOUS):
            _check_bounds(_basic_index(index), rec[_SHAPE])  # before reading anything
            data = _pagein.source_read_ranges([owner._pread], [0], [rec[_OFFSET]], [rec[_NBYTES]])[0][0]
        # Index the zero-copy view, ask the kernel for exactly the pages the
        # selection spans, then copy it: a row range costs its own bytes, not
        # the tensor's or the mapping's read-around window.
        part, is_scalar = _select(src, rec, index, data)
        if owner._fw == "np":
            return part[()] if is_scalar else part
        tdt, raw = _torch_dtype(rec[_DTYPE])
        if part.dtype.byteorder not in ("=", "|"):
            part = part.astype(part.dtype.newbyteorder("="))
        t = _np_to_torch_owned(part, tdt)
        if owner._gpu is not None:
            t = owner._to_device(t)
        return t

    def __repr__(self):
        return "<pagein slice %s %s %s>" % (self._rec[_NAME], self._rec[_DTYPE], list(self._rec[_SHAPE]))


_BACKENDS = ("mmap", "pread")


def _file_object_target(f):
    """What a Python file object opened with safe_open stands for: ("path",
    local path) when it is a local file (it has fileno() and a name that
    exists, as safetensors requires), ("url", URL) for an fsspec handle on
    a store pagein reads itself (pagein, http(s), s3, gs, hf), else
    ("bytes", its content) read from the start."""
    fs = getattr(f, "fs", None)
    if fs is not None and hasattr(f, "path"):
        protos = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
        if "pagein" in protos or isinstance(f.path, str) and _is_url(f.path):
            return "url", f.path
        for p in protos:
            if p in ("file", "local"):
                return "path", f.path
            if isinstance(p, str) and _is_url(_fsspec_url(p + "://")):  # a scheme pagein reads
                url = _fsspec_url(fs.unstrip_protocol(f.path))
                if _is_url(url):
                    return "url", url
    name = getattr(f, "name", None)
    if hasattr(f, "fileno") and isinstance(name, (str, bytes)) and _os.path.isfile(name):
        try:
            f.fileno()
            return "path", _os.fsdecode(name)
        except (OSError, ValueError, AttributeError):
            pass
    if hasattr(f, "seek"):
        f.seek(0)
    data = f.read()
    if isinstance(data, str):
        raise TypeError("safe_open: the file object is open in text mode; open it with 'rb'")
    return "bytes", data


class safe_open(_Opened):
    """Opens a safetensors (or GGUF, or PyTorch) file; the safetensors API.

    safe_open(filename, framework="np"|"numpy"|"pt"|"torch", device="cpu",
              *, backend="mmap"|"pread", copy=False, lenient=False)

    filename: a path, a URL (http(s)://, s3://, gs://, hf://), or a Python
    file object (a local file is opened by its name; an fsspec handle on a
    remote store is read by pagein's own sources; anything else is read
    into memory). keys(), offset_keys(), metadata(), get_tensor(name),
    get_tensors(), get_slice(name); usable as a context manager. Tensors
    are zero-copy and read-only unless copy=True. backend="pread" reads
    tensor bytes through the source (the range engine) into private memory
    instead of handing out views of the mapping. device: "cpu", "cuda",
    "cuda:N", N or a torch.device (CUDA devices load through pagein._gpu).
    lenient=True accepts trailing bytes after the data section. Errors
    raise pagein.Error subclasses (pagein.SafetensorError is pagein.Error)
    carrying the library's message; a missing file FileNotFoundError.
    """

    def __init__(self, filename, framework="np", device="cpu", *, backend="mmap", copy=False, lenient=False):
        if not isinstance(backend, str) or backend not in _BACKENDS:
            raise Error('backend %s is invalid (expected one of: "mmap", "pread")'
                        % (_json.dumps(backend) if isinstance(backend, str) else repr(backend)))
        self._setup(framework, device, copy)
        self._pread = None
        self._backend = backend
        if not isinstance(filename, (str, bytes)) and not hasattr(filename, "__fspath__") \
                and hasattr(filename, "read"):
            kind, what = _file_object_target(filename)
            if kind == "bytes":
                self._table(_pagein.open_memory(bytearray(what), name=str(getattr(filename, "name", "<file object>")),
                                                writable=True))
                return
            filename = what
        path = _os.fsdecode(_os.fspath(filename))
        if _is_url(path):
            # a remote object cannot be mapped: its bytes are read into
            # memory, in parallel ranges (docs/REMOTE.md); with pread only
            # the headers are read and each tensor when asked for
            self._table(_pagein.open_model(path, strategy="lazy" if backend == "pread" else "read",
                                           lenient=lenient, writable=self._fw == "pt"))
            return
        if not _os.path.lexists(path):
            # safetensors' exception and words ("No such file or directory:
            # PATH"), which callers catch and search for; errno and filename
            # set as for any OSError
            e = FileNotFoundError(2, "No such file or directory", path)
            e.code, e.error, e.detail = -2, _pagein.strerror(-2), "%s: No such file or directory" % path
            raise e
        _check_openable(path)
        # torch has no read-only tensors: map copy-on-write for it, so an
        # in-place write lands in a private page instead of faulting.
        self._table(_pagein.open_file(path, lenient=lenient, writable=self._fw == "pt"))
        if backend == "pread":
            self._pread = _pagein.source_open(path)

    def close(self):
        self._pread = None
        super().close()

    @classmethod
    def _from_bytes(cls, data, framework, device="cpu"):
        """A safe_open over a file image in memory (load(bytes)); the
        tensors are views of a private, writable copy of data."""
        self = cls.__new__(cls)
        self._setup(framework, device, False)
        self._table(_pagein.open_memory(bytearray(data), writable=True))
        return self

    # -- safetensors API --
    def keys(self):
        """Tensor names, sorted (as safetensors does)."""
        self._source()
        return sorted(self._by_name)

    def offset_keys(self):
        """Tensor names in file (offset) order."""
        self._source()
        return [r[_NAME] for r in self._recs]

    def metadata(self):
        """dict of str to str, as safetensors gives it: the __metadata__
        strings; for GGUF every key, non-string values JSON-encoded
        (metadata_typed() gives the native values). None when the file has
        no metadata (as safetensors)."""
        meta = {k: _json_str(v) for k, v in self.metadata_typed().items()}
        return meta or None

    def get_tensors(self):
        """Every tensor as a dict {name: tensor}, in file (offset) order;
        with backend="pread" one range-engine run reads them all."""
        self._source()
        return self._tensors(self._recs)

    def get_slice(self, name):
        """A slice object: get_shape(), get_dtype(), and [index] reading
        only the selected elements (see _Slice)."""
        return _Slice(self, self._rec(name))

    # -- extras --
    def get_dtype(self, name):
        """The file's dtype name of a tensor ("BF16", "F8_E4M3", "Q8_0", ...)."""
        return self._rec(name)[_DTYPE]

    def get_shape(self, name):
        return list(self._rec(name)[_SHAPE])

    def info(self):
        """dict describing the file: path, format, file_size, data_start, ..."""
        return self._source().files()[0]

    def resident(self, names=None):
        """Page-cache residency of the named tensors (a name or a list;
        default: the whole data section): dict with bytes, resident_bytes,
        pages, resident_pages and fraction. A snapshot (mincore)."""
        return _residency(self._source().residency(_names(names)))

    def evict(self, names=None):
        """Drops the named tensors (default: all data) from the page cache
        (advice: pages mapped elsewhere stay; check with resident())."""
        self._source().evict(_names(names))

    def __iter__(self):
        return iter(self.keys())

    def __repr__(self):
        state = "closed" if self._src is None else "%d tensors" % len(self._recs)
        return "<pagein.safe_open %s (%s)>" % (getattr(self._src, "path", "?"), state)


def load_file(filename, device="cpu", *, framework="pt", copy=False, backend="mmap"):
    """Loads every tensor of a safetensors (or GGUF) file into a dict
    {name: tensor}, like safetensors.torch.load_file (framework="np" gives
    numpy arrays, like safetensors.numpy.load_file). Zero-copy and read-only
    unless copy=True; backend="pread" reads them into private memory. On a
    CUDA device every tensor goes through one pagein._gpu.load call."""
    with safe_open(filename, framework=framework, device=device, copy=copy, backend=backend) as f:
        return f.get_tensors()


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


class _safe_open_handle(safe_open):
    """safetensors' _safe_open_handle(f, framework, device="cpu", *,
    backend="mmap"): safe_open over an open file object (a local file, an
    fsspec handle). pagein.safe_open takes file objects directly too."""

    def __init__(self, f, framework, device="cpu", *, backend="mmap"):
        if not hasattr(f, "read"):
            raise TypeError("_safe_open_handle: expected an open file object, got %s" % type(f).__name__)
        super().__init__(f, framework, device, backend=backend)


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


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

def _residency(t):
    b, rb, p, rp = t
    return {"bytes": b, "resident_bytes": rb, "pages": p, "resident_pages": rp,
            "fraction": (rb / b) if b else 1.0}


def _names(names):
    if names is None:
        return None
    return [names] if isinstance(names, str) else list(names)


def _load_quietly(src, layer):
    # Lookahead is advice: a failure shows up in layer_wait on the caller.
    try:
        src.load_layers(layer, layer)
    except Exception:
        pass


class _TensorMap(_Mapping):
    """Model.tensors: a read-only mapping name -> tensor, in model order.
    Each lookup builds a fresh zero-copy view (cheap); nothing is cached, so
    dropping the arrays releases the memory."""

    def __init__(self, model):
        self._model = model

    def __getitem__(self, name):
        return self._model.get_tensor(name)

    def __iter__(self):
        return iter(self._model._names)

    def __len__(self):
        return len(self._model._names)

    def __contains__(self, name):
        return name in self._model._by_name

    def __repr__(self):
        return "<pagein tensors of %s: %d>" % (self._model.path, len(self))


class Model(_Opened):
    """A model over one file, a sharded safetensors checkpoint or a GGUF
    split set (use open_model())."""

    _what = "model"

    def __init__(self, path, strategy="auto", *, framework="np", device="cpu", copy=False,
                 prefetch=2, budget=0, threads=0, hints=0, lenient=False):
        self._setup(framework, device, copy)
        self._prefetch = prefetch
        self.path = _os.fsdecode(_os.fspath(path))
        _check_openable(self.path)
        self._table(_pagein.open_model(self.path, strategy=strategy, threads=threads,
                                       prefetch=prefetch, budget=budget or 0, hints=hints,
                                       lenient=lenient, writable=self._fw == "pt"))
        self._names = [r[_NAME] for r in self._recs]
        # A remote model prefetched under a budget (given, or chosen by
        # auto for a model larger than memory) reads layers into memory
        # that layer_done gives back, where it reads as zeros until read
        # again: arrays handed out are copies, so none of them changes
        # under the caller (include/pagein.h, pagein_model_tensor_data).
        if _is_url(self.path) and self.strategy == "prefetch" and (budget or strategy == "auto"):
            self._copy = True

    # -- tables --
    @property
    def tensors(self):
        return _TensorMap(self)

    @property
    def metadata(self):
        """Metadata as Python values (GGUF: int, float, bool, str, lists;
        safetensors: the __metadata__ strings). Shards' entries are merged,
        the first file winning. Same as metadata_typed()."""
        return self.metadata_typed()

    @property
    def strategy(self):
        return self._source().strategy()[0]

    @property
    def strategy_reason(self):
        """Why auto chose the strategy in effect."""
        return self._source().strategy()[1]

    @property
    def files(self):
        """Info dicts of the model's files, in shard order."""
        return self._source().files()

    @property
    def layer_count(self):
        return self._source().layer_count()

    def keys(self):
        return list(self._names)

    def dtype(self, name):
        """The file's dtype name of a tensor ("BF16", "Q8_0", ...)."""
        return self._rec(name)[_DTYPE]

    def shape(self, name):
        return list(self._rec(name)[_SHAPE])

    def wait(self, name):
        """Returns once tensor `name` is resident and gives it, while the
        prefetch pager may still be reading the rest of its layer (compute
        on a layer's first tensors while its last ones arrive;
        pagein_tensor_wait). With lazy it pages the tensor in now; with
        populate and read it returns at once."""
        self._rec(name)
        self._source().tensor_wait(name)
        return self.get_tensor(name)

    def load(self, names=None):
        """Makes the given tensors (default: all) resident now, in parallel."""
        self._source().load(_names(names))

    def warm(self, names=None):
        """Makes the given tensors (a name or a list; default: all) resident
        now, in parallel chunks, whatever the strategy (same as load())."""
        self._source().load(_names(names))

    def resident(self, names=None, layer=None):
        """Page-cache residency of the named tensors, of one layer (-1
        leading globals, 0..L-1, L trailing globals) or of every tensor: a
        dict with bytes, resident_bytes, pages, resident_pages, fraction.
        For the "read" strategy this is the page cache behind the copy."""
        return _residency(self._source().residency(_names(names), layer))

    def evict(self, names=None):
        """Drops the named tensors (default: all) from the page cache: this
        model's mapping stops pinning them and the kernel is told to drop
        them. Views stay valid (the data is read again on access)."""
        self._source().evict(_names(names))

    def lock(self, names=None):
        """mlock()s the named tensors (default: all) until unlock() or
        close; pagein.Error (PAGEIN_E_MEMLOCK) says how to raise the limit."""
        self._source().lock(_names(names))

    def unlock(self, names=None):
        self._source().unlock(_names(names))

    def layers(self, prefetch=None):
        """Iterates (layer, {name: tensor}) over the layers in order: the
        leading globals (layer -1), layers 0..L-1, then the trailing globals
        (layer L). Each layer is yielded once it is resident; asking for the
        next one marks the previous one done, so the pager moves on and,
        with a budget, releases it.

        prefetch: layers made resident ahead of the one being consumed. With
        the "prefetch" strategy the library's background pager does this,
        with the lookahead given to open_model(prefetch=...) (default 2);
        passing another value here raises ValueError. With the other
        strategies a helper thread loads the next `prefetch` layers
        (pagein_model_load_layers, GIL released) while the caller works;
        0 turns that off."""
        src = self._source()
        pager = src.strategy()[0] == "prefetch"
        if prefetch is None:
            prefetch = self._prefetch
        prefetch = _operator.index(prefetch)
        if prefetch < 0:
            raise ValueError("prefetch must be >= 0, not %d" % prefetch)
        if pager and prefetch != self._prefetch:
            raise ValueError("the prefetch strategy's lookahead is set at open: "
                             "open_model(..., prefetch=%d)" % prefetch)
        n = src.layer_count()
        order = [l for l in range(-1, n + 1) if src.layer_tensors(l)]
        ahead = None
        if not pager and prefetch and len(order) > 1:
            import concurrent.futures
            ahead = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="pagein-ahead")
        try:
            for i, layer in enumerate(order):
                if ahead is not None:
                    # keep layers i+1 .. i+prefetch on their way
                    for j in (range(1, prefetch + 1) if i == 0 else (i + prefetch,)):
                        if j < len(order):
                            ahead.submit(_load_quietly, src, order[j])
                src.layer_wait(layer)
                try:
                    yield layer, self._tensors(src.layer_tensors(layer))
                finally:
                    src.layer_done(layer)
        finally:
            if ahead is not None:
                ahead.shutdown(wait=True, cancel_futures=True)

    def __repr__(self):
        state = "closed" if self._src is None else "%d tensors, %s" % (len(self._names), self.strategy)
        return "<pagein.Model %s (%s)>" % (self.path, state)


def open_model(path, strategy="auto", **kw):
    """Opens a model: a safetensors or GGUF file, a sharded checkpoint (its
    index.json or the directory), a GGUF split set or a directory.

    strategy: "auto", "lazy", "populate", "prefetch" or "read". "lazy" over
    a URL opens the headers only: get_tensor reads that tensor through the
    source into a private copy, and wait()/layers() raise (nothing resident).
    Keywords: framework ("np" default, or "pt"), device, copy, prefetch
    (layers kept ahead by the pager, default 2), budget (bytes resident at
    most under prefetch; 0 = unlimited), threads, hints, lenient.
    """
    return Model(path, strategy, **kw)


# ---- remote pull (docs/REMOTE.md) ------------------------------------------
def pull(src, dest=None, *, connections=0, chunk=0, stage=None, cache_dir=None, sync=True):
    """Downloads a remote model or shards (http(s)://, s3://, gs://,
    hf://ORG/NAME[@REV][/PATH], a prefix ending in '/', or a *.index.json
    with its shards) in parallel range requests, resumable, verified and
    renamed into place (docs/REMOTE.md; `pagein pull`).

    dest: a file or directory; None puts hf:// into the Hugging Face cache
    (cache_dir, else HF_HUB_CACHE / HF_HOME/hub / ~/.cache/huggingface/hub)
    and other sources into the current directory. stage: a directory for
    training shards (relative paths kept). Returns a dict: path, files,
    bytes, fetched, resumed, cached, requests, retries, seconds, verified.
    Raises pagein.Error (FormatError for HTTP, verification and change
    errors, FileError for local I/O). Runs without the GIL."""
    if not _pagein.remote_available():
        raise FormatError("pagein was built without libcurl: no remote sources")
    return _pagein.pull(_os.fspath(src) if not isinstance(src, str) else src,
                        None if dest is None else _os.fsdecode(_os.fspath(dest)),
                        connections=connections, chunk=chunk,
                        stage=None if stage is None else _os.fsdecode(_os.fspath(stage)),
                        cache_dir=None if cache_dir is None else _os.fsdecode(_os.fspath(cache_dir)),
                        sync=bool(sync))


__all__.append("pull")

# A torch Distributed Checkpoint directory opens with safe_open / open_model (pagein/dcp.py).
from . import dcp as _dcp  # noqa: E402

_dcp._serve(globals())
