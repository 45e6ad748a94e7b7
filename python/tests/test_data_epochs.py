"""pagein.data: epochs and resume state reach DataLoader workers (persistent
ones too), state_dict is exact with workers without arguments, and every
field of load_state_dict is validated; sources' input errors."""
import copy
import pickle

import numpy as np
import pytest

import pagein
import pagein.data as pd

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
        assert got == ds.ids(0, 1).tolist()
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
    assert st["epoch"] == 1 and st["position"] == 28
    ds.set_epoch(0)
    assert sorted(ids_of(dl)) == list(range(N))  # another epoch in between
    ds.load_state_dict(st)
    rest = ids_of(dl)
    assert rest == fresh_epoch(shard, 1, state=st)
    assert sorted(first + rest) == list(range(N))
    assert first + rest == pd.epoch_order(N, "global", 3, 1).tolist()


def test_state_dict_with_workers_needs_no_argument(shard):
    ds = make(shard)
    dl = pd.DataLoader(ds, batch_size=4, num_workers=2)
    it = iter(dl)
    for _ in range(5):
        next(it)
    assert ds.state_dict()["position"] == 20
    del it
    # to the end: the last batch is partial, the epoch is done
    assert len(ids_of(dl)) == N
    assert ds.state_dict()["position"] == N
    # a plain torch loader with workers: refused rather than position 0
    ds2 = make(shard)
    for _ in torch.utils.data.DataLoader(ds2, batch_size=4, num_workers=2):
        pass
    with pytest.raises(ValueError, match="samples_seen"):
        ds2.state_dict()
    assert ds2.state_dict(samples_seen=8)["position"] == 8


def test_loader_adopts_the_batch_size(shard):
    ds = pd.Dataset(shard, record_size=REC, seed=3, return_ids=True, framework="pt")
    dl = pd.DataLoader(ds, batch_size=5, num_workers=2)
    assert ds.batch_size == 5
    assert ids_of(dl) == ds.ids(0, 1).tolist()
    with pytest.raises(ValueError, match="batch_size"):
        pd.DataLoader(make(shard), batch_size=5, num_workers=2)


def test_load_state_dict_validates_every_field(shard):
    ds = make(shard)
    good = ds.state_dict()
    bad = [({"position": -5}, ValueError, "position"), ({"position": N + 1}, ValueError, "position"),
           ({"position": "3"}, TypeError, "position"), ({"position": 2.0}, TypeError, "position"),
           ({"epoch": 2**64}, ValueError, "epoch"), ({"epoch": 2**63}, ValueError, "epoch"),
           ({"epoch": -1}, ValueError, "epoch"), ({"epoch": None}, TypeError, "epoch"),
           ({"num_samples": "203"}, TypeError, "num_samples"), ({"seed": 1.5}, TypeError, "seed"),
           ({"shuffle": 3}, TypeError, "shuffle"), ({"block_samples": 0}, ValueError, "block_samples"),
           ({"window_blocks": True}, TypeError, "window_blocks"), ({"version": 2}, ValueError, "version")]
    for change, exc, field in bad:
        st = dict(good, **change)
        with pytest.raises(exc, match=field):
            ds.load_state_dict(st)
    for k in good:
        st = dict(good)
        del st[k]
        with pytest.raises(ValueError, match=k):
            ds.load_state_dict(st)
    with pytest.raises(TypeError, match="dict"):
        ds.load_state_dict([1, 2])
    for e, exc in ((-1, ValueError), (2**63, ValueError), ("1", TypeError)):
        with pytest.raises(exc, match="epoch"):
            ds.set_epoch(e)
    ds.load_state_dict(dict(good, position=N, epoch=2**63 - 1))  # the limits themselves are fine
    assert len(ds) == 0 and ds.epoch == 2**63 - 1


def test_pickle_and_copy_keep_the_state(shard):
    ds = make(shard)
    ds.load_state_dict(dict(ds.state_dict(), epoch=4, position=10))
    for other in (pickle.loads(pickle.dumps(ds)), copy.deepcopy(ds)):
        assert (other.epoch, other._start) == (4, 10)
        other.set_epoch(5)  # its own block: the original is unchanged
        assert (ds.epoch, ds._start) == (4, 10)


def test_bin_without_record_size_asks_for_it(tmp_path):
    p = tmp_path / "rows0.bin"
    p.write_bytes(b"\0" * 64)
    with pytest.raises(ValueError, match="record_size") as e:
        pd.Dataset(str(p))
    assert "No such file" not in str(e.value)


@pytest.mark.parametrize("url", ["https://example.com/rows.bin", "s3://bucket/rows.bin", "hf://org/data"])
def test_url_is_refused_with_advice(url):
    if hasattr(pd, "ShardDataset"):  # the dataset-format table reads URLs: not refused there
        pytest.skip("Dataset(URL) is a ShardDataset in this build")
    with pytest.raises(ValueError, match="URL.*pagein pull"):
        pd.Dataset(url, record_size=8)


def test_lines_over_the_limit_are_refused(tmp_path):
    p = tmp_path / "big.jsonl"
    p.write_bytes(b'{"a": 1}\n' + b"x" * (3 << 20) + b"\n{}\n")
    with pytest.raises(pagein.FormatError, match=r"big.jsonl: line 2 \(at byte 9\) is 3145728 bytes.*max_line_bytes"):
        pd.Dataset(str(p), max_line_bytes=1 << 20)
    ds = pd.Dataset(str(p), max_line_bytes=4 << 20, shuffle="none")
    assert [len(s) for s in ds] == [8, 3 << 20, 2]


def test_line_batches_are_capped_in_bytes(tmp_path, monkeypatch):
    p = tmp_path / "t.txt"
    rng = np.random.default_rng(1)
    lens = rng.integers(1, 400, size=500)
    lines = [b"%d " % i + b"y" * int(n) for i, n in enumerate(lens)]
    p.write_bytes(b"\n".join(lines) + b"\n")
    ds = pd.Dataset(str(p), shuffle="global", seed=2, read_batch=256, read_batch_bytes=2000)
    sizes = []
    real = ds._src.read

    def spy(ids, qd, gap):
        sizes.append(int(ds._src.len[ids.astype(np.int64)].sum()))
        return real(ids, qd, gap)

    monkeypatch.setattr(ds._src, "read", spy)
    got = list(ds)
    assert sorted(got) == sorted(lines)
    assert max(sizes) <= 2000 + 400 and len(sizes) > 10  # one line may pass the cap alone
