"""pagein: load model weights from safetensors and GGUF files fast and safely.

A drop-in for ``safetensors.safe_open`` that hands out zero-copy, read-only
numpy arrays and torch tensors backed by the library's mapping:

    import pagein
    with pagein.safe_open("model.safetensors", framework="pt") as f:
        for name in f.keys():
            t = f.get_tensor(name)

plus ``load_file``/``save_file`` and ``open_model`` (shards, GGUF split sets,
load strategies, a layer-by-layer prefetching iterator). See docs/PYTHON.md.

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

import os as _os
import sys as _sys
import warnings as _warnings
from collections.abc import Mapping as _Mapping

import numpy as _np

from . import _pagein
from ._pagein import Error, FileError, FormatError, NotFoundError

__all__ = [
    "Error", "FormatError", "FileError", "NotFoundError",
    "safe_open", "load_file", "save_file", "open_model", "Model",
    "dtype_info", "__version__",
]

__version__ = _pagein.version

# Source tuple fields (see _pagein.c tensor_tuple).
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


def _np_array(src, rec, buf=None):
    """Zero-copy read-only numpy array over one tensor (rec: tensor tuple).
    buf: the tensor's View when the caller already has it."""
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


def _select(src, rec, index):
    """A private copy of tensor[index], reading only the bytes it spans."""
    nbytes = rec[_NBYTES]
    buf = src.buffer(rec[_NAME]) if nbytes else None
    view = _np_array(src, rec, buf)
    sel = view[index]
    if buf is not None and sel.size:
        lo, hi = _byte_bounds(sel)
        buf.willneed(lo - buf.address, hi - lo)
    return _np.array(sel, copy=True)


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
    raise FormatError("framework %r is not supported (use 'np'/'numpy' or 'pt'/'torch')" % (framework,))


def _check_device(fw, device):
    if fw == "np":
        if device not in ("cpu", None):
            raise FormatError("framework 'np' only supports device='cpu', not %r" % (device,))
        return "cpu"
    return "cpu" if device is None else device


def _convert(src, rec, fw, device, copy):
    if fw == "np":
        a = _np_array(src, rec)
        return _np.array(a, copy=True) if copy else a
    t = _torch_tensor(src, rec)
    if copy:
        t = t.clone()
    if device not in ("cpu", None):
        t = t.to(device)
    return t


# ---------------------------------------------------------------------------
# safe_open
# ---------------------------------------------------------------------------

class _Slice:
    """What safe_open.get_slice() returns: shape and dtype without reading
    data, and indexing that copies only the selected elements."""

    def __init__(self, owner, rec):
        self._owner = owner
        self._rec = rec

    def get_shape(self):
        return list(self._rec[_SHAPE])

    def get_dtype(self):
        return self._rec[_DTYPE]

    @property
    def shape(self):
        return tuple(self._rec[_SHAPE])

    @property
    def dtype(self):
        return self._rec[_DTYPE]

    def __len__(self):
        shape = self._rec[_SHAPE]
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    def __getitem__(self, index):
        src = self._owner._source()
        fw, device = self._owner._fw, self._owner._device
        rec = self._rec
        # Index the zero-copy view, ask the kernel for exactly the pages the
        # selection spans, then copy it: a row range costs its own bytes, not
        # the tensor's or the mapping's read-around window.
        part = _select(src, rec, index)
        if fw == "np":
            return part
        tdt, raw = _torch_dtype(rec[_DTYPE])
        if part.dtype.byteorder not in ("=", "|"):
            part = part.astype(part.dtype.newbyteorder("="))
        t = _np_to_torch_owned(part, tdt)
        if device not in ("cpu", None):
            t = t.to(device)
        return t

    def __repr__(self):
        return "<pagein slice %s %s %s>" % (self._rec[_NAME], self._rec[_DTYPE], list(self._rec[_SHAPE]))


class safe_open:
    """Opens a safetensors (or GGUF) file; the safetensors API.

    safe_open(filename, framework="np"|"numpy"|"pt"|"torch", device="cpu",
              *, copy=False, lenient=False)

    keys(), offset_keys(), metadata(), get_tensor(name), get_slice(name);
    usable as a context manager. Tensors are zero-copy and read-only unless
    copy=True. lenient=True accepts trailing bytes after the data section.
    Errors raise pagein.Error subclasses carrying the library's message.
    """

    def __init__(self, filename, framework="np", device="cpu", *, copy=False, lenient=False):
        self._src = None
        self._fw = _framework(framework)
        self._device = _check_device(self._fw, device)
        self._copy = bool(copy)
        # torch has no read-only tensors: map copy-on-write for it, so an
        # in-place write lands in a private page instead of faulting.
        self._src = _pagein.open_file(_os.fsdecode(_os.fspath(filename)), lenient=lenient,
                                      writable=self._fw == "pt")
        self._recs = self._src.tensors()
        self._by_name = {r[_NAME]: r for r in self._recs}
        self._meta = None

    # -- lifetime --
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        """Drops this object's reference to the file. Arrays and tensors
        already handed out stay valid; the file is unmapped when the last of
        them goes."""
        self._src = None

    def _source(self):
        if self._src is None:
            raise Error("the file is closed")
        return self._src

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
        """The `__metadata__` dict of str (safetensors) or the typed GGUF
        key-value pairs; None when the file has none (as safetensors)."""
        src = self._source()
        if self._meta is None:
            self._meta = dict(src.metadata())
        return dict(self._meta) if self._meta else None

    def _rec(self, name):
        self._source()
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            raise NotFoundError("no tensor named %r in %s" % (name, self._src.path)) from None

    def get_tensor(self, name):
        rec = self._rec(name)
        return _convert(self._src, rec, self._fw, self._device, self._copy)

    def get_slice(self, name):
        return _Slice(self, self._rec(name))

    # -- extras --
    def get_dtype(self, name):
        """The file's dtype name of a tensor ("BF16", "F8_E4M3", "Q8_0", ...)."""
        return self._rec(name)[_DTYPE]

    def get_shape(self, name):
        return list(self._rec(name)[_SHAPE])

    def tensor_info(self, name):
        """dict: dtype, shape, offset (absolute), nbytes, layer."""
        r = self._rec(name)
        return {"dtype": r[_DTYPE], "shape": list(r[_SHAPE]), "offset": r[_OFFSET],
                "nbytes": r[_NBYTES], "layer": r[_LAYER]}

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

    def __contains__(self, name):
        return name in self._by_name

    def __len__(self):
        return len(self._recs)

    def __iter__(self):
        return iter(self.keys())

    def __repr__(self):
        state = "closed" if self._src is None else "%d tensors" % len(self._recs)
        return "<pagein.safe_open %s (%s)>" % (getattr(self._src, "path", "?"), state)


def load_file(filename, device="cpu", *, framework="pt", copy=False):
    """Loads every tensor of a safetensors (or GGUF) file into a dict
    {name: tensor}, like safetensors.torch.load_file (framework="np" gives
    numpy arrays, like safetensors.numpy.load_file). Zero-copy and read-only
    unless copy=True."""
    with safe_open(filename, framework=framework, device=device, copy=copy) as f:
        return {name: f.get_tensor(name) for name in f.offset_keys()}


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


class Model:
    """A model over one file, a sharded safetensors checkpoint or a GGUF
    split set (use open_model())."""

    def __init__(self, path, strategy="auto", *, framework="np", device="cpu", copy=False,
                 prefetch=2, budget=0, threads=0, hints=0, lenient=False):
        self._src = None
        self._fw = _framework(framework)
        self._device = _check_device(self._fw, device)
        self._copy = bool(copy)
        self._prefetch = prefetch
        self.path = _os.fsdecode(_os.fspath(path))
        self._src = _pagein.open_model(self.path, strategy=strategy, threads=threads,
                                       prefetch=prefetch, budget=budget or 0, hints=hints,
                                       lenient=lenient, writable=self._fw == "pt")
        recs = self._src.tensors()
        self._names = [r[_NAME] for r in recs]
        self._by_name = {r[_NAME]: r for r in recs}
        self._meta = None

    # -- lifetime --
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        """Drops this object's reference to the model. Tensors already
        handed out stay valid; the pager stops and the files are unmapped
        when the last of them goes."""
        self._src = None

    def _source(self):
        if self._src is None:
            raise Error("the model is closed")
        return self._src

    # -- tables --
    @property
    def tensors(self):
        return _TensorMap(self)

    @property
    def metadata(self):
        """Metadata as Python values (GGUF: int, float, bool, str, lists;
        safetensors: the __metadata__ strings). Shards' entries are merged,
        the first file winning."""
        if self._meta is None:
            meta = {}
            for k, v in self._source().metadata():
                meta.setdefault(k, v)
            self._meta = meta
        return self._meta

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

    def _rec(self, name):
        self._source()
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            raise NotFoundError("no tensor named %r in %s" % (name, self.path)) from None

    def get_tensor(self, name):
        return _convert(self._source(), self._rec(name), self._fw, self._device, self._copy)

    def keys(self):
        return list(self._names)

    def dtype(self, name):
        """The file's dtype name of a tensor ("BF16", "Q8_0", ...)."""
        return self._rec(name)[_DTYPE]

    def shape(self, name):
        return list(self._rec(name)[_SHAPE])

    def tensor_info(self, name):
        r = self._rec(name)
        return {"dtype": r[_DTYPE], "shape": list(r[_SHAPE]), "offset": r[_OFFSET],
                "nbytes": r[_NBYTES], "layer": r[_LAYER], "file": r[_FILE]}

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
                    yield layer, {r[_NAME]: _convert(src, r, self._fw, self._device, self._copy)
                                  for r in src.layer_tensors(layer)}
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

    strategy: "auto", "lazy", "populate", "prefetch" or "read".
    Keywords: framework ("np" default, or "pt"), device, copy, prefetch
    (layers kept ahead by the pager, default 2), budget (bytes resident at
    most under prefetch; 0 = unlimited), threads, hints, lenient.
    """
    return Model(path, strategy, **kw)
