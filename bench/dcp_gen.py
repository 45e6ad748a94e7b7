"""bench/dcp_gen.py OUT [MIB] - a torch Distributed Checkpoint for
bench/dcp.sh, written by torch 1.13's own DCP writer (save_state_dict,
FileSystemWriter, single_file_per_rank=True) from 4 gloo ranks started with
torch.multiprocessing.spawn: MIB (default 512) MiB of bf16 in 16 [R, 4096]
tensors, half split by rows and half by columns over the 4 ranks
(ShardedTensors), plus a replicated bias and a step. Not committed: a
benchmark input (tests/data/dcp/gen.py writes the small test fixtures).

bench/dcp_gen.py OUT MIB --conv: 4-D chunks instead: MIB MiB of bf16 conv
weights [C, 1024, 3, 3], even ones split by dim 0, odd ones by dim 1 (rows
of 3 elements: what the copies of a >2-D chunk box are measured on)."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "data", "dcp"))
import gen  # noqa: E402  (dcp_module, free_port: the fixtures' helpers)

NT, COLS = 16, 4096


def tensor(i, rows):
    g = torch.Generator().manual_seed(i)
    return torch.randn(rows, COLS, generator=g).to(torch.bfloat16)


def conv(i, rows):
    g = torch.Generator().manual_seed(i)
    return torch.randn(rows * COLS // 9216 * 8, 1024, 3, 3, generator=g).to(torch.bfloat16)


def shard(i, rows, world, rank, full=None):
    from torch.distributed._shard.sharded_tensor import Shard, ShardedTensor
    from torch.distributed._shard.sharding_spec import ShardMetadata
    full = tensor(i, rows) if full is None else full
    dim = i % 2  # even: by rows, odd: by columns
    n = full.shape[dim] // world
    mds = []
    for r in range(world):
        offs, sizes = [0] * full.dim(), list(full.shape)
        offs[dim], sizes[dim] = r * n, n
        mds.append(ShardMetadata(offs, sizes, "rank:%d/cpu" % r))
    md = mds[rank]
    local = full.narrow(dim, md.shard_offsets[dim], md.shard_sizes[dim]).clone()
    return ShardedTensor._init_from_local_shards([Shard(local, md)], *full.shape)


def run(rank, world, port, out, rows, nd):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    dcp = gen.dcp_module()
    if nd:
        sd = {"conv.%d.weight" % i: shard(i, rows, world, rank, conv(i, rows)) for i in range(NT // 4)}
    else:
        sd = {"layers.%d.weight" % i: shard(i, rows, world, rank) for i in range(NT)}
    sd["norm.bias"] = torch.ones(COLS, dtype=torch.bfloat16)
    sd["step"] = 1000
    dcp.save_state_dict(sd, storage_writer=dcp.FileSystemWriter(out, single_file_per_rank=True, sync_files=False))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = args[0]
    mib = int(args[1]) if len(args) > 1 else 512
    nd = "--conv" in sys.argv
    rows = (mib << 20) // (NT * COLS * 2)
    if nd:  # NT / 4 conv weights of [rows * COLS / 9216 * 8, 1024, 3, 3]: 2 * rows * COLS * 8 bytes each
        rows = (mib << 20) // (NT // 4 * COLS * 2 * 8)
    os.makedirs(out, exist_ok=True)
    mp.spawn(run, args=(4, gen.free_port(), out, rows, nd), nprocs=4, join=True)
