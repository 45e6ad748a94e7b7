"""chat_pagein.py FILE - rows/s of pagein.data.Dataset over a chat-shaped
Parquet file (messages: list<struct<role, content>>), block order, every
row's messages built as Python lists of dicts; plus exactly-once over 2
ranks (ids only, in this process) and over 2 ranks x 2 torch DataLoader
workers (each rank's DataLoader in turn, rows built in the workers and sent
back; timed), when torch is there."""
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
dl_s, dl_once = None, None
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    t = time.perf_counter()
    got = []
    for r in range(2):
        ds = pd.Dataset(path, shuffle="block", seed=1, rank=r, world_size=2, return_ids=True)
        got += [int(i) for i, _ in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)]
    dl_s = time.perf_counter() - t
    dl_once = sorted(got) == list(range(n))
print('{"rows": %d, "best_s": %.3f, "rows_per_s": %.0f, "exactly_once_2_ranks": %s, '
      '"dataloader_2x2_s": %s, "exactly_once_2_ranks_2_workers": %s}'
      % (n, best, n / best, "true" if sorted(ids) == list(range(n)) else "false",
         "null" if dl_s is None else "%.3f" % dl_s, "null" if dl_once is None else str(dl_once).lower()))
