"""pagein.dcp: torch Distributed Checkpoints (DCP) read by pagein's C reader.

    import pagein.dcp
    with pagein.dcp.open("ckpt/") as ck:          # .metadata + __R_N.distcp
        w = ck.get_tensor("layers.0.weight")       # assembled from its chunks
        part = ck.get_slice("emb.weight", (0, 0), (128, 64))   # reads only the chunks it overlaps
        raw = ck.get_bytes("step")                 # a non-tensor item: its torch.save bytes
    pagein.dcp.convert("ckpt/", "model.safetensors")

    # torch's own load_state_dict (1.13) / load (2.x) driven by pagein:
    dcp.load_state_dict(sd, storage_reader=pagein.dcp.Reader("ckpt/"))

The .metadata pickle is read by pagein's restricted unpickler (nothing in it
runs, docs/FORMAT-DCP.md); Reader.read_metadata builds torch's Metadata
objects from what pagein parsed instead of unpickling the file with pickle.
"""
import io

from . import _pagein
from . import _dcpcompat

__all__ = ["open", "convert", "is_dcp_dir", "Checkpoint", "Reader"]

_TORCH_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
    "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool", "C64": "complex64",
}


def is_dcp_dir(path):
    """True if path is a local directory holding a DCP .metadata."""
    return _pagein.is_dcp_dir(str(path))


def convert(path, out):
    """Consolidates the checkpoint into one safetensors file (atomic).
    Returns (tensors, tensor_bytes, skipped non-tensor items)."""
    return _pagein.dcp_convert(str(path), str(out))


class Checkpoint:
    """An open DCP checkpoint directory (local, or a source URL prefix)."""

    def __init__(self, path):
        self.path = str(path)
        self._h = _pagein.dcp_open(self.path)
        self._items = {}
        for i, (name, is_bytes, dtype, shape, nbytes, nchunks) in enumerate(_pagein.dcp_items(self._h)):
            self._items[name] = (i, bool(is_bytes), dtype, tuple(shape), nbytes, nchunks)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._h = None

    def keys(self):
        """Every item's name, in the state dict's order."""
        return list(self._items)

    def tensor_keys(self):
        return [k for k, v in self._items.items() if not v[1]]

    def info(self, name):
        """(is_bytes, dtype name, shape, nbytes, nchunks)."""
        return self._items[name][1:]

    def chunks(self, name):
        """[(offsets, sizes)] of a tensor's chunks as saved."""
        return [(tuple(o), tuple(s)) for o, s in _pagein.dcp_chunks(self._h, self._items[name][0])]

    def _torch_dtype(self, dtype):
        import torch
        return getattr(torch, _TORCH_DTYPES[dtype])

    def get_bytes(self, name):
        """A non-tensor item's stored bytes (torch.save of the object; not unpickled)."""
        i, is_bytes, _, _, nbytes, _ = self._items[name]
        if not is_bytes:
            raise TypeError("%s is a tensor; use get_tensor" % name)
        buf = bytearray(nbytes)
        _pagein.dcp_read_into(self._h, i, buf)
        return bytes(buf)

    def _read(self, name, start=None, count=None):
        import torch
        i, is_bytes, dtype, shape, nbytes, _ = self._items[name]
        if is_bytes:
            raise TypeError("%s is a non-tensor item; use get_bytes" % name)
        td = self._torch_dtype(dtype)
        if start is not None:
            shape = tuple(int(c) for c in count)
            n = 1
            for c in shape:
                n *= c
            nbytes = n * torch.empty((), dtype=td).element_size()
        if nbytes == 0:
            return torch.empty(shape, dtype=td)
        buf = bytearray(nbytes)
        if start is None:
            _pagein.dcp_read_into(self._h, i, buf)
        else:
            _pagein.dcp_read_into(self._h, i, buf, tuple(int(s) for s in start), shape)
        return torch.frombuffer(buf, dtype=td).reshape(shape)

    def get_tensor(self, name):
        """The whole tensor (a torch.Tensor), assembled from its chunks."""
        return self._read(name)

    def get_slice(self, name, start, count):
        """The box [start, start + count) of a tensor; reads only the chunks it overlaps."""
        return self._read(name, start, count)


def open(path):  # noqa: A001 - the module's entry point, like pagein.safe_open
    return Checkpoint(path)


def _storage_reader_base():
    dcp = _dcpcompat.import_torch_dcp()
    return dcp, dcp.StorageReader


def _torch_classes(dcp):
    """torch's Metadata dataclasses (1.13: _shard.checkpoint; 2.x: checkpoint)."""
    import importlib
    md = importlib.import_module(dcp.__name__ + ".metadata")
    props = getattr(md, "TensorProperties", None)
    if props is None:
        props = importlib.import_module("torch.distributed._shard.sharded_tensor.metadata").TensorProperties
    return md, props


def Reader(path):  # noqa: N802 - a class made on first use (torch's StorageReader is its base)
    """A torch DCP StorageReader over pagein: torch's planner decides what
    each rank needs; pagein reads exactly those boxes of the saved chunks."""
    dcp, base = _storage_reader_base()

    class _Reader(base):
        def __init__(self, path):
            super().__init__()
            self.ck = Checkpoint(path)
            self.storage_data = None

        def read_metadata(self):
            import torch
            md, props = _torch_classes(dcp)
            sdm, sd = {}, {}
            for name in self.ck.keys():
                is_bytes, dtype, shape, _, _ = self.ck.info(name)
                if is_bytes:
                    sdm[name] = md.BytesStorageMetadata()
                    sd[md.MetadataIndex(name)] = (name, None)
                    continue
                chunks = []
                for j, (off, size) in enumerate(self.ck.chunks(name)):
                    chunks.append(md.ChunkStorageMetadata(offsets=torch.Size(off), sizes=torch.Size(size)))
                    sd[md.MetadataIndex(name, off, j)] = (name, off)
                p = props(dtype=self.ck._torch_dtype(dtype))
                sdm[name] = md.TensorStorageMetadata(properties=p, size=torch.Size(shape), chunks=chunks)
            return md.Metadata(state_dict_metadata=sdm, storage_data=sd)

        def init(self, metadata, is_coordinator):
            self.storage_data = metadata.storage_data

        def prepare_local_plan(self, plan):
            return plan

        def prepare_global_plan(self, global_plan):
            return global_plan

        def read_data(self, plan, planner):
            from torch.futures import Future
            for req in plan.items:
                fqn = req.storage_index.fqn
                is_bytes = self.ck.info(fqn)[0]
                if is_bytes:
                    planner.load_bytes(req, io.BytesIO(self.ck.get_bytes(fqn)))
                    continue
                base_off = tuple(req.storage_index.offset or ())
                start = tuple(b + s for b, s in zip(base_off, req.storage_offsets))
                t = self.ck.get_slice(fqn, start, tuple(req.lengths))
                target = planner.resolve_tensor(req).detach()
                assert target.size() == t.size(), "%s: %s vs %s" % (fqn, target.size(), t.size())
                target.copy_(t)
                planner.commit_tensor(req, target)
            fut = Future()
            fut.set_result(None)
            return fut

    return _Reader(path)
