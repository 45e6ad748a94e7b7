#!/usr/bin/python3
"""torch_gen.py OUTDIR - writes small real torch.save checkpoints for pagein's
tests (Debian's python3-torch). Every file is small; the whole run takes a
couple of seconds, most of it importing torch.

Files (all under OUTDIR):
  modules.pt      state dicts of real nn modules (Linear, Conv2d, BatchNorm
                  with num_batches_tracked, Embedding, LSTM, a small
                  TransformerEncoder) in one nested dict, plus ints/strings
  dtypes.pt       one tensor of every dtype torch 1.13 can save
  views.pt        tied weights, views, slices, transposes, expand, 0-d and
                  empty tensors
  params.pt       nn.Parameter objects (the _rebuild_parameter path)
  tensor.pt       a lone tensor (torch.save(tensor))
  checkpoint.pt   {"model": ..., "optimizer": Adam state, "epoch": 3, ...}
  legacy.pt       the pre-1.6 format (_use_new_zipfile_serialization=False)
  evil_system.pt  a pickle whose loading would call os.system(touch FILE)
  evil_eval.pt    a pickle that would call builtins.eval
  compressed.pt   modules.pt repacked with deflate
  truncated.pt    modules.pt cut in half
  corrupt_pkl.pt  data.pkl with garbage in the middle (same length)
  missing_storage.pt  data.pkl refers to a storage record that is absent
The evil files' payload would create OUTDIR/PWNED; tests assert it never
appears.
"""
import collections
import io
import os
import sys
import zipfile

import torch

torch.manual_seed(0)
out = os.path.abspath(sys.argv[1])
os.makedirs(out, exist_ok=True)


def path(n):
    return os.path.join(out, n)


# ---- real modules -----------------------------------------------------------
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.lstm = torch.nn.LSTM(16, 8, num_layers=2)
        layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2)
        self.head = torch.nn.Linear(16, 50)
        self.head.weight = self.embed.weight  # tied


net = Net()
net.bn(net.conv(torch.randn(2, 3, 8, 8)))  # num_batches_tracked = 1, running stats move
torch.save(
    {"state_dict": net.state_dict(), "step": 7, "name": "tiny", "lr": 0.5, "flag": True, "none": None,
     "shape": (2, 3)},
    path("modules.pt"))

# ---- every dtype torch 1.13 saves --------------------------------------------
dt = collections.OrderedDict()
dt["f32"] = torch.randn(3, 4)
dt["f64"] = torch.randn(5, dtype=torch.float64)
dt["f16"] = torch.randn(2, 3).half()
dt["bf16"] = torch.randn(2, 3).bfloat16()
dt["i64"] = torch.arange(-5, 5, dtype=torch.int64)
dt["i32"] = torch.arange(-3, 3, dtype=torch.int32)
dt["i16"] = torch.arange(-3, 3, dtype=torch.int16)
dt["i8"] = torch.arange(-128, 128, 37, dtype=torch.int8)
dt["u8"] = torch.arange(0, 256, 51, dtype=torch.uint8)
dt["bool"] = torch.tensor([True, False, True])
dt["c64"] = torch.randn(4, dtype=torch.complex64)
torch.save(dt, path("dtypes.pt"))

# ---- views, ties, strides -----------------------------------------------------
base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
v = {
    "base": base,
    "tied": base,                      # same tensor object twice
    "row": base[1],                    # view at an offset
    "rows": base[1:3],                 # contiguous slice
    "cols": base[:, 1:4],              # non-contiguous slice
    "t": base.t(),                     # transpose
    "step": base[:, ::2],              # stride 2
    "expand": torch.arange(3.0).reshape(3, 1).expand(3, 4),  # stride 0
    "scalar": torch.tensor(3.5),       # 0-d
    "empty": torch.zeros(0, 5),
    "nested": {"a": [base[0], {"b": base[2, 1:]}], "c": (torch.ones(2), 5)},
}
torch.save(v, path("views.pt"))

# ---- parameters -----------------------------------------------------------------
torch.save({"w": torch.nn.Parameter(torch.randn(2, 2)),
            "frozen": torch.nn.Parameter(torch.randn(3), requires_grad=False)}, path("params.pt"))
torch.save(torch.arange(10, dtype=torch.int16), path("tensor.pt"))

# ---- a training checkpoint ---------------------------------------------------------
lin = torch.nn.Linear(4, 3)
opt = torch.optim.Adam(lin.parameters(), lr=1e-3)
lin(torch.randn(2, 4)).sum().backward()
opt.step()
torch.save({"model": lin.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, path("checkpoint.pt"))

# ---- legacy format -----------------------------------------------------------------
torch.save({"w": torch.ones(2)}, path("legacy.pt"), _use_new_zipfile_serialization=False)


# ---- malicious pickles: would run code under plain pickle -------------------------
class Evil:
    def __init__(self, fn, arg):
        self.fn, self.arg = fn, arg

    def __reduce__(self):
        return (self.fn, (self.arg,))


pwned = path("PWNED")
torch.save({"w": torch.ones(2), "x": Evil(os.system, "touch " + pwned)}, path("evil_system.pt"))
torch.save({"x": Evil(eval, "open(%r, 'w').write('x')" % pwned), "w": torch.ones(2)}, path("evil_eval.pt"))


# ---- broken containers -------------------------------------------------------------
def rewrite(src, dst, fn=None, compress=zipfile.ZIP_STORED, drop=None):
    zin = zipfile.ZipFile(src)
    with zipfile.ZipFile(dst, "w", compression=compress) as zout:
        for info in zin.infolist():
            if drop and info.filename.endswith(drop):
                continue
            data = zin.read(info.filename)
            if fn:
                data = fn(info.filename, data)
            zout.writestr(info.filename, data, compress_type=compress)


rewrite(path("modules.pt"), path("compressed.pt"), compress=zipfile.ZIP_DEFLATED)
with open(path("modules.pt"), "rb") as f:
    whole = f.read()
with open(path("truncated.pt"), "wb") as f:
    f.write(whole[: len(whole) // 2])


def corrupt(name, data):
    if name.endswith("data.pkl"):
        mid = len(data) // 2
        return data[:mid] + b"\xff\xfe\xfd\xfc" + data[mid + 4:]
    return data


rewrite(path("dtypes.pt"), path("corrupt_pkl.pt"), corrupt)
rewrite(path("dtypes.pt"), path("missing_storage.pt"), drop="/data/3")

# the allowlist pagein implements must be torch's (pickle.c says so)
from torch._weights_only_unpickler import _get_allowed_globals  # noqa: E402
with open(path("allowlist.txt"), "w") as f:
    f.write("\n".join(sorted(_get_allowed_globals())) + "\n")
