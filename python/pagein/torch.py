"""pagein.torch: the API of ``safetensors.torch`` on pagein, so that changing
the import is enough::

    from pagein.torch import load_file, save_file, load, save, save_model, load_model

load_file(filename, device="cpu")       {name: tensor}, zero-copy on the CPU
                                         (copy-on-write: writable, private)
save_file(tensors, filename, metadata)  atomic safetensors write
load(data: bytes)                       {name: tensor} from a file image
save(tensors, metadata) -> bytes        the bytes save_file would write
save_model(model, filename, metadata=None, force_contiguous=False)
load_model(model, filename, strict=True, device="cpu") -> (missing, unexpected)

As in safetensors: save_file and save refuse tensors that share memory
(RuntimeError naming them; tied weights must go through save_model), and
tensors that are not contiguous (ValueError). save_model keeps one name per
group of shared tensors (recording the others in the metadata) and
load_model restores them through the model's own tying. Devices are
"cpu", "cuda", "cuda:N", N or a torch.device (CUDA through pagein._gpu).
"""
import torch  # absolute import: the real torch, not this module

import pagein as _p

__all__ = ["load_file", "save_file", "load", "save", "save_model", "load_model"]


def _check(tensors):
    """What safetensors.torch refuses before writing."""
    if not isinstance(tensors, dict):
        raise ValueError("Expected a dict of [str, torch.Tensor] but received %s" % type(tensors))
    sparse = []
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise ValueError("Key `%s` is invalid, expected torch.Tensor but received %s" % (k, type(v)))
        if v.layout != torch.strided:
            sparse.append(k)
    if sparse:
        raise ValueError("You are trying to save sparse tensors: %s, which safetensors does not support; "
                         "make them dense with `.to_dense()` first" % sparse)
    _p._refuse_shared(tensors)
    for k, v in tensors.items():
        if not v.is_contiguous():
            raise ValueError("You are trying to save a non contiguous tensor: `%s` which is not allowed; "
                             "call `.contiguous()` on it first (or save_model(..., force_contiguous=True))" % k)


def save_file(tensors, filename, metadata=None):
    """Writes {name: tensor} as a safetensors file (atomically)."""
    _check(tensors)
    _p.save_file(tensors, filename, metadata)


def save(tensors, metadata=None):
    """The safetensors bytes of {name: tensor}."""
    _check(tensors)
    return _p._save_bytes(tensors, metadata)


def load_file(filename, device="cpu"):
    """{name: tensor} of a safetensors (or GGUF, or torch.save) file."""
    return _p.load_file(filename, device=device, framework="pt")


def load(data):
    """{name: tensor} from the bytes of a safetensors file. The tensors are
    views of one private copy of data."""
    f = _p.safe_open._from_bytes(data, "pt")
    return f._tensors(f._recs)


# ---- models with shared (tied) tensors --------------------------------------

def _is_complete(t):
    """True when t covers its whole storage (the name worth keeping)."""
    key = _p._storage_key(t)
    return key is not None and t.data_ptr() == key[1] and t.nelement() * t.element_size() == key[2]


def _duplicate_names(state_dict, preferred=()):
    """{kept name: [names to drop]} for each group of tensors sharing memory:
    the kept one covers the whole storage; among several, one of
    `preferred` (the names a file holds) if any, else the first in sorted
    order (safetensors' choice, so files are interchangeable)."""
    preferred = set(preferred)
    out = {}
    for group in _p._shared_groups(state_dict):
        complete = sorted(n for n in group if _is_complete(state_dict[n]))
        if not complete:
            raise RuntimeError("Tensors %s share memory but none covers the whole storage; refusing to save "
                               "or load them (safetensors refuses too)" % sorted(group))
        pick = [n for n in complete if n in preferred] or complete
        keep = pick[0]
        out[keep] = [n for n in sorted(group) if n != keep]
    return out


def save_model(model, filename, metadata=None, force_contiguous=False):
    """Saves model.state_dict() with one copy of each group of shared
    (tied) tensors; the dropped names are recorded in the metadata as
    {dropped: kept} (unless the caller's metadata already has the key)."""
    state_dict = model.state_dict()
    for keep, drops in _duplicate_names(state_dict).items():
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
        raise ValueError("%s (or use save_model(..., force_contiguous=True))" % e) from None


def load_model(model, filename, strict=True, device="cpu"):
    """Loads a file written by save_model (or safetensors' save_model) into
    model. Names dropped as duplicates come back through the model's own
    tying (they share memory with the kept name). Returns (missing,
    unexpected) key lists; strict=True raises RuntimeError when either is
    non-empty, like torch's load_state_dict."""
    state_dict = load_file(filename, device=device)
    model_sd = model.state_dict()
    dups = _duplicate_names(model_sd, preferred=state_dict.keys())
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing, unexpected = set(missing), list(unexpected)
    for drops in dups.values():
        for name in drops:
            if name in missing:
                missing.discard(name)
            else:
                unexpected.append(name)
    missing = sorted(missing)
    if strict and (missing or unexpected):
        msg = "Error(s) in loading state_dict for %s:" % model.__class__.__name__
        if missing:
            msg += "\n    Missing key(s) in state_dict: " + ", ".join('"%s"' % k for k in missing)
        if unexpected:
            msg += "\n    Unexpected key(s) in state_dict: " + ", ".join('"%s"' % k for k in sorted(unexpected))
        raise RuntimeError(msg)
    return missing, unexpected
