"""python3 -m pagein.bench MODEL.safetensors - load time and peak memory.

Compares, on the same weights (MODEL, and a copy saved with torch.save next
to it or in --tmpdir):

  torch.load        torch.load() of the .pt copy
  numpy-mmap        the minimal reader: json header + np.frombuffer on an mmap
  safe_open         pagein.safe_open() (the file-level API, lazy mapping)
  safe_open(.pt)    pagein.safe_open() of the torch.save copy itself (pagein
                    reads PyTorch checkpoints without unpickling in Python)
  model:STRATEGY    pagein.open_model(strategy=STRATEGY) for each strategy
                    (prefetch consumes the model with .layers())

Each measurement runs in a fresh child process so that peak RSS (VmHWM) is
the load's own: the figure reported is VmHWM minus the RSS after imports.
"Loaded" means every tensor was produced (torch tensors with --framework pt,
numpy arrays with np) and one byte of every page of it was read, so lazy
approaches pay for their page faults. Cold runs first drop the files from
the page cache with posix_fadvise(DONTNEED) (after fsync) and report how
much stayed resident; warm runs read the files once before.

Options: --framework pt|np, --runs N (best of N), --json, --tmpdir DIR,
--methods a,b,c, --make-model MB (write a synthetic llama-like model of about
MB megabytes at MODEL first).
"""
import argparse
import ctypes
import json
import mmap
import os
import platform
import struct
import subprocess
import sys
import time

def _strategies():
    try:
        from pagein import _pagein
        names = list(_pagein.strategies())
        return names[1:] + names[:1]  # the table puts auto first; the report puts it last
    except ImportError:  # the benchmark's peers still run without the extension
        return ["lazy", "populate", "prefetch", "read", "auto"]


STRATEGIES = _strategies()
METHODS = ["torch.load", "numpy-mmap", "safe_open", "safe_open(.pt)"] + ["model:" + s for s in STRATEGIES]
PAGE = mmap.PAGESIZE


# ---------------------------------------------------------------------------
# child side: load and touch, then report
# ---------------------------------------------------------------------------

def _status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _touch_np(a):
    import numpy as np
    if a.size == 0:
        return 0
    flat = a.reshape(-1).view(np.uint8) if a.flags.c_contiguous else np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    return int(flat[::PAGE].sum())


def _touch(t):
    if type(t).__module__.startswith("torch"):
        import torch
        if t.numel() == 0:
            return 0
        return int(t.reshape(-1).view(torch.uint8)[::PAGE].sum())
    return _touch_np(t)


def _numpy_mmap(path, framework):
    """The minimal approach: parse the header, map the file, wrap each tensor."""
    import numpy as np
    types = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
             "F16": np.float16, "BF16": np.uint16, "I32": np.int32, "U32": np.uint32,
             "F32": np.float32, "F64": np.float64, "I64": np.int64, "U64": np.uint64}
    with open(path, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        header = json.loads(fh.read(n))
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)  # private: writable for torch
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        a = np.frombuffer(mm, dtype=types[e["dtype"]], count=(end - b) // np.dtype(types[e["dtype"]]).itemsize,
                          offset=8 + n + b).reshape(e["shape"])
        if framework == "pt":
            import torch
            if e["dtype"] == "BF16":
                out[name] = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
            else:
                out[name] = torch.from_numpy(a) if a.size else torch.empty(e["shape"])
        else:
            out[name] = a
    return out


def _child(method, model, pt, framework):
    import numpy  # noqa: F401 - imports are not part of the measurement
    if framework == "pt":
        import torch
    import pagein
    base = _status("VmRSS")
    t0 = time.perf_counter()
    total = 0
    keep = []
    if method == "torch.load":
        sd = torch.load(pt)
        for t in sd.values():
            total += _touch(t)
        keep.append(sd)
    elif method == "numpy-mmap":
        sd = _numpy_mmap(model, framework)
        for t in sd.values():
            total += _touch(t)
        keep.append(sd)
    elif method in ("safe_open", "safe_open(.pt)"):
        with pagein.safe_open(model if method == "safe_open" else pt, framework=framework) as f:
            sd = {k: f.get_tensor(k) for k in f.offset_keys()}
        for t in sd.values():
            total += _touch(t)
        keep.append(sd)
    elif method.startswith("model:"):
        strategy = method.split(":", 1)[1]
        m = pagein.open_model(model, strategy=strategy, framework=framework)
        if strategy == "prefetch":
            sd = {}
            for _, tensors in m.layers():
                for t in tensors.values():
                    total += _touch(t)
                sd.update(tensors)
        else:
            sd = dict(m.tensors.items())
            for t in sd.values():
                total += _touch(t)
        keep.append((m.strategy, sd))
    else:
        raise SystemExit("unknown method " + method)
    elapsed = time.perf_counter() - t0
    print(json.dumps({"method": method, "seconds": elapsed, "peak_rss": _status("VmHWM") - base,
                      "hwm": _status("VmHWM"), "base_rss": base, "checksum": total,
                      "strategy": keep[0][0] if method.startswith("model:") else None}))


# ---------------------------------------------------------------------------
# parent side
# ---------------------------------------------------------------------------

def _resident_fraction(path):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0.0
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        pages = (size + PAGE - 1) // PAGE
        vec = (ctypes.c_ubyte * pages)()
        libc.mincore(addr, size, vec)
        libc.munmap(addr, size)
        return sum(b & 1 for b in bytes(vec)) / pages
    finally:
        os.close(fd)


def _evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return _resident_fraction(path)


def _warm(path):
    with open(path, "rb", buffering=0) as fh:
        while fh.read(8 << 20):
            pass


def _fs_type(path):
    best, fstype = "", "?"
    real = os.path.realpath(path)
    with open("/proc/mounts") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 2 and (real == parts[1] or real.startswith(parts[1].rstrip("/") + "/")) \
                    and len(parts[1]) > len(best):
                best, fstype = parts[1], parts[2]
    return fstype


def make_model(path, megabytes, dtype="BF16"):
    """A synthetic llama-like model of about `megabytes` MB (BF16 or F32)."""
    import numpy as np
    import pagein
    hidden = 2048
    per_layer = 4 * hidden * hidden + 3 * hidden * hidden * 11 // 4
    esize = 2 if dtype == "BF16" else 4
    vocab = 32000
    layers = max(1, int((megabytes * 1e6 / esize - 2 * vocab * hidden) // per_layer))
    rng = np.random.default_rng(0)
    tensors = {}

    def rnd(shape):
        a = rng.integers(0, 1 << 14, size=shape, dtype=np.uint16) if esize == 2 else \
            rng.standard_normal(shape, dtype=np.float32)
        return a

    tensors["model.embed_tokens.weight"] = rnd((vocab, hidden))
    for i in range(layers):
        p = "model.layers.%d." % i
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[p + "self_attn.%s.weight" % n] = rnd((hidden, hidden))
        tensors[p + "mlp.gate_proj.weight"] = rnd((hidden * 11 // 4, hidden))
        tensors[p + "mlp.up_proj.weight"] = rnd((hidden * 11 // 4, hidden))
        tensors[p + "mlp.down_proj.weight"] = rnd((hidden, hidden * 11 // 4))
        tensors[p + "input_layernorm.weight"] = rnd((hidden,))
    tensors["model.norm.weight"] = rnd((hidden,))
    tensors["lm_head.weight"] = rnd((vocab, hidden))
    if esize == 2:
        import torch
        tensors = {k: torch.from_numpy(v.view(np.int16)).view(torch.bfloat16) for k, v in tensors.items()}
    pagein.save_file(tensors, path, metadata={"format": "pt"})
    return layers


def _ensure_pt(model, pt):
    if os.path.exists(pt) and os.path.getmtime(pt) >= os.path.getmtime(model):
        return
    import torch  # noqa: F401
    import pagein
    sd = pagein.load_file(model, copy=True)
    torch.save(sd, pt + ".tmp")
    os.replace(pt + ".tmp", pt)


def _run_child(method, model, pt, framework):
    cmd = [sys.executable, "-m", "pagein.bench", "--child", method, model, pt, framework]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return {"method": method, "error": (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m pagein.bench", description=__doc__.split("\n")[0])
    ap.add_argument("model", help="a .safetensors file")
    ap.add_argument("--framework", choices=["pt", "np"], default=None)
    ap.add_argument("--runs", type=int, default=1, help="runs per measurement; the best is reported")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tmpdir", help="where the torch.save copy goes (default: next to MODEL)")
    ap.add_argument("--methods", help="comma-separated subset of: " + ",".join(METHODS))
    ap.add_argument("--make-model", type=float, metavar="MB", help="first write a synthetic model of about MB MB")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--child"]:
        _child(*argv[1:5])
        return 0
    a = ap.parse_args(argv)
    if a.framework is None:
        try:
            import torch  # noqa: F401
            a.framework = "pt"
        except ImportError:
            a.framework = "np"
    methods = a.methods.split(",") if a.methods else list(METHODS)
    if a.framework == "np":
        methods = [m for m in methods if m not in ("torch.load", "safe_open(.pt)")]
    if a.make_model:
        make_model(a.model, a.make_model)
    model = os.path.abspath(a.model)
    pt = os.path.join(a.tmpdir or os.path.dirname(model), os.path.basename(model) + ".pt")
    need_pt = "torch.load" in methods or "safe_open(.pt)" in methods
    if need_pt:
        _ensure_pt(model, pt)

    import pagein
    with pagein.safe_open(model, "np") as f:
        n_tensors = len(f.keys())
        data_bytes = sum(f.tensor_info(k)["nbytes"] for k in f.keys())
    info = {"model": model, "model_bytes": os.path.getsize(model), "tensor_bytes": data_bytes,
            "tensors": n_tensors, "framework": a.framework, "runs": a.runs,
            "kernel": platform.release(), "filesystem": _fs_type(model), "cpus": os.cpu_count(),
            "pagein": pagein.__version__, "results": []}
    files = [model] + ([pt] if need_pt else [])
    for method in methods:
        row = {"method": method}
        for cache in ("cold", "warm"):
            best = None
            for _ in range(a.runs):
                if cache == "cold":
                    left = max(_evict(p) for p in files)
                    row["cold_resident_before"] = round(left, 4)
                else:
                    for p in files:
                        _warm(p)
                r = _run_child(method, model, pt, a.framework)
                if "error" in r:
                    row["error"] = r["error"]
                    break
                if best is None or r["seconds"] < best["seconds"]:
                    best = r
            if best is None:
                break
            row[cache + "_s"] = best["seconds"]
            row[cache + "_peak_rss"] = best["peak_rss"]
            if best.get("strategy"):
                row["strategy"] = best["strategy"]
        info["results"].append(row)
    base = next((r for r in info["results"] if r["method"] == "torch.load" and "cold_s" in r), None)
    for r in info["results"]:
        if "cold_s" in r:
            r["peak_rss_x_model"] = round(max(r["cold_peak_rss"], r["warm_peak_rss"]) / data_bytes, 3)
            if base:
                r["cold_speedup_vs_torch_load"] = round(base["cold_s"] / r["cold_s"], 2)
                r["warm_speedup_vs_torch_load"] = round(base["warm_s"] / r["warm_s"], 2)
    if a.json:
        print(json.dumps(info, indent=2))
        return 0
    print("pagein %s Python benchmark: %s" % (info["pagein"], model))
    print("  %.1f MiB of tensors in %d tensors; framework %s; kernel %s; %s; %d CPUs; best of %d"
          % (data_bytes / 2**20, n_tensors, a.framework, info["kernel"], info["filesystem"], info["cpus"], a.runs))
    print("  peak RSS = VmHWM of a fresh process minus its RSS after imports; cold = evicted first")
    print()
    print("%-16s %-9s %8s %8s %10s %10s %7s %9s" % ("method", "strategy", "cold s", "warm s", "cold MiB",
                                                   "warm MiB", "xmodel", "cold vs"))
    for r in info["results"]:
        if "error" in r:
            print("%-16s error: %s" % (r["method"], r["error"]))
            continue
        print("%-16s %-9s %8.3f %8.3f %10.1f %10.1f %7.3f %8sx" % (
            r["method"], r.get("strategy") or "", r["cold_s"], r["warm_s"], r["cold_peak_rss"] / 2**20,
            r["warm_peak_rss"] / 2**20, r["peak_rss_x_model"], r.get("cold_speedup_vs_torch_load", "-")))
    left = max((r.get("cold_resident_before", 0) for r in info["results"]), default=0)
    if left > 0.05:
        print("\nwarning: up to %.0f%% of a file stayed cached after eviction: cold figures are optimistic"
              % (left * 100))
    return 0


if __name__ == "__main__":
    sys.exit(main())
