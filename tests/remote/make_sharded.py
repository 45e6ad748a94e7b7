#!/usr/bin/env python3
"""make_sharded.py OUTDIR [SHARDS] [FLOATS_PER_TENSOR] [META_BYTES]: writes a
small sharded safetensors model (model-0000i-of-0000N.safetensors, two F32
tensors per shard in layers.i.*, plus model.safetensors.index.json) for the
remote tests. META_BYTES > 0 adds a __metadata__ string of that many bytes
to each header (a header larger than a remote open's first request).
Deterministic bytes (no numpy needed)."""
import json
import os
import struct
import sys

out = sys.argv[1]
shards = int(sys.argv[2]) if len(sys.argv) > 2 else 2
n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
meta = int(sys.argv[4]) if len(sys.argv) > 4 else 0
os.makedirs(out, exist_ok=True)
weight_map = {}
total = 0
for s in range(shards):
    name = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
    header, blobs, off = {}, [], 0
    for t in ("weight", "bias"):
        tname = "model.layers.%d.%s" % (s, t)
        data = struct.pack("<%df" % n, *[(s * 7 + i) * 0.5 for i in range(n)])
        header[tname] = {"dtype": "F32", "shape": [n], "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
        weight_map[tname] = name
    if meta > 0:
        header["__metadata__"] = {"pad": "p" * meta}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    total += off
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
