"""A small "user project" written against the safetensors package's public
API (from its documentation and docstrings), unchanged except that the test
running it (test_safetensors_api.py::test_project_runs_unchanged) maps the
`safetensors`, `safetensors.torch` and `safetensors.numpy` modules to
pagein's. It uses every public name and prints what it saw as one JSON
object: the test checks it, and compares it with a run on the real
safetensors package when that is installed.

Usage: python3 dropin_project.py WORKDIR
"""
import json
import os
import sys

import numpy as np
import torch

import safetensors
from safetensors import SafetensorError, TensorSpec, _safe_open_handle, deserialize, safe_open, serialize, \
    serialize_file
from safetensors.numpy import load as np_load, load_file as np_load_file, save as np_save, \
    save_file as np_save_file
from safetensors.torch import _end_ptr, _find_shared_tensors, _is_complete, _remove_duplicate_names, load, \
    load_file, load_model, save, save_file, save_model, storage_ptr, storage_size

out = {}
work = sys.argv[1]


def path(name):
    return os.path.join(work, name)


def exc(fn):
    """The exception class names fn raises (its MRO, as names), or None."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - recording what was raised
        return {"SafetensorError": isinstance(e, SafetensorError), "FileNotFoundError": isinstance(e, FileNotFoundError),
                "RuntimeError": isinstance(e, RuntimeError), "ValueError": isinstance(e, ValueError),
                "TypeError": isinstance(e, TypeError), "msg": str(e)}
    return None


out["version_is_str"] = isinstance(safetensors.__version__, str)

# ---- torch: save_file / load_file / safe_open -------------------------------
a = torch.arange(50, dtype=torch.float32).reshape(10, 5)
b = torch.tensor([1, 2, 3], dtype=torch.int64)
h = torch.ones((2, 2), dtype=torch.bfloat16)
save_file({"b": b, "a": a, "h": h}, path("m.safetensors"), metadata={"format": "pt", "who": "project"})
sd = load_file(path("m.safetensors"))
out["load_file"] = {k: [str(v.dtype), list(v.shape), v.float().sum().item()] for k, v in sorted(sd.items())}
with safe_open(path("m.safetensors"), framework="pt", device="cpu") as f:
    out["keys"] = f.keys()
    out["offset_keys"] = f.offset_keys()
    out["metadata"] = f.metadata()
    out["get_tensor_a_sum"] = f.get_tensor("a").sum().item()
    out["get_tensors"] = sorted(f.get_tensors())
    sl = f.get_slice("a")
    out["slice_shape_dtype"] = [sl.get_shape(), sl.get_dtype()]
    out["slice_rows"] = sl[2:4].tolist()
    out["slice_cols"] = sl[:, 1:3].shape[1]
    out["slice_empty_list"] = list(sl[[]].shape)
    out["missing_tensor"] = exc(lambda: f.get_tensor("nope"))
with safe_open(path("m.safetensors"), framework="np") as f:  # safetensors checks bounds for numpy
    sl = f.get_slice("a")
    out["slice_too_far"] = exc(lambda: sl[:20])
    out["slice_bad_index"] = exc(lambda: sl[2:, 20])
    out["slice_negative"] = exc(lambda: sl[2:, -6])
    out["slice_list"] = exc(lambda: sl[[0, 1]])
out["closed"] = exc(lambda: f.keys())
out["missing_file"] = exc(lambda: safe_open(path("notafile"), framework="pt"))
out["bad_framework"] = exc(lambda: safe_open(path("m.safetensors"), framework="nope")) is not None
with safe_open(path("m.safetensors"), framework="pt", backend="pread") as f:
    out["pread_sum"] = f.get_tensor("a").sum().item()
out["bad_backend"] = exc(lambda: safe_open(path("m.safetensors"), framework="pt", backend="nope"))

# ---- file handles ---------------------------------------------------------------
with open(path("m.safetensors"), "rb") as fh:
    with _safe_open_handle(fh, framework="pt", device="cpu") as g:
        out["handle_keys"] = g.keys()
        out["handle_b"] = g.get_tensor("b").tolist()

# ---- numpy ----------------------------------------------------------------------
arrs = {"x": np.arange(6, dtype=np.float64).reshape(2, 3), "y": np.zeros((2, 3), dtype=np.uint8)}
np_save_file(arrs, path("n.safetensors"))
back = np_load_file(path("n.safetensors"))
out["numpy_file"] = {k: [str(v.dtype), list(v.shape), float(v.sum())] for k, v in sorted(back.items())}
blob = np_save(arrs, metadata={"k": "v"})
out["numpy_bytes"] = {k: float(v.sum()) for k, v in sorted(np_load(blob).items())}
with safe_open(path("n.safetensors"), framework="np") as f:
    out["numpy_slice"] = f.get_slice("x")[1:, :2].tolist()

# ---- bytes: save / load / serialize / deserialize ------------------------------
raw = save({"t": a[:2].contiguous()}, metadata={"m": "1"})
out["save_load"] = load(raw)["t"].tolist()
t = torch.arange(6, dtype=torch.float32)
spec = TensorSpec(dtype="float32", shape=list(t.shape), data_ptr=t.data_ptr(), data_len=t.numel() * 4)
out["spec"] = [spec.dtype, spec.shape, spec.data_len]
ser = serialize({"t": spec}, metadata={"m": "2"})
des = deserialize(ser)
out["deserialize"] = [[n, d["dtype"], d["shape"], len(d["data"])] for n, d in des]
serialize_file({"t": spec}, path("s.safetensors"))
out["serialize_file"] = load_file(path("s.safetensors"))["t"].tolist()
out["unknown_dtype"] = exc(lambda: TensorSpec(dtype="float31", shape=[1], data_ptr=0, data_len=4))
out["bad_bytes"] = exc(lambda: deserialize(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}"))

# ---- shared tensors, storage helpers, save_model / load_model --------------------
base = torch.zeros(10)
shared = {"w": base, "v": base[:5], "other": torch.ones(3)}
out["storage_same"] = storage_ptr(shared["w"]) == storage_ptr(shared["v"])
out["storage_size"] = storage_size(shared["v"])
out["end_ptr"] = _end_ptr(shared["v"]) - shared["v"].data_ptr()
out["shared_groups"] = sorted(sorted(g) for g in _find_shared_tensors(shared))
out["remove_dups"] = {k: v for k, v in _remove_duplicate_names(shared).items()}
out["is_complete"] = [_is_complete(base), _is_complete(base[:5]), _is_complete(torch.zeros((2, 2), device="meta"))]
out["save_shared"] = exc(lambda: save_file(shared, path("bad.safetensors")))
out["save_noncontig"] = exc(lambda: save_file({"t": torch.zeros(4, 4).t()}, path("bad.safetensors")))
out["save_sparse"] = exc(lambda: save_file({"s": torch.zeros(3, 3).to_sparse()}, path("bad.safetensors")))
out["save_not_tensor"] = exc(lambda: save_file({"s": [1, 2]}, path("bad.safetensors")))


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(4, 3)
        self.head = torch.nn.Linear(3, 4, bias=False)
        self.head.weight = self.emb.weight


m = Tied()
with torch.no_grad():
    m.emb.weight.copy_(torch.arange(12, dtype=torch.float32).reshape(4, 3))
save_model(m, path("tied.safetensors"))
with safe_open(path("tied.safetensors"), framework="pt") as f:
    out["tied_keys"] = f.keys()
    out["tied_meta"] = f.metadata()
m2 = Tied()
missing, unexpected = load_model(m2, path("tied.safetensors"))
out["load_model"] = [sorted(missing), sorted(unexpected), m2.head.weight.sum().item(),
                     m2.head.weight.data_ptr() == m2.emb.weight.data_ptr()]

print(json.dumps(out, sort_keys=True))
