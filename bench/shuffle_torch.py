#!/usr/bin/env python3
"""shuffle_torch.py - the torch DataLoader baseline of `pagein bench shuffle
--formats`: a map-style Dataset over the shards of one format, one os.pread
per sample in __getitem__, read by torch.utils.data.DataLoader(shuffle=True,
num_workers=W), every sample's bytes touched. The index (where each sample
is) is built first, then every file's page cache is dropped
(posix_fadvise DONTNEED on the paths given after --evict), then the epoch is
timed. Prints one JSON line: {"seconds", "samples", "bytes", "index_seconds"},
or {"skipped": REASON} when torch does not import.

    shuffle_torch.py FORMAT DIR ROW_BYTES SEED WORKERS [--evict PATH...]
"""
import json
import os
import sys
import time


def shards(d, ext):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(ext))


def index(fmt, d, row):
    """[(path, offset, length)] of every sample, in id order."""
    out = []
    if fmt == "records":
        for p in shards(d, ".bin"):
            out += [(p, i * row, row) for i in range(os.path.getsize(p) // row)]
    elif fmt == "webdataset":
        import tarfile
        for p in shards(d, ".tar"):
            with tarfile.open(p) as tf:
                out += [(p, m.offset_data, m.size) for m in tf.getmembers() if m.isfile()]
    elif fmt == "mds":
        import struct
        for p in shards(d, ".mds"):
            with open(p, "rb") as fh:
                n = struct.unpack("<I", fh.read(4))[0]
                offs = struct.unpack("<%dI" % (n + 1), fh.read(4 * (n + 1)))
            out += [(p, offs[i], offs[i + 1] - offs[i]) for i in range(n)]
    elif fmt == "lines":
        for p in shards(d, ".jsonl"):
            with open(p, "rb") as fh:
                start, pos = 0, 0
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    k = chunk.find(b"\n")
                    while k >= 0:
                        if pos + k > start:
                            out.append((p, start, pos + k - start))
                        start = pos + k + 1
                        k = chunk.find(b"\n", k + 1)
                    pos += len(chunk)
    elif fmt == "arrow":
        files = shards(d, ".arrow")
        with open(os.path.join(d, "layout.pagein")) as fh:
            batches = [tuple(int(x) for x in line.split()) for line in fh]
        for s, first, n, offsets_at, data_at in batches:
            out += [(files[s], (offsets_at, data_at), j) for j in range(n)]
    else:
        raise SystemExit("shuffle_torch.py: unknown format %r" % fmt)
    return out


def main():
    fmt, d, row, seed, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    evict = sys.argv[sys.argv.index("--evict") + 1:] if "--evict" in sys.argv else []
    try:
        import torch
        from torch.utils.data import DataLoader, Dataset
    except ImportError as e:
        print(json.dumps({"skipped": "torch does not import: %s" % e}))
        return
    t0 = time.monotonic()
    idx = index(fmt, d, row)
    t1 = time.monotonic()

    class PerSample(Dataset):
        def __init__(self, idx):
            self.idx, self.fds = idx, {}

        def __len__(self):
            return len(self.idx)

        def fd(self, p):
            if p not in self.fds:
                self.fds[p] = os.open(p, os.O_RDONLY)
            return self.fds[p]

        def __getitem__(self, i):
            p, off, n = self.idx[i]
            if isinstance(off, tuple):  # arrow: the row's two offsets, then its bytes
                o = os.pread(self.fd(p), 8, off[0] + 4 * n)
                a, b = int.from_bytes(o[:4], "little"), int.from_bytes(o[4:], "little")
                return os.pread(self.fd(p), b - a, off[1] + a)
            return os.pread(self.fd(p), n, off)

    for p in evict:
        try:
            fd = os.open(p, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        except OSError:
            pass
    g = torch.Generator()
    g.manual_seed(seed)
    dl = DataLoader(PerSample(idx), batch_size=64, shuffle=True, num_workers=workers, generator=g,
                    collate_fn=lambda b: b)
    t2 = time.monotonic()
    n = nbytes = sink = 0
    for batch in dl:
        for s in batch:
            n += 1
            nbytes += len(s)
            sink += s[::4096].count(0)  # every page touched
    t3 = time.monotonic()
    print(json.dumps({"seconds": t3 - t2, "samples": n, "bytes": nbytes, "index_seconds": t1 - t0,
                      "workers": workers}))


if __name__ == "__main__":
    main()
