"""Tensors into GPU memory through pagein's pinned staging (docs/GPU.md).

The one entry point other modules call (safe_open / load_file / open_model
delegate CUDA devices here)::

    load(file_handle, names, device_index, framework="pt") -> dict[str, tensor]
    load(..., wait=False) -> Loading  (per-tensor waits; layer 0 usable first)

file_handle
    a ``pagein.safe_open`` object, a ``pagein.Model`` (``open_model``), a
    ``pagein._pagein.Source``, or a path (``str`` / ``os.PathLike``: opened
    as a model with the lazy strategy, which reads nothing at open, and
    closed again before returning).
names
    an iterable of tensor names, or None for every tensor. The library loads
    them in layer order whatever order they are given in.
device_index
    a CUDA device ordinal (>= 0), or ``DEVICE_HOST`` (-1): the same pipeline
    with host memory as the destination (CPU tensors or numpy arrays), for
    tests and machines without a GPU.
framework
    ``"pt"`` (torch tensors; the only choice for a CUDA device) or ``"np"``
    (numpy arrays, host only).

Destinations come from torch's caching allocator (``torch.empty(...,
device="cuda:N")``), so the tensors are ordinary CUDA tensors owned by
torch; pagein copies into them through a ring of pinned host buffers (a
few MiB each, ``buffer_bytes`` x ``nbuffers`` in all, whatever the model
size) and returns when every copy has completed (its own streams, synchronised
before return, so any torch stream can use them). Each tensor holds its
bytes in row-major, native byte order (strided and byte-swapped checkpoint
tensors are converted on the way); dtypes torch lacks (ggml blocks, F8 on old
torch) come back as uint8, shaped like pagein's CPU tensors.

Errors: ``pagein.Error`` (code PAGEIN_E_NO_CUDA, ``.detail`` says why: no
libcuda.so.1, no such device) when the device cannot be used, checked before
torch is touched; ``pagein.Error`` when torch has no CUDA support;
``pagein.NotFoundError`` for an unknown name; ``pagein.FormatError`` for an
unknown framework; ``ValueError`` / ``TypeError`` for bad arguments; load
errors (a file truncated under us, a failing CUDA call) name the file, the
tensor and the call.
"""

import os as _os

from . import _pagein
from ._pagein import Error, FormatError

DEVICE_HOST = _pagein.DEVICE_HOST

__all__ = ["load", "probe", "trim", "Loading", "DEVICE_HOST"]


def trim():
    """Frees the pinned host buffers pagein keeps between loads (at most
    64 MiB by default, PAGEIN_GPU_PINNED_CACHE sets the cap) so that loading
    tensor by tensor does not pin memory again for every tensor."""
    _pagein.gpu_trim()


def probe(device_index):
    """{"name", "total_bytes", "free_bytes"} of a CUDA device (or DEVICE_HOST); raises
    pagein.Error naming why when it cannot be used."""
    return _pagein.gpu_probe(_device(device_index))


def _device(device_index):
    if isinstance(device_index, bool) or not isinstance(device_index, int):
        raise TypeError("device_index must be an int (a CUDA ordinal or DEVICE_HOST), not %s"
                        % type(device_index).__name__)
    if device_index < 0 and device_index != DEVICE_HOST:
        raise ValueError("device_index %d: CUDA ordinals start at 0 (DEVICE_HOST is %d)"
                         % (device_index, DEVICE_HOST))
    return device_index


def _framework(framework):
    from . import _framework as fw
    return fw(framework)


def _source_of(file_handle):
    """(Source, close_after) for any accepted handle."""
    if isinstance(file_handle, _pagein.Source):
        return file_handle, False
    get = getattr(file_handle, "_source", None)
    if callable(get):
        return get(), False
    if isinstance(file_handle, (str, bytes, _os.PathLike)):
        path = _os.fsdecode(file_handle)
        return _pagein.open_model(path, strategy="lazy"), True
    raise TypeError("file_handle must be a pagein.safe_open object, a pagein.Model, a Source or a path, not %s"
                    % type(file_handle).__name__)


def _names(src, names):
    if names is None:
        return [r[0] for r in src.tensors("layer")]
    if isinstance(names, (str, bytes)):
        raise TypeError("names must be an iterable of str or None, not a single %s" % type(names).__name__)
    out = list(names)
    for n in out:
        if not isinstance(n, str):
            raise TypeError("tensor names must be str, not %s" % type(n).__name__)
    if len(set(out)) != len(out):
        raise ValueError("names lists a tensor more than once")
    return out


def _staged_layout(rec):
    """(numpy dtype, shape, bytes) of a tensor's staged, row-major bytes."""
    import numpy as np
    from . import _np_layout, _NP_TYPES
    name, dtype, shape, nbytes, flags = rec[0], rec[1], tuple(rec[2]), rec[4], rec[7]
    npdt, npshape = _np_layout(dtype, shape, nbytes)
    n = 1
    for d in npshape:
        n *= d
    size = n * npdt.itemsize
    if flags & _pagein.TENSOR_NONCONTIGUOUS:
        if dtype not in _NP_TYPES:
            raise FormatError("tensor %r: strided %s data is not supported" % (name, dtype))
    elif size != nbytes:
        raise FormatError("tensor %r: %s %s does not hold %d bytes" % (name, dtype, list(shape), nbytes))
    return np.dtype(npdt), npshape, size


def _alloc(rec, fw, device_index):
    """An empty destination for one tensor and its address."""
    npdt, npshape, size = _staged_layout(rec)
    if fw == "np":
        import numpy as np
        a = np.empty(npshape, npdt)
        return a, (a.ctypes.data if size else 0)
    from . import _torch_dtype, _import_torch
    torch = _import_torch()
    tdt, raw = _torch_dtype(rec[1])
    shape = npshape if raw else tuple(rec[2])
    dev = "cpu" if device_index == DEVICE_HOST else "cuda:%d" % device_index
    t = torch.empty(shape, dtype=tdt, device=dev)
    if t.numel() * t.element_size() != size:
        raise FormatError("tensor %r: torch %s %s holds %d bytes, the file %d"
                          % (rec[0], tdt, list(shape), t.numel() * t.element_size(), size))
    return t, (t.data_ptr() if size else 0)


class Loading:
    """A load in progress: ``load(..., wait=False)``.

    ``tensors`` maps every name to its destination tensor; a tensor's
    contents are valid once ``wait(name)`` returned (tensors arrive in layer
    order, so layer 0 is usable while later layers are still being copied).
    ``wait_all()`` waits for every tensor and returns ``tensors``. ``close()``
    (also on exit of a ``with`` block or garbage collection) stops a load
    still running, waiting for the copies in flight, and frees the pinned
    ring; the tensors themselves stay valid (torch owns them), with
    undefined contents for those never waited for.
    """

    def __init__(self, handle, tensors):
        self._h = handle
        self.tensors = tensors

    def wait(self, name):
        """The tensor, once it is on the device (GIL released while waiting);
        raises the load's error (naming the file, tensor and call)."""
        self._h.wait(name)
        return self.tensors[name]

    def ready(self, name):
        """True when the tensor is on the device (never blocks)."""
        return self._h.query(name)

    def wait_all(self):
        self._h.wait_all()
        return self.tensors

    def stats(self):
        """bytes, tensors, ready, copies, seconds, first_layer_seconds,
        ring_bytes, pinned_peak, buffers_peak, device_bytes, device_name."""
        return self._h.stats()

    def close(self):
        self._h.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def load(file_handle, names, device_index, framework="pt", *, buffer_bytes=0, nbuffers=0, threads=0,
         stats=None, wait=True):
    """Loads tensors into device memory; see the module docstring.

    buffer_bytes, nbuffers, threads: the staging ring (0 = library defaults:
    8 MiB x 8, nbuffers / 2 reading threads). stats: a dict that receives
    what the load did (bytes, seconds, first_layer_seconds, ring_bytes,
    pinned_peak, copies, device_name). wait=False returns a Loading at once
    instead of the dict (per-tensor waits: layer 0 usable first).
    """
    device_index = _device(device_index)
    fw = _framework(framework)
    if fw == "np" and device_index != DEVICE_HOST:
        raise FormatError("framework 'np' cannot hold CUDA memory: use framework='pt' for device cuda:%d"
                          % device_index)
    if device_index != DEVICE_HOST:
        _pagein.gpu_probe(device_index)  # raises pagein.Error with the reason
        from . import _import_torch
        torch = _import_torch()
        if not torch.cuda.is_available():
            raise Error("torch %s has no CUDA support here (torch.cuda.is_available() is False), "
                        "though the CUDA driver sees device %d" % (torch.__version__, device_index))
    src, close_after = _source_of(file_handle)
    try:
        wanted = _names(src, names)
        out, ptrs = {}, []
        for n in wanted:
            rec = src.tensor(n)  # NotFoundError for unknown names
            obj, ptr = _alloc(rec, fw, device_index)
            out[n] = obj
            ptrs.append(ptr)
        kw = dict(keep=list(out.values()), buffer_bytes=buffer_bytes, nbuffers=nbuffers, threads=threads)
        if not wait:
            # The handle keeps the source open and the destinations alive
            # until it is closed.
            return Loading(_pagein.gpu_start(src, wanted, device_index, ptrs, **kw), out)
        st = _pagein.gpu_load(src, wanted, device_index, ptrs, **kw)
        if stats is not None:
            stats.update(st)
        return out
    finally:
        if close_after:
            del src
