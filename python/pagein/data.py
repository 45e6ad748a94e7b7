"""pagein.data: training samples for torch DataLoaders, ranks and workers.

    ds = pagein.data.Dataset(["shard0.bin", "shard1.bin"], record_size=32768,
                             shuffle="global", seed=0)
    loader = pagein.data.DataLoader(ds, batch_size=64, num_workers=2)  # torch's, counting
    for epoch in range(3):
        ds.set_epoch(epoch)
        for batch in loader: ...

Every format goes through the library's one pipeline (``pagein_pipe``,
docs/TRAINING-DATA.md): the epoch's order, its partition over ranks and
DataLoader workers, epochs and resume are computed in C, so the same seed
gives the same order from C, ``pagein read-samples --dataset`` and Python.

``Dataset(paths, record_size=...)`` (fixed-size records), a Megatron-LM
``.bin``/``.idx`` pair and JSONL/text files, plain or ``.gz``/``.zst``
compressed (``format="lines"``), yield plain
samples: numpy arrays (torch tensors with ``framework="pt"``) of the bytes or
tokens, ``bytes`` for a line. Every other source (WebDataset tars, MDS,
Arrow, Parquet, a directory, a glob, a URL) gives a
``ShardDataset`` whose samples are dicts of field to value.

Order: ``"global"`` is a seeded permutation of all samples, ``"block"``
takes the dataset's groups (runs of consecutive samples of about
``group_bytes``) in a seeded order and shuffles the samples of each window
of ``window`` groups together, ``"none"`` is id order. The epoch's sequence
minus what a resume state says was consumed is split into contiguous rank
slices, and a rank slice is dealt to its DataLoader workers in whole
batches of the loader's batch size, round-robin, which is the order in
which the DataLoader hands their batches out. Every sample comes out once
per epoch across all ranks and workers.

Resume: ``state_dict()`` is the pipeline's state after every rank consumed
the same number of samples (each worker's position follows from the loader's
round-robin); ``load_state_dict()`` continues that epoch on any world size
and number of workers. With workers, iterate with ``pagein.data.DataLoader``
(torch's, counting in this process what it hands out) and ``state_dict()``
needs no argument; with a plain torch DataLoader pass ``samples_seen=``.

Sample lifetime: every sample is a copy, never overwritten later.
"""

import multiprocessing as _mp
import multiprocessing.context as _mpctx
import numbers as _numbers
import os as _os
import warnings as _warnings

import numpy as _np

from . import _pagein
from ._pagein import Error, FormatError

__all__ = ["Dataset", "DataLoader", "ShardDataset", "epoch_order", "partition", "formats"]

try:  # torch is optional: a plain iterable without it
    import torch as _torch
    from torch.utils.data import IterableDataset as _Base
except ImportError:  # pragma: no cover - depends on the machine
    _torch = None
    _Base = object

_SHUFFLES = ("global", "block", "none")


# ---------------------------------------------------------------------------
# orders: the library's
# ---------------------------------------------------------------------------

def epoch_order(n, shuffle, seed, epoch, block_samples=1, window_blocks=8):
    """The sequence of sample ids of epoch `epoch` over n samples, from the
    library's one implementation of the orders (src/data/order.c, through
    pagein_order_groups): "global" is pagein_permutation(n,
    pagein_epoch_seed(seed, epoch)); "none" id order; "block" takes groups of
    `block_samples` consecutive ids (the last one shorter) in a seeded order
    and permutes the samples of each window of `window_blocks` groups. That
    is ``Dataset.order()`` of a dataset whose groups are runs of
    block_samples ids, e.g. one record file with group_bytes = block_samples
    x record_size and window = window_blocks; a dataset's own groups (4 MiB
    by default, never across shards) are what its order() uses."""
    if shuffle not in _SHUFFLES:
        raise ValueError("shuffle must be one of %s, not %r" % (", ".join(_SHUFFLES), shuffle))
    n, bs, wb = int(n), int(block_samples), int(window_blocks)
    if n < 0:
        raise ValueError("epoch_order: n %d < 0" % n)
    if shuffle == "block" and (bs < 1 or wb < 1):
        raise ValueError("epoch_order: block_samples %d and window_blocks %d must be >= 1" % (bs, wb))
    ids = _pagein.order_groups(n, max(bs, 1), order=shuffle, seed=int(seed) & (2**64 - 1), epoch=int(epoch),
                               window=max(wb, 1))
    return _np.frombuffer(ids, dtype=_np.uint64)


def partition(order, start, rank, world_size, worker=0, num_workers=1, chunk=1):
    """The ids of `order[start:]` that one (rank, worker) yields, in order,
    by the library's partition (pagein_pipe_part): rank r of W takes the
    contiguous slice [r M / W, (r + 1) M / W) of the M remaining positions;
    within it, batches of `chunk` (the DataLoader's batch size) are dealt
    round-robin to the num_workers workers, worker w's part being the
    contiguous run of its batches' count. With order = Dataset.order() and
    start = 0 this is ``Dataset(..., rank=, world_size=, batch_size=chunk)
    .ids(worker, num_workers)``; with start = s, the same after a resume
    state that consumed the first s positions of the order."""
    order = _np.asarray(order)
    M0, start = len(order), int(start)
    rank, world_size, worker, num_workers = int(rank), int(world_size), int(worker), int(num_workers)
    if not 0 <= start <= M0:
        raise ValueError("partition: start %d outside [0, %d]" % (start, M0))
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError("partition: rank %d of world size %d" % (rank, world_size))
    if num_workers < 1 or not 0 <= worker < num_workers:
        raise ValueError("partition: worker %d of %d" % (worker, num_workers))
    off, cnt = _pagein.pipe_part(M0 - start, rank=rank, world_size=world_size, worker=worker,
                                 num_workers=num_workers, batch=max(1, int(chunk)))
    return order[start + off:start + off + cnt]


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


def _in_worker():
    return _torch is not None and _torch.utils.data.get_worker_info() is not None


def _check_int(field, v, lo, hi):
    """v as an int in [lo, hi), or a TypeError/ValueError naming the field."""
    if isinstance(v, bool) or not isinstance(v, _numbers.Integral):
        raise TypeError("Dataset state: %s must be an integer, not %s" % (field, type(v).__name__))
    v = int(v)
    if not lo <= v < hi:
        raise ValueError("Dataset state: %s %d outside [%d, %d)" % (field, v, lo, hi))
    return v


def _to_torch(a):
    if a.dtype.kind == "u" and a.itemsize > 1:  # torch 1.13 lacks uint16/32/64
        a = a.view("i%d" % a.itemsize)
    return _torch.from_numpy(a)


# ---------------------------------------------------------------------------
# the dataset-format table through the one C pipeline (docs/TRAINING-DATA.md)
# ---------------------------------------------------------------------------

_OUTPUT_FORMATS = ("numpy", "np", "torch", "pt")
# The rows whose samples Dataset yields plain (one array, or bytes for a
# line); every other row gives a ShardDataset. Their names, aliases and
# suffixes are the table's (formats()).
_PLAIN_ROWS = ("records", "megatron", "lines")


def formats():
    """The library's dataset-format table, in detection order: one dict per
    row with its name, aliases (other names format= takes), suffixes (the
    file names a directory scan picks up), index_names (files describing a
    whole directory), content (True: recognised by its bytes, not only its
    name) and companion (True: named through companion files, as a
    Megatron .bin/.idx pair)."""
    return _pagein.dataset_formats()


def _row_name(fmt):
    """The row a format name or alias names (the table's), or None."""
    for row in _pagein.dataset_formats():
        if fmt == row["name"] or fmt in row["aliases"]:
            return row["name"]
    return None


def _use_pipeline(paths, kwargs):
    """True when Dataset(...) should be a ShardDataset (samples as dicts of
    fields): a format of the table other than records, Megatron and plain
    line files, columns=, an output format= ("numpy"/"torch"), or a source
    that is a directory, a glob, a brace pattern or a URL a remote source
    reads (pagein_is_url: the source table's word, not a scheme list)."""
    if kwargs.get("pipeline") or kwargs.get("columns") is not None:
        return True
    fmt = kwargs.get("format")
    if fmt is not None and _row_name(fmt) not in _PLAIN_ROWS:
        return True
    if isinstance(paths, (str, _os.PathLike)):
        paths = [paths]
    try:
        paths = [_os.fspath(p) for p in paths]
    except TypeError:
        return False
    for p in paths:
        url = _pagein.is_url(p)
        row = None if url else _pagein.dataset_detect_name(p)  # the table's name rules and companions
        if row == "lines":
            continue  # one family, one sample shape: .jsonl.zst is a line file like .jsonl
        if url or any(c in p for c in "*?[{") or _os.path.isdir(p) or row not in (None,) + _PLAIN_ROWS:
            return True
        # any other file: the C table's detection by content (an Arrow
        # stream named .stream, a Feather v2 file, Parquet under any name)
        if _os.path.isfile(p):
            try:
                name, score = _pagein.dataset_detect(p)
            except Exception:
                continue
            if score == 2 and name not in _PLAIN_ROWS:
                return True
    return False


_FIELD_DTYPES = {(2, 1): "i1", (2, 2): "<i2", (2, 4): "<i4", (2, 8): "<i8", (3, 1): "u1", (3, 2): "<u2",
                 (3, 4): "<u4", (3, 8): "<u8", (4, 2): "<f2", (4, 4): "<f4", (4, 8): "<f8", (1, 1): "?"}

# shared with DataLoader workers: the epoch, the resume state's length, the
# worker count workers saw (0: no worker ran this dataset), whether a larger
# state moved to new shared memory that these workers cannot see
_EPOCH, _STATELEN, _WORKERS, _STALE, _NNUMS = range(5)


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
    workers in whole batches (pagein.data.DataLoader sets it). read_batch:
    the global order's samples fetched at once (0: the library's choice).
    group_bytes (block_bytes): bytes of a group of sample-addressable shards
    (0: 4 MiB). Samples are dicts of field name to numpy array (numbers,
    arrays), str (utf8) or bytes (binary), None for a missing field; every
    value is a copy, never overwritten later.
    """

    def __init__(self, source, record_size=None, shuffle="block", seed=0, rank=None, world_size=None,
                 return_ids=False, *, format=None, data_format=None, columns=None, batch_size=None,
                 loader_batch_size=None, window=8, read_batch=0, queue_depth=0, group_bytes=0,
                 cache_dir=None, framework=None, pipeline=True, num_workers=None, copy=True,
                 block_bytes=None, window_blocks=None, max_gap=None, read_batch_bytes=None, max_line_bytes=None):
        if shuffle not in _SHUFFLES:
            raise ValueError("shuffle must be one of %s, not %r" % (", ".join(_SHUFFLES), shuffle))
        # parameters of the older Python readers: honoured where the pipeline
        # has them, refused where it does not (never ignored)
        if block_bytes is not None:
            group_bytes = block_bytes
        if window_blocks is not None:
            window = window_blocks
        # max_gap tuned the request merging of the older readers and changes
        # no sample: accepted, with a warning that it has no effect.
        # copy=False asked for views: samples are copies either way (the
        # same values, never overwritten). read_batch_bytes becomes a read
        # batch in samples below; max_line_bytes is checked on every line.
        if max_gap:
            _warnings.warn("pagein.data: max_gap=%r has no effect: the pipeline merges the adjacent byte ranges of "
                           "a unit into requests of 1 MiB or more" % (max_gap,), stacklevel=2)
        if read_batch_bytes is not None and int(read_batch_bytes) < 1:
            raise ValueError("read_batch_bytes %r must be >= 1" % (read_batch_bytes,))
        if max_line_bytes is not None and int(max_line_bytes) < 1:
            raise ValueError("max_line_bytes %r must be >= 1" % (max_line_bytes,))
        self._max_line = int(max_line_bytes) if max_line_bytes is not None else None
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
        self._loader_batch_given = loader_batch_size is not None
        self.loader_batch_size = max(1, int(loader_batch_size or 1))
        self.window, self.read_batch, self.queue_depth = int(window), int(read_batch), int(queue_depth)
        self.num_workers = num_workers
        self._shared = None  # epoch and resume state seen by persistent workers (see _sync)
        self.epoch = 0
        self._state = None  # resume state of the current epoch, or None
        self._yielded = 0   # samples yielded by this process, or handed out by a counting DataLoader
        self._counted = False
        self.stats = {}
        self._ds = None
        self._pid = None
        self._open()
        shards, self._count, self._groups = _pagein.ds_shards(self._ds)
        self._publish()
        self.shards = [(p, f, s) for p, f, s in shards]
        if read_batch_bytes is not None and not self.read_batch:
            # the older readers' byte cap of a global read batch, in samples of
            # the mean stored size
            mean = max(1, sum(sz for _, _, sz in self.shards) // max(1, self._count))
            self.read_batch = max(1, min(1 << 30, int(read_batch_bytes) // mean))
        if "lines" not in self.formats:
            self._max_line = None  # a limit of line files only, as before

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
        if _mpctx.get_spawning_popen() is None:  # a plain pickle or copy: its own shared block
            d["_shared"] = None
        return d

    def __setstate__(self, d):
        self.__dict__.update(d)
        if self._shared is None:
            self._publish()

    # -- persistent DataLoader workers -----------------------------------------
    # A worker process keeps the copy of the dataset it started with; the
    # epoch and resume state set later in the main process reach it through
    # shared memory created before the workers start (fork and spawn).
    # The state's room grows with it (a mid-epoch state holds a run per
    # rank and worker: 8,192 runs for 1,024 ranks x 8 workers); workers
    # started before it outgrew their room are told to restart.
    def _publish(self):
        st = (self._state or "").encode()
        old = self._shared
        if old is None or len(st) > len(old[1]):
            cap = 1 << 16
            while cap < len(st):
                cap <<= 1
            self._shared = (_mp.RawArray("q", _NNUMS), _mp.RawArray("c", cap))
            if old is not None:
                self._shared[0][_WORKERS] = old[0][_WORKERS]
                old[0][_STALE] = 1
        nums, text = self._shared
        text[:len(st)] = st
        nums[_EPOCH], nums[_STATELEN] = self.epoch, len(st)

    def _sync(self):
        if self._shared is not None:
            nums, text = self._shared
            if nums[_STALE]:
                raise Error("pagein.data: this persistent DataLoader worker started before load_state_dict gave "
                            "a resume state larger than the room shared with it: create the DataLoader after "
                            "load_state_dict")
            self.epoch = int(nums[_EPOCH])
            self._state = text[:int(nums[_STATELEN])].decode() or None

    # -- facts -----------------------------------------------------------------
    @property
    def num_samples(self):
        """Samples in the dataset (all ranks)."""
        return self._count

    @property
    def formats(self):
        return sorted({f for _, f, _ in self.shards})

    @property
    def files(self):
        """[(path, size)] of the shards."""
        return [(p, s) for p, _, s in self.shards]

    def rank_world(self):
        """(rank, world_size) in effect: explicit, else torch.distributed's, else (0, 1)."""
        if self._world is not None:
            return self._rank, self._world
        return _dist_rank_world()

    def _chunk(self):
        return self.batch_size or self.loader_batch_size

    def _opts(self, worker=0, num_workers=1, with_state=True):
        r, w = self.rank_world()
        o = dict(order=self.shuffle, seed=self.seed & (2**64 - 1), epoch=self.epoch, rank=r, world_size=w,
                 worker=worker, num_workers=num_workers, batch=self._chunk(), window=self.window,
                 read_batch=self.read_batch, queue_depth=self.queue_depth)
        if with_state and self._state:
            o["state"] = self._state
        return o

    def _samples_len(self):
        """Samples this rank yields this epoch: its part of what the resume
        state leaves (the library's parser and partition)."""
        r, w = self.rank_world()
        m = _pagein.pipe_state_parse(self._state)["remaining"] if self._state else self._count
        return _pagein.pipe_part(m, rank=r, world_size=w)[1]

    def __len__(self):
        """Samples (or batches, with batch_size) this rank yields this epoch (all its workers)."""
        n = self._samples_len()
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

    def ids(self, worker=None, num_workers=None):
        """The ids this rank (and DataLoader worker) yields this epoch, in
        order: the pipeline's partition (pagein_pipe_ids; nothing is read)."""
        if worker is None:
            worker, num_workers = _worker()
        o = self._opts(int(worker), max(1, int(num_workers or 1)))
        return _np.frombuffer(_pagein.pipe_ids(self._open(), **o), dtype=_np.uint64)

    # -- epochs and resume ---------------------------------------------------
    def set_epoch(self, epoch):
        """Selects epoch `epoch`: its order comes from (seed, epoch) alone. A
        resume state from load_state_dict applies only to its own epoch."""
        if isinstance(epoch, bool) or not isinstance(epoch, _numbers.Integral):
            raise TypeError("set_epoch: epoch must be an integer, not %s" % type(epoch).__name__)
        epoch = int(epoch)
        if not 0 <= epoch < 2**63:
            raise ValueError("set_epoch: epoch %d outside [0, 2**63)" % epoch)
        if epoch != self.epoch:
            self._state = None
        self.epoch = epoch
        self._publish()

    def state_dict(self, samples_seen=None, num_workers=None):
        """The resume state after every rank consumed samples_seen samples this
        epoch (default: what this process yielded, or what a
        pagein.data.DataLoader handed out; with batch_size, batches count as
        their samples). With DataLoader workers the workers' parts are
        consumed batch by batch, round-robin: num_workers defaults to the
        loader's (pagein.data.DataLoader), else to what the workers reported,
        else to the num_workers given at construction. A plain torch
        DataLoader with workers needs samples_seen= (its progress is not
        visible here): without it this raises rather than return a wrong
        state. Loadable onto any world size and worker count."""
        ran = int(self._shared[0][_WORKERS]) if self._shared is not None else 0
        if samples_seen is None and ran and not self._counted:
            raise ValueError("state_dict: this dataset was iterated by DataLoader workers, whose progress this "
                             "process cannot see: iterate it with pagein.data.DataLoader (a torch DataLoader that "
                             "counts what it hands out) or pass samples_seen=")
        nw_in = num_workers if num_workers is not None else (self.num_workers or ran or 1)
        if (samples_seen is not None and ran and not self._counted and int(nw_in) > 1 and self.batch_size is None
                and not self._loader_batch_given):
            # torch's DataLoader deals a rank's samples to its workers in its
            # own batches, whose size this dataset was not told: a state
            # computed for batches of 1 repeats some samples and loses others
            raise ValueError("state_dict: DataLoader workers took this dataset's samples in the DataLoader's "
                             "batches, whose size it was not given: give the dataset the DataLoader's batch_size "
                             "(Dataset(batch_size=), ShardDataset(loader_batch_size=)), or use pagein.data.DataLoader")
        seen = self._yielded if samples_seen is None else int(samples_seen)
        if seen < 0:
            raise ValueError("samples_seen must be >= 0")
        if seen >= self._samples_len():
            # this rank is done, so is the epoch: ranks differ by one sample
            # when the world size does not divide what is left
            seen = self._count
        nw = num_workers if num_workers is not None else (self.num_workers or ran or 1)
        o = self._opts(0, max(1, int(nw)))
        st = _pagein.pipe_state(self._open(), seen, **o)
        return {"version": 2, "pipe": st, "epoch": self.epoch, "seed": self.seed, "shuffle": self.shuffle,
                "num_samples": self._count}

    def load_state_dict(self, state):
        """Continues the state's epoch where it stopped: what is left of it,
        partitioned over this world size and worker count. Every field is
        checked (TypeError / ValueError naming it); a state for another
        dataset, seed, order or group layout is refused. A version-1 state
        of the older Python readers continues for the global and none
        orders (_load_v1)."""
        if not hasattr(state, "get") or not hasattr(state, "__getitem__"):
            raise TypeError("Dataset state must be a dict (from state_dict()), not %s" % type(state).__name__)
        if state.get("version") == 1:
            return self._load_v1(state)
        if state.get("version") != 2:
            raise ValueError("Dataset state: unknown version %r" % (state.get("version"),))
        for k in ("pipe", "epoch", "seed", "shuffle", "num_samples"):
            if k not in state:
                raise ValueError("Dataset state: missing field %r" % k)
        n = _check_int("num_samples", state["num_samples"], 0, 2**63)
        seed = _check_int("seed", state["seed"], -(1 << 1024), 1 << 1024)
        epoch = _check_int("epoch", state["epoch"], 0, 2**63)
        for k in ("shuffle", "pipe"):
            if not isinstance(state[k], str):
                raise TypeError("Dataset state: %s must be a string, not %s" % (k, type(state[k]).__name__))
        if n != self._count:
            raise Error("Dataset state is for %d samples, this dataset has %d" % (n, self._count))
        if seed != self.seed or state["shuffle"] != self.shuffle:
            raise ValueError("Dataset state has seed %r shuffle %r, this dataset seed %r shuffle %r"
                             % (seed, state["shuffle"], self.seed, self.shuffle))
        pipe = state["pipe"]
        try:
            said = _pagein.pipe_state_parse(pipe)["epoch"]
        except Error as e:
            raise ValueError("Dataset state: pipe: %s" % e) from None
        if said != epoch:
            raise ValueError("Dataset state: epoch %d is not the pipe state's (%d)" % (epoch, said))
        o = self._opts()
        o["state"] = pipe
        try:  # the library checks the pipe state against this dataset now, not at the next epoch
            _pagein.pipe_state(self._open(), 0, **o)
        except Error as e:
            raise ValueError("Dataset state: pipe: %s" % e) from None
        self.epoch = epoch
        self._state = pipe
        self._yielded = 0
        self._publish()

    def _load_v1(self, state):
        """A state of the Python readers before the pipeline: epoch `epoch`
        consumed up to `position` of its order (all ranks). Their global and
        none orders are the pipeline's (pagein_permutation of (seed, epoch),
        id order), so the rest is the positions from `position` on; their
        block order is not (other groups and window seeds)."""
        for k in ("seed", "shuffle", "epoch", "position", "num_samples"):
            if k not in state:
                raise ValueError("Dataset state: missing field %r" % k)
        n = _check_int("num_samples", state["num_samples"], 0, 2**63)
        seed = _check_int("seed", state["seed"], -(1 << 1024), 1 << 1024)
        epoch = _check_int("epoch", state["epoch"], 0, 2**63)
        pos = _check_int("position", state["position"], 0, n + 1)
        if not isinstance(state["shuffle"], str):
            raise TypeError("Dataset state: shuffle must be a string, not %s" % type(state["shuffle"]).__name__)
        if n != self._count:
            raise Error("Dataset state is for %d samples, this dataset has %d" % (n, self._count))
        if seed != self.seed or state["shuffle"] != self.shuffle:
            raise ValueError("Dataset state has seed %r shuffle %r, this dataset seed %r shuffle %r"
                             % (seed, state["shuffle"], self.seed, self.shuffle))
        if self.shuffle == "block":
            raise ValueError("Dataset state version 1 (the Python readers of an earlier pagein) of a block order: "
                             "that order is not the pipeline's, so the epoch cannot be continued; start the next "
                             "one (set_epoch(%d))" % (epoch + 1))
        o = self._opts(0, 1, with_state=False)
        o.update(epoch=epoch, rank=0, world_size=1, batch=1)
        self._state = _pagein.pipe_state(self._open(), pos, **o)  # the positions from `position` on
        self.epoch = epoch
        self._yielded = 0
        self._publish()

    # -- iteration -------------------------------------------------------------
    def _value(self, f):
        name, typ, width, shape, data = f
        if data is None or typ == -1:  # -1: a nested or annotated value, built by the binding
            return data
        if typ == 5:
            return data.decode("utf-8", "surrogateescape")
        if typ == 6:
            return data
        dt = _FIELD_DTYPES.get((typ, width))
        if dt is None:
            return data
        a = _np.frombuffer(data, dtype=dt)
        # writable memory of its own (torch.as_tensor and default_collate
        # warn on read-only arrays); scalars are numpy scalars
        a = a.reshape(shape).copy() if shape is not None else a[0]
        if self.torch:
            a = _to_torch(_np.array(a))
        return a

    def _sample(self, fields):
        s = {f[0]: self._value(f) for f in fields}
        if len(s) != len(fields):
            _duplicate_names(self.source, [f[0] for f in fields])
        return s

    def _check_line(self, sid, fields):
        for f in fields:
            if f[1] in (5, 6) and f[4] is not None and len(f[4]) > self._max_line:
                raise FormatError("%s: sample %d: a line of %d bytes, over max_line_bytes=%d: give Dataset(..., "
                                  "max_line_bytes=) a larger limit" % (", ".join(self.source)[:200], sid, len(f[4]),
                                                                       self._max_line))

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
        if _in_worker():
            self._sync()
            if self._shared is not None:
                self._shared[0][_WORKERS] = nw
        elif self._shared is not None and not self._counted:
            self._shared[0][_WORKERS] = 0
        pipe = _pagein.pipe_open(self._open(), **self._opts(worker, nw))
        self._yielded = 0
        pending = []
        while True:
            chunk = _pagein.pipe_next(pipe, 256)
            if not chunk:
                break
            for sid, fields in chunk:
                if self._max_line is not None:
                    self._check_line(sid, fields)
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


# ---------------------------------------------------------------------------
# records, Megatron and line files: plain samples over the same pipeline
# ---------------------------------------------------------------------------

def _duplicate_names(source, names):
    """A row is a dict keyed by field name: two fields of one name would
    lose one, so such a file is refused, naming both."""
    seen = {}
    for i, n in enumerate(names):
        if n in seen:
            raise FormatError("%s: fields %d and %d are both named %r: a sample is a dict keyed by name, so one "
                              "would be lost; rename one with the writer, or select the others with columns="
                              % (", ".join(source)[:200], seen[n], i, n))
        seen[n] = i


def _plain_source(paths, record_size, fmt):
    """(spec list, row name) for records, Megatron and line files."""
    if isinstance(paths, (str, _os.PathLike)):
        paths = [paths]
    paths = [_os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("Dataset: no paths given")
    if fmt is None:
        p0 = paths[0]
        # the table's name rules and companion files (a Megatron dataset is
        # named by its .idx, or by its prefix or .bin beside the .idx)
        fmt = "records" if record_size is not None else _pagein.dataset_detect_name(p0)
        if fmt not in _PLAIN_ROWS:
            raise ValueError("Dataset(%r): give record_size= for fixed-size record files, or format= "
                             "('records', 'megatron', 'lines'): no dataset format claims this name%s"
                             % (p0, " (no Megatron .idx beside it)" if fmt is None else " as plain samples"))
    fmt = _row_name(fmt) or fmt
    if fmt == "records":
        if record_size is None:
            raise ValueError("Dataset: format 'records' needs record_size=")
        return paths, "records"
    if fmt == "megatron":
        if len(paths) != 1:
            raise ValueError("Dataset: a Megatron dataset is one .bin/.idx pair (got %d paths)" % len(paths))
        return paths, "megatron"  # the library opens the pair (the row's companion files)
    if fmt == "lines":
        return paths, "lines"  # a .json array or document is refused by the row's open (src/data/ds_lines.c)
    raise ValueError("Dataset: unknown format %r (records, megatron, lines)" % fmt)


class Dataset(ShardDataset):
    """An iterable over the samples of record, Megatron or line files,
    partitioned over ranks and DataLoader workers by the library's pipeline
    (module docstring). Other sources give a ShardDataset.

    paths: a path or a list of paths (shards, in id order). record_size:
    bytes per record (fixed-size record files). format: 'records',
    'megatron' or 'lines' (guessed from record_size and the names when
    None). shuffle: 'global', 'block' or 'none'. seed: the order of epoch e
    depends only on (seed, e) and the dataset's groups. rank, world_size:
    default to torch.distributed's when it is initialised, else 0 and 1.
    batch_size: the DataLoader's batch size, by which a rank's samples are
    dealt to its workers (pagein.data.DataLoader sets it). return_ids: yield
    (sample_id, sample). dtype: numpy dtype to view record bytes as
    (Megatron: the index's dtype). framework: 'np' (default) or 'pt'.
    read_batch: the global order's samples fetched at once. queue_depth:
    requests in flight (0: the storage's choice). block_bytes (group_bytes),
    window_blocks (window): the block order's group size (4 MiB) and the
    groups shuffled together (8). Samples are numpy arrays (torch tensors)
    of their own memory, line samples bytes. Parameters of the older Python
    readers: read_batch_bytes (without read_batch) sets read_batch to that
    many bytes of samples of the mean stored size; max_line_bytes (line
    files) raises FormatError on a longer line; copy=False is accepted
    (samples are copies either way: the same values, never overwritten);
    max_gap is accepted with a warning that it has no effect (the pipeline
    merges a unit's adjacent ranges into requests of 1 MiB or more).
    """

    def __new__(cls, paths=None, *args, **kwargs):
        # The dataset-format table's other formats (and anything remote, a
        # directory, a glob or columns=) give samples as dicts: ShardDataset.
        if cls is Dataset and _use_pipeline(paths, kwargs):
            return ShardDataset(paths, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, paths, record_size=None, shuffle="global", seed=0, rank=None, world_size=None,
                 return_ids=False, *, format=None, dtype=None, batch_size=None, framework="np", copy=True,
                 read_batch=0, queue_depth=0, max_gap=None, block_bytes=None, window_blocks=None,
                 group_bytes=0, window=8, read_batch_bytes=None, max_line_bytes=None, num_workers=None,
                 cache_dir=None):
        if framework not in ("np", "numpy", "pt", "torch"):
            raise ValueError("framework must be 'np' or 'pt', not %r" % (framework,))
        specs, row = _plain_source(paths, record_size, format)
        self._row = row
        super().__init__(specs, record_size=record_size if row == "records" else None, shuffle=shuffle, seed=seed,
                         rank=rank, world_size=world_size, return_ids=return_ids, data_format=row,
                         loader_batch_size=batch_size or 1, window=window, read_batch=read_batch,
                         queue_depth=queue_depth, group_bytes=group_bytes, cache_dir=cache_dir,
                         framework="torch" if framework in ("pt", "torch") else "numpy", num_workers=num_workers,
                         copy=copy, block_bytes=block_bytes, window_blocks=window_blocks, max_gap=max_gap,
                         read_batch_bytes=read_batch_bytes, max_line_bytes=max_line_bytes)
        self._loader_batch_given = batch_size is not None
        self.framework = "pt" if self.torch else "np"
        self.dtype = _np.dtype(dtype) if dtype is not None else None
        if row == "lines" and dtype is not None:
            raise ValueError("Dataset: dtype= does not apply to line files (their samples are bytes)")

    def _sample(self, fields):
        name, typ, width, shape, data = fields[0]
        if self._row == "lines":
            return data
        dt = self.dtype if self.dtype is not None else _np.dtype(_FIELD_DTYPES.get((typ, width), "u1"))
        a = _np.frombuffer(data, dtype=dt).copy()  # its own, writable memory
        return _to_torch(a) if self.torch else a


if _torch is not None:
    class DataLoader(_torch.utils.data.DataLoader):
        """torch.utils.data.DataLoader that counts, in this process, the
        samples it hands out of a pagein dataset (Dataset or ShardDataset),
        so that ``dataset.state_dict()`` is exact with workers (persistent
        or not) without samples_seen, and tells the dataset its num_workers.
        Every argument is torch's. The loader's batch_size becomes the
        dataset's loader_batch_size (the batches a rank's samples are dealt
        to workers in) when the dataset was given none; with workers the two
        must agree."""

        def __init__(self, dataset, *args, **kwargs):
            super().__init__(dataset, *args, **kwargs)
            bs = self.batch_size
            if isinstance(dataset, ShardDataset):
                if bs is not None and dataset.batch_size is not None:
                    raise ValueError("pagein.data.DataLoader: the dataset yields batches of %d (batch_size=): give "
                                     "the loader batch_size=None" % dataset.batch_size)
                if bs is not None and bs != dataset.loader_batch_size:
                    if dataset._loader_batch_given and self.num_workers > 1:
                        raise ValueError("pagein.data.DataLoader: batch_size %d, but the dataset deals its samples "
                                         "to workers in batches of %d: give both the same"
                                         % (bs, dataset.loader_batch_size))
                    dataset.loader_batch_size = bs
                dataset.num_workers = max(1, self.num_workers)

        def __iter__(self):
            it = super().__iter__()
            if not isinstance(self.dataset, ShardDataset):
                return it
            ds = self.dataset
            return _Counting(it, ds, self.batch_size or ds.batch_size or 1)

    class _Counting:
        """The loader's iterator, counting what it hands out into the
        dataset (of this process) as it goes."""

        def __init__(self, it, ds, batch):
            self._it, self._ds, self._bs = it, ds, batch
            self._n, self._len = 0, ds._samples_len()
            ds._yielded, ds._counted = 0, True

        def __iter__(self):
            return self

        def __len__(self):
            return len(self._it)

        def __next__(self):
            item = next(self._it)
            self._n += 1
            # batches are full but for the last of the rank's slice: the
            # loader's output is the rank's samples, so this is exact
            self._ds._yielded = min(self._n * self._bs, self._len)
            return item
