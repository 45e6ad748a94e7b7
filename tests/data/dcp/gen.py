#!/usr/bin/python3
"""gen.py [OUTDIR] - torch Distributed Checkpoints (DCP) written by torch's own
writer (Debian's python3-torch 1.13: torch.distributed._shard.checkpoint
save_state_dict + FileSystemWriter), for pagein's tests. Regenerate with

    /usr/bin/python3 tests/data/dcp/gen.py tests/data/dcp

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
    """A ShardedTensor of the known values: split along dim 0 or 1 into chunks
    of `split` (ChunkShardingSpec semantics), or 2D blocks."""
    from torch.distributed._shard.sharded_tensor import ShardedTensor, Shard
    from torch.distributed._shard.sharding_spec import ShardMetadata
    full = known(shape, dtype)
    mds = []
    if spec_kind in ("rows", "cols"):
        dim = 0 if spec_kind == "rows" else 1
        off = 0
        for r in range(world):
            n = min(split, shape[dim] - off)
            if n <= 0:
                break
            offs, sizes = [0, 0], list(shape)
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


def main():
    top = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else HERE)
    for layout, world in (("rank4", 4), ("rank2", 2)):
        out = os.path.join(top, layout)
        os.makedirs(out, exist_ok=True)
        for f in os.listdir(out):
            os.unlink(os.path.join(out, f))
        mp.spawn(run, args=(world, free_port(), out, layout), nprocs=world, join=True)
        print("wrote", out, sorted(os.listdir(out)))


if __name__ == "__main__":
    main()
