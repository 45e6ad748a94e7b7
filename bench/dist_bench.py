#!/usr/bin/env python3
"""dist_bench.py - many ranks on one machine: weights read once, data partitioned.

    PYTHONPATH=build/python /usr/bin/python3 bench/dist_bench.py [--size 1.3G]
        [--ranks 4] [--workers 2] [--data-size 1G] [--record 32K] [--slowfs]
        [--delay-us 1000] [--shared-mount] [--dir DIR] [--only weights|data] [--json]

Weights (a `pagein make-sample` model of --size): three ways for --ranks
ranks (torch.multiprocessing.spawn, gloo over 127.0.0.1) to end with the model:
  naive       every rank loads the whole model itself (pagein.distributed.load
              on a group of one: the same range engine, no exchange)
  replicated  pagein.distributed.load(mode="replicated"): each rank reads 1/N
              and the ranks broadcast
  tp          pagein.distributed.load(mode="tp"): each rank reads its slices
For each: seconds (the slowest rank, from a common barrier; split into its
own reads and what the exchange adds after them), bytes read from storage (slowfs' counters of
bytes served with --slowfs; else the ranks' own read counters) and its ratio
to the model's size. With --slowfs every rank reads through its own slowfs
mount of the same directory, like ranks on separate machines: no rank is
served from another's page cache (--shared-mount: one mount for all, where
naive ranks share the page cache and storage serves each page about once).

Data (--data-size of --record-byte records in three shards): one epoch, global
shuffle, read by (a) `pagein read-samples --mode global` (the C global reader,
one process), (b) pagein.data.Dataset in one process, (c) --ranks ranks x
--workers DataLoader workers; samples/s and MB/s, and a check that (c) yielded
every sample exactly once.

Before each run the files' pages are dropped (posix_fadvise DONTNEED on the
mount and on the backing files) so every byte comes from storage. The machine
may be shared: compare the ratios inside one run.
"""
import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def evict(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def slowfs_stats(mnts):
    """slowfs counters summed over the mounts (None without slowfs)."""
    if not mnts:
        return None
    out = {}
    for mnt in mnts:
        with open(os.path.join(mnt, ".slowfs-stats"), "rb") as fh:
            text = fh.read().decode()
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                out[parts[0]] = out.get(parts[0], 0) + int(parts[1])
    return out


def stat_delta(before, after):
    if before is None:
        return None
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if k in ("requests", "bytes", "read_bytes")}


def spawn_collect(fn, args, n, q):
    """Starts n ranks and reads their n results while they run (a result
    larger than the pipe's buffer would otherwise block its rank forever)."""
    import torch.multiprocessing as mp
    ctx = mp.spawn(fn, args=args, nprocs=n, join=False)
    res = [q.get() for _ in range(n)]
    while not ctx.join():
        pass
    return res


# ---- weights --------------------------------------------------------------

def _weights_rank(rank, world, port, paths, mode, q):
    path = paths[rank]
    import datetime
    import torch.distributed as dist
    import pagein.distributed as pdist
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    solo = [dist.new_group([r]) for r in range(world)] if mode == "naive" else None
    dist.barrier()
    t0 = time.monotonic()
    if mode == "naive":
        res, st = pdist.load(path, group=solo[rank], return_stats=True)
    else:
        res, st = pdist.load(path, mode=mode, return_stats=True, timeout=600)
    secs = time.monotonic() - t0
    nbytes = sum(t.numel() * t.element_size() for t in res.values())
    del res
    dist.barrier()
    q.put((rank, secs, st["bytes_read"], st["broadcast_bytes"], nbytes, st["read_seconds"],
           st["exchange_seconds"]))
    dist.destroy_process_group()


def run_weights(args, model, rank_models, mnts, backing):
    import torch.multiprocessing as mp
    size = os.path.getsize(model)
    rows = []
    for mode in ("naive", "replicated", "tp"):
        evict(sorted(set(rank_models)) + [backing])
        before = slowfs_stats(mnts)
        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        t0 = time.monotonic()
        res = spawn_collect(_weights_rank, (args.ranks, free_port(), rank_models, mode, q), args.ranks, q)
        wall = time.monotonic() - t0
        d = stat_delta(before, slowfs_stats(mnts))
        own = sum(r[2] for r in res)
        storage = d["bytes"] if d else own
        rows.append({"mode": mode, "seconds": max(r[1] for r in res), "spawn_wall": wall,
                     "read_seconds": max(r[5] for r in res), "exchange_seconds": max(r[6] for r in res),
                     "storage_bytes": storage, "ratio_to_model": storage / size, "ranks_read_bytes": own,
                     "requests": d["requests"] if d else None,
                     "broadcast_bytes_per_rank": max(r[3] for r in res),
                     "tensor_bytes_per_rank": [r[4] for r in sorted(res)]})
        print("weights %-10s %7.2f s (own reads %.2f s, then exchange %.2f s)  storage %6.3f GB (%.3fx model)" % (
            mode, rows[-1]["seconds"], rows[-1]["read_seconds"], rows[-1]["exchange_seconds"],
            storage / 1e9, storage / size), file=sys.stderr)
    base = rows[0]["seconds"]
    for r in rows:
        r["time_vs_naive"] = r["seconds"] / base
    return {"model_bytes": size, "modes": rows}


# ---- data -------------------------------------------------------------------

def _ids_collate(batch):
    return [i for i, _ in batch]


def _data_rank(rank, world, workers, rank_paths, record, port, q):
    paths = rank_paths[rank]
    import datetime
    import torch
    import torch.distributed as dist
    import pagein.data as pd
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    ds = pd.Dataset(paths, record_size=record, shuffle="global", seed=1, return_ids=True, batch_size=32)
    dl = torch.utils.data.DataLoader(ds, batch_size=32, num_workers=workers, collate_fn=_ids_collate,
                                     multiprocessing_context="fork" if workers else None)
    dist.barrier()
    t0 = time.monotonic()
    ids = []
    for b in dl:
        ids += b
    secs = time.monotonic() - t0
    q.put((rank, secs, ids))
    dist.barrier()
    dist.destroy_process_group()


def run_data(args, rank_paths, backing, mnts):
    paths = rank_paths[0]
    import torch.multiprocessing as mp
    import pagein.data as pd
    record = args.record
    total = sum(os.path.getsize(p) for p in paths)
    n = total // record
    rows = []

    evict(sorted(set(p for ps in rank_paths for p in ps)) + backing)
    before = slowfs_stats(mnts)
    t0 = time.monotonic()
    cli = os.path.join(REPO, "build", "pagein")
    out = subprocess.run([cli, "read-samples", "--records", str(record), "--mode", "global", "--seed", "1",
                          "--json"] + paths, check=True, capture_output=True)
    secs = time.monotonic() - t0
    json.loads(out.stdout.decode().splitlines()[-1])
    rows.append({"mode": "c-global-reader, 1 process", "seconds": secs, "samples": n,
                 "storage": stat_delta(before, slowfs_stats(mnts))})

    evict(sorted(set(p for ps in rank_paths for p in ps)) + backing)
    before = slowfs_stats(mnts)
    ds = pd.Dataset(paths, record_size=record, shuffle="global", seed=1, rank=0, world_size=1)
    t0 = time.monotonic()
    k = sum(1 for _ in ds)
    secs = time.monotonic() - t0
    assert k == n
    rows.append({"mode": "pagein.data, 1 process", "seconds": secs, "samples": k,
                 "storage": stat_delta(before, slowfs_stats(mnts))})

    evict(sorted(set(p for ps in rank_paths for p in ps)) + backing)
    before = slowfs_stats(mnts)
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    res = spawn_collect(_data_rank, (args.ranks, args.workers, rank_paths, record, free_port(), q), args.ranks, q)
    allids = sorted(i for r in res for i in r[2])
    rows.append({"mode": "pagein.data, %d ranks x %d workers" % (args.ranks, args.workers),
                 "seconds": max(r[1] for r in res), "samples": len(allids),
                 "exactly_once": allids == list(range(n)), "storage": stat_delta(before, slowfs_stats(mnts))})
    base = rows[0]["seconds"]
    for r in rows:
        r["samples_per_s"] = r["samples"] / r["seconds"]
        r["MB_per_s"] = r["samples"] * record / r["seconds"] / 1e6
        r["throughput_vs_c_global"] = base / r["seconds"]
        print("data %-34s %7.2f s %9.0f samples/s  %.2fx of the C global reader%s" % (
            r["mode"], r["seconds"], r["samples_per_s"], r["throughput_vs_c_global"],
            "" if "exactly_once" not in r else ("  exactly once: %s" % r["exactly_once"])), file=sys.stderr)
    return {"bytes": total, "record": record, "samples": n, "modes": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="1.3G")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--data-size", default="1G")
    ap.add_argument("--record", default="32K")
    ap.add_argument("--slowfs", action="store_true")
    ap.add_argument("--delay-us", type=int, default=1000)
    ap.add_argument("--shared-mount", action="store_true")
    ap.add_argument("--dir")
    ap.add_argument("--only", choices=("weights", "data"))
    ap.add_argument("--json", action="store_true", help="the whole report as JSON on stdout")
    args = ap.parse_args()
    args.record = parse_size(args.record)

    work = args.dir or tempfile.mkdtemp(prefix="pagein-dist-", dir="/var/tmp")
    src = os.path.join(work, "src")
    os.makedirs(src, exist_ok=True)
    mnts = []
    report = {"bench": "dist", "ranks": args.ranks, "workers": args.workers, "kernel": platform.release(),
              "fs": "slowfs" if args.slowfs else "local", "delay_us": args.delay_us if args.slowfs else None,
              "loadavg_before": os.getloadavg(), "cpus": os.cpu_count()}
    try:
        model = os.path.join(src, "sample.safetensors")
        data = [os.path.join(src, "rows%d.bin" % i) for i in range(3)]
        if args.only != "data" and not os.path.exists(model):
            subprocess.run([os.path.join(REPO, "build", "pagein"), "make-sample", model, "--size", args.size, "-q"],
                           check=True)
        if args.only != "weights" and not os.path.exists(data[0]):
            total = parse_size(args.data_size) // args.record * args.record
            per = [total // args.record // 3 * args.record] * 3
            per[2] = total - per[0] - per[1]
            chunk = os.urandom(1 << 20)
            for p, sz in zip(data, per):
                with open(p, "wb") as fh:
                    left = sz
                    while left:
                        k = min(left, len(chunk))
                        fh.write(chunk[:k])
                        left -= k
        report["mounts"] = "shared" if args.shared_mount or not args.slowfs else "per-rank"
        if args.slowfs:
            env = dict(os.environ, SLOWFS=os.path.join(REPO, "build", "slowfs"))
            for r in range(1 if args.shared_mount else args.ranks):
                mnt = os.path.join(work, "mnt%d" % r)
                subprocess.run(["bash", os.path.join(REPO, "tools", "slowfs.sh"), "mount", src, mnt, "--delay-us",
                                str(args.delay_us)], check=True, env=env, stdout=subprocess.DEVNULL)
                mnts.append(mnt)
        roots = [mnts[r % len(mnts)] if mnts else src for r in range(args.ranks)]
        if args.only != "data":
            report["weights"] = run_weights(args, model, [os.path.join(r, "sample.safetensors") for r in roots],
                                            mnts, model)
        if args.only != "weights":
            report["data"] = run_data(args, [[os.path.join(r, os.path.basename(p)) for p in data] for r in roots],
                                      data, mnts)
    finally:
        for mnt in mnts:
            subprocess.run(["bash", os.path.join(REPO, "tools", "slowfs.sh"), "umount", mnt])
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    report["loadavg_after"] = os.getloadavg()
    if args.json:
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
