#!/usr/bin/python3
"""dequant_ref.py - an independent numpy dequantizer for ggml block types,
used to check pagein_tensor_dequantize (tests/test_dequant.c). It shares no
code with pagein: each type is written from the block layouts of
../shared/specs/GGUF.md section 2 as a gather over per-element indices
(which byte, which bits, which scale), then float32 arithmetic in ggml's
order (scale * quant, then - min or + min).

  dequant_ref.py blocks TYPE IN OUT [TYPE IN OUT]...
                                      IN holds whole blocks (or elements) of
                                      TYPE; writes OUT.f32, OUT.f16, OUT.bf16
                                      (many triples: one numpy start)
  dequant_ref.py gguf FILE OUTDIR     every tensor of FILE with a type known
                                      here: OUTDIR/<i>.f32 (i = tensor
                                      index in the file); prints one line
                                      "i<TAB>name<TAB>type" per tensor
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_ref  # noqa: E402  (the independent GGUF reader: tensor offsets)

F32 = np.float32
IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=F32)

# name -> (ggml id, block elements, block bytes)
TYPES = {
    "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34), "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "Q8_K": (15, 256, 292), "IQ4_NL": (20, 32, 18),
    "IQ4_XS": (23, 256, 136),
}
PLAIN = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I8": "i1", "U8": "u1", "I16": "<i2", "U16": "<u2",
         "I32": "<i4", "U32": "<u4", "I64": "<i8", "U64": "<u8", "BOOL": "u1", "BF16": "<u2"}
BY_ID = {v[0]: k for k, v in TYPES.items()}
BY_ID.update({0: "F32", 1: "F16", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 30: "BF16"})


def f16(b, off):
    """the fp16 at byte off of every block, as float32 column (exact)"""
    return b[:, off:off + 2].copy().view("<f2").astype(F32)


def u(a):
    return a.astype(np.int64)


def fl(a):
    return np.asarray(a).astype(F32)


def q4_0(b):
    d = f16(b, 0)
    qs = u(b[:, 2:18])
    q = np.concatenate([(qs & 15) - 8, (qs >> 4) - 8], axis=1)
    return fl(q) * d


def q4_1(b):
    d, m = f16(b, 0), f16(b, 2)
    qs = u(b[:, 4:20])
    q = np.concatenate([qs & 15, qs >> 4], axis=1)
    return fl(q) * d + m


def high_bits(b, off):
    qh = u(b[:, off:off + 4].copy().view("<u4"))  # (nb, 1)
    return (qh >> np.arange(32)) & 1  # bit e for element e


def q5_0(b):
    d = f16(b, 0)
    qs = u(b[:, 6:22])
    q = np.concatenate([qs & 15, qs >> 4], axis=1) | (high_bits(b, 2) << 4)
    return fl(q - 16) * d


def q5_1(b):
    d, m = f16(b, 0), f16(b, 2)
    qs = u(b[:, 8:24])
    q = np.concatenate([qs & 15, qs >> 4], axis=1) | (high_bits(b, 4) << 4)
    return fl(q) * d + m


def q8_0(b):
    return fl(b[:, 2:34].view("i1")) * f16(b, 0)


E = np.arange(256)


def q2_k(b):
    sc, qs = u(b[:, 0:16]), u(b[:, 16:80])
    d, dmin = f16(b, 80), f16(b, 82)
    n, r = E // 128, E % 128
    byte = n * 32 + ((r % 32) // 16) * 16 + r % 16
    q = (qs[:, byte] >> (2 * (r // 32))) & 3
    s = sc[:, E // 16]
    return (d * fl(s & 15)) * fl(q) - dmin * fl(s >> 4)


def q3_k(b):
    hm, qs, sc = u(b[:, 0:32]), u(b[:, 32:96]), u(b[:, 96:108])
    d = f16(b, 108)
    n, r = E // 128, E % 128
    j, half, ll = r // 32, (r % 32) // 16, r % 16
    q = (qs[:, n * 32 + half * 16 + ll] >> (2 * j)) & 3
    h = (hm[:, half * 16 + ll] >> (n * 4 + j)) & 1
    v = q - np.where(h == 1, 0, 4)
    i = np.arange(16)
    lo = np.where(i < 8, sc[:, i % 8] & 15, sc[:, i % 8] >> 4)
    hi = (sc[:, 8 + i % 4] >> (2 * (i // 4))) & 3
    scale = (lo | (hi << 4)) - 32  # (nb, 16)
    return (d * fl(scale[:, E // 16])) * fl(v)


def k4(sc):
    """the 8 (scale, min) pairs of Q4_K/Q5_K: (nb, 8) each"""
    s = np.zeros((sc.shape[0], 8), np.int64)
    m = np.zeros_like(s)
    for j in range(8):
        if j < 4:
            s[:, j] = sc[:, j] & 63
            m[:, j] = sc[:, j + 4] & 63
        else:
            s[:, j] = (sc[:, j + 4] & 15) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return s, m


def q4_k(b):
    d, dmin = f16(b, 0), f16(b, 2)
    s, m = k4(u(b[:, 4:16]))
    qs = u(b[:, 16:144])
    g, r = E // 64, E % 64
    q = (qs[:, g * 32 + r % 32] >> (4 * (r // 32))) & 15
    sub = E // 32
    return (d * fl(s[:, sub])) * fl(q) - dmin * fl(m[:, sub])


def q5_k(b):
    d, dmin = f16(b, 0), f16(b, 2)
    s, m = k4(u(b[:, 4:16]))
    qh, qs = u(b[:, 16:48]), u(b[:, 48:176])
    g, r = E // 64, E % 64
    sub = E // 32
    q = ((qs[:, g * 32 + r % 32] >> (4 * (r // 32))) & 15) + 16 * ((qh[:, r % 32] >> sub) & 1)
    return (d * fl(s[:, sub])) * fl(q) - dmin * fl(m[:, sub])


def q6_k(b):
    ql, qh = u(b[:, 0:128]), u(b[:, 128:192])
    sc = b[:, 192:208].view("i1").astype(np.int64)
    d = f16(b, 208)
    n, r = E // 128, E % 128
    k, ll = r // 32, r % 32
    nib = (ql[:, n * 64 + (k % 2) * 32 + ll] >> (4 * (k // 2))) & 15
    hb = (qh[:, n * 32 + ll] >> (2 * k)) & 3
    q = (nib | (hb << 4)) - 32
    return (d * fl(sc[:, n * 8 + ll // 16 + 2 * k])) * fl(q)


def q8_k(b):
    d = b[:, 0:4].copy().view("<f4").astype(F32)
    return d * fl(b[:, 4:260].view("i1"))


def iq4_nl(b):
    d = f16(b, 0)
    qs = u(b[:, 2:18])
    idx = np.concatenate([qs & 15, qs >> 4], axis=1)
    return d * IQ4NL[idx]


def iq4_xs(b):
    d = f16(b, 0)
    sh = u(b[:, 2:4].copy().view("<u2"))  # (nb, 1)
    sl, qs = u(b[:, 4:8]), u(b[:, 8:136])
    ib, r = E // 32, E % 32
    idx = (qs[:, ib * 16 + r % 16] >> (4 * (r // 16))) & 15
    ls = ((sl[:, ib // 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4)
    return (d * fl(ls - 32)) * IQ4NL[idx]


FN = {"Q4_0": q4_0, "Q4_1": q4_1, "Q5_0": q5_0, "Q5_1": q5_1, "Q8_0": q8_0, "Q2_K": q2_k, "Q3_K": q3_k,
      "Q4_K": q4_k, "Q5_K": q5_k, "Q6_K": q6_k, "Q8_K": q8_k, "IQ4_NL": iq4_nl, "IQ4_XS": iq4_xs}


def dequant(name, data):
    with np.errstate(all="ignore"):
        if name in PLAIN:
            a = np.frombuffer(data, PLAIN[name])
            if name == "BF16":
                return (a.astype(np.uint32) << 16).view(F32)
            if name == "BOOL":
                return (a != 0).astype(F32)
            return a.astype(F32)
        _, be, bb = TYPES[name]
        if len(data) % bb:
            raise ValueError("%d bytes is not whole %s blocks" % (len(data), name))
        b = np.frombuffer(data, np.uint8).reshape(-1, bb)
        y = FN[name](b)
        assert y.dtype == F32 and y.shape == (b.shape[0], be), (name, y.dtype, y.shape)
        return y.reshape(-1)


def to_bf16(y):
    x = y.view(np.uint32).astype(np.uint64)
    nan = np.isnan(y)
    r = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((x >> 16) | 0x40).astype(np.uint16), r)


def main(argv):
    if len(argv) >= 5 and (len(argv) - 2) % 3 == 0 and argv[1] == "blocks":
        for k in range(2, len(argv), 3):
            ty, inp, out = argv[k:k + 3]
            y = dequant(ty, open(inp, "rb").read())
            y.astype("<f4").tofile(out + ".f32")
            with np.errstate(all="ignore"):
                y.astype("<f2").tofile(out + ".f16")
            to_bf16(y).astype("<u2").tofile(out + ".bf16")
        return 0
    if len(argv) == 4 and argv[1] == "gguf":
        info = gguf_ref.read(argv[2])
        data = open(argv[2], "rb").read()
        for i, t in enumerate(info["tensors"]):
            name = BY_ID.get(t["type"])
            if name is None or info["big_endian"]:
                continue
            raw = data[t["offset"]:t["offset"] + t["nbytes"]]
            dequant(name, raw).astype("<f4").tofile(os.path.join(argv[3], "%d.f32" % i))
            print("%d\t%s\t%s" % (i, t["name"], name))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
