"""pagein.distributed: load weights once across the ranks of a torch.distributed group.

    import torch.distributed as dist, pagein.distributed
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500", rank=r, world_size=n)
    tensors = pagein.distributed.load("model.safetensors")            # every tensor, every rank
    shards = pagein.distributed.load("model.safetensors", mode="tp")   # this rank's slices

mode="replicated": every rank reads about 1/N of the model's bytes (one
contiguous part of the tensors' bytes in model order, balanced by bytes)
and broadcasts it; storage serves each byte once, and every rank ends with a
dict equal to ``safe_open`` on one process.

mode="tp": tensors matched by ``rules`` (default: llama-style names, see
``default_rules()``) are split along rows (dimension 0) or columns (the last
dimension); each rank reads only its own slice with range reads. Other
tensors are loaded as in "replicated".

The plan (who reads which ranges, who ends with which slice) is computed
by the C library (``pagein_dist_plan_new``); ``plan()`` shows it.

Failures. Before any data moves, the ranks compare the model's files (sizes
and a SHA-256 of each file's header) and their load() arguments (mode,
rules, align, cols_direct, chunk_bytes), in one small all_gather: a mismatch
raises ``pagein.Error`` (code PAGEIN_E_PEER) on every rank, naming the ranks
and the file, or each differing argument with every rank's value. A rank
that dies or stops answering makes the others raise ``pagein.Error``
(PAGEIN_E_PEER) within ``timeout`` seconds: with ``group=None`` the load
runs on a new gloo group created with that timeout (every rank of the
default group must call load); with an explicit group, that group's own
timeout applies.
"""

import datetime as _dt
import hashlib as _hashlib
import json as _json
import os as _os
import threading as _threading
import time as _time

import numpy as _np

from . import _pagein
from . import _np_layout, _torch_dtype
from ._pagein import Error

__all__ = ["load", "plan", "default_rules"]

_E_PEER = -30036
_NAME, _DTYPE, _SHAPE, _OFFSET, _NBYTES, _LAYER, _FILE, _FLAGS, _INDEX = range(9)


def _peer_error(msg):
    e = Error(msg)
    e.code = _E_PEER
    e.error = _pagein.strerror(_E_PEER)
    e.detail = msg
    return e


def default_rules():
    """The default tensor-parallel rules: [(fnmatch pattern, 'rows'|'cols')]."""
    return _pagein.dist_default_rules()


def _rules(rules):
    if rules is None:
        return None
    if isinstance(rules, dict):
        rules = list(rules.items())
    return [(str(p), str(s)) for p, s in rules]


_KINDS = {0: "private", 1: "broadcast", 2: "exchange"}


def plan(path, rank, world_size, mode="replicated", rules=None, align=0, cols_direct=False):
    """The plan of one rank, without loading: a dict with "reads" (dicts:
    owner, shared ("private", "broadcast" or "exchange"), tensor, file,
    offset, length, stride, count, dst_offset, row_start, row_stop),
    "pieces" (dicts: name, split, dim, start, stop, nbytes) and "read_bytes"
    (bytes this rank reads from storage)."""
    src = _pagein.open_model(_os.fspath(path), strategy="lazy")
    names = [t[_NAME] for t in src.tensors()]
    reads, pieces, nbytes = _pagein.dist_plan(src, rank, world_size, mode, _rules(rules), align, cols_direct)
    rk = ("owner", "shared", "tensor", "file", "offset", "length", "stride", "count", "dst_offset",
          "row_start", "row_stop")
    reads = [dict(zip(rk, r)) for r in reads]
    for r in reads:
        r["shared"] = _KINDS[r["shared"]]
    return {"reads": reads,
            "pieces": [{"name": names[p[0]], "split": p[1], "dim": p[2], "start": p[3], "stop": p[4],
                        "nbytes": p[5]} for p in pieces],
            "read_bytes": nbytes}


def _fingerprint(src):
    """(total size, SHA-256 over every file's size and header bytes)."""
    h = _hashlib.sha256()
    total = 0
    for f in src.files():
        size, start = f["file_size"], f["data_start"]
        total += size
        h.update(size.to_bytes(8, "little"))
        fd = _os.open(f["path"], _os.O_RDONLY | _os.O_CLOEXEC)
        try:
            head = _os.pread(fd, start, 0)
        finally:
            _os.close(fd)
        h.update(head)
    return total, h.digest()


class _Group:
    """Collectives over a group, turning transport failures and timeouts
    into pagein.Error(PAGEIN_E_PEER)."""

    def __init__(self, dist, group, timeout):
        self.dist = dist
        self.timeout = timeout
        self.own = False
        if group is None and dist.is_initialized() and dist.get_world_size() > 1:
            try:
                group = dist.new_group(backend="gloo", timeout=_dt.timedelta(seconds=timeout))
            except RuntimeError as e:
                raise _peer_error("pagein.distributed: could not form the load group within %gs "
                                  "(a rank died or did not call load): %s" % (timeout, e)) from e
            self.own = True
        self.group = group
        self.rank = dist.get_rank(group) if dist.is_initialized() else 0
        self.world = dist.get_world_size(group) if dist.is_initialized() else 1

    def global_rank(self, r):
        if self.own or self.group is None or self.group == self.dist.group.WORLD:
            return r  # our own group spans the default group in rank order
        c10d = self.dist.distributed_c10d
        fn = getattr(c10d, "get_global_rank", None) or c10d._get_global_rank
        return fn(self.group, r)

    def _call(self, what, fn):
        try:
            return fn()
        except RuntimeError as e:
            raise _peer_error("pagein.distributed: rank %d of %d: %s failed (a peer died, timed out "
                              "after %s or disagrees): %s"
                              % (self.rank, self.world, what,
                                 "%gs" % self.timeout if self.own else "the group's timeout", e)) from e

    def all_gather(self, t, what):
        out = [t.new_empty(t.shape) for _ in range(self.world)]
        self._call(what, lambda: self.dist.all_gather(out, t, group=self.group))
        return out

    def broadcast(self, t, owner, what):
        self._call(what, lambda: self.dist.broadcast(t, src=self.global_rank(owner), group=self.group))

    def all_to_all(self, out, inp, out_splits, in_splits, what):
        if self.world == 1:
            out.copy_(inp)
            return
        self._call(what, lambda: self.dist.all_to_all_single(out, inp, out_splits, in_splits, group=self.group))

    def close(self):
        if self.own:
            try:
                self.dist.destroy_process_group(self.group)
            except Exception:  # pragma: no cover - best effort
                pass


def _args_json(mode, rules, align, cols_direct, chunk_bytes):
    """The load() arguments every rank must agree on, canonical: the plan
    (mode, rules, align, cols_direct) and the broadcasts' cut (chunk_bytes)
    decide which collectives run with which sizes."""
    try:
        r = [list(x) for x in _rules(rules)]
    except Exception:  # invalid here: compared (and refused later) as written
        r = repr(rules)
    return _json.dumps({"mode": mode, "rules": r, "align": align, "cols_direct": cols_direct,
                        "chunk_bytes": chunk_bytes}, sort_keys=True, default=repr).encode()


def _check_same_files(g, torch, src, path, args=b""):
    """One all_gather of (files' size, files' digest, arguments' digest and
    length); only when the arguments differ, a second one of the arguments
    themselves, to name the difference. Every rank sees the same answer and
    fails the same way (PAGEIN_E_PEER) before any data moves: a rank with
    other arguments would run other collectives (SIGABRT inside gloo) or
    return while the others wait."""
    total, digest = _fingerprint(src)
    adig = _hashlib.sha256(args).digest()
    mine = torch.tensor(list(total.to_bytes(8, "little") + digest + adig + len(args).to_bytes(4, "little")),
                        dtype=torch.uint8)
    allv = [bytes(t.tolist()) for t in g.all_gather(mine, "comparing the model files and load() arguments")]
    mine_b = bytes(mine.tolist())
    differ = [r for r, t in enumerate(allv) if t[:40] != mine_b[:40]]
    if differ:
        sizes = {r: int.from_bytes(t[:8], "little") for r, t in enumerate(allv)}
        raise _peer_error("pagein.distributed: rank %d: model '%s' differs from rank(s) %s (file sizes "
                          "%s bytes, or headers differ); every rank must load the same files"
                          % (g.rank, path, ", ".join(map(str, differ)),
                             ", ".join("rank %d: %d" % kv for kv in sorted(sizes.items()))))
    if all(t[40:72] == adig for t in allv):
        return
    n = max(int.from_bytes(t[72:76], "little") for t in allv)
    buf = torch.zeros(n, dtype=torch.uint8)
    buf[:len(args)] = torch.tensor(list(args), dtype=torch.uint8)
    every = []
    for r, t in enumerate(g.all_gather(buf, "exchanging the differing load() arguments")):
        k = int.from_bytes(allv[r][72:76], "little")
        every.append(_json.loads(bytes(t[:k].tolist()).decode()))
    diffs = []
    for key in sorted(every[0]):
        vals = [e.get(key) for e in every]
        if any(v != vals[0] for v in vals):
            diffs.append("%s: %s" % (key, ", ".join("rank %d: %s" % (r, _json.dumps(v)) for r, v in enumerate(vals))))
    raise _peer_error("pagein.distributed: rank %d: load() arguments differ between ranks (%s); every rank "
                      "must call load with the same mode, rules, align, cols_direct and chunk_bytes"
                      % (g.rank, "; ".join(diffs)))


def _expand(reads):
    """Request arrays (files, offsets, lengths, dst-in-piece) of strided reads."""
    files, offs, lens, dst = [], [], [], []
    for r in reads:
        n = r[7]
        k = _np.arange(n, dtype=_np.uint64)
        files.append(_np.full(n, r[3], _np.uint32))
        offs.append(r[4] + k * _np.uint64(r[6]))
        lens.append(_np.full(n, r[5], _np.uint64))
        dst.append(r[8] + k * _np.uint64(r[5]))
    if not files:
        z = _np.zeros(0, _np.uint64)
        return _np.zeros(0, _np.uint32), z, z, z
    return (_np.concatenate(files), _np.concatenate(offs), _np.concatenate(lens), _np.concatenate(dst))


def load(path, group=None, mode="replicated", rules=None, *, timeout=60.0, align=0, queue_depth=0,
         cols_direct=False, chunk_bytes=64 << 20, return_stats=False):
    """Loads a model (a file, a sharded checkpoint or a GGUF set) on every
    rank of `group` (default: the whole default group), each byte read from
    storage by one rank only. Returns {name: torch tensor} (CPU), or with
    return_stats=True (tensors, stats). Tensors share one buffer per rank.
    mode: "replicated" or "tp"; rules: TP rules [(pattern, "rows"|"cols"|
    "none")] or a dict, default default_rules(). Without an initialised
    torch.distributed it loads on its own (rank 0 of 1). cols_direct: each
    rank reads its column slices itself (strided reads) instead of 1/N of
    the rows followed by an all-to-all. chunk_bytes: broadcasts go out in
    pieces of at most this size, round-robin over the ranks, while each
    rank reads its next pieces."""
    import torch
    import torch.distributed as dist

    t0 = _time.monotonic()
    path = _os.fspath(path)
    src = _pagein.open_model(path, strategy="lazy")
    recs = src.tensors()
    g = _Group(dist, group, float(timeout))
    try:
        if g.world > 1:  # first, so that a rank with other arguments fails every rank
            _check_same_files(g, torch, src, path, _args_json(mode, rules, align, cols_direct, chunk_bytes))
        if mode not in ("replicated", "tp"):
            raise ValueError("mode must be 'replicated' or 'tp', not %r" % (mode,))
        reads, pieces, plan_bytes = _pagein.dist_plan(src, g.rank, g.world, mode, _rules(rules), align,
                                                      cols_direct)

        # One flat buffer per rank: replicated tensors at their position in
        # the replicated stream (so one owner's consecutive reads land
        # contiguously and go out as one broadcast), then this rank's slices.
        base = [0] * len(recs)
        pos = 0
        for p in pieces:
            if p[1] == "none":
                base[p[0]] = pos
                pos += p[5]
        for p in pieces:
            if p[1] != "none":
                pos = (pos + 63) // 64 * 64
                base[p[0]] = pos
                pos += p[5]
        flat = torch.empty(max(pos, 1), dtype=torch.uint8)
        out = flat.numpy()

        fds = [_os.open(f["path"], _os.O_RDONLY | _os.O_CLOEXEC) for f in src.files()]
        for fd in fds:  # no readahead past a rank's part (another rank reads it)
            _os.posix_fadvise(fd, 0, 0, _os.POSIX_FADV_RANDOM)
        stats = {"rank": g.rank, "world_size": g.world, "mode": mode, "plan_read_bytes": plan_bytes,
                 "requests": 0, "reads": 0, "bytes_read": 0, "broadcasts": 0, "broadcast_bytes": 0,
                 "exchanges": 0, "exchange_bytes_sent": 0}
        # Rows this rank reads for the all-to-all of COLS tensors: a staging
        # buffer, freed after the exchange.
        xmine = [r for r in reads if r[1] == 2 and r[0] == g.rank]
        xbase, spos = {}, 0
        for r in xmine:
            xbase[r[2]] = spos
            spos += r[5]
        stage = _np.empty(max(spos, 1), dtype=_np.uint8)

        # The broadcast reads, cut into chunks of at most `chunk` bytes per
        # owner (the same cut on every rank: it depends on the plan only),
        # broadcast round-robin over the owners while a thread reads this
        # rank's next chunks: reading and exchanging overlap.
        chunk = max(1, int(chunk_bytes))
        per_owner = [[] for _ in range(g.world)]  # [lo, hi, [(file, offset, length, dst)]]
        for r in reads:
            if r[1] != 1:
                continue
            lo, off, left = base[r[2]] + r[8], r[4], r[5]
            while left:
                cs = per_owner[r[0]]
                if not cs or cs[-1][1] - cs[-1][0] >= chunk or cs[-1][1] != lo:
                    cs.append([lo, lo, []])
                n = min(left, chunk - (cs[-1][1] - cs[-1][0]))
                cs[-1][2].append((r[3], off, n, lo))
                cs[-1][1] += n
                lo, off, left = lo + n, off + n, left - n
        order = [(o, i) for i in range(max(len(c) for c in per_owner)) for o in range(g.world)
                 if i < len(per_owner[o])]

        mine_rest = [r for r in reads if r[0] == g.rank and r[1] == 0]
        done = [_threading.Event() for _ in per_owner[g.rank]]
        failed = []

        def read(reqs, buf):
            files = _np.array([q[0] for q in reqs], _np.uint32)
            offs = _np.array([q[1] for q in reqs], _np.uint64)
            lens = _np.array([q[2] for q in reqs], _np.uint64)
            dst = _np.array([q[3] for q in reqs], _np.uint64)
            st = _pagein.read_ranges(fds, files, offs, lens, buf, dst, queue_depth=queue_depth, max_gap=1)
            stats["requests"] += st[0]
            stats["reads"] += st[1]
            stats["bytes_read"] += st[3]

        def strided(rs, bases):
            files, offs, lens, dst = _expand(rs)
            add = _np.array([bases[r[2]] for r in rs for _ in range(r[7])], dtype=_np.uint64)
            return list(zip(files.tolist(), offs.tolist(), lens.tolist(), (dst + add).tolist()))

        def reader():
            try:
                for i, c in enumerate(per_owner[g.rank]):
                    read(c[2], out)
                    done[i].set()
                if mine_rest:
                    read(strided(mine_rest, base), out)
                if xmine:
                    read(strided(xmine, xbase), stage)
                stats["read_seconds"] = _time.monotonic() - t_read
            except BaseException as e:  # reported by the main thread
                failed.append(e)
            finally:
                for ev in done:
                    ev.set()

        t_read = _time.monotonic()
        th = _threading.Thread(target=reader, name="pagein-dist-read", daemon=True)
        th.start()
        try:
            for owner, i in order:
                lo, hi, _ = per_owner[owner][i]
                if owner == g.rank:
                    done[i].wait()
                    if failed:
                        break
                if g.world > 1:
                    g.broadcast(flat[lo:hi], owner, "broadcast of bytes [%d, %d) from rank %d" % (lo, hi, owner))
                    stats["broadcasts"] += 1
                    stats["broadcast_bytes"] += hi - lo
        finally:
            th.join()
            for fd in fds:
                _os.close(fd)
        if failed:
            # This rank cannot provide its part: the others wait for its
            # broadcasts until their timeout. Say why here.
            raise Error("pagein.distributed: rank %d could not read its part of '%s': %s"
                        % (g.rank, path, failed[0])) from failed[0]
        t_reads_end = t_read + stats["read_seconds"]

        # The all-to-all of each COLS tensor: every rank sends each rank the
        # columns it keeps of the rows it read, straight into its slice.
        xall = {}
        for r in reads:
            if r[1] == 2:
                xall.setdefault(r[2], []).append(r)
        for ti, rs in xall.items():
            piece = pieces[ti]
            rec = recs[ti]
            cols = rec[_SHAPE][-1]
            row = rs[0][5] // (rs[0][10] - rs[0][9])   # bytes per row
            e = row // cols
            bounds = [(j * cols // g.world, (j + 1) * cols // g.world) for j in range(g.world)]
            rows_of = {r[0]: r[10] - r[9] for r in rs}
            out_splits = [rows_of.get(k, 0) * (piece[4] - piece[3]) * e for k in range(g.world)]
            mine_x = [r for r in rs if r[0] == g.rank]
            if mine_x:
                nrows = rows_of[g.rank]
                blk = stage[xbase[ti]:xbase[ti] + nrows * row].reshape(nrows, row)
                packed = _np.concatenate([blk[:, a * e:b * e].reshape(-1) for a, b in bounds])
                in_splits = [nrows * (b - a) * e for a, b in bounds]
            else:
                packed = _np.empty(0, dtype=_np.uint8)
                in_splits = [0] * g.world
            dst_t = flat[base[ti]:base[ti] + piece[5]]
            src_t = torch.from_numpy(packed)
            g.all_to_all(dst_t, src_t, out_splits, in_splits, "all-to-all of the columns of '%s'" % rec[_NAME])
            stats["exchanges"] += 1
            stats["exchange_bytes_sent"] += sum(in_splits) - (in_splits[g.rank] if mine_x else 0)
        del stage
        # what the collectives add after this rank's own reads are done
        stats["exchange_seconds"] = _time.monotonic() - t_reads_end
        result = {}
        for p in pieces:
            rec = recs[p[0]]
            shape = list(rec[_SHAPE])
            if p[1] != "none":
                shape[p[2]] = p[4] - p[3]
            result[rec[_NAME]] = _view(torch, flat, base[p[0]], p[5], rec[_DTYPE], shape)
        stats["seconds"] = _time.monotonic() - t0
        return (result, stats) if return_stats else result
    finally:
        g.close()


def _view(torch, flat, off, nbytes, dtype, shape):
    tdt, raw = _torch_dtype(dtype)
    if raw:
        _, shape = _np_layout(dtype, tuple(shape), nbytes)
    if nbytes == 0:
        return torch.empty(tuple(shape), dtype=tdt)
    b = flat[off:off + nbytes]
    size = torch.empty((), dtype=tdt).element_size()
    if off % size:  # misaligned in the file's layout: a private aligned copy
        b = b.clone()
    return b.view(tdt).reshape(tuple(shape))


# ---- torch Distributed Checkpoints written by N ranks, loaded on M ----------

def _dcp_split_dim(name, shape, split):
    if callable(split):
        return split(name, tuple(shape))
    if isinstance(split, dict):
        return split.get(name)
    if split in ("rows", 0):
        return 0 if len(shape) >= 2 else None
    if split in ("cols", -1):
        return len(shape) - 1 if len(shape) >= 2 else None
    if split is None:
        return None
    raise ValueError("split must be 'rows', 'cols', None, a dict {name: dim} or a callable(name, shape)")


def dcp_box(shape, dim, rank, world_size):
    """(start, count) of rank's part of a tensor of `shape` split along `dim`
    over world_size ranks as torch.chunk splits it (ceil-sized parts, the
    last ones shorter or empty); dim None: the whole tensor."""
    start, count = [0] * len(shape), list(shape)
    if dim is not None:
        n = shape[dim]
        step = -(-n // world_size) if n else 0
        a = min(n, rank * step)
        start[dim], count[dim] = a, max(0, min(n, a + step) - a)
    return tuple(start), tuple(count)


def _dcp_group(rank, world_size, share):
    """torch.distributed when it is initialized and is this (rank, world)."""
    if share is False or world_size < 2:
        return None
    try:
        import torch.distributed as dist
        ok = dist.is_available() and dist.is_initialized()
    except ImportError:
        ok = False
    if not ok or dist.get_rank() != rank or dist.get_world_size() != world_size:
        if share:
            raise ValueError("share=True needs torch.distributed initialized as rank %r of %r" % (rank, world_size))
        return None
    return dist


def load_dcp(path, rank=None, world_size=None, split="rows", include_bytes=False, share=None):
    """This rank's part of every tensor of a torch Distributed Checkpoint
    written by any number of ranks (resharding N -> M): tensors of two or
    more dimensions split along `split` ("rows": dimension 0, "cols": the
    last, a dict {name: dim or None}, or a callable(name, shape) -> dim or
    None) over world_size ranks as torch.chunk splits them; others whole.
    Every part this rank reads goes through one run of the range engine
    (pagein_dcp_read_many): only the saved chunks its part overlaps, and of
    those only the bytes (or each row's part) it needs, never the other
    ranks' bytes. With torch.distributed initialized (share None: when it
    is; True: required; False: never), the tensors every rank needs whole
    are read once, each by one rank (balanced by bytes), and broadcast.
    rank and world_size default to torch.distributed's. Returns {name:
    tensor} (plus {name: bytes} of the non-tensor items with
    include_bytes); load_dcp.last_stats holds this rank's figures."""
    import ctypes
    import torch
    from . import _pagein, dcp
    if rank is None or world_size is None:
        import torch.distributed as dist
        rank = dist.get_rank() if rank is None else rank
        world_size = dist.get_world_size() if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError("rank %r outside a world of %r" % (rank, world_size))
    dist = _dcp_group(rank, world_size, share)
    out, reqs, raw, whole = {}, [], {}, []
    with dcp.open(path) as ck:
        for name in ck.keys():
            i, is_bytes, dtype, shape, nbytes, _ = ck._items[name]
            if is_bytes:
                if include_bytes:
                    raw[name] = bytearray(nbytes)
                    reqs.append((i, raw[name], None, None))
                continue
            dim = _dcp_split_dim(name, shape, split)
            if dim is not None and dim < 0:
                dim += len(shape)
            if not shape:
                dim = None
            start, count = dcp_box(shape, dim, rank, world_size)
            t = torch.empty(count, dtype=ck._torch_dtype(dtype))
            out[name] = t
            if dim is None and dist is not None and nbytes:
                whole.append((name, i, t, nbytes))
            elif t.numel():
                reqs.append((i, dcp._tensor_buffer(t), start, count))
        # the whole tensors: owners by bytes (largest first to the least
        # loaded rank), each owner's laid out together in one buffer
        owned, load = {r: [] for r in range(world_size)}, [0] * world_size
        for w in sorted(whole, key=lambda w: (-w[3], w[0])):
            r = min(range(world_size), key=lambda x: (load[x], x))
            owned[r].append(w)
            load[r] += w[3]
        flat = torch.empty(sum(load), dtype=torch.uint8)
        spans, off = [], 0
        for r in range(world_size):
            lo = off
            for name, i, t, nb in owned[r]:
                if r == rank:
                    reqs.append((i, (ctypes.c_char * nb).from_address(flat.data_ptr() + off), None, None))
                off += nb
            spans.append((lo, off))
        st = _pagein.dcp_read_many(ck._h, reqs)
    stats = dict(zip(("runs", "spans", "requests", "bytes_read", "bytes_needed"), st))
    stats["broadcast_bytes"] = 0
    for r, (lo, hi) in enumerate(spans):
        if hi > lo:
            dist.broadcast(flat[lo:hi], src=r)
            stats["broadcast_bytes"] += hi - lo
    off = 0
    for r in range(world_size):
        for name, i, t, nb in owned[r]:
            ctypes.memmove(t.data_ptr(), flat.data_ptr() + off, nb)
            off += nb
    load_dcp.last_stats = stats
    for name, b in raw.items():
        out[name] = bytes(b)
    return out


__all__ += ["load_dcp", "dcp_box"]
