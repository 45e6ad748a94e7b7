"""corpus_pagein.py - pagein's rows of a Parquet or Arrow IPC file as the
canonical JSON of bench/corpus_ref.mjs (one line per row), in file order.
usage: python3 corpus_pagein.py parquet|arrow FILE"""
import decimal
import json
import struct
import sys

import numpy as np

import pagein.data as pd


def canon(v):
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return "NaN" if f != f else struct.pack("<d", f)[::-1].hex()
    if isinstance(v, decimal.Decimal):
        sign, digits, exp = v.as_tuple()
        n = int("".join(map(str, digits)) or "0")
        return "%s%de%d" % ("-" if sign and n else "", n, exp)
    if isinstance(v, np.datetime64):  # milliseconds since the epoch, floored (days for dates)
        unit = np.datetime_data(v.dtype)[0]
        n = int(v.view(np.int64))
        if unit == "D":
            return str(n)
        return str(n * 1000 if unit == "s" else n // {"ms": 1, "us": 1000, "ns": 1000000}[unit])
    if isinstance(v, np.timedelta64):  # microseconds (before np.integer: a timedelta64 is one)
        unit = np.datetime_data(v.dtype)[0]
        n = int(v.view(np.int64))
        return str(n * 1000000 if unit == "s" else n * 1000 if unit == "ms" else n if unit == "us" else n // 1000)
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, np.ndarray):
        return [canon(x) for x in v.tolist()] if v.dtype.kind != "f" else [canon(x) for x in v]
    if isinstance(v, dict):
        return {k: canon(x) for k, x in v.items()}
    if isinstance(v, list):
        return [[canon(x[0]), canon(x[1])] if isinstance(x, tuple) else canon(x) for x in v]
    return "unsupported:%r" % (v,)


kind, path = sys.argv[1], sys.argv[2]
ds = pd.Dataset(path, format=kind, shuffle="none")
out = sys.stdout
for row in ds:
    out.write(json.dumps({k: canon(v) for k, v in row.items()}, ensure_ascii=False, separators=(",", ":")) + "\n")
