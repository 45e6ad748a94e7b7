"""A small, independent GGUF reader and writer for the tests (versions 1, 2
and 3, little-endian), written from the GGUF spec (v1: 32-bit counts,
lengths and dims); shares no code with pagein. read() returns metadata as
Python values and each tensor's raw bytes; write() makes files of any
version for the tests."""
import struct

# ggml type id -> (name, block elements, block bytes)
GGML = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
        6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
        10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
        13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
        24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8),
        28: ("F64", 1, 8), 30: ("BF16", 1, 2)}
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def read(path):
    """-> (version, metadata dict, [(name, dtype, shape outermost first, bytes)])"""
    d = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, d, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take(L)
        s = d[pos:pos + n]
        assert len(s) == n
        pos += n
        return s.decode("utf-8", "surrogateescape")

    def value(t):
        if t in SCALAR:
            return take(SCALAR[t])
        if t == 8:
            return string()
        assert t == 9, t
        et, n = take("I"), take(L)
        return [value(et) for _ in range(n)]

    assert d[:4] == b"GGUF"
    pos = 4
    version = take("I")
    assert version in (1, 2, 3), version
    L = "I" if version == 1 else "Q"  # v1: 32-bit counts, lengths, dims
    nt, nkv = take(L), take(L)
    meta = {}
    for _ in range(nkv):
        k = string()
        meta[k] = value(take("I"))
    infos = []
    for _ in range(nt):
        name = string()
        nd = take("I")
        ne = [take(L) for _ in range(nd)]
        t, off = take("I"), take("Q")
        infos.append((name, t, ne, off))
    align = meta.get("general.alignment", 32)
    start = (pos + align - 1) // align * align
    out = []
    for name, t, ne, off in infos:
        tname, be, bb = GGML[t]
        n = 1
        for x in ne:
            n *= x
        nbytes = n * bb // be
        out.append((name, tname, list(reversed(ne)), d[start + off:start + off + nbytes]))
    return version, meta, out


TYPE_ID = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8,
           "arr": 9, "u64": 10, "i64": 11, "f64": 12}


def write(path, meta, tensors=(), version=3, alignment=32):
    """Writes a GGUF file. meta: [(key, type name, value)], arrays as
    (key, "arr", (element type name, [values])), nested arrays as element
    type "arr" with (type name, [values]) elements. tensors: [(name, ggml
    type id, shape outermost first, bytes)]."""
    L = "<I" if version == 1 else "<Q"
    out = bytearray(b"GGUF" + struct.pack("<I", version))
    out += struct.pack(L, len(tensors)) + struct.pack(L, len(meta))

    def string(s):
        b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s
        return struct.pack(L, len(b)) + b

    def value(t, v):
        tid = TYPE_ID[t]
        if tid in SCALAR:
            return struct.pack("<" + SCALAR[tid], v)
        if tid == 8:
            return string(v)
        et, items = v
        return struct.pack("<I", TYPE_ID[et]) + struct.pack(L, len(items)) + b"".join(value(et, x) for x in items)

    for k, t, v in meta:
        out += string(k) + struct.pack("<I", TYPE_ID[t]) + value(t, v)
    off = 0
    offs = []
    for name, tid, shape, raw in tensors:
        offs.append(off)
        off += (len(raw) + alignment - 1) // alignment * alignment
    for (name, tid, shape, raw), o in zip(tensors, offs):
        out += string(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack(L, d) for d in reversed(shape))
        out += struct.pack("<I", tid) + struct.pack("<Q", o)
    out += b"\0" * (-len(out) % alignment)
    for name, tid, shape, raw in tensors:
        out += raw + b"\0" * (-len(raw) % alignment)
    with open(path, "wb") as fh:
        fh.write(out)
