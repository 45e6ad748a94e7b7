#!/usr/bin/python3
"""gen_expand.py - malformed checkpoints from torch's own DCP writer: each
item saved by FileSystemWriter, then its blob swapped for
torch.save(one_byte.expand(SHAPE)) (stride 0: SHAPE's elements in 1 stored
byte) and the .metadata's sizes patched to SHAPE. "big": one [2^17, 2^17]
U8 tensor (16 GiB claimed by 747 bytes); "wrap": 8 tensors of 2^61 - 2^30
bytes and one of 2^33 + 2^21, whose page-aligned sum wraps 64 bits. pagein
refuses both (overlapping or zero strides). Run from the repository root:

    /usr/bin/python3 tests/data/dcp/gen_expand.py tests/data/dcp/expand_big big
    /usr/bin/python3 tests/data/dcp/gen_expand.py tests/data/dcp/expand_wrap wrap
"""
import importlib.util, sys, os, io, pickle, torch
spec = importlib.util.spec_from_file_location("_dcpcompat", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python", "pagein", "_dcpcompat.py"))
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
dcp = m.import_torch_dcp()
out = sys.argv[1]; mode = sys.argv[2]
os.makedirs(out, exist_ok=True)
one = torch.zeros(1, dtype=torch.uint8)
if mode == "big":
    shapes = {"x": (1 << 17, 1 << 17)}            # 16 GiB from 1 byte
else:
    shapes = {"a%d" % i: (1 << 30, (1 << 31) - 1) for i in range(8)}   # 4 x 2^62 bytes
    shapes["z"] = (4097, 1 << 21)                              # + 2 MiB: total wraps to 2 MiB
sd = {k: torch.zeros(2, 2, dtype=torch.uint8) for k in shapes}
w = dcp.FileSystemWriter(out, single_file_per_rank=True, sync_files=False)
dcp.save_state_dict(sd, storage_writer=w, no_dist=True)
md = pickle.load(open(os.path.join(out, ".metadata"), "rb"))
data = bytearray(); newsd = {}
for k, v in list(md.storage_data.items()):
    b = io.BytesIO(); torch.save(one.expand(*shapes[k.fqn]), b); b = b.getvalue()
    v.offset = len(data); v.length = len(b); data += b
    fname = v.relative_path
    nk = type(k)(k.fqn, torch.Size([0, 0]), k.index)
    newsd[nk] = v
md.storage_data = newsd
for k, t in md.state_dict_metadata.items():
    t.size = torch.Size(shapes[k])
    t.chunks[0].sizes = torch.Size(shapes[k])
open(os.path.join(out, fname), "wb").write(data)
pickle.dump(md, open(os.path.join(out, ".metadata"), "wb"))
print(os.listdir(out), [os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)])
