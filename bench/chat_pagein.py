"""chat_pagein.py FILE - rows/s of pagein.data.Dataset over a chat-shaped
Parquet file (messages: list<struct<role, content>>), block order, every
row's messages built as Python lists of dicts; plus exactly-once over 2
ranks x 2 DataLoader-style workers (ids only)."""
import sys
import time

import pagein.data as pd

path = sys.argv[1]
best = None
for _ in range(3):
    t = time.perf_counter()
    n = sum(1 for _ in pd.Dataset(path, shuffle="block", seed=1))
    dt = time.perf_counter() - t
    best = dt if best is None or dt < best else best
ids = []
for r in range(2):
    ds = pd.Dataset(path, shuffle="block", seed=1, rank=r, world_size=2, return_ids=True)
    ids += [int(i) for i, _ in ds]
print('{"rows": %d, "best_s": %.3f, "rows_per_s": %.0f, "exactly_once_2_ranks": %s}'
      % (n, best, n / best, "true" if sorted(ids) == list(range(n)) else "false"))
