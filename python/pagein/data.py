"""pagein.data: training samples for torch DataLoaders, ranks and workers.

    ds = pagein.data.Dataset(["shard0.bin", "shard1.bin"], record_size=32768,
                             shuffle="global", seed=0)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=2)
    for epoch in range(3):
        ds.set_epoch(epoch)
        for batch in loader: ...

Sources: fixed-size record files (``record_size=``), Megatron-LM indexed
datasets (a ``.bin``/``.idx`` pair, or the prefix), and JSONL or text files
(``format="lines"``: one sample per non-empty line, indexed at open by one
scan of the file). The bytes are read by the C library's range engine
(``pagein_read_ranges``): each batch of ``read_batch`` sample ids is sorted,
neighbours merged and read with ``queue_depth`` reads in flight, on a
background thread while the previous batch is consumed.

Order and partition (docs/TRAINING-DATA.md, "Python"). The epoch's global
order is a function of (seed, epoch) only: ``"global"`` is the C global
reader's permutation, ``"block"`` shuffles blocks of consecutive samples and
shuffles samples inside windows of blocks, ``"none"`` is file order. Ranks
take the positions of that order round-robin (rank r: positions start + r,
start + r + W, ...), and a rank's DataLoader workers take chunks of
``batch_size`` of its list round-robin, which is exactly the order in which
the DataLoader hands their batches out. Over one epoch every sample is
therefore yielded exactly once across all ranks and workers.

Resume: ``state_dict()`` records the global position reached (every rank at
the same number of samples, as in synchronous data-parallel training), and
``load_state_dict()`` on any world size continues with the suffix of the same
global order, partitioned over the new ranks.

Sample lifetime: samples are numpy arrays (torch tensors with
``framework="pt"``) that are views into a buffer allocated for their read
batch alone and never reused: a held sample keeps that buffer alive (at
most ``read_batch`` samples' bytes) and never changes. ``copy=True`` gives
each sample its own memory. Line samples are ``bytes`` (always copies).
"""

import os as _os
import threading as _threading
from concurrent.futures import ThreadPoolExecutor as _Pool

import numpy as _np

from . import _pagein
from ._pagein import Error, FormatError

__all__ = ["Dataset", "ShardDataset", "epoch_order", "partition"]

try:  # torch is optional: a plain iterable without it
    import torch as _torch
    from torch.utils.data import IterableDataset as _Base
except ImportError:  # pragma: no cover - depends on the machine
    _torch = None
    _Base = object

_SHUFFLES = ("global", "block", "none")
_MEGATRON_DTYPES = {1: _np.uint8, 2: _np.int8, 3: _np.int16, 4: _np.int32, 5: _np.int64,
                    6: _np.float64, 7: _np.float32, 8: _np.uint16}


# ---------------------------------------------------------------------------
# the epoch's global order and its partition
# ---------------------------------------------------------------------------

def _perm(n, seed):
    return _np.frombuffer(_pagein.permutation(int(n), int(seed) & (2**64 - 1)), dtype=_np.uint64)


def epoch_order(n, shuffle, seed, epoch, block_samples=1, window_blocks=7):
    """The global order of epoch `epoch`: a numpy uint64 permutation of
    0..n-1 that depends only on its arguments (the same on every rank)."""
    if shuffle not in _SHUFFLES:
        raise ValueError("shuffle must be one of %s, not %r" % (", ".join(_SHUFFLES), shuffle))
    if shuffle == "none" or n == 0:
        return _np.arange(n, dtype=_np.uint64)
    es = _pagein.epoch_seed(int(seed) & (2**64 - 1), int(epoch))
    if shuffle == "global":
        return _perm(n, es)
    # block: blocks of block_samples consecutive ids in a seeded order; the
    # samples of each window of window_blocks consecutive blocks (in that
    # order) shuffled together.
    bs = max(1, int(block_samples))
    nblocks = (n + bs - 1) // bs
    border = _perm(nblocks, es)
    out = _np.empty(n, dtype=_np.uint64)
    pos = 0
    wb = max(1, int(window_blocks))
    for w in range(0, nblocks, wb):
        ids = _np.concatenate([_np.arange(b * bs, min(n, (b + 1) * bs), dtype=_np.uint64)
                               for b in border[w:w + wb].tolist()])
        shuf = _perm(len(ids), _pagein.epoch_seed(es, w + 1))
        out[pos:pos + len(ids)] = ids[shuf]
        pos += len(ids)
    return out


def partition(order, start, rank, world_size, worker=0, num_workers=1, chunk=1):
    """The ids of `order[start:]` that one (rank, worker) yields, in order:
    rank r takes positions start + r, start + r + world_size, ...; within a
    rank, worker w takes chunks w, w + num_workers, ... of `chunk` ids."""
    mine = order[int(start) + rank::world_size]
    if num_workers <= 1:
        return mine
    chunk = max(1, int(chunk))
    idx = _np.arange(len(mine))
    return mine[(idx // chunk) % num_workers == worker]


def _dist_rank_world():
    if _torch is not None:
        d = getattr(_torch, "distributed", None)
        if d is not None and d.is_available() and d.is_initialized():
            return d.get_rank(), d.get_world_size()
    return 0, 1


def _worker():
    if _torch is None:
        return 0, 1
    info = _torch.utils.data.get_worker_info()
    return (info.id, info.num_workers) if info is not None else (0, 1)


# ---------------------------------------------------------------------------
# sources: where sample bytes live
# ---------------------------------------------------------------------------

class _Records:
    def __init__(self, paths, record_size):
        self.paths, self.record_size = list(paths), int(record_size)
        self._cap = None
        self._pid = None
        self.count, self.files = _pagein.dataset_info(self._open())
        self.dtype = _np.uint8

    def _open(self):
        if self._cap is None or self._pid != _os.getpid():
            self._cap = _pagein.dataset_open_records(self.paths, self.record_size)
            self._pid = _os.getpid()
        return self._cap

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_cap"] = None
        return d

    def read(self, ids, qd, max_gap):
        return _pagein.dataset_read(self._open(), ids, queue_depth=qd, max_gap=max_gap)

    def mean_bytes(self):
        return self.record_size


class _Megatron(_Records):
    def __init__(self, prefix):
        self.paths, self.record_size = [prefix], 0
        self._cap = None
        self._pid = None
        self.count, self.files = _pagein.dataset_info(self._open())
        with open(prefix + ".idx", "rb") as fh:
            head = fh.read(18)
        self.dtype = _MEGATRON_DTYPES[head[17]]  # validated by the C parser at open

    def _open(self):
        if self._cap is None or self._pid != _os.getpid():
            self._cap = _pagein.dataset_open_megatron(self.paths[0])
            self._pid = _os.getpid()
        return self._cap

    def mean_bytes(self):
        size = sum(s for _, s in self.files)
        return max(1, size // max(1, self.count))


class _Lines:
    """One sample per non-empty line ('\\n'-separated, the newline excluded)
    of each file, in file order; the index is built by one scan at open."""

    def __init__(self, paths):
        self.paths = list(paths)
        files, offs, lens = [], [], []
        self.sizes = []
        for i, p in enumerate(self.paths):
            a = _np.fromfile(p, dtype=_np.uint8)
            self.sizes.append(len(a))
            nl = _np.flatnonzero(a == 10).astype(_np.uint64)
            starts = _np.concatenate([_np.zeros(1, _np.uint64), nl + 1])
            ends = _np.concatenate([nl, _np.array([len(a)], _np.uint64)])
            keep = ends > starts
            offs.append(starts[keep])
            lens.append(ends[keep] - starts[keep])
            files.append(_np.full(int(keep.sum()), i, dtype=_np.uint32))
            del a
        self.file_of = _np.concatenate(files) if files else _np.zeros(0, _np.uint32)
        self.off = _np.concatenate(offs) if offs else _np.zeros(0, _np.uint64)
        self.len = _np.concatenate(lens) if lens else _np.zeros(0, _np.uint64)
        self.count = len(self.off)
        self.files = list(zip(self.paths, self.sizes))
        self.dtype = None
        self._fds = None
        self._pid = None

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_fds"] = None
        return d

    def __del__(self):
        if self._fds is not None and self._pid == _os.getpid():
            for fd in self._fds:
                _os.close(fd)

    def _open(self):
        if self._fds is None or self._pid != _os.getpid():
            self._fds = [_os.open(p, _os.O_RDONLY | _os.O_CLOEXEC) for p in self.paths]
            self._pid = _os.getpid()
        return self._fds

    def read(self, ids, qd, max_gap):
        ids = ids.astype(_np.int64)
        lens = _np.ascontiguousarray(self.len[ids])
        offsets = _np.zeros(len(ids) + 1, dtype=_np.uint64)
        _np.cumsum(lens, out=offsets[1:])
        out = bytearray(int(offsets[-1]))
        st = _pagein.read_ranges(self._open(), _np.ascontiguousarray(self.file_of[ids]),
                                 _np.ascontiguousarray(self.off[ids]), lens, out,
                                 _np.ascontiguousarray(offsets[:-1]), queue_depth=qd, max_gap=max_gap)
        return out, offsets.tobytes(), st

    def mean_bytes(self):
        return max(1, int(self.len.mean())) if self.count else 1


def _make_source(paths, record_size, fmt):
    if isinstance(paths, (str, _os.PathLike)):
        paths = [paths]
    paths = [_os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("Dataset: no paths given")
    if fmt is None:
        p0 = paths[0]
        if record_size is not None:
            fmt = "records"
        elif p0.endswith((".jsonl", ".txt", ".json")):
            fmt = "lines"
        elif p0.endswith((".idx", ".bin")) or _os.path.exists(p0 + ".idx"):
            fmt = "megatron"
        else:
            raise ValueError("Dataset(%r): give record_size= for record files, or format= "
                             "('records', 'megatron', 'lines')" % p0)
    if fmt == "records":
        if record_size is None:
            raise ValueError("Dataset: format 'records' needs record_size=")
        return _Records(paths, record_size)
    if fmt == "megatron":
        if len(paths) != 1:
            raise ValueError("Dataset: a Megatron dataset is one .bin/.idx pair (got %d paths)" % len(paths))
        p = paths[0]
        return _Megatron(p[:-4] if p.endswith((".idx", ".bin")) else p)
    if fmt in ("lines", "jsonl", "text"):
        return _Lines(paths)
    raise ValueError("Dataset: unknown format %r (records, megatron, lines)" % fmt)


# ---------------------------------------------------------------------------
# the dataset
# ---------------------------------------------------------------------------

class Dataset(_Base):
    """An iterable over the samples of record, Megatron or line files,
    partitioned over ranks and DataLoader workers (module docstring).

    paths: a path or a list of paths (shards, in id order). record_size:
    bytes per record (fixed-size record files). format: 'records',
    'megatron' or 'lines' (guessed from record_size and the names when
    None). shuffle: 'global', 'block' or 'none'. seed: the order of epoch e
    depends only on (seed, e). rank, world_size: default to
    torch.distributed's when it is initialised, else 0 and 1. batch_size:
    the DataLoader's batch size, the chunk by which a rank's samples are
    dealt to its workers (so that the loader's output is a prefix of the
    rank's list, which makes resume exact with workers). return_ids: yield
    (sample_id, sample). dtype: numpy dtype to view record bytes as
    (Megatron: the index's dtype). framework: 'np' (default) or 'pt'.
    copy: give every sample its own memory. read_batch, queue_depth,
    max_gap: the range engine's batch and parameters. block_bytes,
    window_blocks: the 'block' order's block size and window.
    """

    def __new__(cls, paths=None, *args, **kwargs):
        # The dataset-format table's formats (and anything remote, a
        # directory, a glob or columns=) go through the C pipeline.
        if cls is Dataset and _use_pipeline(paths, kwargs):
            return ShardDataset(paths, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, paths, record_size=None, shuffle="global", seed=0, rank=None, world_size=None,
                 return_ids=False, *, format=None, dtype=None, batch_size=1, framework="np", copy=False,
                 read_batch=256, queue_depth=0, max_gap=0, block_bytes=16 << 20, window_blocks=7):
        if shuffle not in _SHUFFLES:
            raise ValueError("shuffle must be one of %s, not %r" % (", ".join(_SHUFFLES), shuffle))
        if framework not in ("np", "numpy", "pt", "torch"):
            raise ValueError("framework must be 'np' or 'pt', not %r" % (framework,))
        if framework in ("pt", "torch") and _torch is None:
            raise FormatError("framework 'pt' needs torch, which is not installed")
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither")
        if world_size is not None and not (0 <= int(rank) < int(world_size)):
            raise ValueError("rank %r outside world size %r" % (rank, world_size))
        self._src = _make_source(paths, record_size, format)
        self.shuffle, self.seed = shuffle, int(seed)
        self._rank, self._world = (None, None) if rank is None else (int(rank), int(world_size))
        self.return_ids, self.copy = bool(return_ids), bool(copy)
        self.framework = "pt" if framework in ("pt", "torch") else "np"
        self.batch_size = max(1, int(batch_size))
        self.read_batch = max(1, int(read_batch))
        self.queue_depth, self.max_gap = int(queue_depth), int(max_gap)
        self.block_samples = max(1, int(block_bytes) // self._src.mean_bytes())
        self.window_blocks = int(window_blocks)
        self.dtype = _np.dtype(dtype) if dtype is not None else self._src.dtype
        self.epoch = 0
        self._start = 0        # global position this epoch starts from (resume)
        self._yielded = 0      # samples yielded by this process in the current iteration
        self._lock = _threading.Lock()
        self.stats = {"requests": 0, "reads": 0, "bytes_requested": 0, "bytes_read": 0, "bytes_wasted": 0}

    def __getstate__(self):  # DataLoader workers started with spawn pickle the dataset
        d = dict(self.__dict__)
        del d["_lock"]
        # torch.distributed is not initialised in a spawned worker: fix the
        # rank and world size as the parent process sees them now.
        d["_rank"], d["_world"] = self.rank_world()
        return d

    def __setstate__(self, d):
        self.__dict__.update(d)
        self._lock = _threading.Lock()

    # -- facts ----------------------------------------------------------------
    @property
    def num_samples(self):
        """Samples in the dataset (all ranks)."""
        return self._src.count

    @property
    def files(self):
        """[(path, size)] of the underlying files."""
        return list(self._src.files)

    def rank_world(self):
        """(rank, world_size) in effect: explicit, else torch.distributed's, else (0, 1)."""
        if self._world is not None:
            return self._rank, self._world
        return _dist_rank_world()

    def __len__(self):
        """Samples this rank yields in the current epoch (all its workers)."""
        r, w = self.rank_world()
        rest = max(0, self._src.count - self._start)
        return rest // w + (1 if r < rest % w else 0)

    # -- epochs and resume ----------------------------------------------------
    def set_epoch(self, epoch):
        """Selects epoch `epoch`: its order comes from (seed, epoch) alone. A
        resume position from load_state_dict applies only to its own epoch."""
        epoch = int(epoch)
        if epoch != self.epoch:
            self._start = 0
        self.epoch = epoch

    def order(self, epoch=None):
        """The global order of an epoch (uint64 array of sample ids)."""
        return epoch_order(self._src.count, self.shuffle, self.seed, self.epoch if epoch is None else epoch,
                           self.block_samples, self.window_blocks)

    def ids(self, worker=None, num_workers=None):
        """Ids this rank (and worker) yields this epoch, in order."""
        r, w = self.rank_world()
        if worker is None:
            worker, num_workers = _worker()
        return partition(self.order(), self._start, r, w, worker, num_workers, self.batch_size)

    def state_dict(self, samples_seen=None):
        """Where the epoch stands, for load_state_dict on any world size.
        samples_seen: samples this rank's training loop has consumed this
        epoch (needed with DataLoader workers, whose progress this process
        cannot see; by default the samples this process yielded). Every rank
        is assumed at the same count, as in synchronous training; the state
        is the same on every rank."""
        r, w = self.rank_world()
        seen = self._yielded if samples_seen is None else int(samples_seen)
        if seen < 0:
            raise ValueError("samples_seen must be >= 0")
        # A rank that has consumed all of its samples ends the epoch (ranks
        # differ by one sample when W does not divide what is left).
        pos = self._src.count if seen >= len(self) else min(self._src.count, self._start + seen * w)
        return {"version": 1, "seed": self.seed, "shuffle": self.shuffle, "epoch": self.epoch,
                "position": pos, "num_samples": self._src.count,
                "block_samples": self.block_samples, "window_blocks": self.window_blocks}

    def load_state_dict(self, state):
        """Continues epoch state['epoch'] at global position state['position']:
        the rest of that epoch's order, partitioned over this world size."""
        if state.get("version") != 1:
            raise ValueError("unknown Dataset state version %r" % (state.get("version"),))
        if state["num_samples"] != self._src.count:
            raise Error("Dataset state is for %d samples, this dataset has %d"
                        % (state["num_samples"], self._src.count))
        if state["seed"] != self.seed or state["shuffle"] != self.shuffle:
            raise ValueError("Dataset state has seed %r shuffle %r, this dataset seed %r shuffle %r"
                             % (state["seed"], state["shuffle"], self.seed, self.shuffle))
        self.block_samples, self.window_blocks = state["block_samples"], state["window_blocks"]
        self.epoch = int(state["epoch"])
        self._start = int(state["position"])
        self._yielded = 0

    # -- iteration --------------------------------------------------------------
    def _account(self, st):
        with self._lock:
            for k, v in zip(("requests", "reads", "bytes_requested", "bytes_read", "bytes_wasted"), st):
                self.stats[k] += v

    def _read(self, ids):
        data, offs, st = self._src.read(ids, self.queue_depth, self.max_gap)
        self._account(st)
        return ids, data, _np.frombuffer(offs, dtype=_np.uint64)

    def _samples(self, ids, data, offs):
        lines = self._src.dtype is None
        buf = None if lines else _np.frombuffer(data, dtype=_np.uint8)
        for j in range(len(ids)):
            a, b = int(offs[j]), int(offs[j + 1])
            if lines:
                s = bytes(data[a:b])
            else:
                s = buf[a:b]
                if self.copy:
                    s = s.copy()
                if self.dtype != _np.uint8:
                    s = s.view(self.dtype)
                if self.framework == "pt":
                    s = _to_torch(s)
            yield (int(ids[j]), s) if self.return_ids else s

    def __iter__(self):
        ids = self.ids()
        self._yielded = 0
        rb = self.read_batch
        if len(ids) == 0:
            return
        with _Pool(max_workers=1) as pool:
            nxt = pool.submit(self._read, _np.ascontiguousarray(ids[0:rb]))
            for k in range(0, len(ids), rb):
                batch = nxt.result()
                if k + rb < len(ids):  # read ahead while this batch is consumed
                    nxt = pool.submit(self._read, _np.ascontiguousarray(ids[k + rb:k + 2 * rb]))
                for s in self._samples(*batch):
                    self._yielded += 1
                    yield s


def _to_torch(a):
    if a.dtype.kind == "u" and a.itemsize > 1:  # torch 1.13 lacks uint16/32/64
        a = a.view("i%d" % a.itemsize)
    return _torch.from_numpy(a)



# ---------------------------------------------------------------------------
# the dataset-format table through the one C pipeline (docs/TRAINING-DATA.md)
# ---------------------------------------------------------------------------

_PIPE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".mds", ".mds.zstd", ".gz", ".zst", ".arrow", ".parquet")
_OUTPUT_FORMATS = ("numpy", "np", "torch", "pt")


def _use_pipeline(paths, kwargs):
    """True when Dataset(...) should be a ShardDataset: a format of the
    table that the older Python readers do not know, columns=, an output
    format= ("numpy"/"torch"), or a source that is a directory, a glob, a
    brace pattern or a URL."""
    if kwargs.get("pipeline") or kwargs.get("columns") is not None:
        return True
    fmt = kwargs.get("format")
    if fmt is not None and fmt not in ("records", "megatron", "lines", "jsonl", "text"):
        return True
    if isinstance(paths, (str, _os.PathLike)):
        paths = [paths]
    try:
        paths = [_os.fspath(p) for p in paths]
    except TypeError:
        return False
    for p in paths:
        if "://" in p or any(c in p for c in "*?[{") or p.endswith(_PIPE_SUFFIXES) or _os.path.isdir(p):
            return True
    return False


def _rest_count(state, n):
    """Samples a pipe state leaves in its epoch (n for no state)."""
    if not state:
        return n
    rem = state.split("remaining=", 1)[1].split(" ", 1)[0]
    total = 0
    for part in filter(None, rem.split(",")):
        a, b = part.split("-")
        total += int(b) - int(a)
    return total


_FIELD_DTYPES = {(2, 1): "i1", (2, 2): "<i2", (2, 4): "<i4", (2, 8): "<i8", (3, 1): "u1", (3, 2): "<u2",
                 (3, 4): "<u4", (3, 8): "<u8", (4, 2): "<f2", (4, 4): "<f4", (4, 8): "<f8", (1, 1): "?"}


class ShardDataset(_Base):
    """Samples of any format of the dataset-format table (WebDataset tars,
    MDS, JSONL/text incl. .gz/.zst, Megatron, fixed records, and the
    columnar rows), local or remote, read by the C pipeline: the order,
    the rank/worker partition, epochs and resume are the library's
    (pagein_pipe), the same as `pagein read-samples --dataset` for the same
    seed.

    source: a path, a directory, a glob, a brace pattern, a URL
    (hf://datasets/org/name/..., s3://bucket/prefix/...), or a list of them.
    shuffle: 'block' (default: groups in a seeded order, the samples of each
    window of `window` groups shuffled together; whole groups read with large
    requests), 'global' (a permutation of all samples) or 'none'.
    format: the output, 'numpy' (default) or 'torch'; or a row name
    ('webdataset', 'mds', 'lines', ...) to force the input format
    (data_format= says the same). columns: read only these fields.
    batch_size: yield batches of that many samples (dicts of stacked arrays,
    or lists where shapes differ; use DataLoader(batch_size=None)); None
    yields single samples. loader_batch_size: the DataLoader's batch size
    when it batches single samples, so a rank's samples are dealt to its
    workers in whole batches. Samples are dicts of field name to numpy array
    (numbers, arrays), str (utf8) or bytes (binary), None for a missing
    field; every value is a copy, never overwritten later.
    """

    def __init__(self, source, record_size=None, shuffle="block", seed=0, rank=None, world_size=None,
                 return_ids=False, *, format=None, data_format=None, columns=None, batch_size=None,
                 loader_batch_size=1, window=8, read_batch=256, queue_depth=0, group_bytes=0,
                 cache_dir=None, framework=None, pipeline=True, num_workers=None, **ignored):
        if shuffle not in _SHUFFLES:
            raise ValueError("shuffle must be one of %s, not %r" % (", ".join(_SHUFFLES), shuffle))
        if format in _OUTPUT_FORMATS:
            out = format
        else:
            out = framework or "numpy"
            if format is not None:
                data_format = data_format or format
        if out not in _OUTPUT_FORMATS:
            raise ValueError("format must be 'numpy' or 'torch', not %r" % (out,))
        self.torch = out in ("torch", "pt")
        if self.torch and _torch is None:
            raise FormatError("format 'torch' needs torch, which is not installed")
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither")
        if isinstance(source, (str, _os.PathLike)):
            source = [source]
        self.source = [_os.fspath(p) for p in source]
        if not self.source:
            raise ValueError("ShardDataset: no source given")
        self.data_format = data_format
        self.record_size = int(record_size or 0)
        self.columns = list(columns) if columns is not None else None
        self.group_bytes, self.cache_dir = int(group_bytes), cache_dir
        self.shuffle, self.seed = shuffle, int(seed)
        self._rank, self._world = (None, None) if rank is None else (int(rank), int(world_size))
        if self._world is not None and not (0 <= self._rank < self._world):
            raise ValueError("rank %r outside world size %r" % (rank, world_size))
        self.return_ids = bool(return_ids)
        self.batch_size = None if batch_size is None else max(1, int(batch_size))
        self.loader_batch_size = max(1, int(loader_batch_size))
        self.window, self.read_batch, self.queue_depth = int(window), int(read_batch), int(queue_depth)
        self.num_workers = num_workers
        self.epoch = 0
        self._state = None  # resume state of the current epoch, or None
        self._yielded = 0
        self._ds = None
        self._pid = None
        self._open()
        shards, self._count, self._groups = _pagein.ds_shards(self._ds)
        self.shards = [(p, f, s) for p, f, s in shards]

    # -- the C objects (not pickled: reopened in each worker process) --------
    def _open(self):
        if self._ds is None or self._pid != _os.getpid():
            self._ds = _pagein.ds_open("\n".join(self.source), format=self.data_format,
                                       record_size=self.record_size, columns=self.columns,
                                       group_bytes=self.group_bytes, cache_dir=self.cache_dir)
            self._pid = _os.getpid()
        return self._ds

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_ds"] = None
        d["_rank"], d["_world"] = self.rank_world()
        return d

    # -- facts -----------------------------------------------------------------
    @property
    def num_samples(self):
        return self._count

    @property
    def formats(self):
        return sorted({f for _, f, _ in self.shards})

    def rank_world(self):
        if self._world is not None:
            return self._rank, self._world
        return _dist_rank_world()

    def _opts(self, worker=0, num_workers=1, with_state=True):
        r, w = self.rank_world()
        o = dict(order=self.shuffle, seed=self.seed & (2**64 - 1), epoch=self.epoch, rank=r, world_size=w,
                 worker=worker, num_workers=num_workers,
                 batch=self.batch_size or self.loader_batch_size, window=self.window,
                 read_batch=self.read_batch, queue_depth=self.queue_depth)
        if with_state and self._state:
            o["state"] = self._state
        return o

    def __len__(self):
        """Samples (or batches, with batch_size) this rank yields this epoch."""
        r, w = self.rank_world()
        m = _rest_count(self._state, self._count)
        n = (r + 1) * m // w - r * m // w
        return n if self.batch_size is None else (n + self.batch_size - 1) // self.batch_size

    def order(self, epoch=None):
        """The epoch's whole sequence of sample ids (world size 1, no resume):
        the library's pagein_pipe_order, the same as the CLI's."""
        o = self._opts(with_state=False)
        if epoch is not None:
            o["epoch"] = int(epoch)
        for k in ("rank", "world_size", "worker", "num_workers"):
            o.pop(k)
        return _np.frombuffer(_pagein.pipe_order(self._open(), **o), dtype=_np.uint64)

    # -- epochs and resume ---------------------------------------------------
    def set_epoch(self, epoch):
        epoch = int(epoch)
        if epoch != self.epoch:
            self._state = None
        self.epoch = epoch

    def state_dict(self, samples_seen=None, num_workers=None):
        """The resume state after every rank consumed samples_seen samples
        (default: what this process yielded; with batch_size, batches count
        as their samples). With DataLoader workers pass samples_seen (what
        the training loop saw) and the loader's num_workers (default: the
        num_workers given at construction, else 1): the workers' parts are
        consumed batch by batch, round-robin. Loadable onto any world size
        and worker count."""
        seen = self._yielded if samples_seen is None else int(samples_seen)
        if seen < 0:
            raise ValueError("samples_seen must be >= 0")
        nw = num_workers if num_workers is not None else self.num_workers
        o = self._opts(0, max(1, int(nw or 1)))
        st = _pagein.pipe_state(self._open(), seen, **o)
        return {"version": 2, "pipe": st, "epoch": self.epoch, "seed": self.seed, "shuffle": self.shuffle,
                "num_samples": self._count}

    def load_state_dict(self, state):
        if state.get("version") != 2 or "pipe" not in state:
            raise ValueError("not a ShardDataset state (version %r)" % (state.get("version"),))
        if state["num_samples"] != self._count:
            raise Error("state is for %d samples, this dataset has %d" % (state["num_samples"], self._count))
        if state["seed"] != self.seed or state["shuffle"] != self.shuffle:
            raise ValueError("state has seed %r shuffle %r, this dataset seed %r shuffle %r"
                             % (state["seed"], state["shuffle"], self.seed, self.shuffle))
        self.epoch = int(state["epoch"])
        self._state = state["pipe"]
        self._yielded = 0

    # -- iteration -------------------------------------------------------------
    def _value(self, f):
        name, typ, width, shape, data = f
        if data is None:
            return None
        if typ == 5:
            return data.decode("utf-8", "surrogateescape")
        if typ == 6:
            return data
        dt = _FIELD_DTYPES.get((typ, width))
        if dt is None:
            return data
        a = _np.frombuffer(data, dtype=dt)
        a = a.reshape(shape) if shape is not None else a[0]
        if self.torch:
            a = _to_torch(_np.array(a))
        return a

    def _sample(self, fields):
        return {f[0]: self._value(f) for f in fields}

    def _batch(self, items):
        ids = [i for i, _ in items]
        cols = {}
        for _, s in items:
            for k, v in s.items():
                cols.setdefault(k, []).append(v)
        out = {}
        for k, vs in cols.items():
            if all(isinstance(v, (_np.ndarray, _np.generic)) for v in vs) and len({_np.shape(v) for v in vs}) == 1:
                a = _np.stack(vs)
                out[k] = _to_torch(a) if self.torch else a
            elif self.torch and all(isinstance(v, _torch.Tensor) for v in vs) and len({tuple(v.shape) for v in vs}) == 1:
                out[k] = _torch.stack(vs)
            else:
                out[k] = vs
        return (_np.array(ids, dtype=_np.uint64), out) if self.return_ids else out

    def __iter__(self):
        worker, nw = _worker()
        pipe = _pagein.pipe_open(self._open(), **self._opts(worker, nw))
        self._yielded = 0
        pending = []
        while True:
            chunk = _pagein.pipe_next(pipe, 256)
            if not chunk:
                break
            for sid, fields in chunk:
                s = self._sample(fields)
                if self.batch_size is None:
                    self._yielded += 1
                    yield (sid, s) if self.return_ids else s
                else:
                    pending.append((sid, s))
                    if len(pending) == self.batch_size:
                        self._yielded += len(pending)
                        yield self._batch(pending)
                        pending = []
        if pending:
            self._yielded += len(pending)
            yield self._batch(pending)
        self.stats = _pagein.pipe_stats(pipe)
