#!/usr/bin/env python3
"""matrix.py OUT CELL... - summarises bench/matrix.sh's per-cell JSON into
OUT/matrix.json and prints the tables (markdown) for docs/BENCHMARKS.md."""
import json
import os
import sys

CANDIDATES = ("lazy", "populate", "prefetch", "read")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def trace_fields(run):
    t = run.get("trace") or {}
    return {
        "requests": t.get("requests"),
        "mean_request_bytes": t.get("mean_request_bytes"),
        "size_hist": t.get("size_hist"),
        "mean_inflight": t.get("mean_inflight"),
        "max_inflight": t.get("max_inflight"),
        "lat_p50_us": t.get("lat_p50_us"),
        "lat_p95_us": t.get("lat_p95_us"),
        "lat_p99_us": t.get("lat_p99_us"),
        "trace_source": t.get("source"),
        "engine_request_bytes": t.get("engine_request_bytes"),
        "engine_depth": t.get("engine_depth"),
        "major_faults": run.get("major_faults"),
    }


def load_cell(d):
    runs = {r["strategy"]: r for r in d["runs"] if r.get("cache") == "cold"}
    ok = {k: r for k, r in runs.items() if r.get("ok") and r.get("all_s") is not None}
    cands = {k: r for k, r in ok.items() if k in CANDIDATES}
    if not cands:
        return None
    best = min(cands, key=lambda k: cands[k]["all_s"])
    out = {
        "model_bytes": d.get("model_bytes"),
        "best": best,
        "best_s": cands[best]["all_s"],
        "seconds": {k: r["all_s"] for k, r in ok.items()},
        "strategies": {k: trace_fields(r) for k, r in ok.items()},
    }
    if "auto" in ok:
        a = ok["auto"]
        out["auto_choice"] = a.get("chosen")
        out["auto_s"] = a["all_s"]
        # auto pays its probe on top of the strategy it picks: compare with
        # the best strategy measured in the same run
        out["auto_over_best"] = a["all_s"] / cands[best]["all_s"]
    if "read" in ok and "populate" in ok:
        out["read_over_populate"] = ok["read"]["all_s"] / ok["populate"]["all_s"]
    if "read1m" in ok:
        out["read1m_over_best"] = ok["read1m"]["all_s"] / cands[best]["all_s"]
    if "read" in ok:
        out["peak_rss_read_over_model"] = ok["read"]["peak_rss_bytes"] / d["model_bytes"]
    return out


def shuffle_cell(d):
    modes = {m["mode"]: m for m in d.get("modes", []) if m.get("ok")}
    out = {"seconds": {k: m["seconds"] for k, m in modes.items()},
           "traces": {k: trace_fields(m) for k, m in modes.items()}}
    seq = modes.get("sequential", {}).get("seconds")
    if seq and "block" in modes:
        out["block_over_sequential"] = modes["block"]["seconds"] / seq
    if "mmap-shuffled" in modes and "global" in modes:
        out["mmap_shuffled_over_global"] = modes["mmap-shuffled"]["seconds"] / modes["global"]["seconds"]
    return out


def fmt(v, spec="%.2f"):
    return "-" if v is None else spec % v


def hist_str(h):
    if not h:
        return "-"
    return " ".join("%s:%d" % (k, v) for k, v in h.items())


def main():
    outdir, cells = sys.argv[1], sys.argv[2:]
    res = {"cells": {}}
    for c in cells:
        cell = {}
        d = load(os.path.join(outdir, "load-%s.json" % c))
        if d:
            cell["load"] = load_cell(d)
        s = load(os.path.join(outdir, "shuffle-%s.json" % c))
        if s:
            cell["shuffle"] = shuffle_cell(s)
        res["cells"][c] = cell
    with open(os.path.join(outdir, "matrix.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("\n| cell | lazy | populate | prefetch | read | auto | read1m | best | auto chose | auto/best | read/populate | read1m/best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        L = res["cells"][c].get("load")
        if not L:
            print("| %s | (no data) |" % c)
            continue
        s = L["seconds"]
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            c, *(fmt(s.get(k), "%.3f") for k in ("lazy", "populate", "prefetch", "read", "auto", "read1m")),
            L["best"], L.get("auto_choice", "-"), fmt(L.get("auto_over_best")), fmt(L.get("read_over_populate")),
            fmt(L.get("read1m_over_best"))))
    print("\n| cell | strategy | requests | mean KiB | size histogram | mean/max in flight | latency p50/p95/p99 us | major faults | engine request/depth |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        L = res["cells"][c].get("load")
        if not L:
            continue
        for k in dict.fromkeys(("populate", "read", "auto", L["best"])):
            t = L["strategies"].get(k)
            if not t:
                continue
            eng = "-"
            if t.get("engine_depth"):
                eng = "%d KiB / %d" % (t["engine_request_bytes"] / 1024, t["engine_depth"])
            print("| %s | %s | %s | %s | %s | %s / %s | %s / %s / %s | %s | %s |" % (
                c, k, fmt(t["requests"], "%.0f"),
                fmt(t["mean_request_bytes"] / 1024 if t["mean_request_bytes"] else None, "%.0f"),
                hist_str(t["size_hist"]), fmt(t["mean_inflight"], "%.1f"), fmt(t["max_inflight"], "%.0f"),
                fmt(t["lat_p50_us"], "%.0f"), fmt(t["lat_p95_us"], "%.0f"), fmt(t["lat_p99_us"], "%.0f"),
                fmt(t["major_faults"], "%.0f"), eng))
    if any(res["cells"][c].get("shuffle") for c in cells):
        print("\n| cell | sequential | mmap-in-order | mmap-shuffled | global | block | ranges | block/sequential | mmap-shuffled/global |")
        print("|---|---|---|---|---|---|---|---|---|")
        for c in cells:
            S = res["cells"][c].get("shuffle")
            if not S:
                continue
            s = S["seconds"]
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                c, *(fmt(s.get(k), "%.3f") for k in ("sequential", "mmap-in-order", "mmap-shuffled", "global", "block", "ranges")),
                fmt(S.get("block_over_sequential")), fmt(S.get("mmap_shuffled_over_global"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
