"""pagein.torch: the API of ``safetensors.torch`` on pagein, so that changing
the import is enough::

    from pagein.torch import load_file, save_file, load, save, save_model, load_model

load_file(filename, device="cpu")       {name: tensor}, zero-copy on the CPU
                                         (copy-on-write: writable, private)
save_file(tensors, filename, metadata)  atomic safetensors write
load(data: bytes)                       {name: tensor} from a file image
save(tensors, metadata) -> bytes        the bytes save_file would write
save_model(model, filename, metadata=None, force_contiguous=True)
load_model(model, filename, strict=True, device="cpu", *, backend="mmap")
                                         -> (missing, unexpected)
storage_ptr(t), storage_size(t)         the storage's address and bytes (what
                                         transformers, huggingface_hub, peft
                                         import from safetensors.torch)
_find_shared_tensors, _remove_duplicate_names, _is_complete, _end_ptr,
_filter_shared_not_shared, _SIZE, _TYPES, _getdtype: safetensors.torch's
helpers, same signatures and results

As in safetensors: save_file and save refuse tensors that share memory
(RuntimeError naming them; tied weights must go through save_model), and
tensors that are not contiguous (ValueError). save_model keeps one name per
group of shared tensors (recording the others in the metadata) and
load_model restores them through the model's own tying. Devices are
"cpu", "cuda", "cuda:N", N or a torch.device (CUDA through pagein._gpu).
"""
import sys as _sys
from collections import defaultdict as _defaultdict

import torch  # absolute import: the real torch, not this module

import pagein as _p
from pagein import safe_open, serialize, serialize_file, deserialize, TensorSpec  # noqa: F401 (as safetensors.torch)

__all__ = ["load_file", "save_file", "load", "save", "save_model", "load_model", "storage_ptr", "storage_size"]

# ---- dtypes ----------------------------------------------------------------

# Element size in bytes of each torch dtype safetensors stores (dtypes this
# torch lacks are left out).
_SIZE = {}
_TYPES = {}
for _code, _name in _p._TORCH_NAMES.items():
    _t = getattr(torch, _name, None)
    if _t is not None:
        _TYPES[_code] = _t
        _SIZE[_t] = torch.empty((), dtype=_t).element_size()
_f4 = getattr(torch, "float4_e2m1fn_x2", None)
if _f4 is not None:
    _SIZE[_f4] = 1
del _code, _name, _t, _f4


def _getdtype(dtype_str):
    """The torch dtype of a header code ("F32" -> torch.float32)."""
    return _TYPES[dtype_str]


# ---- storage helpers (safetensors.torch's names and results) ----------------

def storage_ptr(tensor):
    """Address of the tensor's storage (0 for meta tensors)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except Exception:
        try:
            return tensor.storage().data_ptr()
        except NotImplementedError:
            return 0


def storage_size(tensor):
    """Bytes of the tensor's whole storage (for meta tensors on torch < 2:
    the tensor's own bytes)."""
    try:
        return tensor.untyped_storage().nbytes()
    except AttributeError:
        try:
            return tensor.storage().size() * _SIZE[tensor.dtype]
        except NotImplementedError:
            return tensor.nelement() * _SIZE[tensor.dtype]


def _end_ptr(tensor):
    """Address one past the tensor's last element (its data_ptr when empty)."""
    if tensor.nelement():
        return tensor.view(-1)[-1].data_ptr() + _SIZE[tensor.dtype]
    return tensor.data_ptr()


def _filter_shared_not_shared(tensors, state_dict):
    """Splits each group of names on one storage where their byte ranges do
    not overlap (two halves of one buffer are not shared); singletons stay."""
    out = []
    for shared in tensors:
        if len(shared) < 2:
            out.append(shared)
            continue
        areas = sorted((state_dict[n].data_ptr(), _end_ptr(state_dict[n]), n) for n in shared)
        _, last_stop, last_name = areas[0]
        out.append({last_name})
        for start, stop, name in areas[1:]:
            if start >= last_stop:
                out.append({name})
            else:
                out[-1].add(name)
            last_stop = stop
    return out


def _find_shared_tensors(state_dict):
    """A list of sets of names, one per group of tensors whose bytes overlap
    (singletons included); meta tensors and tensors without storage are in
    none. As safetensors.torch gives it."""
    groups = _defaultdict(set)
    for k, v in state_dict.items():
        if v.device != torch.device("meta") and storage_ptr(v) != 0 and storage_size(v) != 0:
            groups[(v.device, storage_ptr(v), storage_size(v))].add(k)
    return _filter_shared_not_shared(list(sorted(groups.values())), state_dict)


def _is_complete(tensor):
    """True when the tensor covers its whole storage (the name worth keeping
    of a shared group). A meta tensor is complete (safetensors' answer)."""
    return tensor.data_ptr() == storage_ptr(tensor) and \
        tensor.nelement() * _SIZE[tensor.dtype] == storage_size(tensor)


def _remove_duplicate_names(state_dict, *, preferred_names=None, discard_names=None):
    """{kept name: [names to drop]} for each group of tensors sharing
    memory: the kept one covers the whole storage; the first in sorted
    order, preferring names not in discard_names, then names in
    preferred_names (the names a file holds). RuntimeError when none
    covers the storage."""
    preferred_names = set(preferred_names or [])
    discard_names = set(discard_names or [])
    out = _defaultdict(list)
    for shared in _find_shared_tensors(state_dict):
        complete = set(n for n in shared if _is_complete(state_dict[n]))
        if not complete:
            raise RuntimeError(
                "Error while trying to find names to remove to save state dict, but found no suitable name to keep "
                "for saving amongst: %s. None is covering the entire storage.Refusing to save/load the model since "
                "you could be storing much more memory than needed. Please refer to "
                "https://huggingface.co/docs/safetensors/torch_shared_tensors for more information. Or open an "
                "issue." % (shared,))
        keep = sorted(complete)[0]
        pick = complete - discard_names
        if pick:
            keep = sorted(pick)[0]
        if preferred_names:
            pick = preferred_names & complete
            if pick:
                keep = sorted(pick)[0]
        for name in sorted(shared):
            if name != keep:
                out[keep].append(name)
    return out


def _check(tensors):
    """What safetensors.torch refuses before writing, in its words."""
    if not isinstance(tensors, dict):
        raise ValueError("Expected a dict of [str, torch.Tensor] but received %s" % type(tensors))
    sparse = []
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise ValueError("Key `%s` is invalid, expected torch.Tensor but received %s" % (k, type(v)))
        if v.layout != torch.strided:
            sparse.append(k)
    if sparse:
        raise ValueError("You are trying to save a sparse tensors: `%s` which this library does not support. You can "
                         "make it a dense tensor before saving with `.to_dense()` but be aware this might make a much "
                         "larger file than needed." % sparse)
    failing = [names for names in _find_shared_tensors(tensors) if len(names) > 1]
    if failing:
        raise RuntimeError(
            "Some tensors share memory, this will lead to duplicate memory on disk and potential differences when "
            "loading them again: %s.\nA potential way to correctly save your model is to use `save_model` "
            "(pagein.torch.save_model).\nMore information at "
            "https://huggingface.co/docs/safetensors/torch_shared_tensors" % [sorted(g) for g in failing])
    for k, v in tensors.items():
        if not v.is_contiguous():
            raise ValueError("You are trying to save a non contiguous tensor: `%s` which is not allowed. It either "
                             "means you are trying to save tensors which are reference of each other in which case "
                             "it's recommended to save only the full tensors, and reslice at load time, or simply "
                             "call `.contiguous()` on your tensor to pack it before saving." % k)


def save_file(tensors, filename, metadata=None):
    """Writes {name: tensor} as a safetensors file (atomically)."""
    _check(tensors)
    _p.save_file(tensors, filename, metadata)


def save(tensors, metadata=None):
    """The safetensors bytes of {name: tensor}."""
    _check(tensors)
    return _p._save_bytes(tensors, metadata)


def load_file(filename, device="cpu", *, backend="mmap"):
    """{name: tensor} of a safetensors (or GGUF, or torch.save) file.
    backend="pread" reads the bytes into private memory (one range-engine
    run) instead of mapping them."""
    return _p.load_file(filename, device=device, framework="pt", backend=backend)


def load(data):
    """{name: tensor} from the bytes of a safetensors file. The tensors are
    views of one private copy of data."""
    f = _p.safe_open._from_bytes(data, "pt")
    return f._tensors(f._recs)


def _view2torch(safeview):
    """{name: tensor} from deserialize()'s list (safetensors.torch's helper)."""
    out = {}
    for k, v in safeview:
        dtype = _getdtype(v["dtype"])
        if len(v["data"]) == 0:
            arr = torch.empty(v["shape"], dtype=dtype)
        else:
            arr = torch.frombuffer(v["data"], dtype=dtype).reshape(v["shape"])
        if _sys.byteorder == "big":  # pragma: no cover
            arr = torch.from_numpy(arr.numpy().byteswap(inplace=False))
        out[k] = arr
    return out


# ---- models with shared (tied) tensors --------------------------------------

def _duplicate_names(state_dict, preferred=()):
    """pagein's earlier name for _remove_duplicate_names: {kept name: [names
    to drop]}, keeping one of `preferred` when it covers the storage."""
    return dict(_remove_duplicate_names(state_dict, preferred_names=list(preferred)))


def save_model(model, filename, metadata=None, force_contiguous=True):
    """Saves model.state_dict() with one copy of each group of shared
    (tied) tensors; the dropped names are recorded in the metadata as
    {dropped: kept} (unless the caller's metadata already has the key).
    force_contiguous (default True, as safetensors) packs strided tensors."""
    state_dict = model.state_dict()
    for keep, drops in _remove_duplicate_names(state_dict).items():
        for name in drops:
            if metadata is None:
                metadata = {}
            metadata.setdefault(name, keep)
            del state_dict[name]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata)
    except ValueError as e:
        raise ValueError("%s Or use save_model(..., force_contiguous=True), read the docs for potential caveats."
                         % e) from None


def load_model(model, filename, strict=True, device="cpu", *, backend="mmap"):
    """Loads a file written by save_model (or safetensors' save_model) into
    model. Names dropped as duplicates come back through the model's own
    tying (they share memory with the kept name). Returns (missing,
    unexpected) key lists, missing sorted (safetensors returns missing as a
    set: the same names); strict=True raises RuntimeError when either is
    non-empty, like torch's load_state_dict."""
    state_dict = load_file(filename, device=device, backend=backend)
    model_sd = model.state_dict()
    dups = _remove_duplicate_names(model_sd, preferred_names=state_dict.keys())
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing, unexpected = set(missing), list(unexpected)
    for drops in dups.values():
        for name in drops:
            if name in missing:
                missing.remove(name)
            else:
                unexpected.append(name)
    missing = sorted(missing)
    if strict and (missing or unexpected):
        msg = "Error(s) in loading state_dict for %s:" % model.__class__.__name__
        if missing:
            msg += "\n    Missing key(s) in state_dict: " + ", ".join('"%s"' % k for k in sorted(missing))
        if unexpected:
            msg += "\n    Unexpected key(s) in state_dict: " + ", ".join('"%s"' % k for k in sorted(unexpected))
        raise RuntimeError(msg)
    return missing, unexpected
