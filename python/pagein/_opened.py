"""What safe_open and Model share: one library Source, its tensor table,
lifetime, typed metadata, tensor access (CPU or CUDA) and page-cache calls."""

import json as _json
import os as _os
import stat as _stat
import sys as _sys

import numpy as _np

from . import _pagein
from ._pagein import Error, FormatError, NotFoundError
from ._errors import DeviceError, _NO_CUDA
from ._tensor import (_NAME, _DTYPE, _SHAPE, _OFFSET, _NBYTES, _LAYER, _FILE, _FLAGS, _np_layout,
                      _representable, _torch_dtype, _frombuffer, _import_torch, _dequantized, _out_dtype,
                      _framework)
from ._device import _parse_device, _gpu_loader, _device_str, _convert


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
        recs = src.tensors()
        # a torch Distributed Checkpoint's non-tensor items (stored bytes):
        # listed apart, read with get_bytes
        self._items = {r[_NAME]: r for r in recs if r[_FLAGS] & _pagein.TENSOR_BYTES}
        self._recs = [r for r in recs if not r[_FLAGS] & _pagein.TENSOR_BYTES] if self._items else recs
        self._by_name = {r[_NAME]: r for r in self._recs}

    def nontensor_keys(self):
        """Names of the items that are not tensors (a torch Distributed
        Checkpoint's BytesStorageMetadata items; none for other formats)."""
        self._source()
        return list(self._items)

    def get_bytes(self, name):
        """A non-tensor item's stored bytes (torch.save of the object: never
        unpickled here; torch.load(io.BytesIO(b)) reads it)."""
        src = self._source()
        if name not in self._items:
            if name in self._by_name:
                raise TypeError("%s is a tensor; use get_tensor" % name)
            raise NotFoundError("no item named %r in %s" % (name, src.path))
        return bytes(src.buffer(name)) if self._items[name][_NBYTES] else b""

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
            if isinstance(name, str) and name in getattr(self, "_items", ()):
                raise TypeError("%s is a non-tensor item; use get_bytes" % name) from None
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


def _residency(t):
    b, rb, p, rp = t
    return {"bytes": b, "resident_bytes": rb, "pages": p, "resident_pages": rp,
            "fraction": (rb / b) if b else 1.0}


def _names(names):
    if names is None:
        return None
    return [names] if isinstance(names, str) else list(names)
