"""Importing torch 1.13's DCP package on Python 3.11 (no pagein needed).

Debian's python3-torch 1.13 cannot import ``torch.distributed._shard.checkpoint``
under Python 3.11: ``ShardedTensorMetadata`` declares
``tensor_properties: TensorProperties = field(default=TensorProperties())``, and
Python 3.11's ``dataclasses`` refuses a default whose class is unhashable (a
non-frozen dataclass) with "mutable default ... use default_factory".

``import_torch_dcp()`` wraps ``dataclasses._get_field`` for the duration of the
import only: a field default (or class attribute) that is an instance of an unhashable dataclass
becomes ``field(default_factory=<a deep copy of it>)``, which is what the
authors meant and what Python 3.10 accepted. Nothing else changes, and the
wrapper is removed again before the function returns. Newer torch (2.x) does
not need it; the function then just imports.
"""
import copy
import dataclasses
import functools
import importlib

__all__ = ["import_torch_dcp"]


def _unhashable_instance(v):
    return dataclasses.is_dataclass(v) and not isinstance(v, type) and type(v).__hash__ is None


def _wrap(orig):
    @functools.wraps(orig)
    def _get_field(cls, a_name, a_type, *args, **kwargs):
        d = cls.__dict__.get(a_name, dataclasses.MISSING)
        if isinstance(d, dataclasses.Field):
            if _unhashable_instance(d.default):
                d.default_factory = functools.partial(copy.deepcopy, d.default)
                d.default = dataclasses.MISSING
        elif _unhashable_instance(d):
            setattr(cls, a_name, dataclasses.field(default_factory=functools.partial(copy.deepcopy, d)))
        return orig(cls, a_name, a_type, *args, **kwargs)
    return _get_field


def import_torch_dcp():
    """Returns torch's DCP module: torch.distributed.checkpoint where it
    exists and exports load_state_dict (torch >= 2.0), else torch 1.13's
    torch.distributed._shard.checkpoint, imported with the dataclass
    workaround described above."""
    try:
        m = importlib.import_module("torch.distributed.checkpoint")
        if hasattr(m, "FileSystemReader"):
            return m
    except Exception:
        pass
    orig = getattr(dataclasses, "_get_field", None)
    if orig is None:
        return importlib.import_module("torch.distributed._shard.checkpoint")
    dataclasses._get_field = _wrap(orig)
    try:
        return importlib.import_module("torch.distributed._shard.checkpoint")
    finally:
        dataclasses._get_field = orig
