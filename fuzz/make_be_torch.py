#!/usr/bin/python3
"""make_be_torch.py OUT - writes a big-endian torch.save checkpoint, as a
big-endian machine (s390x) would, from a little-endian one: torch.save on
this host, then the zip's archive/byteorder record says "big" and every
storage's bytes are swapped per element. torch 1.13's torch.load ignores
the byteorder record, so the script checks the construction by reading the
file back with it: every element must be the byte-swapped original. With
PAGEIN=path/to/pagein it also checks that `pagein convert` of the
big-endian file gives the same safetensors bytes as of the little-endian
original. Produced fuzz/corpus/torch/be.pt and its copy in
fuzz/corpus/open_file (the big-endian path had no corpus entry).
Needs python3-torch."""
import io
import sys
import zipfile

import torch

torch.manual_seed(0)
obj = {
    "f32": torch.randn(3, 4),
    "f64": torch.randn(5, dtype=torch.float64),
    "i16": torch.arange(-6, 6, dtype=torch.int16).reshape(2, 6),
    "i64": torch.arange(7, dtype=torch.int64),
    "bf16": torch.randn(4, dtype=torch.bfloat16),
    "f16": torch.randn(2, 2, dtype=torch.float16),
    "u8": torch.arange(5, dtype=torch.uint8),
    "strided": torch.randn(4, 3).t(),
    "epoch": 3,
}
buf = io.BytesIO()
torch.save(obj, buf)
src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
# storage keys are assigned in order of first appearance; map them by size
# through torch's own pickle: reload with persistent ids recorded
import pickle


class U(pickle.Unpickler):
    def __init__(self, f):
        super().__init__(f)
        self.sizes = {}

    def find_class(self, mod, name):
        if mod == "torch._utils" and name == "_rebuild_tensor_v2":
            return lambda *a, **k: None
        if mod == "torch" and name.endswith("Storage"):
            return getattr(torch, name)
        if mod == "collections" and name == "OrderedDict":
            import collections
            return collections.OrderedDict
        return super().find_class(mod, name)

    def persistent_load(self, pid):
        # ('storage', StorageType, key, location, numel)
        self.sizes[pid[2]] = pid[1](0).element_size() if hasattr(pid[1], "__call__") else 1
        return None


prefix = src.namelist()[0].split("/")[0]
u = U(io.BytesIO(src.read(prefix + "/data.pkl")))
u.load()
out = io.BytesIO()
with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
    for info in src.infolist():
        data = src.read(info.filename)
        rel = info.filename[len(prefix) + 1:]
        if rel == "byteorder":
            data = b"big"
        elif rel.startswith("data/"):
            es = u.sizes[rel[5:]]
            if es > 1:
                data = b"".join(data[i:i + es][::-1] for i in range(0, len(data), es))
        z.writestr(info.filename, data)
    if prefix + "/byteorder" not in src.namelist():
        z.writestr(prefix + "/byteorder", b"big")
open(sys.argv[1], "wb").write(out.getvalue())


def raw(t):
    return t.contiguous().view(torch.uint8).numpy().tobytes()


back = torch.load(sys.argv[1])
for k, v in obj.items():
    if torch.is_tensor(v):
        es = v.element_size()
        a, b = raw(v), raw(back[k])
        want = b"".join(a[i:i + es][::-1] for i in range(0, len(a), es))
        assert back[k].dtype == v.dtype and b == want, k
    else:
        assert back[k] == v, k
import os
import subprocess
import tempfile

if os.environ.get("PAGEIN"):
    with tempfile.TemporaryDirectory() as d:
        le = os.path.join(d, "le.pt")
        open(le, "wb").write(buf.getvalue())
        for n, f in (("be", sys.argv[1]), ("le", le)):
            subprocess.run([os.environ["PAGEIN"], "convert", f, os.path.join(d, n + ".safetensors"), "-q"], check=True)
        same = open(os.path.join(d, "be.safetensors"), "rb").read() == open(os.path.join(d, "le.safetensors"), "rb").read()
        assert same, "pagein reads the big-endian file differently"
        print("pagein convert: big-endian and little-endian originals give identical safetensors")
print("ok", sys.argv[1], len(out.getvalue()), "bytes; every element is the byte-swapped original")
