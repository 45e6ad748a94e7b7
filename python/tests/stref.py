"""An independent, pure-numpy safetensors reader and writer for the tests.

Written from ../shared/specs/SAFETENSORS.md only; shares no code with
pagein. Values come back with the same numpy types pagein uses (BF16 as
uint16, F8 as uint8, F4/F6 as packed uint8 bytes), so arrays can be compared
byte for byte.
"""
import json
import struct

import numpy as np

# name -> (bits per element, numpy dtype of the raw values or None = packed bytes)
DTYPES = {
    "BOOL": (8, np.bool_), "F4": (4, None), "F6_E2M3": (6, None), "F6_E3M2": (6, None),
    "U8": (8, np.uint8), "I8": (8, np.int8),
    "F8_E5M2": (8, np.uint8), "F8_E4M3": (8, np.uint8), "F8_E8M0": (8, np.uint8),
    "F8_E4M3FNUZ": (8, np.uint8), "F8_E5M2FNUZ": (8, np.uint8),
    "I16": (16, np.int16), "U16": (16, np.uint16), "F16": (16, np.float16), "BF16": (16, np.uint16),
    "I32": (32, np.int32), "U32": (32, np.uint32), "F32": (32, np.float32),
    "C64": (64, np.complex64), "F64": (64, np.float64), "I64": (64, np.int64), "U64": (64, np.uint64),
}
ORDER = list(DTYPES)  # the Rust enum order; the official writer sorts descending


def read(path):
    """-> (metadata dict or None, {name: (dtype, shape list, numpy array)})"""
    with open(path, "rb") as fh:
        data = fh.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n].decode("utf-8"))
    start = 8 + n
    meta = header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        dtype, shape = e["dtype"], list(e["shape"])
        b, end = e["data_offsets"]
        raw = data[start + b:start + end]
        bits, npt = DTYPES[dtype]
        count = 1
        for d in shape:
            count *= d
        assert count * bits == len(raw) * 8, name
        if npt is None:
            arr = np.frombuffer(raw, dtype=np.uint8).copy()
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(npt).newbyteorder("<")).astype(npt).reshape(shape)
        out[name] = (dtype, shape, arr)
    return meta, out


def write(path, tensors, metadata=None, sync=False):
    """tensors: {name: (dtype name, shape, raw bytes)}; official layout:
    dtype descending then name, compact JSON, __metadata__ first, header
    padded with spaces to a multiple of 8. sync=True fsyncs (dirty pages
    cannot be evicted from the page cache)."""
    names = sorted(tensors, key=lambda k: (-ORDER.index(tensors[k][0]), k))
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    for k in names:
        dtype, shape, raw = tensors[k]
        header[k] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(hb)))
        fh.write(hb)
        for k in names:
            fh.write(tensors[k][2])
        if sync:
            fh.flush()
            import os
            os.fsync(fh.fileno())


def random_tensor(rng, dtype, shape):
    """Random raw bytes for dtype/shape (finite values for float types)."""
    bits, npt = DTYPES[dtype]
    count = 1
    for d in shape:
        count *= d
    nbytes = count * bits // 8
    if dtype == "BOOL":
        return rng.integers(0, 2, count).astype(np.uint8).tobytes()
    if dtype in ("F16", "F32", "F64"):
        return (rng.standard_normal(count) * 10).astype(np.dtype(npt).newbyteorder("<")).tobytes()
    if dtype == "C64":
        v = rng.standard_normal(count) + 1j * rng.standard_normal(count)
        return v.astype("<c8").tobytes()
    if dtype == "BF16":
        f = rng.standard_normal(count).astype("<f4")
        return (f.view("<u4") >> 16).astype("<u2").tobytes()
    return rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes()
