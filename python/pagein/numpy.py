"""pagein.numpy: the API of ``safetensors.numpy`` on pagein, so that changing
the import is enough::

    from pagein.numpy import load_file, save_file, load, save

load_file(filename, *, backend="mmap")  {name: array}, zero-copy, read-only
save_file(tensors, filename, metadata)  atomic safetensors write
load(data: bytes)                       {name: array} from a file image
save(tensors, metadata) -> bytes        the bytes save_file would write

Types numpy lacks (BF16, F8) come back as raw unsigned integers of their
width, as with pagein.safe_open(..., "np").
"""
import numpy as _np  # absolute import: the real numpy, not this module

import pagein as _p

__all__ = ["load_file", "save_file", "load", "save"]


def _check(tensors):
    if not isinstance(tensors, dict):
        raise ValueError("Expected a dict of [str, np.ndarray] but received %s" % type(tensors))
    for k, v in tensors.items():
        if not isinstance(v, _np.ndarray):
            raise ValueError("Key `%s` is invalid, expected np.ndarray but received %s" % (k, type(v)))


def save_file(tensors, filename, metadata=None):
    """Writes {name: array} as a safetensors file (atomically)."""
    _check(tensors)
    _p.save_file(tensors, filename, metadata)


def save(tensors, metadata=None):
    """The safetensors bytes of {name: array}."""
    _check(tensors)
    return _p._save_bytes(tensors, metadata)


def load_file(filename, *, backend="mmap"):
    """{name: array} of a safetensors (or GGUF, or torch.save) file:
    zero-copy, read-only views that keep the file mapped; backend="pread"
    reads them into private memory (one range-engine run) instead."""
    return _p.load_file(filename, framework="np", backend=backend)


def load(data):
    """{name: array} from the bytes of a safetensors file (views of one
    private copy of data)."""
    f = _p.safe_open._from_bytes(data, "np")
    return f._tensors(f._recs)


# ---- safetensors.numpy's helpers ---------------------------------------------

_TYPES = {code: _np.dtype(t) for code, t in _p._NP_TYPES.items() if code in (
    "F64", "F32", "F16", "I64", "U64", "I32", "U32", "I16", "U16", "I8", "U8", "BOOL", "C64")}


def _getdtype(dtype_str):
    """The numpy dtype of a header code ("F32" -> float32)."""
    return _TYPES[dtype_str]


def _view2np(safeview):
    """{name: array} from deserialize()'s list."""
    return {k: _np.frombuffer(v["data"], dtype=_getdtype(v["dtype"])).reshape(v["shape"]) for k, v in safeview}


def _is_little_endian(tensor):
    """True when the array's bytes are little-endian (or byte order does not apply)."""
    order = tensor.dtype.byteorder
    if order == "=":
        import sys
        return sys.byteorder == "little"
    if order in ("<", "|"):
        return True
    if order == ">":
        return False
    raise ValueError("Unexpected byte order %s" % order)
