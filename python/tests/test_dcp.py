"""torch Distributed Checkpoints: `pagein convert ckpt/ out.safetensors` (the
library's DCP reader) against torch's own DCP load of the same checkpoints
(tests/data/dcp, written by torch 1.13's writer on 2 and 4 gloo ranks; v2 is
the torch 2.x metadata layout). torch's DCP package is imported with the
Python 3.11 workaround of pagein._dcpcompat (docs/PYTHON.md)."""
import os
import subprocess

import pytest

torch = pytest.importorskip("torch")

import pagein  # noqa: E402
from pagein import _dcpcompat  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FX = os.path.join(ROOT, "tests", "data", "dcp")
TOOL = os.path.join(os.environ.get("PAGEIN_BUILD", os.path.join(ROOT, "build")), "pagein")


def torch_load(path):
    """Every item of the checkpoint as torch loads it (no process group)."""
    dcp = _dcpcompat.import_torch_dcp()
    reader = dcp.FileSystemReader(path)
    md = reader.read_metadata()
    sd = {}
    for k, v in md.state_dict_metadata.items():
        if hasattr(v, "chunks"):
            sd[k] = torch.empty(v.size, dtype=v.properties.dtype)
    dcp.load_state_dict(sd, storage_reader=dcp.FileSystemReader(path), no_dist=True)
    return sd


@pytest.mark.parametrize("name", ["rank4", "rank2", "v2"])
def test_convert_equals_torch(tmp_path, name):
    if not os.access(TOOL, os.X_OK):
        pytest.skip("SKIP: %s is not built" % TOOL)
    if name == "v2":
        ref = torch_load(os.path.join(FX, "rank4"))  # same files, torch 2.x metadata torch 1.13 cannot read
    else:
        ref = torch_load(os.path.join(FX, name))
    out = str(tmp_path / "out.safetensors")
    r = subprocess.run([TOOL, "convert", os.path.join(FX, name), out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with pagein.safe_open(out, framework="pt") as f:
        keys = set(f.keys())
        assert keys == set(ref)
        for k, v in ref.items():
            got = f.get_tensor(k)
            assert got.dtype == v.dtype and tuple(got.shape) == tuple(v.shape), k
            assert torch.equal(got, v), k


def test_refuses_evil_metadata(tmp_path):
    if not os.access(TOOL, os.X_OK):
        pytest.skip("SKIP: %s is not built" % TOOL)
    d = tmp_path / "ckpt"
    d.mkdir()
    with open(os.path.join(FX, "bad", "evil.metadata"), "rb") as src:
        (d / ".metadata").write_bytes(src.read())
    r = subprocess.run([TOOL, "convert", str(d), str(tmp_path / "o.safetensors")], capture_output=True, text=True,
                       cwd=str(tmp_path))
    assert r.returncode != 0
    assert "refusing global" in r.stderr and "system" in r.stderr
    assert not os.path.exists(tmp_path / "PWNED_BY_DCP_METADATA")
    assert not os.path.exists(tmp_path / "o.safetensors")


@pytest.mark.parametrize("name", ["rank4", "rank2"])
def test_checkpoint_and_reader_equal_torch(name):
    import pagein.dcp
    path = os.path.join(FX, name)
    ref = torch_load(path)
    with pagein.dcp.open(path) as ck:
        assert set(ck.tensor_keys()) == set(ref)
        for k, v in ref.items():
            assert torch.equal(ck.get_tensor(k), v), k
        k = "rows.weight"
        s = ck.get_slice(k, (2, 1), (5, 3))
        assert torch.equal(s, ref[k][2:7, 1:4])
        nt = [k for k in ck.keys() if k not in ref]
        assert nt and all(ck.get_bytes(k)[:4] == b"PK\x03\x04" for k in nt)
    # torch's load_state_dict driving pagein's reader: plain tensors and bytes items
    dcp = _dcpcompat.import_torch_dcp()
    sd = {k: torch.zeros_like(v) for k, v in ref.items()}
    extra = "step" if name == "rank4" else "epoch"
    sd[extra] = None
    reader = pagein.dcp.Reader(path)
    dcp.load_state_dict(sd, storage_reader=reader, no_dist=True)
    for k, v in ref.items():
        assert torch.equal(sd[k], v), k
    assert sd[extra] == (7 if name == "rank4" else 3)
    # the whole plan in one run of the range engine, coalesced
    st = reader.stats
    assert st["runs"] == 1, st
    assert st["spans"] >= len(ref) and 1 <= st["requests"] <= st["spans"], st
    assert st["bytes_needed"] <= st["bytes_read"], st


def test_reader_one_run_per_plan_into_views():
    """A plan of slices into non-contiguous, differently typed and contiguous
    destinations: one engine run; every destination equals torch's load."""
    import pagein.dcp
    path = os.path.join(FX, "rank4")
    ref = torch_load(path)
    dcp = _dcpcompat.import_torch_dcp()
    sd = {}
    for k, v in ref.items():
        if v.dim() == 2:
            sd[k] = torch.zeros(v.shape[1], v.shape[0], dtype=v.dtype).t()  # a transposed (strided) destination
        else:
            sd[k] = torch.zeros_like(v)
    reader = pagein.dcp.Reader(path)
    dcp.load_state_dict(sd, storage_reader=reader, no_dist=True)
    for k, v in ref.items():
        assert torch.equal(sd[k], v), k
    assert reader.stats["runs"] == 1, reader.stats
    # a second plan on the same reader: one more run, headers cached
    dcp.load_state_dict(sd, storage_reader=reader, no_dist=True)
    assert reader.stats["runs"] == 2, reader.stats


def test_v2_metadata_through_reader():
    import pagein.dcp
    with pagein.dcp.open(os.path.join(FX, "v2")) as ck:
        assert ck.chunks("cols.weight")[3] == ((0, 9), (4, 1))
        assert ck.info("cols.weight")[1] == "BF16"


@pytest.mark.parametrize("name", ["rank4", "rank2"])
def test_safe_open_and_open_model_serve_dcp(name):
    import pagein.dcp
    path = os.path.join(FX, name)
    ref = torch_load(path)
    with pagein.safe_open(path, framework="pt") as f:
        # through the library's model-format table (the DCP row), no wrapper class
        assert type(f) is pagein.safe_open and f.info()["format"] == "dcp"
        assert set(f.keys()) == set(ref)
        assert f.nontensor_keys() and f.get_bytes(f.nontensor_keys()[0])[:4] == b"PK\x03\x04"
        with pytest.raises(TypeError):
            f.get_tensor(f.nontensor_keys()[0])
        for k, v in ref.items():
            assert torch.equal(f.get_tensor(k), v), k
            sl = f.get_slice(k)
            assert sl.get_shape() == list(v.shape)
            if v.dim() == 2:
                assert torch.equal(sl[1:, -1], v[1:, -1]), k
                assert torch.equal(sl[..., 1:3], v[..., 1:3]), k
                assert torch.equal(sl[::2, 1], v[::2, 1]), k
                assert torch.equal(sl[::-2, :1], v.flip(0)[::2, :1]), k
                assert torch.equal(sl[1, 0], v[1, 0]), k
    for strategy in ("lazy", "populate", "prefetch", "read", "auto"):
        m = pagein.open_model(path, strategy, framework="pt")
        assert type(m) is pagein.Model and set(m.keys()) == set(ref)
        for k, v in ref.items():
            assert torch.equal(m.get_tensor(k), v), (strategy, k)
        seen = {}
        for _, ts in m.layers():
            seen.update(ts)
        assert set(seen) == set(ref) and all(torch.equal(seen[k], v) for k, v in ref.items())
        m.close()
    with pagein.safe_open(path, framework="np") as f:
        assert (f.get_tensor("rows.weight") == ref["rows.weight"].numpy()).all()
    # other paths are untouched: a safetensors file still opens as before
    st = os.path.join(ROOT, "tests", "data", "real", "safetensors", "burn-mnist-f32.safetensors")
    if os.path.exists(st):
        with pagein.safe_open(st, framework="np") as f:
            assert isinstance(f, pagein.safe_open)


def test_single_chunk_tensor_is_a_view_into_its_blob():
    import pagein.dcp
    with pagein.dcp.open(os.path.join(FX, "rank4")) as ck:
        v = ck.view("layers.0.bias")  # one chunk, row-major: no copy
        assert v is not None
        t = ck.get_tensor("layers.0.bias")
        assert t.data_ptr() == v.address
        assert ck.view("rows.weight") is None  # four chunks: assembled
        assert ck.view("transposed") is None  # a strided view in its blob: gathered
        assert torch.equal(ck.get_tensor("transposed"), torch.arange(15.).reshape(3, 5).t())


def test_model_views_and_assembled_tensors():
    """Through the model row: a one-chunk tensor is a view into its blob in
    the file's mapping (same page offset as its file offset), an assembled
    one is built in the model's memory; a slice of an assembled tensor
    reads the chunks it overlaps without building the tensor."""
    import mmap
    path = os.path.join(FX, "rank4")
    ref = torch_load(path)
    with pagein.safe_open(path, framework="np") as f:
        src = f._source()
        recs = {r[0]: r for r in src.tensors()}
        bias = recs["layers.0.bias"]
        assert not bias[-2] & pagein._pagein.TENSOR_ASSEMBLED
        assert src.buffer("layers.0.bias").address % mmap.PAGESIZE == bias[3] % mmap.PAGESIZE
        a = f.get_tensor("layers.0.bias")
        assert not a.flags.owndata and not a.flags.writeable
        assert recs["blocks"][-2] & pagein._pagein.TENSOR_ASSEMBLED
        assert recs["transposed"][-2] & pagein._pagein.TENSOR_ASSEMBLED  # a strided view: copied
        box = src.read_slice("blocks", (2, 3), (3, 3))
        assert bytes(box) == ref["blocks"][2:5, 3:6].contiguous().numpy().tobytes()
        assert (f.get_slice("blocks")[2:5, 3:6] == ref["blocks"][2:5, 3:6].numpy()).all()
        assert (f.get_tensor("transposed") == ref["transposed"].numpy()).all()
        # a box past the shape is refused before anything is allocated for
        # it (was: count=[2^40] asked for a 1 TiB buffer first)
        import tracemalloc
        tracemalloc.start()
        for start, count in (((0, 0), (1 << 40, 1)), ((0, 0), (1, 1 << 62)), ((7, 0), (1, 1))):
            with pytest.raises(Exception, match="outside") as e:
                src.read_slice("blocks", start, count)
            assert "blocks" in str(e.value)
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
        tracemalloc.stop()


def test_model_gpu_staging_host():
    # the staging pipeline (the host backend: no GPU here) copies assembled
    # tensors from their built memory and views from the files
    import importlib
    import numpy as np
    gpu = importlib.import_module("pagein._gpu")
    if "_gpu" in vars(pagein):  # test_dropin.py replaces sys.modules["pagein._gpu"]: leave no attribute
        delattr(pagein, "_gpu")
    path = os.path.join(FX, "rank4")
    with pagein.safe_open(path, framework="np") as f:
        want = {k: np.array(f.get_tensor(k)) for k in f.keys()}
    for strategy in ("lazy", "read"):
        with pagein.open_model(path, strategy=strategy) as m:
            got = gpu.load(m, list(want), gpu.DEVICE_HOST, "np", buffer_bytes=4096, nbuffers=2)
        assert set(got) == set(want)
        for k, v in want.items():
            assert np.asarray(got[k]).tobytes() == v.tobytes(), k


def test_python_convert_shards(tmp_path):
    import pagein.dcp
    path = os.path.join(FX, "rank4")
    out = tmp_path / "model.safetensors"
    st = pagein.dcp.convert_stats(path, out, max_shard_size=200)
    assert st["shards"] == 3 and st["tensors"] == 9 and st["requests"] >= 1
    assert (tmp_path / "model.safetensors.index.json").exists() and not out.exists()
    ref = torch_load(path)
    with pagein.safe_open(str(tmp_path / "model-00001-of-00003.safetensors"), framework="pt") as f:
        first = set(f.keys())
    assert first and first < set(ref)
    seen = set()
    for i in (1, 2, 3):
        with pagein.safe_open(str(tmp_path / ("model-%05d-of-00003.safetensors" % i)), framework="pt") as f:
            for k in f.keys():
                assert torch.equal(f.get_tensor(k), ref[k]), k
                seen.add(k)
    assert seen == set(ref)


def _reshard_rank(rank, world, port, path, split, q):
    import torch.distributed as dist
    import pagein.distributed
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    try:
        got = pagein.distributed.load_dcp(path, split=split)
        st = pagein.distributed.load_dcp.last_stats
        got["__stats__"] = torch.tensor([st["runs"], st["bytes_needed"], st["broadcast_bytes"]])
        import io
        b = io.BytesIO()
        torch.save(got, b)  # bytes: a tensor sent as shared memory dies with its process
        q.put((rank, b.getvalue()))
    finally:
        dist.destroy_process_group()


def _free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def _want(ref, world, rank, split):
    out = {}
    for k, v in ref.items():
        if v.dim() < 2:
            out[k] = v
        else:
            dim = 0 if split == "rows" else v.dim() - 1
            parts = torch.chunk(v, world, dim=dim)
            out[k] = parts[rank] if rank < len(parts) else v.narrow(dim, v.shape[dim], 0)
    return out


def test_reshard_4_to_2_on_gloo_ranks():
    """A checkpoint written by 4 ranks loaded on 2 gloo ranks (spawned):
    every rank's tensors equal torch's full tensors, chunked."""
    import torch.multiprocessing as mp
    path = os.path.join(FX, "rank4")
    ref = torch_load(path)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    mp.spawn(_reshard_rank, args=(2, _free_port(), path, "rows", q), nprocs=2, join=True)
    import io
    got = {r: torch.load(io.BytesIO(b)) for r, b in (q.get(timeout=60) for _ in range(2))}
    whole = sum(v.numel() * v.element_size() for v in ref.values() if v.dim() < 2)
    needed = []
    for r in range(2):
        runs, need, bcast = got[r].pop("__stats__").tolist()
        assert runs == 1 and bcast == whole, (r, runs, bcast, whole)
        needed.append(need)
        want = _want(ref, 2, r, "rows")
        assert set(got[r]) == set(want)
        for k, v in want.items():
            assert torch.equal(got[r][k], v), (r, k)
    # the whole (unsplit) tensors are read once over both ranks, not twice
    split_bytes = sum(v.numel() * v.element_size() for v in ref.values() if v.dim() >= 2)
    assert sum(needed) == split_bytes + whole, (needed, split_bytes, whole)


@pytest.mark.parametrize("world,split", [(8, "rows"), (8, "cols"), (3, "cols"), (4, "rows")])
def test_reshard_without_a_group(world, split):
    import pagein.distributed
    path = os.path.join(FX, "rank4")
    ref = torch_load(path)
    for r in range(world):
        got = pagein.distributed.load_dcp(path, rank=r, world_size=world, split=split)
        for k, v in _want(ref, world, r, split).items():
            assert got[k].shape == v.shape and torch.equal(got[k], v), (world, r, k)
