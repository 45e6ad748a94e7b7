"""bench/dcp_reshard_dist.py CKPT WORLD [rows|cols] - resharding a DCP
checkpoint onto WORLD gloo ranks (torch.multiprocessing.spawn, 127.0.0.1)
with pagein.distributed.load_dcp, every file cold (posix_fadvise DONTNEED)
before the start: each rank's bytes read from storage (/proc/self/io
read_bytes) against the bytes of its own parts, and the total over the
ranks against the bytes the ranks need between them (each unsplit tensor
counted once: it is read once and broadcast). Prints one line per rank and
the totals (target <= 1.05)."""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))


def read_bytes():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def rank_main(rank, world, port, ck, split, q):
    import torch.distributed as dist
    import pagein.distributed
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    try:
        b0 = read_bytes()
        got = pagein.distributed.load_dcp(ck, split=split)
        got_b = read_bytes() - b0
        st = pagein.distributed.load_dcp.last_stats
        mine = sum(t.numel() * t.element_size() for t in got.values())
        q.put((rank, got_b, st["bytes_needed"], st["broadcast_bytes"], mine))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    import torch.multiprocessing as mp
    ck, world = sys.argv[1], int(sys.argv[2])
    split = sys.argv[3] if len(sys.argv) > 3 else "rows"
    for n in os.listdir(ck):
        fd = os.open(os.path.join(ck, n), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    q = mp.get_context("spawn").Queue()
    mp.spawn(rank_main, args=(world, port, ck, split, q), nprocs=world, join=True)
    rows = sorted(q.get(timeout=60) for _ in range(world))
    tr = tn = 0
    for r, got_b, need, bcast, mine in rows:
        tr += got_b
        tn += need
        print("rank %d/%d (%s): read %d bytes for %d of its own (%.3fx); its parts %d bytes; %d bytes broadcast in all"
              % (r, world, split, got_b, need, got_b / need if need else 0, mine, bcast))
    print("total: read %d, needed %d (%.3fx; target <= 1.05)" % (tr, tn, tr / tn))
