"""bench/dcp_reshard.py CKPT WORLD [rows|cols] - resharding a DCP
checkpoint onto WORLD ranks with pagein.distributed.load_dcp, one rank
after the other in this process, every file cold (posix_fadvise DONTNEED)
before each: the bytes each rank read from storage (/proc/self/io
read_bytes) against the bytes of its slices. Prints one line per rank and
the worst ratio (target <= 1.05)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))
import pagein.distributed  # noqa: E402


def read_bytes():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def cold(d):
    for n in os.listdir(d):
        fd = os.open(os.path.join(d, n), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


ck, world = sys.argv[1], int(sys.argv[2])
split = sys.argv[3] if len(sys.argv) > 3 else "rows"
worst = 0.0
for r in range(world):
    cold(ck)
    b0 = read_bytes()
    got = pagein.distributed.load_dcp(ck, rank=r, world_size=world, split=split)
    got_b = read_bytes() - b0
    need = sum(t.numel() * t.element_size() for t in got.values())
    worst = max(worst, got_b / need if need else 0)
    print("rank %d/%d (%s): needed %d bytes, read %d (%.3fx)" % (r, world, split, need, got_b, got_b / need))
print("worst %.3fx (target <= 1.05)" % worst)
