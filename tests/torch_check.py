#!/usr/bin/python3
"""torch_check.py PAGEIN DIR - compares `pagein convert` against torch.load on
the checkpoints tests/torch_gen.py wrote into DIR (Debian's python3-torch).

For every good checkpoint: the converted safetensors file (read here by a
tiny pure-Python reader) holds every tensor torch.load returns, under the
same dotted name, with the same dtype, shape and bytes; --dry-run --json
reports views, strides, storage offsets and non-contiguity exactly as torch
sees them, and lists every non-tensor value as skipped. Malicious, legacy,
compressed, truncated and corrupt files are refused with a clear message,
and the malicious payload never runs (its marker file never appears, while
plain torch.load does create it). Prints one line per check; exit 1 on any
failure.
"""
import json
import os
import struct
import subprocess
import sys

import torch

PAGEIN, D = sys.argv[1], sys.argv[2]
OUT = os.path.join(D, "out")
os.makedirs(OUT, exist_ok=True)
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


def run(*args):
    p = subprocess.run([PAGEIN, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


# ---- a tiny safetensors reader ------------------------------------------------
def read_st(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    hdr = json.loads(blob[8:8 + n])
    meta = hdr.pop("__metadata__", None)
    data = blob[8 + n:]
    out = {}
    for name, info in hdr.items():
        a, b = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], data[a:b])
    return out, meta, n


ST_DTYPE = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
            torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
            torch.bool: "BOOL", torch.complex64: "C64"}


def tbytes(t):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def flatten(obj, prefix, tensors, values, top=True):
    """The naming pagein uses: dotted keys, list indexes; containers without
    tensors are one value."""
    def has_tensor(o):
        if isinstance(o, torch.Tensor):
            return True
        if isinstance(o, dict):
            return any(has_tensor(v) for v in o.values())
        if isinstance(o, (list, tuple)):
            return any(has_tensor(v) for v in o)
        return False

    if isinstance(obj, torch.Tensor):
        tensors[prefix or "tensor"] = obj
    elif isinstance(obj, dict) and (top or obj):
        for k, v in obj.items():
            flatten(v, (prefix + "." if prefix else "") + str(k), tensors, values, False)
    elif isinstance(obj, (list, tuple)) and (top or has_tensor(obj)):
        for i, v in enumerate(obj):
            flatten(v, (prefix + "." if prefix else "") + str(i), tensors, values, False)
    else:
        values[prefix] = obj


GOOD = ["modules", "dtypes", "views", "params", "tensor", "checkpoint"]
for name in GOOD:
    src = os.path.join(D, name + ".pt")
    dst = os.path.join(OUT, name + ".safetensors")
    rc, so, se = run("convert", src, dst, "--json")
    check(rc == 0, f"{name}: pagein convert exits 0 ({se.strip()[:200]})")
    if rc != 0:
        continue
    summ = json.loads(so)
    # reference: plain torch.load (these files are ours); weights_only=True
    # accepts the same files except that torch 1.13 refuses Python floats
    # (BINFLOAT), which pagein accepts like torch >= 2.0 (docs/FORMAT-TORCH.md)
    ref = torch.load(src)
    if name in ("dtypes", "views", "params", "tensor"):
        wo = torch.load(src, weights_only=True)
        check(type(wo) is type(ref), f"{name}: torch.load(weights_only=True) accepts it too")
    tensors, values = {}, {}
    flatten(ref, "", tensors, values)
    got, meta, _ = read_st(dst)
    check(meta == {"format": "pt"}, f"{name}: __metadata__ is {{'format': 'pt'}}")
    check(sorted(got) == sorted(tensors), f"{name}: same tensor names as torch.load ({len(tensors)})")
    bad = [k for k, t in tensors.items() if k in got and
           (got[k][0] != ST_DTYPE[t.dtype] or got[k][1] != list(t.shape) or got[k][2] != tbytes(t))]
    check(not bad, f"{name}: dtype, shape and bytes equal torch.load's for every tensor {bad[:5]}")
    # views, strides, storage offsets, contiguity as torch sees them
    js = {t["name"]: t for t in summ["tensors"]}
    ptr_count = {}
    for t in tensors.values():
        p = t.storage().data_ptr()
        ptr_count[p] = ptr_count.get(p, 0) + 1
    bad = []
    for k, t in tensors.items():
        j = js[k]
        if j["stride"] != list(t.stride()) or j["storage_offset"] != t.storage_offset():
            bad.append(k + ": stride/offset")
        if j["noncontiguous"] != (not t.is_contiguous()) and t.numel() > 1:
            bad.append(k + ": contiguity")
        if j["view"] != (ptr_count[t.storage().data_ptr()] > 1) and t.storage().size() > 0:
            bad.append(k + ": view")
        if j["parameter"] != isinstance(t, torch.nn.Parameter):
            bad.append(k + ": parameter")
    check(not bad, f"{name}: strides, storage offsets, views, contiguity, parameters match torch {bad[:5]}")
    skipped = {s["name"] for s in summ["skipped"]}
    check(skipped == set(values), f"{name}: every non-tensor value listed as skipped {sorted(values)}")

# ---- casts: bytes equal torch's own conversion ---------------------------------------
for flag, dt in (("bf16", torch.bfloat16), ("f16", torch.float16), ("f32", torch.float32)):
    dst = os.path.join(OUT, f"dtypes-{flag}.safetensors")
    rc, so, se = run("convert", os.path.join(D, "dtypes.pt"), dst, "--dtype", flag, "-q")
    check(rc == 0, f"--dtype {flag}: exits 0 {se.strip()[:200]}")
    if rc:
        continue
    got, _, _ = read_st(dst)
    ref = torch.load(os.path.join(D, "dtypes.pt"))
    bad = []
    for k, t in ref.items():
        want = t.to(dt) if t.dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16) else t
        if got[k][0] != ST_DTYPE[want.dtype] or got[k][2] != tbytes(want):
            bad.append(k)
    check(not bad, f"--dtype {flag}: every float tensor equals torch's .to({dt}), others unchanged {bad}")

# ---- sharding + index ----------------------------------------------------------------
sdir = os.path.join(OUT, "sharded")
os.makedirs(sdir, exist_ok=True)
dst = os.path.join(sdir, "model.safetensors")
rc, so, se = run("convert", os.path.join(D, "modules.pt"), dst, "--max-shard-size", "8K", "-q")
check(rc == 0, f"sharded: exits 0 {se.strip()[:200]}")
idx_path = dst + ".index.json"
if rc == 0 and os.path.exists(idx_path):
    idx = json.load(open(idx_path))
    files = sorted(set(idx["weight_map"].values()))
    check(len(files) > 1 and files[0] == "model-00001-of-%05d.safetensors" % len(files),
          f"sharded: {len(files)} shards named like Hugging Face's")
    ref = torch.load(os.path.join(D, "modules.pt"))
    tensors = {}
    flatten(ref, "", tensors, {})
    total, bad = 0, []
    for fn in files:
        got, meta, _ = read_st(os.path.join(sdir, fn))
        for k, (dtp, shape, b) in got.items():
            total += len(b)
            if idx["weight_map"].get(k) != fn or b != tbytes(tensors[k]):
                bad.append(k)
    check(not bad and set(idx["weight_map"]) == set(tensors), f"sharded: index maps every tensor to its shard {bad[:3]}")
    check(idx["metadata"]["total_size"] == total, "sharded: total_size is the sum of tensor bytes")
else:
    check(False, "sharded: index written")

# ---- page-aligned safetensors -> safetensors ----------------------------------------------
src = os.path.join(OUT, "modules.safetensors")
dst = os.path.join(OUT, "modules-4k.safetensors")
rc, so, se = run("convert", src, dst, "--align", "4096", "-q")
check(rc == 0, f"--align 4096: exits 0 {se.strip()[:200]}")
if rc == 0:
    a, _, _ = read_st(src)
    b, meta, n = read_st(dst)
    raw = open(dst, "rb").read()
    check((8 + n) % 4096 == 0 and raw[8 + n - 1:8 + n] == b" ", "--align 4096: data starts on a 4096 boundary, header padded with spaces")
    check(a == b and meta == {"format": "pt"}, "--align 4096: same tensors and metadata")

# ---- checkpoint -> GGUF -> safetensors equals checkpoint -> safetensors -------------------
g = os.path.join(OUT, "modules.gguf")
rc, so, se = run("convert", os.path.join(D, "modules.pt"), g, "-q")
rc2, so, se2 = run("convert", g, os.path.join(OUT, "modules-via-gguf.safetensors"), "-q")
check(rc == 0 and rc2 == 0, f"checkpoint -> GGUF -> safetensors exits 0 {(se + se2).strip()[:200]}")
if rc == 0 and rc2 == 0:
    a, _, _ = read_st(os.path.join(OUT, "modules.safetensors"))
    b, _, _ = read_st(os.path.join(OUT, "modules-via-gguf.safetensors"))
    check(a == b, "checkpoint -> GGUF -> safetensors: same tensors as the direct conversion")

# ---- refusals: nothing runs -------------------------------------------------------------
pwned = os.path.join(D, "PWNED")
for name, needle in (("evil_system", "posix.system"), ("evil_eval", "eval")):
    if os.path.exists(pwned):
        os.unlink(pwned)
    rc, so, se = run("convert", os.path.join(D, name + ".pt"), os.path.join(OUT, name + ".safetensors"))
    check(rc == 1 and needle in se and "refus" in se, f"{name}: refused naming the global ({se.strip()[:160]})")
    check(not os.path.exists(pwned), f"{name}: payload did not run ({pwned} absent)")
    check(not os.path.exists(os.path.join(OUT, name + ".safetensors")), f"{name}: no output written")
    # the payload is real: plain unpickling runs it
    try:
        torch.load(os.path.join(D, name + ".pt"))  # trusted here: we wrote it
    except Exception:
        pass
    check(os.path.exists(pwned), f"{name}: control: plain torch.load does run the payload")
    if os.path.exists(pwned):
        os.unlink(pwned)
    try:
        torch.load(os.path.join(D, name + ".pt"), weights_only=True)
        check(False, f"{name}: torch.load(weights_only=True) refuses it too")
    except Exception:
        check(True, f"{name}: torch.load(weights_only=True) refuses it too")

for name, needle in (("legacy", "legacy"), ("compressed", "compressed"), ("truncated", "truncated"),
                     ("corrupt_pkl", "pickle"), ("missing_storage", "no record")):
    rc, so, se = run("convert", os.path.join(D, name + ".pt"), os.path.join(OUT, name + ".safetensors"))
    check(rc == 1 and needle in se, f"{name}: refused with a clear error ({se.strip()[:160]})")

# ---- pagein's allowlist is exactly torch's ---------------------------------------------
# One archive per global: its pickle only names the global. Every entry of
# torch's list must be accepted, near misses must be refused.
import zipfile  # noqa: E402


def global_ckpt(path, dotted):
    mod, _, name = dotted.rpartition(".")
    pkl = b"\x80\x02c" + mod.encode() + b"\n" + name.encode() + b"\n."
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a/data.pkl", pkl)
        z.writestr("a/version", "3\n")


allow = open(os.path.join(D, "allowlist.txt")).read().split()
gdir = os.path.join(OUT, "globals")
os.makedirs(gdir, exist_ok=True)
bad = []
near = ["torch.FloatStorageX", "torch.cuda.BoolTensorX", "collections.defaultdict", "torch._utils._rebuild_qtensor",
        "torch.load", "torch.storage._TypedStorage", "torch.bfloat16", "builtins.getattr", "torch.nn.Parameter",
        "torch._utils._rebuild_device_tensor_from_numpy", "torch._tensor._rebuild_from_type_v2"]
for i, g in enumerate(allow + near):
    p = os.path.join(gdir, "g%d.pt" % i)
    global_ckpt(p, g)
    rc, so, se = run("convert", p, "--dry-run", "-q")
    if (g in allow) != (rc == 0) or (g not in allow and "refusing global '%s'" % g not in se):
        bad.append((g, rc, se.strip()[:120]))
check(not bad, f"allowlist: all {len(allow)} globals of torch 1.13's list accepted, {len(near)} near misses refused {bad[:3]}")

print(f"torch_check: {failures} failed")
sys.exit(1 if failures else 0)
