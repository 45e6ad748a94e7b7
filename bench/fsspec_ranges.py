#!/usr/bin/env python3
"""bench/fsspec_ranges.py URL SIZE [N LEN RUNS] - cat_ranges of N ranges of
LEN bytes spread evenly over an object of SIZE bytes at URL: pagein.fsspec
(one range-engine run) against fsspec's own HTTPFileSystem.cat_ranges
(aiohttp), in the same process, interleaved RUNS times; every result is
checked against the other tool's. Both keep their connections between runs
(fsspec its aiohttp session, pagein its sources), so the first run of each
is the cold one. Called by bench/remote.sh (its fsspec
cat_ranges section) with the URL of its paced server (tools/delayhdr.py:
first-byte latency and a per-connection rate). Prints one JSON object:
seconds per tool (median and every run), MB/s, the ratio, and the CPU
seconds each tool's run cost this process (a figure the machine's load
does not inflate the way it does wall time).

Needs build/python on PYTHONPATH, python3-fsspec and python3-aiohttp."""
import hashlib
import json
import resource
import sys
import time

import fsspec

import pagein.fsspec  # noqa: F401 (registers "pagein")


def main():
    url, size = sys.argv[1], int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    length = int(sys.argv[4]) if len(sys.argv) > 4 else 1 << 20
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    if n * length > size:
        raise SystemExit("fsspec_ranges: %d ranges of %d bytes do not fit in %d bytes" % (n, length, size))
    stride = (size - length) // max(1, n - 1)
    starts = [i * stride for i in range(n)]
    ends = [s + length for s in starts]
    paths = [url] * n
    pg = fsspec.filesystem("pagein")
    http = fsspec.filesystem("http")
    times = {"pagein": [], "fsspec_http": []}
    cpu = {"pagein": [], "fsspec_http": []}  # this process's CPU seconds (all threads: fsspec's loop, pagein's lanes)
    digest = {}
    for _ in range(runs):
        for name, fs in (("fsspec_http", http), ("pagein", pg)):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            parts = fs.cat_ranges(paths, starts, ends)
            times[name].append(round(time.perf_counter() - t0, 3))
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu[name].append(round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 3))
            bad = [p for p in parts if not isinstance(p, bytes) or len(p) != length]
            if bad:
                raise SystemExit("fsspec_ranges: %s returned %r" % (name, bad[0] if not isinstance(bad[0], bytes)
                                                                    else "%d bytes" % len(bad[0])))
            h = hashlib.sha256(b"".join(parts)).hexdigest()
            if digest.setdefault(name, h) != h or len(set(digest.values())) != 1:
                raise SystemExit("fsspec_ranges: %s read other bytes than %s" % (name, "the other tool"))
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    total = n * length
    print(json.dumps({"ranges": n, "range_bytes": length, "object_bytes": size, "runs": runs,
                      "queue_depth": pg.queue_depth, "seconds": med, "seconds_every_run": times,
                      "cpu_seconds": {k: sorted(v)[len(v) // 2] for k, v in cpu.items()},
                      "cpu_seconds_every_run": cpu,
                      "MB_per_s": {k: round(total / v / 1e6, 1) for k, v in med.items()},
                      "pagein_faster_by": round(med["fsspec_http"] / med["pagein"], 2)}))


if __name__ == "__main__":
    main()
