"""pagein.data: epochs and resume state reach DataLoader workers (persistent
ones too); state_dict with DataLoader workers (each worker's position)
resumes exactly once on another worker count and world size; every field of
load_state_dict is validated; sources' input errors."""
import copy
import pickle

import numpy as np
import pytest

import pagein
import pagein.data as pd
from pagein import _pagein

torch = pytest.importorskip("torch")

REC = 16
N = 203  # not a multiple of the batch or of the workers


@pytest.fixture
def shard(tmp_path):
    """One record file whose records start with their own id (u32)."""
    a = np.zeros((N, REC), dtype=np.uint8)
    a[:, :4] = np.arange(N, dtype=np.uint32).view(np.uint8).reshape(N, 4)
    p = str(tmp_path / "rows.bin")
    a.tofile(p)
    return p


def ids_of(batches):
    """Sample ids of a loader's batches (return_ids=True: (ids, samples))."""
    out = []
    for ids, samples in batches:
        got = samples[:, :4].contiguous().view(torch.int32).flatten().tolist()
        assert got == ids.tolist(), "a sample's bytes are not its id's"
        out += ids.tolist()
    return out


def make(shard, **kw):
    return pd.Dataset(shard, record_size=REC, seed=3, return_ids=True, batch_size=4, framework="pt",
                      read_batch=8, **kw)


def interleave(parts, b):
    """What a DataLoader hands out of its workers' parts: batches of b, round-robin."""
    parts = [list(p) for p in parts]
    out, k = [], 0
    while any(parts):
        w = k % len(parts)
        out += parts[w][:b]
        parts[w] = parts[w][b:]
        k += 1
    return out


def fresh_epoch(shard, epoch, state=None, workers=2, ctx=None):
    """What a new dataset and a new non-persistent loader yield in epoch."""
    ds = make(shard)
    if state is not None:
        ds.load_state_dict(state)
    ds.set_epoch(epoch)
    dl = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=workers, multiprocessing_context=ctx)
    return ids_of(dl)


@pytest.mark.parametrize("ctx", [None, "spawn"])
def test_persistent_workers_follow_set_epoch(shard, ctx):
    epochs = 3 if ctx is None else 2  # spawned workers start slowly
    ds = make(shard)
    # torch's own loader: the epoch reaches its persistent workers
    dl = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True,
                                     multiprocessing_context=ctx)
    seen = []
    for e in range(epochs):
        ds.set_epoch(e)
        got = ids_of(dl)
        assert sorted(got) == list(range(N))
        assert got == fresh_epoch(shard, e, ctx=ctx), "epoch %d: persistent workers replayed another epoch" % e
        assert got == interleave([ds.ids(w, 2) for w in range(2)], 4)
        seen.append(got)
    assert seen[0] != seen[1]


def test_persistent_workers_resume(shard):
    """load_state_dict on a dataset whose persistent workers already ran
    reaches them; the rest of the epoch is what a fresh loader yields."""
    ds = make(shard)
    dl = pd.DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
    ds.set_epoch(1)
    first = []
    for k, (ids, _) in enumerate(dl):
        first += ids.tolist()
        if k == 6:
            break
    st = ds.state_dict()  # no samples_seen: the loader counted 7 batches
    assert st["epoch"] == 1
    ds.set_epoch(0)
    assert sorted(ids_of(dl)) == list(range(N))  # another epoch in between
    ds.load_state_dict(st)
    rest = ids_of(dl)
    assert rest == fresh_epoch(shard, 1, state=st)
    assert sorted(first + rest) == list(range(N))


@pytest.mark.parametrize("kind", ["records", "webdataset"])
def test_state_dict_with_two_workers_resumes_on_other_workers_and_worlds(shard, tmp_path, kind):
    """A torch DataLoader with num_workers=2 on each of 2 ranks stops after
    some batches; state_dict() (pagein.data.DataLoader: no argument; a plain
    torch loader: samples_seen=) is each worker's position; resuming on
    1 x 3 workers, 3 ranks x 1 worker and 4 ranks x 2 workers gives every
    sample not consumed exactly once."""
    if kind == "records":
        def mk(**kw):
            return make(shard, **kw)
        n = N
    else:
        import tarfile
        import io
        n = 150
        p = str(tmp_path / "s.tar")
        with tarfile.open(p, "w", format=tarfile.GNU_FORMAT) as tf:
            for i in range(n):
                b = i.to_bytes(4, "little") + bytes(i % 13)
                ti = tarfile.TarInfo("%06d.bin" % i)
                ti.size = len(b)
                tf.addfile(ti, io.BytesIO(b))

        def mk(**kw):
            return pd.ShardDataset(p, shuffle="block", seed=3, return_ids=True, window=2, group_bytes=1024,
                                   loader_batch_size=4, **kw)
    for counting in (True, False):
        consumed, states = [], []
        for r in range(2):
            ds = mk(rank=r, world_size=2)
            dl = (pd.DataLoader if counting else torch.utils.data.DataLoader)(
                ds, batch_size=4, num_workers=2, collate_fn=None if kind == "records" else lambda b: b)
            for k, batch in enumerate(dl):
                consumed += batch[0].tolist() if kind == "records" else [i for i, _ in batch]
                if k == 4:  # 5 batches of 4: worker 0 gave 3, worker 1 gave 2
                    break
            states.append(ds.state_dict() if counting else ds.state_dict(samples_seen=20))
        assert len(consumed) == 40 and len(set(consumed)) == 40
        assert states[0] == states[1], "the same state on every rank"
        if not counting:
            with pytest.raises(ValueError, match="samples_seen"):
                ds.state_dict()
        for world, workers in ((1, 3), (3, 1), (4, 2)):
            rest = []
            for r in range(world):
                ds = mk(rank=r, world_size=world)
                ds.load_state_dict(states[0])
                dl = pd.DataLoader(ds, batch_size=4, num_workers=workers,
                                   collate_fn=None if kind == "records" else lambda b: b)
                for batch in dl:
                    rest += batch[0].tolist() if kind == "records" else [i for i, _ in batch]
            assert sorted(consumed + rest) == list(range(n)), (counting, world, workers)


def test_state_dict_with_workers_needs_no_argument(shard):
    ds = make(shard)
    dl = pd.DataLoader(ds, batch_size=4, num_workers=2)
    it = iter(dl)
    first = []
    for _ in range(5):
        first += next(it)[0].tolist()
    st = ds.state_dict()
    del it
    ds2 = make(shard)
    ds2.load_state_dict(st)
    assert sorted(first + ids_of(torch.utils.data.DataLoader(ds2, batch_size=4))) == list(range(N))
    # to the end: the last batch is partial, the epoch is done
    assert len(ids_of(dl)) == N
    assert _pagein.pipe_state_parse(ds.state_dict()["pipe"])["remaining"] == 0
    # a plain torch loader with workers: refused rather than a wrong state
    ds3 = make(shard)
    for _ in torch.utils.data.DataLoader(ds3, batch_size=4, num_workers=2):
        pass
    with pytest.raises(ValueError, match="samples_seen"):
        ds3.state_dict()
    assert _pagein.pipe_state_parse(ds3.state_dict(samples_seen=N)["pipe"])["remaining"] == 0


def test_loader_adopts_the_batch_size(shard):
    ds = pd.Dataset(shard, record_size=REC, seed=3, return_ids=True, framework="pt")
    dl = pd.DataLoader(ds, batch_size=5, num_workers=2)
    assert ds.loader_batch_size == 5 and ds.num_workers == 2
    assert ids_of(dl) == interleave([ds.ids(w, 2) for w in range(2)], 5)
    with pytest.raises(ValueError, match="batch_size"):
        pd.DataLoader(make(shard), batch_size=5, num_workers=2)


def test_load_state_dict_validates_every_field(shard):
    ds = make(shard)
    good = ds.state_dict()
    bad = [({"epoch": 2**64}, ValueError, "epoch"), ({"epoch": 2**63}, ValueError, "epoch"),
           ({"epoch": -1}, ValueError, "epoch"), ({"epoch": None}, TypeError, "epoch"),
           ({"epoch": 3}, ValueError, "epoch"),
           ({"num_samples": "203"}, TypeError, "num_samples"), ({"seed": 1.5}, TypeError, "seed"),
           ({"shuffle": 3}, TypeError, "shuffle"), ({"pipe": 3}, TypeError, "pipe"),
           ({"pipe": good["pipe"].replace("remaining=", "remaining=9-5")}, ValueError, "pipe"),
           ({"pipe": good["pipe"].replace("n=203", "n=204")}, ValueError, "pipe"),
           ({"pipe": "nonsense"}, ValueError, "pipe"), ({"version": 3}, ValueError, "version")]
    for change, exc, field in bad:
        st = dict(good, **change)
        with pytest.raises(exc, match=field):
            ds.load_state_dict(st)
    for k in good:
        if k == "version":
            continue
        st = dict(good)
        del st[k]
        with pytest.raises(ValueError, match=k):
            ds.load_state_dict(st)
    with pytest.raises(TypeError, match="dict"):
        ds.load_state_dict([1, 2])
    for e, exc in ((-1, ValueError), (2**63, ValueError), ("1", TypeError)):
        with pytest.raises(exc, match="epoch"):
            ds.set_epoch(e)


def test_pickle_and_copy_keep_the_state(shard):
    ds = make(shard)
    ds.set_epoch(4)
    ds.load_state_dict(ds.state_dict(samples_seen=10))
    for other in (pickle.loads(pickle.dumps(ds)), copy.deepcopy(ds)):
        assert (other.epoch, other._state) == (4, ds._state)
        other.set_epoch(5)  # its own block: the original is unchanged
        assert ds.epoch == 4 and ds._state is not None
        ds._sync()
        assert ds.epoch == 4


def test_bin_without_record_size_asks_for_it(tmp_path):
    p = tmp_path / "rows0.bin"
    p.write_bytes(b"\0" * 64)
    with pytest.raises(ValueError, match="record_size") as e:
        pd.Dataset(str(p))
    assert "No such file" not in str(e.value)


def test_resume_state_of_many_ranks_and_workers(tmp_path):
    """A mid-epoch state of 1,024 ranks x 8 workers holds a run per worker
    (8,192 runs, ~100 KB): it loads on one rank, reaches DataLoader workers
    (fresh and persistent), and the rest of the epoch comes out once. The
    state shared with workers was capped at 64 KiB: load_state_dict raised."""
    n = 100_000
    a = np.zeros((n, 4), dtype=np.uint8)
    a[:, :4] = np.arange(n, dtype=np.uint32).view(np.uint8).reshape(n, 4)
    p = str(tmp_path / "many.bin")
    a.tofile(p)
    W, nw, seen = 1024, 8, 9  # every worker has consumed one or two samples of its part
    big = pd.Dataset(p, record_size=4, seed=7, rank=0, world_size=W)
    st = big.state_dict(samples_seen=seen, num_workers=nw)
    assert len(st["pipe"]) > 1 << 16
    ds = pd.Dataset(p, record_size=4, seed=7, return_ids=True, framework="pt", batch_size=512)
    ds.load_state_dict(st)
    rest = ds.ids(0, 1)
    assert len(rest) == n - W * seen and len(set(rest.tolist())) == len(rest)
    dl = pd.DataLoader(ds, batch_size=512, num_workers=2, persistent_workers=True)
    got = ids_of(dl)
    assert sorted(got) == sorted(rest.tolist())
    # a state longer than the room shared with the running persistent
    # workers: they say to create the loader after load_state_dict
    st2 = pd.Dataset(p, record_size=4, seed=7, rank=0, world_size=4 * W).state_dict(samples_seen=seen, num_workers=nw)
    assert len(st2["pipe"]) > 1 << 17
    ds.load_state_dict(st2)
    with pytest.raises(Exception, match="create the DataLoader after"):
        ids_of(dl)
    rest2 = ds.ids(0, 1)
    got2 = ids_of(pd.DataLoader(ds, batch_size=512, num_workers=2))
    assert sorted(got2) == sorted(rest2.tolist()) and len(rest2) == n - 4 * W * seen
