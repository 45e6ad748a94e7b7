"""pagein.data.Dataset over Arrow IPC written by npm apache-arrow
(tests/data/arrow/gen.mjs; committed in tests/data/arrow/fixtures): a
save_to_disk directory yields the writer's values as str and numpy arrays,
exactly once over ranks, in the same order as `pagein read-samples
--dataset`; columns= reads one field."""
import os
import subprocess

import numpy as np
import pytest

import pagein.data as pdata

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def fx():
    # the committed fixtures, shared with the C tests (tests/test_arrow.c;
    # tests/data/regen.sh writes them again)
    d = os.environ.get("PAGEIN_ARROW_FIXTURES") or os.path.join(REPO, "tests", "data", "arrow", "fixtures")
    assert os.path.isfile(os.path.join(d, "types.expected.tsv")), d + ": the committed fixtures are missing"
    return d


def expected(fx):
    """(sample id, column) -> the writer's value text (see gen.mjs)."""
    want, n, base, key = {}, {}, 0, None
    for line in open(os.path.join(fx, "ds.expected.tsv")):
        f, b, col, row, val = line.rstrip("\n").split("\t")
        if (f, b) != key:
            base += n.get(key, 0)
            key = (f, b)
        n[key] = max(n.get(key, 0), int(row) + 1)
        want[(base + int(row), col)] = val
    return want


def text(v):
    if isinstance(v, str):
        return "s:" + v.encode().hex()
    a = np.asarray(v)
    return "[" + ",".join(str(int(x)) for x in a) + "]" if a.ndim else str(int(a))


def test_save_to_disk_values_and_partition(fx):
    want = expected(fx)
    ds = os.path.join(fx, "ds")
    seen = []
    for rank in range(3):
        d = pdata.Dataset(ds, shuffle="block", seed=5, rank=rank, world_size=3, return_ids=True)
        for sid, s in d:
            seen.append(sid)
            assert sorted(s) == ["input_ids", "label", "text"]
            assert isinstance(s["text"], str)
            assert s["input_ids"].dtype == np.int32
            for col in s:
                assert text(s[col]) == want[(sid, col)], (sid, col)
    assert sorted(seen) == list(range(35))


def test_same_order_as_cli(fx):
    ds = os.path.join(fx, "ds")
    pagein = os.environ.get("PAGEIN_BUILD", os.path.join(REPO, "build")) + "/pagein"
    if not os.path.exists(pagein):
        pytest.skip("no pagein tool at " + pagein)
    for shuffle in ("block", "global", "none"):
        cli = subprocess.run([pagein, "read-samples", "--dataset", ds, "--order", shuffle, "--seed", "11", "--ids"],
                             capture_output=True, text=True, check=True).stdout.split()
        py = [sid for sid, _ in pdata.Dataset(ds, shuffle=shuffle, seed=11, return_ids=True)]
        assert py == [int(x) for x in cli], shuffle


def test_columns_and_nested(fx):
    ds = os.path.join(fx, "ds")
    rows = list(pdata.Dataset(ds, shuffle="none", columns=["input_ids"]))
    assert len(rows) == 35 and all(list(r) == ["input_ids"] for r in rows)
    assert rows[7]["input_ids"].tolist() == [700, 701]
    # a list of strings is a list of str, a struct a dict
    rows = list(pdata.Dataset(os.path.join(fx, "types.file.arrow"), shuffle="none", columns=["lstr", "st"]))
    assert len(rows) == 169
    assert all(r["lstr"] is None or all(isinstance(x, (str, type(None))) for x in r["lstr"]) for r in rows)
    assert all(r["st"] is None or set(r["st"]) == {"a", "b", "c"} for r in rows)
    assert [r["st"] is None for r in rows[:10]] == [i % 5 == 4 for i in range(10)]
