"""One tensor's bytes as numpy arrays and torch tensors: the dtype tables,
zero-copy views, basic indexing for get_slice, and the dtype conversion
behind get_tensor(name, dtype=...)."""

import operator as _operator

import numpy as _np

from . import _pagein
from ._pagein import Error, FormatError
from ._errors import SliceError, _with_note


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
