#!/usr/bin/python3
"""gen.py [OUTDIR] - torch Distributed Checkpoints (DCP) written by torch's own
writer (Debian's python3-torch 1.13: torch.distributed._shard.checkpoint
save_state_dict + FileSystemWriter), for pagein's tests. Regenerate with

    /usr/bin/python3 tests/data/dcp/gen.py tests/data/dcp
    /usr/bin/python3 tests/data/dcp/gen.py --derived tests/data/dcp   (v2/ and bad/ only)
    /usr/bin/python3 tests/data/dcp/gen.py --nd tests/data/dcp        (nd/ only)

(a few seconds, most of it importing torch and starting gloo ranks). The
import goes through python/pagein/_dcpcompat.py (docs/PYTHON.md: torch 1.13's
DCP package cannot be imported under Python 3.11 without it).

Every tensor holds known values so that tests without torch can check them:
element k (row-major, in the whole tensor) is k % 251 converted to the dtype
(bool: k % 3 == 0), except "transposed" (see below).

Checkpoints (directories under OUTDIR):
  rank4/   4 gloo ranks, single_file_per_rank=True (__R_0.distcp, several
           blobs per file, as torch 2.x writes by default):
             rows.weight   f32 [10, 6]  ShardedTensor split by rows (3,3,3,1)
             cols.weight   bf16 [4, 10] ShardedTensor split by columns (3,3,3,1)
             blocks        f16 [6, 8]   four 3x4 blocks (EnumerableShardingSpec)
             layers.0.bias f32 [6]      a plain (replicated) tensor, rank 0 writes it
             counts        i64 [5]
             flags         bool [7]
             small         i8 [2, 3]
             scalar        f64 []       0-d, the value 2.5
             transposed    f32 [5, 3]   torch.arange(15).reshape(3, 5).t(): a view
                                        with strides (1, 5) that the writer keeps as is
             step          the int 7 (a non-tensor item: a torch.save blob)
             config        {"lr": 0.5, "name": "tiny"} (non-tensor)
  rank2/   2 gloo ranks, one file per item (single_file_per_rank=False):
             rows.weight f32 [8, 4] by rows (4,4), cols.weight bf16 [4, 8] by
             columns (4,4), bias f16 [4] replicated, epoch (non-tensor 3)
  nd/      2 gloo ranks, chunks of more than 2 dimensions: cube f32 [4, 6, 5]
           split along dim 1 (3,3), conv.weight bf16 [4, 2, 3, 3] along dim 0
           (2,2), hyper f16 [2, 3, 4, 6] along dim 2 (2,2)
  v2/      rank4's files with its .metadata re-pickled under torch 2.x's
           module names and fields (torch/distributed/checkpoint/metadata.py
           and filesystem.py: Metadata.storage_meta and .version,
           StorageMeta, _StorageInfo.transform_descriptors,
           _MEM_FORMAT_ENCODING), for want of torch 2.x on Debian
  bad/     malformed .metadata files derived from rank4's (torch's own
           classes, fields changed, pickled again): NAME.metadata, each
           refused for the reason its name gives (gap, overlap, outside,
           path_slash, path_dotdot, path_nul, no_storage, orphan_storage,
           sparse, evil, bad_hint, past_end,
           shared_blob)
"""
import importlib.util
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
COMPAT = os.path.join(HERE, "..", "..", "..", "python", "pagein", "_dcpcompat.py")


def dcp_module():
    spec = importlib.util.spec_from_file_location("_dcpcompat", COMPAT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.import_torch_dcp()


def known(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    k = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return (k % 3 == 0).reshape(shape)
    return (k % 251).to(dtype).reshape(shape)


def sharded(spec_kind, shape, dtype, world, rank, split=None):
    """A ShardedTensor of the known values: split along dim 0 or 1 ("rows",
    "cols") or along dimension spec_kind (an int) into chunks of `split`
    (ChunkShardingSpec semantics), or 2D blocks."""
    from torch.distributed._shard.sharded_tensor import ShardedTensor, Shard
    from torch.distributed._shard.sharding_spec import ShardMetadata
    full = known(shape, dtype)
    mds = []
    if spec_kind in ("rows", "cols") or isinstance(spec_kind, int):
        dim = spec_kind if isinstance(spec_kind, int) else 0 if spec_kind == "rows" else 1
        off = 0
        for r in range(world):
            n = min(split, shape[dim] - off)
            if n <= 0:
                break
            offs, sizes = [0] * len(shape), list(shape)
            offs[dim], sizes[dim] = off, n
            mds.append(ShardMetadata(offs, sizes, "rank:%d/cpu" % r))
            off += n
    else:  # blocks: a 2x2 grid
        h, w = shape[0] // 2, shape[1] // 2
        for r in range(4):
            i, j = divmod(r, 2)
            mds.append(ShardMetadata([i * h, j * w], [h, w], "rank:%d/cpu" % (r % world)))
    local = []
    for md in mds:
        if md.placement.rank() != rank:
            continue
        sl = full
        for d, (o, s) in enumerate(zip(md.shard_offsets, md.shard_sizes)):
            sl = sl.narrow(d, o, s)
        local.append(Shard(sl.clone(), md))
    return ShardedTensor._init_from_local_shards(local, *shape)


def run(rank, world, port, out, layout):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    dcp = dcp_module()
    if layout == "rank4":
        sd = {
            "rows.weight": sharded("rows", [10, 6], torch.float32, world, rank, 3),
            "cols.weight": sharded("cols", [4, 10], torch.bfloat16, world, rank, 3),
            "blocks": sharded("blocks", [6, 8], torch.float16, world, rank),
            "layers.0.bias": known([6], torch.float32),
            "counts": known([5], torch.int64),
            "flags": known([7], torch.bool),
            "small": known([2, 3], torch.int8),
            "scalar": torch.tensor(2.5, dtype=torch.float64),
            "transposed": torch.arange(15, dtype=torch.float32).reshape(3, 5).t(),
            "step": 7,
            "config": {"lr": 0.5, "name": "tiny"},
        }
        writer = dcp.FileSystemWriter(out, single_file_per_rank=True, sync_files=False)
    elif layout == "nd":
        sd = {
            "cube": sharded(1, [4, 6, 5], torch.float32, world, rank, 3),
            "conv.weight": sharded(0, [4, 2, 3, 3], torch.bfloat16, world, rank, 2),
            "hyper": sharded(2, [2, 3, 4, 6], torch.float16, world, rank, 2),
        }
        writer = dcp.FileSystemWriter(out, single_file_per_rank=True, sync_files=False)
    else:
        sd = {
            "rows.weight": sharded("rows", [8, 4], torch.float32, world, rank, 4),
            "cols.weight": sharded("cols", [4, 8], torch.bfloat16, world, rank, 4),
            "bias": known([4], torch.float16),
            "epoch": 3,
        }
        writer = dcp.FileSystemWriter(out, single_file_per_rank=False, sync_files=False)
    dcp.save_state_dict(sd, storage_writer=writer)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def v2_modules():
    """Stand-ins for torch 2.x's DCP classes under their module names, field
    for field as torch/distributed/checkpoint/metadata.py and filesystem.py
    declare them (the pickle records module, class name and fields only)."""
    import dataclasses
    import enum
    import types
    from typing import Any, Optional

    mods = {}
    for name in ("torch.distributed.checkpoint", "torch.distributed.checkpoint.metadata",
                 "torch.distributed.checkpoint.filesystem"):
        mods[name] = sys.modules.get(name) or types.ModuleType(name)
        sys.modules[name] = mods[name]
    md, fs = mods["torch.distributed.checkpoint.metadata"], mods["torch.distributed.checkpoint.filesystem"]

    class _MEM_FORMAT_ENCODING(enum.Enum):
        TORCH_CONTIGUOUS_FORMAT = 0
        TORCH_CHANNELS_LAST = 1
        TORCH_PRESERVE_FORMAT = 2

    def dc(mod, name, fields, **kw):
        c = dataclasses.make_dataclass(name, fields, **kw)
        c.__module__ = mod.__name__
        c.__qualname__ = name
        setattr(mod, name, c)
        return c

    _MEM_FORMAT_ENCODING.__module__ = md.__name__
    _MEM_FORMAT_ENCODING.__qualname__ = "_MEM_FORMAT_ENCODING"
    md._MEM_FORMAT_ENCODING = _MEM_FORMAT_ENCODING
    props = dc(md, "TensorProperties", [("dtype", Any), ("layout", Any), ("requires_grad", bool),
                                        ("memory_format", Any), ("pin_memory", bool)])
    props.__getstate__ = lambda self: (self.dtype, self.layout, self.requires_grad,
                                       _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT, self.pin_memory)
    dc(md, "ChunkStorageMetadata", [("offsets", Any), ("sizes", Any)])
    dc(md, "TensorStorageMetadata", [("properties", Any), ("size", Any), ("chunks", Any)])
    dc(md, "BytesStorageMetadata", [])
    dc(md, "StorageMeta", [("checkpoint_id", Any, None), ("save_id", str, ""), ("load_id", str, ""),
                           ("modules", Any, dataclasses.field(default_factory=list))])
    dc(md, "MetadataIndex", [("fqn", str), ("offset", Optional[Any], None), ("index", Optional[int], None)],
       frozen=True)
    dc(md, "Metadata", [("state_dict_metadata", Any), ("planner_data", Any, None), ("storage_data", Any, None),
                        ("storage_meta", Any, None), ("version", Optional[str], None)])
    dc(fs, "_StorageInfo", [("relative_path", str), ("offset", int), ("length", int),
                            ("transform_descriptors", Any, None)])
    return md, fs


def write_v2(top):
    """rank4 re-pickled as torch 2.x writes it (see v2_modules)."""
    import pathlib
    import pickle
    import shutil
    src, out = os.path.join(top, "rank4"), os.path.join(top, "v2")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(src):
        if f != ".metadata":
            shutil.copy(os.path.join(src, f), os.path.join(out, f))
    with open(os.path.join(src, ".metadata"), "rb") as f:
        old = pickle.load(f)
    md, fs = v2_modules()
    sdm = {}
    for k, v in old.state_dict_metadata.items():
        if hasattr(v, "chunks"):
            p = v.properties
            sdm[k] = md.TensorStorageMetadata(
                md.TensorProperties(p.dtype, p.layout, p.requires_grad, p.memory_format, p.pin_memory),
                v.size, [md.ChunkStorageMetadata(c.offsets, c.sizes) for c in v.chunks])
        else:
            sdm[k] = md.BytesStorageMetadata()
    sd = {md.MetadataIndex(k.fqn, k.offset, k.index): fs._StorageInfo(v.relative_path, v.offset, v.length, [])
          for k, v in old.storage_data.items()}
    meta = md.Metadata(sdm, None, sd, md.StorageMeta(pathlib.PurePosixPath("ckpt", "v2"), "save-1", "", []), "1.0.0")
    with open(os.path.join(out, ".metadata"), "wb") as f:
        pickle.dump(meta, f)


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch PWNED_BY_DCP_METADATA",))


def write_bad(top):
    """Malformed .metadata files, each from rank4's with one change."""
    import copy
    import pickle
    dcp_module()  # the classes must be importable to unpickle
    with open(os.path.join(top, "rank4", ".metadata"), "rb") as f:
        base = pickle.load(f)
    out = os.path.join(top, "bad")
    os.makedirs(out, exist_ok=True)

    def entry(m, fqn, off):
        return next(k for k in m.storage_data if k.fqn == fqn and tuple(k.offset or ()) == off)

    def put(name, fn):
        m = copy.deepcopy(base)
        fn(m)
        with open(os.path.join(out, name + ".metadata"), "wb") as f:
            pickle.dump(m, f)

    rows = lambda m: m.state_dict_metadata["rows.weight"]  # noqa: E731

    def gap(m):
        del rows(m).chunks[3]
        del m.storage_data[entry(m, "rows.weight", (9, 0))]

    def overlap(m):
        rows(m).chunks[1].offsets = torch.Size([2, 0])
        rows(m).chunks[1].sizes = torch.Size([4, 6])

    def outside(m):
        rows(m).chunks[3].sizes = torch.Size([2, 6])

    def path(p):
        def f(m):
            m.storage_data[entry(m, "rows.weight", (3, 0))].relative_path = p
        return f

    def no_storage(m):
        del m.storage_data[entry(m, "cols.weight", (0, 3))]

    def orphan(m):
        k = entry(m, "counts", (0,))
        m.storage_data[type(k)("nosuch", torch.Size([0]), 0)] = m.storage_data[k]

    def sparse(m):
        m.state_dict_metadata["counts"].properties.layout = torch.sparse_coo

    def evil(m):
        m.planner_data = _Evil()

    def bad_hint(m):
        k = entry(m, "rows.weight", (3, 0))
        v = m.storage_data.pop(k)
        m.storage_data[type(k)("rows.weight", torch.Size([4, 0]), 1)] = v

    def past_end(m):
        m.storage_data[entry(m, "blocks", (3, 4))].length += 1

    put("gap", gap)
    put("overlap", overlap)
    put("outside", outside)
    put("path_slash", path("sub/__1_0.distcp"))
    put("path_dotdot", path(".."))
    put("path_nul", path("__1_0.distcp\0x"))
    put("no_storage", no_storage)
    put("orphan_storage", orphan)
    put("sparse", sparse)
    put("evil", evil)
    put("bad_hint", bad_hint)
    put("past_end", past_end)

    def shared_blob(m):  # two chunks read from one stored blob
        m.storage_data[entry(m, "rows.weight", (3, 0))] = m.storage_data[entry(m, "rows.weight", (0, 0))]

    put("shared_blob", shared_blob)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    top = os.path.abspath(args[0] if args else HERE)
    if "--derived" in sys.argv:  # only v2/ and bad/, from the committed rank4/
        write_bad(top)
        write_v2(top)
        return
    layouts = (("rank4", 4), ("rank2", 2), ("nd", 2))
    if "--nd" in sys.argv:  # only nd/ (added later; the others unchanged)
        layouts = (("nd", 2),)
    for layout, world in layouts:
        out = os.path.join(top, layout)
        os.makedirs(out, exist_ok=True)
        for f in os.listdir(out):
            os.unlink(os.path.join(out, f))
        mp.spawn(run, args=(world, free_port(), out, layout), nprocs=world, join=True)
        print("wrote", out, sorted(os.listdir(out)))
    write_bad(top)
    write_v2(top)


if __name__ == "__main__":
    main()
