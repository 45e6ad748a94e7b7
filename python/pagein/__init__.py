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

import numpy as _np  # noqa: F401 (the package needs numpy: fail here first when it is missing)

from . import _pagein
from ._pagein import Error, FileError, FileNotFoundError, FormatError, NotFoundError  # noqa: F401

# The package by area (each module's docstring says what it holds):
#   _errors   SafetensorError, SliceError, DeviceError
#   _tensor   dtype tables, zero-copy numpy/torch views, indexing, dtype conversion
#   _device   device arguments and the CPU/CUDA paths
#   _opened   what safe_open and Model share (_Opened)
#   _safe     safe_open, load_file (the safetensors drop-in's reading side)
#   _save     save_file, TensorSpec, serialize, serialize_file, deserialize
#   _model    open_model, Model
#   _pull     pull
from ._errors import SafetensorError, SliceError, DeviceError
from ._tensor import dtype_info
from ._safe import safe_open, load_file
from ._save import TensorSpec, serialize, serialize_file, deserialize, save_file
from ._model import Model, open_model
from ._pull import pull

# Private names the submodules (pagein.torch, .numpy, .fsspec, .distributed,
# ._gpu) and tests reach through the package.
from ._tensor import _NP_TYPES, _TORCH_NAMES, _np_layout, _torch_dtype, _import_torch, _framework  # noqa: F401
from ._device import _parse_device  # noqa: F401
from ._opened import _Opened, _is_url, _fsspec_url, _FSSPEC_ALIASES  # noqa: F401
from ._safe import _file_object_target, _safe_open_handle  # noqa: F401
from ._save import _save_bytes  # noqa: F401

__all__ = [
    # (pagein.FileNotFoundError stays out of *: it would shadow the builtin)
    "Error", "FormatError", "FileError", "NotFoundError", "SafetensorError",
    "SliceError", "DeviceError",
    "safe_open", "load_file", "save_file", "open_model", "Model",
    "serialize", "serialize_file", "deserialize", "TensorSpec",
    "dtype_info", "__version__", "pull",
]
# pagein.torch and pagein.numpy (the safetensors.torch / safetensors.numpy
# drop-ins) are submodules: `import pagein.torch`.

__version__ = _pagein.version

# The public classes and functions say they are pagein's (help(), repr),
# wherever in the package they are defined.
for _o in (SafetensorError, SliceError, DeviceError, dtype_info, safe_open, load_file, TensorSpec, serialize,
           serialize_file, deserialize, save_file, Model, open_model, pull):
    if getattr(_o, "__module__", "").startswith("pagein."):
        _o.__module__ = "pagein"
del _o

# pagein.dcp (Checkpoint, Reader, convert) is imported with the package; a
# torch Distributed Checkpoint directory opens with safe_open / open_model
# through the library's model-format table (docs/FORMAT-DCP.md).
from . import dcp as _dcp  # noqa: E402,F401
