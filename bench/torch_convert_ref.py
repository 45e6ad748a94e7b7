#!/usr/bin/python3
"""torch_convert_ref.py IN OUT - the Python baseline for `pagein convert`:
torch.load + a minimal pure-Python safetensors writer (the safetensors
package is not in Debian), as a conversion script would do it. Tensors are
made contiguous and written in full, like pagein does."""
import json
import struct
import sys

import torch

NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
         torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
         torch.bool: "BOOL", torch.complex64: "C64"}


def flat(obj, prefix, out):
    if isinstance(obj, torch.Tensor):
        out[prefix or "tensor"] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flat(v, f"{prefix}.{k}" if prefix else str(k), out)


sd = {}
flat(torch.load(sys.argv[1], map_location="cpu", weights_only=True), "", sd)
hdr, off = {"__metadata__": {"format": "pt"}}, 0
for k, t in sd.items():
    n = t.numel() * t.element_size()
    hdr[k] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + n]}
    off += n
h = json.dumps(hdr, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
    for t in sd.values():
        t = t.contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        f.write(t.numpy().tobytes())
