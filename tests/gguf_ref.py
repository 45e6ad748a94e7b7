#!/usr/bin/python3
"""gguf_ref.py - an independent, deliberately simple GGUF reader used to check
pagein's parser (tests/test_gguf_ref.c). It shares no code with pagein and is
written from ../shared/specs/GGUF.md only.

  gguf_ref.py FILE                 dump FILE as JSON on stdout
  gguf_ref.py --compare FILE JSON  compare FILE with pagein's dump in JSON
                                   (the format written by test_gguf_ref.c);
                                   exit 0 if they agree, 1 with differences

Dump format:
  {"version": 3, "big_endian": false, "alignment": 32, "data_start": N,
   "n_kv": K, "n_tensors": T,
   "meta": [{"key": "...", "type": 4, "value": ...}, ...],
   "tensors": [{"name": "...", "type": 8, "ne": [ne0, ne1, ...],
                "offset": ABSOLUTE, "nbytes": N}, ...]}
Scalar values are numbers (floats as float.hex strings), strings are
{"len": N}, arrays {"elem_type": E, "count": C}.
"""
import json
import struct
import sys

# (block elements, bytes per block) by ggml type id, spec section 2.
GGML = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
    8: (32, 34), 9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144),
    13: (256, 176), 14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74),
    18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
    23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
    29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17),
    40: (64, 36), 41: (128, 18), 42: (64, 18),
}
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B",
          10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, data):
        self.d = data
        self.p = 0
        self.e = "<"
        self.v1 = False

    def take(self, fmt):
        n = struct.calcsize(fmt)
        if self.p + n > len(self.d):
            raise ValueError("truncated at %d" % self.p)
        v = struct.unpack_from(self.e + fmt, self.d, self.p)[0]
        self.p += n
        return v

    def length(self):
        return self.take("I" if self.v1 else "Q")

    def string(self):
        n = self.length()
        if self.p + n > len(self.d):
            raise ValueError("string truncated at %d" % self.p)
        s = self.d[self.p:self.p + n]
        self.p += n
        return s

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])
        if t == 8:
            return {"len": len(self.string())}
        if t == 9:
            et = self.take("I")
            count = self.length()
            for _ in range(count):
                self.value(et)
            return {"elem_type": et, "count": count}
        raise ValueError("bad value type %d" % t)


def read(path):
    data = open(path, "rb").read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError("bad magic")
    r.p = 4
    (v,) = struct.unpack_from("<I", data, 4)
    if v & 0xFFFF == 0:
        r.e = ">"
        (v,) = struct.unpack_from(">I", data, 4)
    r.p = 8
    r.v1 = v == 1
    nt = r.length()
    nkv = r.length()
    meta = []
    align = 32
    for _ in range(nkv):
        key = r.string().decode("utf-8", "surrogateescape")
        t = r.take("I")
        val = r.value(t)
        if t == 6 or t == 12:
            val = float(val).hex()
        elif t == 7:
            val = 1 if val else 0
        if key == "general.alignment":
            align = val
        meta.append({"key": key, "type": t, "value": val})
    infos = []
    for _ in range(nt):
        name = r.string().decode("utf-8", "surrogateescape")
        nd = r.take("I")
        ne = [r.length() for _ in range(nd)]
        t = r.take("I")
        off = r.take("Q")
        infos.append((name, ne, t, off))
    ds = r.p
    if nt:
        ds = (r.p + align - 1) // align * align
    tensors = []
    for name, ne, t, off in infos:
        n = 1
        for x in ne:
            n *= x
        blck, size = GGML[t]
        tensors.append({"name": name, "type": t, "ne": ne, "offset": ds + off,
                        "nbytes": n // blck * size})
    return {"version": v, "big_endian": r.e == ">", "alignment": align,
            "data_start": ds, "n_kv": nkv, "n_tensors": nt, "meta": meta,
            "tensors": tensors}


def same_value(a, b):
    if isinstance(a, str) and isinstance(b, str):
        fa, fb = float.fromhex(a), float.fromhex(b)
        return fa == fb or (fa != fa and fb != fb)
    return a == b


def compare(ref, got):
    errs = []
    for k in ("version", "big_endian", "alignment", "data_start", "n_kv", "n_tensors"):
        if ref[k] != got.get(k):
            errs.append("%s: reference %r, pagein %r" % (k, ref[k], got.get(k)))
    if len(ref["meta"]) != len(got.get("meta", [])):
        errs.append("metadata count: reference %d, pagein %d" % (len(ref["meta"]), len(got.get("meta", []))))
    for a, b in zip(ref["meta"], got.get("meta", [])):
        if a["key"] != b["key"] or a["type"] != b["type"] or not same_value(a["value"], b["value"]):
            errs.append("metadata: reference %r, pagein %r" % (a, b))
    if len(ref["tensors"]) != len(got.get("tensors", [])):
        errs.append("tensor count: reference %d, pagein %d" % (len(ref["tensors"]), len(got.get("tensors", []))))
    for a, b in zip(ref["tensors"], got.get("tensors", [])):
        if a != b:
            errs.append("tensor: reference %r, pagein %r" % (a, b))
    return errs


def main(argv):
    if len(argv) == 2:
        json.dump(read(argv[1]), sys.stdout, indent=1)
        print()
        return 0
    if len(argv) == 4 and argv[1] == "--compare":
        errs = compare(read(argv[2]), json.load(open(argv[3], encoding="utf-8", errors="surrogateescape")))
        for e in errs[:20]:
            print(argv[2] + ": " + e)
        return 1 if errs else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
