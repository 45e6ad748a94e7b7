"""pagein.data.Dataset on Parquet files written by npm parquet-wasm (the Rust
parquet crate) from npm apache-arrow tables (tests/data/parquet/gen.mjs,
committed in tests/data/parquet/fixtures): rows as dicts with
lists as numpy arrays and strings as str, every value checked against the
writer's JSON; structs as dicts, lists of strings as lists; columns= on
top-level and nested fields; exactly once over ranks; refusals named."""
import json
import os

import numpy as np
import pytest

import pagein
import pagein.data as pd

from conftest import REPO


@pytest.fixture(scope="module")
def fx():
    # committed (tests/data/regen.sh writes them again)
    d = os.environ.get("PAGEIN_PQ_FIXTURES") or os.path.join(REPO, "tests", "data", "parquet", "fixtures")
    with open(os.path.join(d, "expected.json")) as f:
        return d, json.load(f)["columns"]


def utf8hex(s):
    return s.encode("utf-8").hex()


@pytest.mark.parametrize("name", ["small_groups", "snappy_v2_dict", "encodings_v1", "lz4_raw_v1_plain"])
def test_values(fx, name):
    d, exp = fx
    ds = pd.Dataset(os.path.join(d, name + ".parquet"), columns=["i32", "tok", "s", "st", "f64", "b"],
                    shuffle="block", seed=3, return_ids=True)
    assert isinstance(ds, pd.ShardDataset) and ds.formats == ["parquet"] and len(ds) == 1000
    seen = set()
    for i, row in ds:
        i = int(i)
        seen.add(i)
        assert set(row) == {"i32", "tok", "s", "st", "f64", "b"}
        want = exp["i32"][i]
        assert (row["i32"] is None) if want is None else int(row["i32"]) == int(want)
        assert isinstance(row["tok"], np.ndarray) and row["tok"].dtype == np.int32
        assert row["tok"].tolist() == [int(x) for x in exp["tok"][i]]
        want = exp["s"][i]
        assert (row["s"] is None) if want is None else (isinstance(row["s"], str) and utf8hex(row["s"]) == want)
        st = row["st"]
        assert st is None or set(st) == {"a", "b"}
        want = exp["st.b"][i]
        assert (st is None or st["b"] is None) if want is None else utf8hex(st["b"]) == want
        want = exp["st.a"][i]
        assert (st is None or st["a"] is None) if want is None else st["a"] == int(want)
        want = exp["f64"][i]
        assert (row["f64"] is None) if want is None else \
            "0x%016x" % np.float64(row["f64"]).view(np.uint64) == want
        want = exp["b"][i]
        assert (row["b"] is None) if want is None else bool(row["b"]) == (want == "true")
    assert seen == set(range(1000))


def test_ranks_exactly_once(fx):
    d, _ = fx
    got = []
    for r in range(4):
        ds = pd.Dataset(os.path.join(d, "small_groups.parquet"), columns=["tok"], shuffle="block", seed=9,
                        rank=r, world_size=4, window=3, return_ids=True)
        got += [int(i) for i, _ in ds]
    assert sorted(got) == list(range(1000))


def test_nested_lists_and_members(fx):
    d, exp = fx
    ds = pd.Dataset(os.path.join(d, "small_groups.parquet"), columns=["tags", "ids", "st.b"], shuffle="none")
    for i, row in enumerate(ds):
        assert set(row) == {"tags", "ids", "st"}
        assert [utf8hex(t) for t in row["tags"]] == exp["tags"][i]
        want = exp["ids"][i]
        got = row["ids"]
        if want is None:
            assert got is None
        else:
            got = got.tolist() if isinstance(got, np.ndarray) else got
            assert [None if x is None else int(x) for x in got] == [None if x is None else int(x) for x in want]
        # only the selected member of the struct
        assert row["st"] is None or set(row["st"]) == {"b"}


def test_refusals(fx):
    d, _ = fx
    with pytest.raises(Exception) as e:
        list(pd.Dataset(os.path.join(d, "small_groups.parquet"), columns=["nope"]))
    assert "nope" in str(e.value)


def test_detected_by_content(fx, tmp_path):
    # no suffix to go by: the C table's detection reads the PAR1 magic
    d, _ = fx
    p = tmp_path / "shard.data"
    p.write_bytes(open(os.path.join(d, "small_groups.parquet"), "rb").read())
    import pagein._pagein as _p
    assert _p.dataset_detect(str(p)) == ("parquet", 2)
    ds = pd.Dataset(str(p), columns=["i32"])
    assert isinstance(ds, pd.ShardDataset) and len(ds) == 1000
