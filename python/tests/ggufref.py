"""A small, independent GGUF reader for the tests (versions 2 and 3,
little-endian), written from ../shared/specs/GGUF.md; shares no code with
pagein. Returns metadata as Python values and each tensor's raw bytes."""
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
        n = take("Q")
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
        et, n = take("I"), take("Q")
        return [value(et) for _ in range(n)]

    assert d[:4] == b"GGUF"
    pos = 4
    version = take("I")
    assert version in (2, 3), version
    nt, nkv = take("Q"), take("Q")
    meta = {}
    for _ in range(nkv):
        k = string()
        meta[k] = value(take("I"))
    infos = []
    for _ in range(nt):
        name = string()
        nd = take("I")
        ne = [take("Q") for _ in range(nd)]
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
