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

__all__ = ["open", "convert", "convert_stats", "is_dcp_dir", "Checkpoint", "Reader", "SafeOpen"]

_TORCH_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
    "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool", "C64": "complex64",
}


def is_dcp_dir(path):
    """True if path is a local directory holding a DCP .metadata."""
    return _pagein.is_dcp_dir(str(path))


def convert(path, out, max_shard_size=None):
    """Consolidates the checkpoint (a local directory or a source URL) into
    one safetensors file, or with max_shard_size (bytes) Hugging Face shards
    plus OUT's .index.json, all or nothing, through one run of the range
    engine. Returns (tensors, tensor_bytes, skipped non-tensor items)."""
    return _pagein.dcp_convert(str(path), str(out), int(max_shard_size or 0))[:3]


def convert_stats(path, out, max_shard_size=None):
    """convert, returning a dict with the engine's figures too (shards,
    bytes_read, requests)."""
    r = _pagein.dcp_convert(str(path), str(out), int(max_shard_size or 0))
    return dict(zip(("tensors", "tensor_bytes", "skipped", "shards", "bytes_read", "requests"), r))


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

    def view(self, name):
        """A tensor stored in one row-major chunk of a local file: a
        read-only buffer over its bytes inside the blob (no copy; the
        checkpoint stays open while it lives), else None."""
        return _pagein.dcp_view(self._h, self._items[name][0])

    def get_tensor(self, name):
        """The whole tensor (a torch.Tensor): a zero-copy, read-only view
        into its blob when it is stored in one chunk of a local file, else
        assembled from its chunks."""
        i, is_bytes, dtype, shape, nbytes, nchunks = self._items[name]
        if not is_bytes and nchunks == 1 and nbytes:
            v = self.view(name)
            if v is not None:
                import warnings
                import torch
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # read-only: torch warns that it is not writable
                    return torch.frombuffer(v, dtype=self._torch_dtype(dtype)).reshape(shape)
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


def _tensor_buffer(t):
    """A writable buffer over a contiguous CPU tensor's bytes (any dtype,
    bfloat16 included); the tensor must outlive it."""
    import ctypes
    n = t.numel() * t.element_size()
    return (ctypes.c_char * n).from_address(t.data_ptr())


def _strided_buffer(t):
    """A writable buffer from a CPU tensor view's first element to its last
    (non-negative strides), and its strides in elements; None if the view
    cannot be written through (negative strides)."""
    import ctypes
    if any(s < 0 for s in t.stride()):
        return None
    reach = 1 + sum((n - 1) * s for n, s in zip(t.size(), t.stride()))
    return (ctypes.c_char * (reach * t.element_size())).from_address(t.data_ptr()), tuple(t.stride())


def Reader(path):  # noqa: N802 - a class made on first use (torch's StorageReader is its base)
    """A torch DCP StorageReader over pagein: torch's planner decides what
    each rank needs; pagein reads exactly those boxes of the saved chunks."""
    dcp, base = _storage_reader_base()

    class _Reader(base):
        def __init__(self, path):
            super().__init__()
            self.ck = Checkpoint(path)
            self.storage_data = None
            # summed over read_data calls: engine runs (one per plan), spans, requests, bytes
            self.stats = dict.fromkeys(("runs", "spans", "requests", "bytes_read", "bytes_needed"), 0)

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
            """Every ReadItem of the plan in one run of pagein's range
            engine (coalesced, many in flight): tensors straight into the
            destination's memory where it is a CPU tensor of the item's
            dtype, a strided view included (a column slice of a whole
            tensor), else into a temporary then copied; bytes items into a
            buffer handed to planner.load_bytes."""
            import torch
            from torch.futures import Future
            reqs, done = [], []
            for req in plan.items:
                fqn = req.storage_index.fqn
                i, is_bytes, dtype, _, nbytes, _ = self.ck._items[fqn]
                if is_bytes:
                    buf = bytearray(nbytes)
                    reqs.append((i, buf, None, None))
                    done.append((req, buf, None, None))
                    continue
                base_off = tuple(req.storage_index.offset or ())
                start = tuple(int(b) + int(s) for b, s in zip(base_off, req.storage_offsets))
                count = tuple(int(c) for c in req.lengths)
                target = planner.resolve_tensor(req).detach()
                assert tuple(target.size()) == count, "%s: %s vs %s" % (fqn, tuple(target.size()), count)
                td = self.ck._torch_dtype(dtype)
                direct = target.device.type == "cpu" and target.dtype == td
                sb = None if not direct or target.is_contiguous() or not target.numel() else _strided_buffer(target)
                direct = direct and (target.is_contiguous() or sb is not None)
                dst = target if direct else torch.empty(count, dtype=td)
                if sb is not None:
                    reqs.append((i, sb[0], start, count, sb[1]))
                elif dst.numel():
                    reqs.append((i, _tensor_buffer(dst), start, count))
                done.append((req, None, target, None if direct else dst))
            r = _pagein.dcp_read_many(self.ck._h, reqs)
            for k, v in zip(("runs", "spans", "requests", "bytes_read", "bytes_needed"), r):
                self.stats[k] += v
            for req, buf, target, tmp in done:
                if buf is not None:
                    planner.load_bytes(req, io.BytesIO(bytes(buf)))
                    continue
                if tmp is not None:
                    target.copy_(tmp)
                planner.commit_tensor(req, target)
            fut = Future()
            fut.set_result(None)
            return fut

    return _Reader(path)


# ---- safe_open / open_model on a checkpoint directory ------------------------

_NP_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64", "I32": "int32", "I16": "int16",
              "I8": "int8", "U8": "uint8", "BOOL": "bool", "C64": "complex64"}


def _box(index, shape):
    """(start, count, squeeze) of a basic index (ints, step-1 slices, ...)."""
    if not isinstance(index, tuple):
        index = (index,)
    if any(i is Ellipsis for i in index):
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (len(shape) - len(index) + 1) + index[k + 1:]
    if len(index) > len(shape):
        raise IndexError("too many indices: %d for %d dimensions" % (len(index), len(shape)))
    index = index + (slice(None),) * (len(shape) - len(index))
    start, count, squeeze = [], [], []
    for d, (ix, n) in enumerate(zip(index, shape)):
        if isinstance(ix, slice):
            a, b, step = ix.indices(n)
            if step != 1:
                raise IndexError("dimension %d: only steps of 1 are supported" % d)
            start.append(a)
            count.append(max(0, b - a))
        else:
            ix = int(ix)
            if ix < 0:
                ix += n
            if not 0 <= ix < n:
                raise IndexError("index %d out of range for dimension %d of size %d" % (ix, d, n))
            start.append(ix)
            count.append(1)
            squeeze.append(d)
    return tuple(start), tuple(count), squeeze


class _DcpSlice:
    """safe_open(ckpt).get_slice(name): reads only the chunks a box overlaps."""

    def __init__(self, f, name):
        self._f, self._name = f, name
        _, self._dtype, self._shape, _, _ = f._ck.info(name)

    def get_shape(self):
        return list(self._shape)

    def get_dtype(self):
        return self._dtype

    def __getitem__(self, index):
        start, count, squeeze = _box(index, self._shape)
        t = self._f._ck.get_slice(self._name, start, count)
        if squeeze:
            t = t.reshape([c for d, c in enumerate(count) if d not in squeeze])
        return self._f._out(t, self._dtype)


class SafeOpen:
    """What pagein.safe_open and pagein.open_model return for a torch
    Distributed Checkpoint directory (or source URL): the safetensors
    reading API over its tensors (keys, get_tensor, get_slice, metadata),
    plus the non-tensor items (nontensor_keys, get_bytes). Single-chunk
    tensors of a local checkpoint are zero-copy views into their blobs."""

    def __init__(self, path, framework="pt", device="cpu"):
        if str(device) != "cpu":
            raise ValueError("a torch Distributed Checkpoint is served on the CPU (device=%r)" % (device,))
        self.path = str(path)
        self.framework = framework
        self._ck = Checkpoint(path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._ck.close()

    def keys(self):
        return self._ck.tensor_keys()

    def nontensor_keys(self):
        return [k for k in self._ck.keys() if self._ck.info(k)[0]]

    def metadata(self):
        return {"format": "pt"}

    def _out(self, t, dtype):
        if self.framework in ("pt", "torch", "pytorch"):
            return t
        if dtype not in _NP_DTYPES:
            raise TypeError("%s has no numpy dtype (use framework='pt')" % dtype)
        return t.numpy()

    def get_tensor(self, name):
        if name not in self._ck._items or self._ck.info(name)[0]:
            if name in self._ck._items:
                raise TypeError("%s is a non-tensor item; use get_bytes" % name)
            raise KeyError(name)
        return self._out(self._ck.get_tensor(name), self._ck.info(name)[1])

    def get_slice(self, name):
        if name not in self._ck._items or self._ck.info(name)[0]:
            raise KeyError(name)
        return _DcpSlice(self, name)

    def get_bytes(self, name):
        return self._ck.get_bytes(name)

    def chunks(self, name):
        return self._ck.chunks(name)

    def __getitem__(self, name):
        return self.get_tensor(name)

    def __contains__(self, name):
        return name in self.keys()

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self.keys())


def _is_ckpt(path):
    """A local directory holding a .metadata (no request for a URL: those
    open with pagein.dcp.open)."""
    import os
    try:
        p = os.fsdecode(os.fspath(path))
    except TypeError:
        return False
    return "://" not in p and os.path.isdir(p) and is_dcp_dir(p)


def _serve(ns):
    """Makes pagein.safe_open and pagein.open_model (in namespace ns) serve
    a DCP directory with SafeOpen; every other path goes on as before."""
    cls, open_model = ns["safe_open"], ns["open_model"]
    orig_new = cls.__new__

    def __new__(c, path=None, *a, **kw):
        if c is cls and path is not None and _is_ckpt(path):
            return SafeOpen(path, *a, **kw)
        return orig_new(c) if orig_new is object.__new__ else orig_new(c, path, *a, **kw)

    cls.__new__ = staticmethod(__new__)

    def open_model_dcp(path, *a, **kw):
        if _is_ckpt(path):
            kw.pop("strategy", None)
            return SafeOpen(path, **{k: v for k, v in kw.items() if k in ("framework", "device")})
        return open_model(path, *a, **kw)

    open_model_dcp.__doc__ = open_model.__doc__
    open_model_dcp.__name__ = open_model.__name__
    open_model_dcp.__qualname__ = getattr(open_model, "__qualname__", open_model.__name__)
    open_model_dcp.__module__ = open_model.__module__
    open_model_dcp.__wrapped__ = open_model
    ns["open_model"] = open_model_dcp
