"""pagein.distributed: the C plan, replicated and tensor-parallel loads across
real gloo ranks (bytewise equal to one process), a killed rank, mismatched
files, and pagein.data under an initialised torch.distributed."""
import os
import socket
import time

import numpy as np
import pytest

import pagein
import pagein.distributed as pdist

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    HAVE_GLOO = dist.is_available() and dist.is_gloo_available()
except ImportError:  # pragma: no cover - depends on the machine
    torch = None
    HAVE_GLOO = False

needs_gloo = pytest.mark.skipif(not HAVE_GLOO, reason="torch with torch.distributed (gloo) is not installed")

SPLITS = {"q_proj": 0, "k_proj": 0, "v_proj": 0, "gate_proj": 0, "up_proj": 0, "o_proj": -1,
          "down_proj": -1, "embed_tokens": 0, "lm_head": 0}


def tiny_llama(path, seed=0, vocab=37):
    """A llama-shaped safetensors file with odd sizes (splits are uneven)."""
    rng = np.random.default_rng(seed)
    V, H, F = vocab, 12, 20
    t = {"model.embed_tokens.weight": rng.standard_normal((V, H)).astype(np.float32)}
    for layer in range(2):
        p = "model.layers.%d." % layer
        for n in ("q", "k", "v"):
            t[p + "self_attn.%s_proj.weight" % n] = rng.standard_normal((H, H)).astype(np.float16)
        t[p + "self_attn.q_proj.bias"] = rng.standard_normal((H,)).astype(np.float32)
        t[p + "self_attn.o_proj.weight"] = rng.standard_normal((H, H)).astype(np.float32)
        t[p + "mlp.gate_proj.weight"] = rng.standard_normal((F, H)).astype(np.float32)
        t[p + "mlp.up_proj.weight"] = rng.standard_normal((F, H)).astype(np.float32)
        t[p + "mlp.down_proj.weight"] = rng.standard_normal((H, F)).astype(np.float32)
        t[p + "input_layernorm.weight"] = rng.standard_normal((H,)).astype(np.float32)
    t["model.norm.weight"] = rng.standard_normal((H,)).astype(np.float32)
    t["model.scale"] = np.array(3, dtype=np.int64)  # a scalar
    t["lm_head.weight"] = rng.standard_normal((V, H)).astype(np.float32)
    pagein.save_file(t, path)
    return t


def expected_slice(name, a, rank, world):
    kind = next((k for k in SPLITS if k in name.split(".")), None)
    if kind is None or a.ndim == 0 or (SPLITS[kind] == -1 and a.ndim < 2):
        return a
    ax = SPLITS[kind]
    d = a.shape[ax]
    lo, hi = rank * d // world, (rank + 1) * d // world
    return a[lo:hi] if ax == 0 else a[..., lo:hi]


# ---- the plan (no torch needed) -------------------------------------------

@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_replicated_plan_reads_every_byte_once(tmp_path, world):
    path = str(tmp_path / "m.safetensors")
    tiny_llama(path)
    with pagein.safe_open(path) as f:
        info = {n: f.tensor_info(n) for n in f.keys()}
    total = sum(i["nbytes"] if isinstance(i, dict) else i[4] for i in info.values())
    plans = [pdist.plan(path, r, world, align=16) for r in range(world)]
    assert all(p["reads"] == plans[0]["reads"] for p in plans), "shared reads are the same on every rank"
    assert sum(p["read_bytes"] for p in plans) == total
    covered = {}
    for r in plans[0]["reads"]:
        assert r["shared"] == "broadcast" and r["count"] == 1
        covered.setdefault(r["tensor"], []).append((r["dst_offset"], r["length"]))
    for t, parts in covered.items():
        pos = 0
        for off, ln in sorted(parts):
            assert off == pos
            pos += ln
    per_rank = [p["read_bytes"] for p in plans]
    assert max(per_rank) - min(per_rank) <= 2 * 16 + 1, per_rank  # balanced up to the alignment
    for p in plans:
        assert all(c["split"] == "none" for c in p["pieces"])


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("cols_direct", [False, True])
def test_tp_plan(tmp_path, world, cols_direct):
    path = str(tmp_path / "m.safetensors")
    t = tiny_llama(path)
    total = sum(a.nbytes for a in t.values())
    plans = [pdist.plan(path, r, world, mode="tp", cols_direct=cols_direct) for r in range(world)]
    # Storage serves each byte once: slices + this rank's part of the replicated ones.
    assert sum(p["read_bytes"] for p in plans) == total
    for r, p in enumerate(plans):
        for c in p["pieces"]:
            exp = expected_slice(c["name"], t[c["name"]], r, world)
            assert c["nbytes"] == exp.nbytes, c
            assert (c["split"] == "none") == (exp is t[c["name"]]), c
        private = [x for x in p["reads"] if x["shared"] == "private"]
        assert all(x["owner"] == r for x in private)
        exchanged = {plans[0]["pieces"][x["tensor"]]["name"] for x in p["reads"] if x["shared"] == "exchange"}
        cols = {c["name"] for c in p["pieces"] if c["split"] == "cols"}
        assert exchanged == (set() if cols_direct else cols) and cols


def test_plan_errors_and_rules(tmp_path):
    path = str(tmp_path / "m.safetensors")
    tiny_llama(path)
    with pytest.raises(pagein.Error, match="rank 2 of world size 2"):
        pdist.plan(path, 2, 2)
    with pytest.raises(ValueError, match="unknown split"):
        pdist.plan(path, 0, 2, mode="tp", rules=[("*", "diagonal")])
    rules = dict(pdist.default_rules())
    assert rules["*.q_proj.*"] == "rows" and rules["*.down_proj.weight"] == "cols"
    # custom rules: split the norm by rows, nothing else
    p = pdist.plan(path, 1, 2, mode="tp", rules={"model.norm.weight": "rows"})
    split = {c["name"]: (c["start"], c["stop"]) for c in p["pieces"] if c["split"] != "none"}
    assert split == {"model.norm.weight": (6, 12)}


def test_tp_refuses_quantized_split(tmp_path):
    q8 = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "real", "gguf",
                      "tinyllamas-stories-260k-q8_0.gguf")
    if not os.path.exists(q8):
        pytest.skip("test file %s missing" % q8)
    with pytest.raises(pagein.Error, match="cannot be split"):
        pdist.plan(q8, 0, 2, mode="tp", rules=[("*", "cols")])
    p = pdist.plan(q8, 0, 2)  # replicated reads raw blocks: fine
    assert p["read_bytes"] > 0


# ---- real ranks -------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _init(rank, world, port, timeout=30):
    import datetime
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout))


def _rank_load(rank, world, port, path, records, q):
    """Replicated load, TP load and a pagein.data epoch on one rank."""
    try:
        _init(rank, world, port)
        rep, st = pdist.load(path, return_stats=True, align=16, timeout=30, chunk_bytes=300)
        if st["broadcasts"] < 3 * world:  # several chunks per owner, round-robin
            raise AssertionError("rank %d: %d broadcasts" % (rank, st["broadcasts"]))
        tp, tst = pdist.load(path, mode="tp", timeout=30, return_stats=True)
        tpd = pdist.load(path, mode="tp", timeout=30, cols_direct=True)
        if tst["exchanges"] != 4:  # o_proj and down_proj of 2 layers
            raise AssertionError("rank %d: %d all-to-alls" % (rank, tst["exchanges"]))
        for k in tp:
            if not torch.equal(tp[k], tpd[k]):
                raise AssertionError("rank %d: %s differs between exchange and direct column reads" % (rank, k))
        import pagein.data as pd
        ds = pd.Dataset(records, record_size=8, seed=1, return_ids=True)  # rank/world from torch.distributed
        ids = [i for i, _ in ds]
        allids = [None] * world
        dist.all_gather_object(allids, ids)
        import pickle
        pickled = pickle.dumps(ds)  # what a DataLoader does for spawned workers
        dist.destroy_process_group()
        # a spawned worker has no torch.distributed: it keeps the parent's rank
        again = [i for i, _ in pickle.loads(pickled)]
        if again != ids:
            raise AssertionError("rank %d: a pickled Dataset yields %d samples, not its %d" % (rank, len(again), len(ids)))
        q.put((rank, "ok", {k: v.numpy().tobytes() for k, v in rep.items()},
               {k: (tuple(v.shape), v.numpy().tobytes()) for k, v in tp.items()}, st, allids))
    except Exception as e:  # reported, not raised: the parent checks
        q.put((rank, "error", repr(e), None, None, None))


@needs_gloo
def test_replicated_and_tp_load_equal_single_process(tmp_path):
    path = str(tmp_path / "m.safetensors")
    t = tiny_llama(path)
    rec = str(tmp_path / "rec.bin")
    np.arange(50 * 8, dtype=np.uint8).tofile(rec)
    world = 3
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.spawn(_rank_load, args=(world, free_port(), path, [rec], q), nprocs=world, join=True)
    res = [q.get() for _ in range(world)]
    with pagein.safe_open(path, framework="pt") as f:
        single = {n: f.get_tensor(n).numpy().tobytes() for n in f.keys()}
    for rank, status, rep, tp, st, allids in res:
        assert status == "ok", rep
        assert rep == single
        assert st["bytes_read"] == st["plan_read_bytes"] > 0
        for name, a in t.items():
            exp = expected_slice(name, a, rank, world)
            assert tp[name] == (exp.shape, np.ascontiguousarray(exp).tobytes()), name
        flat = sorted(i for ids in allids for i in ids)
        assert flat == list(range(50)), "pagein.data: each sample once across the gloo ranks"
    total = sum(a.nbytes for a in t.values())
    assert sum(r[4]["bytes_read"] for r in res) == total, "storage served each byte once"


def _rank_mismatch(rank, world, port, paths, q):
    try:
        _init(rank, world, port)
        pdist.load(paths[rank], timeout=20)
        q.put((rank, "loaded", None))
    except pagein.Error as e:
        q.put((rank, "error", (getattr(e, "code", None), str(e))))
    except Exception as e:
        q.put((rank, "other", repr(e)))


@needs_gloo
def test_mismatched_files_detected_before_exchange(tmp_path):
    a, b = str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")
    tiny_llama(a, seed=0)
    tiny_llama(b, seed=0, vocab=38)  # another shape: header and size differ
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.spawn(_rank_mismatch, args=(2, free_port(), [a, b], q), nprocs=2, join=True)
    for _ in range(2):
        rank, status, info = q.get()
        assert status == "error", (rank, status, info)
        code, msg = info
        assert code == -30036  # PAGEIN_E_PEER
        assert "differs from rank(s) %d" % (1 - rank) in msg


def _rank_killed(rank, world, port, path, q):
    try:
        _init(rank, world, port, timeout=60)
        if rank == world - 1:
            # die in the middle of the load: after the file check, before its part is sent
            real = pdist._pagein.read_ranges

            def die(*a, **k):
                os._exit(7)
            pdist._pagein.read_ranges = die
        t0 = time.monotonic()
        try:
            pdist.load(path, timeout=5)
            q.put((rank, "loaded", None))
        except pagein.Error as e:
            q.put((rank, "error", (getattr(e, "code", None), str(e), time.monotonic() - t0)))
    except Exception as e:
        q.put((rank, "other", repr(e)))


@needs_gloo
def test_killed_rank_makes_the_others_fail_fast(tmp_path):
    path = str(tmp_path / "m.safetensors")
    tiny_llama(path)
    world = 3
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=_rank_killed, args=(r, world, port, path, q)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 90
    for p in procs:
        p.join(max(1, deadline - time.monotonic()))
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.kill()
        p.join()
    assert not alive, "a surviving rank hung"
    assert procs[-1].exitcode == 7
    got = []
    while not q.empty():
        got.append(q.get())
    assert sorted(r for r, _, _ in got) == list(range(world - 1))
    for rank, status, info in got:
        assert status == "error", (rank, status, info)
        code, msg, secs = info
        assert code == -30036 and "rank %d of %d" % (rank, world) in msg
        assert secs < 30, "failed after %.1fs" % secs


# ---- one process (no torch.distributed): sharded and GGUF models ---------------

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def _bytes(t):
    return t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


@needs_torch
def test_single_process_sharded_model(tmp_path):
    """Without torch.distributed load() is rank 0 of 1: it reads the whole
    model; a sharded checkpoint's plan spans both files."""
    t = tiny_llama(str(tmp_path / "whole.safetensors"))
    names = sorted(t)
    half = len(names) // 2
    pagein.save_file({n: t[n] for n in names[:half]}, str(tmp_path / "model-00001-of-00002.safetensors"))
    pagein.save_file({n: t[n] for n in names[half:]}, str(tmp_path / "model-00002-of-00002.safetensors"))
    wm = {n: "model-0000%d-of-00002.safetensors" % (1 if i < half else 2) for i, n in enumerate(names)}
    import json
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    os.unlink(str(tmp_path / "whole.safetensors"))
    res, st = pdist.load(str(tmp_path), return_stats=True)
    assert sorted(res) == names
    for n in names:
        assert res[n].numpy().tobytes() == t[n].tobytes(), n
    assert st["bytes_read"] == sum(a.nbytes for a in t.values())
    plans = [pdist.plan(str(tmp_path), r, 2, align=1) for r in range(2)]
    assert {x["file"] for x in plans[0]["reads"]} == {0, 1}
    assert sum(p["read_bytes"] for p in plans) == st["bytes_read"]


@needs_torch
def test_single_process_gguf(tmp_path):
    q8 = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "real", "gguf",
                      "tinyllamas-stories-260k-q8_0.gguf")
    if not os.path.exists(q8):
        pytest.skip("test file %s missing" % q8)
    res = pdist.load(q8)
    with pagein.open_model(q8, framework="pt") as m:
        assert sorted(res) == sorted(m.keys())
        for n in m.keys():
            ref = m.get_tensor(n)
            assert tuple(res[n].shape) == tuple(ref.shape) and res[n].dtype == ref.dtype, n
            assert _bytes(res[n]) == _bytes(ref), n


# ---- load() arguments that differ between ranks ------------------------------

def _rank_args(rank, world, port, path, kwargs, q):
    try:
        _init(rank, world, port)
        pdist.load(path, timeout=20, **kwargs[rank])
        q.put((rank, "loaded", None))
    except pagein.Error as e:
        q.put((rank, "error", (getattr(e, "code", None), str(e))))
    except BaseException as e:
        q.put((rank, "other", repr(e)))


@needs_gloo
@pytest.mark.parametrize("kwargs, names", [
    ([{"chunk_bytes": 300}, {"chunk_bytes": 1000}], ["chunk_bytes: rank 0: 300, rank 1: 1000"]),
    ([{"align": 16}, {"align": 64}], ["align: rank 0: 16, rank 1: 64"]),
    ([{"mode": "tp"}, {}], ['mode: rank 0: "tp", rank 1: "replicated"']),
    ([{"mode": "tp", "rules": [("*q_proj*", "rows")]}, {"mode": "tp"}], ["rules: rank 0:"]),
    ([{"mode": "tp", "cols_direct": True, "align": 8}, {"mode": "tp"}], ["align: rank 0: 8, rank 1: 0",
                                                                        "cols_direct: rank 0: true, rank 1: false"]),
])
def test_different_arguments_fail_every_rank(tmp_path, kwargs, names):
    """Different chunk_bytes/align/mode aborted a rank inside gloo; different
    rules let one rank return while the other hung: now every rank raises
    PAGEIN_E_PEER naming each differing argument, before any data moves."""
    path = str(tmp_path / "m.safetensors")
    tiny_llama(path)
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    t0 = time.monotonic()
    mp.spawn(_rank_args, args=(2, free_port(), path, kwargs, q), nprocs=2, join=True)
    assert time.monotonic() - t0 < 60
    for _ in range(2):
        rank, status, info = q.get()
        assert status == "error", (rank, status, info)
        code, msg = info
        assert code == -30036, msg  # PAGEIN_E_PEER
        assert "load() arguments differ" in msg
        for n in names:
            assert n in msg, msg
