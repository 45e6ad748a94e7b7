"""The safetensors drop-in's reading side: safe_open (paths, URLs, file
objects; mmap or pread backend), get_slice's slice object, load_file."""

import json as _json
import os as _os

from . import _pagein
from ._pagein import Error, FileNotFoundError
from ._tensor import (_NAME, _DTYPE, _SHAPE, _OFFSET, _NBYTES, _FLAGS, _NP_TYPES, _np_layout, _representable,
                      _basic_index, _check_bounds, _select, _torch_dtype, _np_to_torch_owned)
import numpy as _np
from ._opened import _Opened, _check_openable, _is_url, _fsspec_url, _json_str, _residency, _names


# ---------------------------------------------------------------------------
# safe_open
# ---------------------------------------------------------------------------

def _box_select(src, rec, index):
    """tensor[index] for an assembled tensor (a torch Distributed
    Checkpoint's tensor saved in several chunks): the selection's bounding
    box is read from the chunks it overlaps only (Source.read_slice,
    pagein_model_read_slice), then indexed. -> (copy, is_scalar), as
    _select."""
    idx = _basic_index(index)
    _representable(rec)
    shape = tuple(rec[_SHAPE])
    _check_bounds(idx, shape)
    used = sum(1 for it in idx if it is not None and it is not Ellipsis)
    lo, cnt, rel = [], [], []
    axis = 0
    for it in idx:
        if it is None:
            rel.append(None)
            continue
        if it is Ellipsis:
            for _ in range(len(shape) - used):
                lo.append(0), cnt.append(shape[axis]), rel.append(slice(None))
                axis += 1
            continue
        dim = shape[axis]
        if isinstance(it, slice):
            r = range(*it.indices(dim))
            if not len(r):
                lo.append(0), cnt.append(0), rel.append(slice(0, 0))
            else:
                a = min(r[0], r[-1])
                first = r[0] - a
                stop = first + r.step * len(r)
                lo.append(a), cnt.append(abs(r[-1] - r[0]) + 1), rel.append(slice(first, stop if stop >= 0 else None, r.step))
        else:
            lo.append(it + dim if it < 0 else it), cnt.append(1), rel.append(0)
        axis += 1
    while axis < len(shape):
        lo.append(0), cnt.append(shape[axis]), rel.append(slice(None))
        axis += 1
    npdt, _ = _np_layout(rec[_DTYPE], shape, rec[_NBYTES])
    n = 1
    for c in cnt:
        n *= c
    data = src.read_slice(rec[_NAME], lo, cnt) if n else bytearray(0)
    box = _np.frombuffer(data, dtype=npdt).reshape(cnt)
    is_scalar = Ellipsis not in idx and None not in idx and sum(1 for i in idx if not isinstance(i, slice)) == len(shape)
    return _np.array(box[tuple(rel) + (Ellipsis,)], copy=True), is_scalar


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
        # the tensor's or the mapping's read-around window. An assembled
        # tensor (DCP chunks) reads the box from the chunks it overlaps.
        if rec[_FLAGS] & _pagein.TENSOR_ASSEMBLED:
            part, is_scalar = _box_select(src, rec, index)
        else:
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
        if _os.path.isdir(path) and _pagein.is_dcp_dir(path):
            # a torch Distributed Checkpoint: a model (the format table's DCP
            # row); one-chunk tensors are views of their blobs, the others
            # assembled when first asked for; pread reads every file at open
            self._table(_pagein.open_model(path, strategy="lazy" if backend == "mmap" else "read",
                                           lenient=lenient, writable=self._fw == "pt"))
            return
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


class _safe_open_handle(safe_open):
    """safetensors' _safe_open_handle(f, framework, device="cpu", *,
    backend="mmap"): safe_open over an open file object (a local file, an
    fsspec handle). pagein.safe_open takes file objects directly too."""

    def __init__(self, f, framework, device="cpu", *, backend="mmap"):
        if not hasattr(f, "read"):
            raise TypeError("_safe_open_handle: expected an open file object, got %s" % type(f).__name__)
        super().__init__(f, framework, device, backend=backend)
