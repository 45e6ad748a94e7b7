"""pagein.data.Dataset (records, Megatron and line files) on the library's
pipeline: the same order from C, the CLI and Python; exactly-once
partitioning over ranks and workers; determinism; resume with a world-size
and worker-count change; sample lifetime; refused parameters."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import pagein
import pagein.data as pd
from pagein import _pagein

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

from conftest import REPO

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
TOOL = os.path.join(os.environ.get("PAGEIN_BUILD") or os.path.join(REPO, "build"), "pagein")

REC = 24
COUNTS = [100, 0, 57, 80]  # shards, one empty


@pytest.fixture
def records(tmp_path, rng):
    """Record shards whose records start with their own id (u32) followed by
    random bytes; returns (paths, the whole dataset as an array)."""
    paths, parts, first = [], [], 0
    for i, n in enumerate(COUNTS):
        a = rng.integers(0, 256, size=(n, REC), dtype=np.uint8)
        a[:, :4] = np.arange(first, first + n, dtype=np.uint32).view(np.uint8).reshape(n, 4)
        p = str(tmp_path / ("shard%d.bin" % i))
        a.tofile(p)
        paths.append(p)
        parts.append(a)
        first += n
    return paths, np.concatenate(parts)


def run(ds, monkeypatch, worker=0, num_workers=1):
    """Iterates ds as DataLoader worker `worker` of `num_workers` would."""
    monkeypatch.setattr(pd, "_worker", lambda: (worker, num_workers))
    return list(iter(ds))


def check_samples(pairs, whole):
    for i, s in pairs:
        assert np.asarray(s).tobytes() == whole[i].tobytes(), "sample %d has the wrong bytes" % i


def write_megatron(prefix, seqs, code=4, dtype=np.int32):
    ptrs, off = [], 0
    with open(prefix + ".bin", "wb") as fh:
        for s in seqs:
            b = np.asarray(s, dtype=dtype).tobytes()
            fh.write(b)
            ptrs.append(off)
            off += len(b)
    S = len(seqs)
    docs = list(range(S + 1))
    with open(prefix + ".idx", "wb") as fh:
        fh.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, code, S, len(docs)))
        fh.write(np.array([len(s) for s in seqs], np.int32).tobytes())
        fh.write(np.array(ptrs, np.int64).tobytes())
        fh.write(np.array(docs, np.int64).tobytes())


@pytest.fixture
def plain(tmp_path, rng, records):
    """The three plain kinds: (Dataset kwargs, CLI arguments) each."""
    paths, _ = records
    seqs = [rng.integers(0, 50000, size=int(rng.integers(1, 40))) for _ in range(90)]
    prefix = str(tmp_path / "corpus_text_document")
    write_megatron(prefix, seqs)
    rows = [json.dumps({"id": i, "text": "x" * (i % 7)}) for i in range(150)]
    p1, p2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    p1.write_text("\n".join(rows[:70]) + "\n\n")
    p2.write_text("\n".join(rows[70:]))
    return {
        "records": (dict(paths=paths, record_size=REC, block_bytes=REC * 10),
                    sum((["--dataset", p] for p in paths), []) + ["--data-format", "records", "--record-size",
                                                                   str(REC), "--group-size", str(REC * 10)]),
        "megatron": (dict(paths=prefix + ".bin", block_bytes=4 * 60),
                     ["--dataset", prefix + ".bin", "--data-format", "megatron", "--group-size", str(4 * 60)]),
        "lines": (dict(paths=[str(p1), str(p2)], block_bytes=600),
                  ["--dataset", str(p1), "--dataset", str(p2), "--data-format", "lines", "--group-size", "600"]),
    }


@pytest.mark.parametrize("kind", ["records", "megatron", "lines"])
@pytest.mark.parametrize("order", ["none", "block", "global"])
def test_same_order_c_cli_python(plain, kind, order):
    """Records, Megatron and line files: the Python Dataset's epoch is the
    C pipeline's order (pagein_pipe_order) and the CLI's, for the same seed."""
    kw, cli_args = plain[kind]
    ds = pd.Dataset(shuffle=order, seed=9, window=3, return_ids=True, **kw)
    assert type(ds) is pd.Dataset
    for epoch in (0, 2):
        ds.set_epoch(epoch)
        py = [i for i, _ in ds]
        c = ds.order().tolist()
        cli = subprocess.run([TOOL, "read-samples"] + cli_args + ["--order", order, "--seed", "9", "--epoch",
                                                                   str(epoch), "--window", "3", "--ids"],
                             check=True, capture_output=True, text=True).stdout.split()
        assert py == c == [int(x) for x in cli]
        assert sorted(py) == list(range(ds.num_samples))
        if order == "global":
            assert py == pd.epoch_order(ds.num_samples, "global", 9, epoch).tolist()
        if order != "none":
            assert py != sorted(py)


@pytest.mark.parametrize("shuffle", ["global", "block", "none"])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("workers", [0, 1, 2, 3])
def test_exactly_once_over_ranks_and_workers(records, monkeypatch, shuffle, world, workers):
    paths, whole = records
    seen = []
    for rank in range(world):
        ds = pd.Dataset(paths, record_size=REC, shuffle=shuffle, seed=7, rank=rank, world_size=world,
                        return_ids=True, batch_size=3, read_batch=16, block_bytes=REC * 10, window_blocks=3)
        ds.set_epoch(2)
        got = []
        for w in range(max(1, workers)):
            got += run(ds, monkeypatch, w, max(1, workers))
        assert len(got) == len(ds), "rank %d yields len(ds) samples" % rank
        check_samples(got, whole)
        seen += [i for i, _ in got]
    assert sorted(seen) == list(range(len(whole)))


def test_ranks_are_contiguous_slices_of_the_order(records):
    """The pipeline's partition: rank r of W takes a contiguous slice of the
    epoch's one order (the same on every rank)."""
    paths, whole = records
    n = len(whole)
    W = 3
    for epoch in (0, 1, 5):
        order = pd.epoch_order(n, "global", 11, epoch)
        ref = np.frombuffer(_pagein.permutation(n, _pagein.epoch_seed(11, epoch)), np.uint64)
        assert (order == ref).all()
        parts = [pd.Dataset(paths, record_size=REC, seed=11, rank=r, world_size=W) for r in range(W)]
        for p in parts:
            p.set_epoch(epoch)
        assert np.concatenate([p.ids(0, 1) for p in parts]).tolist() == order.tolist()
    assert (pd.epoch_order(n, "global", 11, 0) != pd.epoch_order(n, "global", 11, 1)).any()
    assert (pd.epoch_order(n, "global", 11, 0) != pd.epoch_order(n, "global", 12, 0)).any()
    # partition over the whole order: the ranks' contiguous slices
    assert np.concatenate([pd.partition(order, 0, r, W) for r in range(W)]).tolist() == order.tolist()


def test_epoch_order_block_is_the_pipelines(tmp_path):
    """epoch_order(n, "block", ..., block_samples=B, window_blocks=K) is
    Dataset.order() of a record file whose groups are B records, windows K
    (the C pipeline's pagein_pipe_order), for every epoch; the defaults are
    one sample a group, windows of 8."""
    n, rs = 203, 16
    p = str(tmp_path / "one.bin")
    np.zeros((n, rs), np.uint8).tofile(p)
    for bs, wb in ((1, 8), (5, 3), (7, 1), (64, 2), (300, 4)):
        ds = pd.Dataset(p, record_size=rs, shuffle="block", seed=5, group_bytes=bs * rs, window=wb)
        for epoch in (0, 3):
            got = pd.epoch_order(n, "block", 5, epoch, block_samples=bs, window_blocks=wb)
            assert got.tolist() == ds.order(epoch).tolist(), (bs, wb, epoch)
            assert sorted(got.tolist()) == list(range(n))
    ds = pd.Dataset(p, record_size=rs, shuffle="block", seed=5, group_bytes=rs)
    assert pd.epoch_order(n, "block", 5, 1).tolist() == ds.order(1).tolist()
    with pytest.raises(ValueError, match="block_samples"):
        pd.epoch_order(n, "block", 5, 0, block_samples=0)


@pytest.mark.parametrize("shuffle", ["global", "block"])
def test_partition_is_the_pipelines(records, shuffle):
    """partition(order, start, rank, W, worker, nw, chunk) gives the ids the
    pipeline gives that (rank, worker) (pagein_pipe_ids), from the start of
    the epoch and after a state that consumed the first `start` positions."""
    paths, whole = records
    n = len(whole)
    for W, nw, B in ((1, 1, 1), (3, 1, 1), (2, 2, 4), (4, 3, 5), (3, 2, 50)):
        full = pd.Dataset(paths, record_size=REC, shuffle=shuffle, seed=3, batch_size=B)
        order = full.order()
        for start in (0, 37):
            st = full.state_dict(samples_seen=start, num_workers=1) if start else None
            got = []
            for r in range(W):
                ds = pd.Dataset(paths, record_size=REC, shuffle=shuffle, seed=3, rank=r, world_size=W, batch_size=B)
                if st:
                    ds.load_state_dict(st)
                for w in range(nw):
                    part = pd.partition(order, start, r, W, w, nw, B)
                    assert part.tolist() == ds.ids(w, nw).tolist(), (W, nw, B, start, r, w)
                    got += part.tolist()
            assert sorted(got) == sorted(order[start:].tolist())  # exactly once
    with pytest.raises(ValueError, match="rank"):
        pd.partition(order, 0, 2, 2)
    with pytest.raises(ValueError, match="worker"):
        pd.partition(order, 0, 0, 1, 1, 1)
    with pytest.raises(ValueError, match="start"):
        pd.partition(order, n + 1, 0, 1)


@pytest.mark.parametrize("shuffle", ["global", "block"])
def test_determinism_across_runs(records, shuffle):
    paths, _ = records
    a = pd.Dataset(paths, record_size=REC, shuffle=shuffle, seed=3, return_ids=True, block_bytes=REC * 8)
    b = pd.Dataset(paths, record_size=REC, shuffle=shuffle, seed=3, return_ids=True, block_bytes=REC * 8)
    for e in (0, 4):
        a.set_epoch(e)
        b.set_epoch(e)
        ia, ib = [i for i, _ in a], [i for i, _ in b]
        assert ia == ib
        assert ia != sorted(ia)


def test_block_order_keeps_groups_together(records):
    paths, whole = records
    gs = 10  # records a group
    ds = pd.Dataset(paths, record_size=REC, shuffle="block", seed=1, block_bytes=REC * gs, window_blocks=2)
    o = ds.order()
    assert sorted(o.tolist()) == list(range(len(whole)))
    q_block = _pagein.shuffle_quality(np.ascontiguousarray(o))
    q_global = _pagein.shuffle_quality(np.ascontiguousarray(pd.epoch_order(len(o), "global", 1, 0)))
    assert 0 < q_block < q_global


def test_resume_with_world_size_change(records, monkeypatch):
    paths, whole = records
    n = len(whole)
    kw = dict(record_size=REC, seed=5, return_ids=True, read_batch=8)
    # Epoch 1 on 3 ranks; every rank consumes 17 samples, then stops.
    consumed, states = [], []
    for r in range(3):
        ds = pd.Dataset(paths, rank=r, world_size=3, **kw)
        ds.set_epoch(1)
        it = iter(ds)
        got = [next(it) for _ in range(17)]
        check_samples(got, whole)
        consumed += [i for i, _ in got]
        states.append(ds.state_dict())
        it.close()
    assert all(s == states[0] for s in states), "the state is the same on every rank"
    assert states[0]["epoch"] == 1
    # Resume on 2 ranks with 2 workers each, then on 4 ranks: the rest of the epoch, once.
    for world, workers in ((2, 2), (4, 0)):
        rest = []
        for r in range(world):
            ds = pd.Dataset(paths, rank=r, world_size=world, batch_size=4, **kw)
            ds.load_state_dict(states[0])
            ds.set_epoch(1)  # the usual loop calls set_epoch again: the state stays
            assert len(ds) in ((n - 51) // world, (n - 51) // world + 1)
            for w in range(max(1, workers)):
                got = run(ds, monkeypatch, w, max(1, workers))
                check_samples(got, whole)
                rest += [i for i, _ in got]
        assert sorted(consumed + rest) == list(range(n))
    # A new epoch starts from its beginning.
    ds = pd.Dataset(paths, rank=0, world_size=1, **kw)
    ds.load_state_dict(states[0])
    ds.set_epoch(2)
    assert len(list(ds)) == n


def test_state_at_the_end_of_an_epoch(records):
    """Ranks differ by one sample when W does not divide N: after a whole
    epoch every rank's state says the epoch is done."""
    paths, whole = records
    n = len(whole)
    assert n % 4
    states = []
    for r in range(4):
        ds = pd.Dataset(paths, record_size=REC, seed=1, rank=r, world_size=4)
        assert len(list(ds)) == len(ds)
        states.append(ds.state_dict())
    assert all(_pagein.pipe_state_parse(s["pipe"])["remaining"] == 0 for s in states)
    ds = pd.Dataset(paths, record_size=REC, seed=1, rank=0, world_size=2)
    ds.load_state_dict(states[3])
    assert list(ds) == [] and len(ds) == 0


def test_state_mismatch_is_refused(records):
    paths, _ = records
    st = pd.Dataset(paths, record_size=REC, seed=1).state_dict()
    with pytest.raises(pagein.Error, match="237 samples"):
        pd.Dataset(paths[:1], record_size=REC, seed=1).load_state_dict(st)
    with pytest.raises(ValueError, match="seed"):
        pd.Dataset(paths, record_size=REC, seed=2).load_state_dict(st)
    old = {"version": 1, "seed": 1, "shuffle": "block", "epoch": 0, "position": 5, "num_samples": 237,
           "block_samples": 1, "window_blocks": 7}
    with pytest.raises(ValueError, match="version 1.*set_epoch\\(1\\)"):
        pd.Dataset(paths, record_size=REC, seed=1, shuffle="block").load_state_dict(old)


@pytest.mark.parametrize("shuffle", ["global", "none"])
def test_version1_state_continues(records, shuffle):
    """A state of the Python readers before the pipeline (version 1: the
    global position in the epoch's order) continues on the pipeline for
    the global and none orders, which are the same: the rest of the order
    from that position, over any world size (it raised before)."""
    paths, whole = records
    n = len(whole)
    for pos in (0, 5, 100, n):
        old = {"version": 1, "seed": 1, "shuffle": shuffle, "epoch": 3, "position": pos, "num_samples": n,
               "block_samples": 1, "window_blocks": 7}
        order = pd.epoch_order(n, shuffle, 1, 3)
        got = []
        for r in range(3):
            ds = pd.Dataset(paths, record_size=REC, seed=1, shuffle=shuffle, rank=r, world_size=3, return_ids=True)
            ds.load_state_dict(old)
            assert ds.epoch == 3
            got += [int(i) for i, s in ds]
        assert got == order[pos:].tolist()
        st = ds.state_dict(samples_seen=0)  # a version 2 state of the same rest
        assert st["version"] == 2 and st["epoch"] == 3


def test_older_readers_parameters_keep_working(records, tmp_path):
    """Parameters of the Python readers before the pipeline keep working:
    copy=False (samples are copies either way) and max_gap (a warning: no
    effect) give the same samples; read_batch_bytes sets the global read
    batch in samples; max_line_bytes raises on a longer line. They raised
    ValueError since the pipeline came."""
    paths, whole = records
    ref = [(int(i), s.tobytes()) for i, s in pd.Dataset(paths, record_size=REC, seed=2, return_ids=True)]
    ds = pd.Dataset(paths, record_size=REC, seed=2, return_ids=True, copy=False)
    assert [(int(i), s.tobytes()) for i, s in ds] == ref
    with pytest.warns(UserWarning, match="max_gap=4096 has no effect"):
        ds = pd.Dataset(paths, record_size=REC, seed=2, return_ids=True, max_gap=4096)
    assert [(int(i), s.tobytes()) for i, s in ds] == ref
    # 10 records' bytes a batch: ceil(237 / 10) units of the global order
    ds = pd.Dataset(paths, record_size=REC, seed=2, return_ids=True, read_batch_bytes=10 * REC + 5)
    assert ds.read_batch == 10
    assert [(int(i), s.tobytes()) for i, s in ds] == ref
    assert ds.stats["units"] == (len(whole) + 9) // 10
    assert pd.Dataset(paths, record_size=REC, read_batch=7, read_batch_bytes=1 << 20).read_batch == 7
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"short\n" + b"x" * 300 + b"\nend\n")
    assert list(pd.Dataset(str(p), format="lines", max_line_bytes=300, shuffle="none")) == [b"short", b"x" * 300,
                                                                                              b"end"]
    with pytest.raises(pagein.FormatError, match="sample 1: a line of 300 bytes, over max_line_bytes=299"):
        list(pd.Dataset(str(p), format="lines", max_line_bytes=299, shuffle="none"))
    for kw in (dict(read_batch_bytes=0), dict(max_line_bytes=0)):
        with pytest.raises(ValueError):
            pd.Dataset(paths, record_size=REC, **kw)
    with pytest.raises(TypeError):
        pd.Dataset(paths, record_size=REC, no_such_parameter=1)


def test_held_samples_never_change(records):
    paths, whole = records
    for fw in (["np", "pt"] if torch is not None else ["np"]):
        ds = pd.Dataset(paths, record_size=REC, seed=2, return_ids=True, read_batch=4, framework=fw)
        it = iter(ds)
        held = [next(it) for _ in range(3)]
        snap = [np.asarray(s).tobytes() for _, s in held]
        rest = list(it)  # many more batches read (and read ahead) after them
        assert len(rest) == len(whole) - 3
        for (i, s), b in zip(held, snap):
            assert np.asarray(s).tobytes() == b == whole[i].tobytes()
        a0 = np.asarray(held[0][1])
        a_last = np.asarray(rest[-1][1])
        assert not np.shares_memory(a0, a_last)
        a0[:] = 0  # its own, writable memory


def test_pickles_for_spawned_workers(records, monkeypatch):
    """DataLoader workers started with "spawn" get a pickled copy: it reopens
    the files and yields the same samples."""
    import pickle
    paths, whole = records
    ds = pd.Dataset(paths, record_size=REC, seed=8, rank=1, world_size=2, return_ids=True)
    list(ds)  # opened and used before pickling
    ds2 = pickle.loads(pickle.dumps(ds))
    got = run(ds2, monkeypatch)
    assert [i for i, _ in got] == ds.ids(0, 1).tolist()
    check_samples(got, whole)


def test_dtype_view(records):
    paths, whole = records
    ds = pd.Dataset(paths, record_size=REC, shuffle="none", dtype=np.uint32)
    s = next(iter(ds))
    assert s.dtype == np.uint32 and s[0] == 0 and s.tobytes() == whole[0].tobytes()


def test_record_file_not_whole_records(tmp_path):
    p = tmp_path / "odd.bin"
    p.write_bytes(b"x" * 50)
    with pytest.raises(pagein.Error, match="odd.bin"):
        pd.Dataset([str(p)], record_size=24)
    with pytest.raises(ValueError):
        pd.Dataset([str(p)], record_size=25, rank=0)
    with pytest.raises(ValueError):
        pd.Dataset([str(p)], record_size=25, rank=2, world_size=2)


def test_megatron_dataset(tmp_path, rng, monkeypatch):
    seqs = [rng.integers(0, 50000, size=int(rng.integers(1, 40))) for _ in range(90)]
    prefix = str(tmp_path / "corpus_text_document")
    write_megatron(prefix, seqs)
    for name in (prefix, prefix + ".bin", prefix + ".idx"):
        assert pd.Dataset(name).num_samples == 90
    seen = []
    for r in range(2):
        ds = pd.Dataset(prefix + ".bin", rank=r, world_size=2, return_ids=True, read_batch=7)
        assert ds.num_samples == 90
        for w in range(2):
            for i, s in run(ds, monkeypatch, w, 2):
                assert s.dtype == np.int32 and (s == seqs[i]).all()
                seen.append(i)
    assert sorted(seen) == list(range(90))
    with open(prefix + ".idx", "r+b") as fh:  # a pointer past the end of .bin
        fh.seek(34 + 4 * 90)
        fh.write(np.array([10 ** 9], np.int64).tobytes())
    with pytest.raises(pagein.Error):
        pd.Dataset(prefix)


def test_jsonl_lines(tmp_path, monkeypatch):
    rows = [{"id": i, "text": "x" * (i % 7)} for i in range(60)]
    p1, p2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    p1.write_text("".join(json.dumps(r) + "\n" for r in rows[:25]) + "\n")  # a blank line is skipped
    p2.write_text("\n".join(json.dumps(r) for r in rows[25:]))  # no final newline
    seen = []
    for r in range(3):
        ds = pd.Dataset([str(p1), str(p2)], rank=r, world_size=3, return_ids=True, read_batch=5)
        assert ds.num_samples == 60
        for i, line in run(ds, monkeypatch, 0, 1):
            assert isinstance(line, bytes) and json.loads(line) == rows[i]
            seen.append(i)
    assert sorted(seen) == list(range(60))


def test_formats_are_the_tables(tmp_path, rng):
    """pagein.data.formats() lists the library's dataset-format rows (names,
    aliases, suffixes, index files, content detection, companion files);
    Python keeps no list of its own: format= aliases, line-file names and
    the Megatron pair all resolve through the table."""
    rows = {r["name"]: r for r in pd.formats()}
    assert {"records", "megatron", "lines", "webdataset", "mds", "arrow", "parquet"} <= set(rows)
    assert {"jsonl", "text", "ndjson"} <= set(rows["lines"]["aliases"]) and ".jsonl.zst" in rows["lines"]["suffixes"]
    assert {"tar", "wds"} <= set(rows["webdataset"]["aliases"]) and "index.json" in rows["mds"]["index_names"]
    assert rows["megatron"]["companion"] and rows["megatron"]["content"] and not rows["lines"]["content"]
    assert _pagein.dataset_detect_name("x/y.ndjson.gz") == "lines" and _pagein.dataset_detect_name("x/y.q") is None
    p = tmp_path / "a.jsonl"
    p.write_text("".join('{"i": %d}\n' % i for i in range(9)))
    for fmt in ("ndjson", "json-lines", "jsonl", "lines"):  # aliases from the table, plain samples
        ds = pd.Dataset(str(p), format=fmt)
        assert type(ds) is pd.Dataset and ds.num_samples == 9 and ds.formats == ["lines"]
    prefix = str(tmp_path / "m")
    write_megatron(prefix, [rng.integers(0, 9, size=3) for _ in range(5)])
    for name in (prefix, prefix + ".bin", prefix + ".idx"):
        assert _pagein.dataset_detect_name(name) == "megatron"
        ds = pd.Dataset(name)
        assert ds.files == [(prefix + ".bin", 5 * 3 * 4)]  # the library paired it


def test_state_is_read_by_the_library(records):
    """What a resume state says comes from the library's parser
    (pagein_pipe_state_parse), which len() and load_state_dict use."""
    paths, whole = records
    ds = pd.Dataset(paths, record_size=REC, seed=3, rank=1, world_size=3)
    n = ds.num_samples
    st = ds.state_dict(samples_seen=4)
    info = _pagein.pipe_state_parse(st["pipe"])
    assert info["order"] == "global" and info["seed"] == 3 and info["epoch"] == 0 and info["samples"] == n
    assert info["remaining"] == n - 3 * 4
    ds2 = pd.Dataset(paths, record_size=REC, seed=3, rank=0, world_size=2)
    ds2.load_state_dict(st)
    assert len(ds2) == (n - 12) // 2 == len(ds2.ids())
    with pytest.raises(pagein.Error, match="pipe state"):
        _pagein.pipe_state_parse(st["pipe"].replace("epoch=0", "epoch=x"))


@needs_torch
def test_real_dataloader_workers(records):
    """A real DataLoader with 2 worker processes: every sample once, and the
    loader's output is the workers' parts interleaved batch by batch (what
    the resume state relies on)."""
    paths, whole = records
    for rank in range(2):
        ds = pd.Dataset(paths, record_size=REC, seed=4, rank=rank, world_size=2, return_ids=True,
                        batch_size=5, read_batch=8, framework="pt")
        dl = torch.utils.data.DataLoader(ds, batch_size=5, num_workers=2)
        ids = []
        for bid, bs in dl:
            assert bs.shape[1] == REC
            for i, s in zip(bid.tolist(), bs):
                assert s.numpy().tobytes() == whole[i].tobytes()
            ids += bid.tolist()
        parts = [ds.ids(w, 2).tolist() for w in range(2)]
        want, k = [], 0
        while any(parts):
            want += parts[k % 2][:5]
            parts[k % 2] = parts[k % 2][5:]
            k += 1
        assert ids == want


def test_memory_bounded_by_window(tmp_path):
    """A block epoch over 48 MiB of records, windows of 4 groups of 256 KiB:
    the process's peak RSS grows by the pipeline's two units and a chunk of
    samples (a few MiB), never by the dataset (docs/TRAINING-DATA.md,
    "Reading and memory")."""
    p = tmp_path / "big.bin"
    rec, n = 16384, 3 * 1024
    with open(p, "wb") as fh:
        for k in range(12):
            fh.write(np.full((256, rec), k, dtype=np.uint8).tobytes())
    script = r"""
import sys, pagein.data as pd
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
ds = pd.Dataset(sys.argv[1], record_size=%d, shuffle="block", seed=1, block_bytes=256 << 10, window_blocks=4)
base = hwm()
n = 0
for s in ds:
    n += 1
print(n, hwm() - base, ds.stats["memory_peak"])
""" % rec
    out = subprocess.run([sys.executable, "-c", script, str(p)], check=True, capture_output=True, text=True,
                         env=dict(os.environ)).stdout.split()
    count, grew, peak = int(out[0]), int(out[1]), int(out[2])
    assert count == n
    assert peak <= 2 * 4 * (256 << 10) + 2 * rec, "the pipeline holds two units of 4 groups"
    print("peak RSS grew by", grew, "memory_peak", peak)
    assert grew < 16 << 20, "peak RSS grew by %d bytes over a 48 MiB epoch" % grew
