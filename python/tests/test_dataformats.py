"""pagein.data over the dataset-format table (ShardDataset, the C pipeline):
WebDataset, MDS and JSONL fixtures from tests/dataformats_gen.py; the same
order from C, the CLI and Python; exactly once over 4 ranks x 2 DataLoader
workers; resume onto another world size; batches; torch output; held
samples never change; malformed shards name the file."""
import os
import subprocess
import sys

import numpy as np
import pytest

import pagein
import pagein.data as pd
from pagein import _pagein

from conftest import REPO

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
TOOL = os.path.join(os.environ.get("PAGEIN_BUILD") or os.path.join(REPO, "build"), "pagein")
SPECS = ["wds", "mds", "lines", "wds-gz.tar.gz"]


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    d = tmp_path_factory.mktemp("dsfx")
    subprocess.check_call([sys.executable, os.path.join(REPO, "tests", "dataformats_gen.py"), str(d)])
    return str(d)


def test_dispatch_and_values(fx):
    ds = pd.Dataset(os.path.join(fx, "mds"), shuffle="none")
    assert isinstance(ds, pd.ShardDataset) and ds.formats == ["mds"] and len(ds) == 60
    for i, s in enumerate(ds):
        assert s["id"] == i and s["id"].dtype == np.int64
        assert s["text"] == "sample %d" % i
        assert s["tokens"].dtype == np.int32 and s["tokens"].tolist() == list(range(i % 9 + 1))
        assert s["vec"].tolist() == [i, i + 0.5, -i, 2 * i]
        assert s["label"] == i % 256 and s["raw"] == b"\x01" * (i % 5)
    w = list(pd.Dataset(os.path.join(fx, "wds", "shard-{00..01}.tar"), shuffle="none"))
    assert len(w) == 80 and w[3]["txt"] == b"hello 0 3" and w[3]["bin"] is None
    assert w[42]["bin"] == bytes((1 * 2 + j) % 251 for j in range(2 * 13)) and w[42]["__key__"].endswith("s01/00002")
    # plain line files: a Dataset on the same pipeline whose samples are the lines' bytes
    plain = pd.Dataset(os.path.join(fx, "lines", "a.jsonl"), shuffle="none")
    assert type(plain) is pd.Dataset and all(isinstance(s, bytes) for s in plain)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("order", ["none", "block", "global"])
def test_same_order_c_cli_python(fx, spec, order):
    ds = pd.Dataset(os.path.join(fx, spec), shuffle=order, seed=9, window=2, pipeline=True, return_ids=True)
    py = [i for i, _ in ds]
    c = ds.order().tolist()
    cli = subprocess.run([TOOL, "read-samples", "--dataset", os.path.join(fx, spec), "--order", order,
                          "--seed", "9", "--window", "2", "--ids"], check=True, capture_output=True,
                         text=True).stdout.split()
    assert py == c == [int(x) for x in cli]
    assert sorted(py) == list(range(ds.num_samples))
    if order != "none" and ds.num_samples > 10:
        ds.set_epoch(1)
        assert [i for i, _ in ds] != py


@needs_torch
@pytest.mark.parametrize("spec", ["wds", "mds"])
def test_exactly_once_ranks_workers_and_resume(fx, spec):
    B = 3
    seen, states = [], []
    for r in range(4):
        ds = pd.Dataset(os.path.join(fx, spec), shuffle="block", seed=4, rank=r, world_size=4, window=2,
                        loader_batch_size=B, return_ids=True)
        loader = torch.utils.data.DataLoader(ds, batch_size=B, num_workers=2, collate_fn=lambda b: b)
        got = [i for batch in loader for i, _ in batch]
        assert len(got) == len(ds)
        seen += got
    n = ds.num_samples
    assert sorted(seen) == list(range(n))
    # resume: every rank's loop consumed 2 batches, then 3 ranks without workers finish
    first, consumed = None, []
    for r in range(4):
        ds = pd.Dataset(os.path.join(fx, spec), shuffle="block", seed=4, rank=r, world_size=4, window=2,
                        loader_batch_size=B, return_ids=True)
        loader = torch.utils.data.DataLoader(ds, batch_size=B, num_workers=2, collate_fn=lambda b: b)
        it = iter(loader)
        for _ in range(2):
            consumed += [i for i, _ in next(it)]
        del it
        st = ds.state_dict(samples_seen=2 * B, num_workers=2)
        assert first is None or st == first  # the same state on every rank
        first = st
    rest = []
    for r in range(3):
        ds = pd.Dataset(os.path.join(fx, spec), shuffle="block", seed=4, rank=r, world_size=3, window=2,
                        return_ids=True)
        ds.load_state_dict(first)
        rest += [i for i, _ in ds]
    assert sorted(consumed + rest) == list(range(n)) and len(consumed) == 4 * 2 * B


def test_batches_and_lifetime(fx):
    ds = pd.Dataset(os.path.join(fx, "mds"), shuffle="global", seed=1, batch_size=7)
    batches = list(ds)
    assert len(batches) == len(ds) == 9
    b = batches[0]
    assert b["vec"].shape == (7, 4) and b["id"].shape == (7,) and isinstance(b["tokens"], list)
    held = [x["vec"].copy() for x in batches]
    for _ in range(2):
        list(ds)  # later reads never touch what was handed out
    assert all((x["vec"] == h).all() for x, h in zip(batches, held))
    ids = np.concatenate([x["id"] for x in batches])
    assert sorted(ids.tolist()) == list(range(60))


@needs_torch
def test_torch_format(fx):
    s = next(iter(pd.Dataset(os.path.join(fx, "mds"), shuffle="none", format="torch")))
    assert isinstance(s["tokens"], torch.Tensor) and s["tokens"].dtype == torch.int32
    assert s["text"] == "sample 0"


def test_columns_and_errors(fx, tmp_path):
    ds = pd.Dataset(os.path.join(fx, "mds"), columns=["text"], shuffle="none")
    assert list(next(iter(ds))) == ["text"]
    with pytest.raises(pagein.NotFoundError, match="nope"):
        pd.Dataset(os.path.join(fx, "mds"), columns=["nope"])
    bad = tmp_path / "cut.tar"
    with open(os.path.join(fx, "wds", "shard-00.tar"), "rb") as fh:
        bad.write_bytes(fh.read()[:700])
    with pytest.raises(pagein.FormatError, match="cut.tar"):
        pd.Dataset(str(bad))
    with pytest.raises(ValueError):
        ds.load_state_dict({"version": 1})


@needs_torch
def test_persistent_workers_see_set_epoch(fx):
    ds = pd.Dataset(os.path.join(fx, "wds"), shuffle="block", seed=2, window=2, return_ids=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True,
                                         collate_fn=lambda b: b)
    got = {}
    for e in (0, 1):
        ds.set_epoch(e)
        got[e] = [i for batch in loader for i, _ in batch]
        assert sorted(got[e]) == list(range(ds.num_samples))
    assert got[0] != got[1]
    ds2 = pd.Dataset(os.path.join(fx, "wds"), shuffle="block", seed=2, window=2, loader_batch_size=4, return_ids=True)
    ds2.set_epoch(1)
    solo = [i for i, _ in ds2]
    assert sorted(solo) == sorted(got[1])
