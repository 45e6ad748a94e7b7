"""Nested and annotated columns through pagein.data.Dataset, against the
writers' own read-back: tests/data/nested/ holds a chat-shaped table
(messages: list<struct<role, content>>, a map, lists of lists, a decimal, a
timestamp, a date, nulls at every level) written by npm parquet-wasm (the
Rust parquet crate) and npm apache-arrow, committed with gen.mjs and each
writer's canonical read-back (bench/corpus_ref.mjs); every value of every
row must equal it."""
import importlib.util
import json
import os

import pytest

import pagein.data as pd

from conftest import REPO

HERE = os.path.join(REPO, "tests", "data", "nested")


def canon():
    spec = importlib.util.spec_from_file_location("corpus_canon", os.path.join(REPO, "bench", "corpus_pagein.py"))
    src = open(spec.origin).read().split("\nkind, path = ")[0]  # the canonical form only, not the script
    ns = {}
    exec(compile(src, spec.origin, "exec"), ns)
    return ns["canon"]


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_every_value(kind):
    c = canon()
    want = [json.loads(l) for l in open(os.path.join(HERE, "nested.%s.jsonl" % kind))]
    got = [{k: c(v) for k, v in row.items()} for row in pd.Dataset(os.path.join(HERE, "nested." + kind), shuffle="none")]
    assert len(got) == len(want) == 120
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, (i, g, w)


def test_types_and_nested_columns():
    rows = list(pd.Dataset(os.path.join(HERE, "nested.parquet"), shuffle="none",
                           columns=["messages.content", "price"]))
    assert set(rows[2]) == {"messages", "price"}
    msgs = [m for r in rows if r["messages"] for m in r["messages"] if m is not None]
    assert msgs and all(set(m) == {"content"} for m in msgs)  # only the selected member's chunk read
    import decimal
    assert all(r["price"] is None or isinstance(r["price"], decimal.Decimal) for r in rows)
    row = list(pd.Dataset(os.path.join(HERE, "nested.arrow"), shuffle="none", columns=["meta", "ts"]))[1]
    assert row["meta"] == [("k0", None)] and str(row["ts"].dtype) == "datetime64[ms]"


@pytest.mark.parametrize("name", ["types.arrows", "types.arrow"])
def test_arrow_dictionaries_decimal256_intervals_unions(name):
    """gen_types.mjs (apache-arrow): dictionary columns whose dictionaries grow
    by delta batches (a stream, and a file listing them in its footer), a
    Decimal256, YEAR_MONTH and DAY_TIME intervals, a sparse and a dense union
    (type ids 5 and 9): every value equals apache-arrow's read-back."""
    c = canon()
    want = [json.loads(l) for l in open(os.path.join(HERE, name + ".jsonl"))]
    rows = list(pd.Dataset(os.path.join(HERE, name), shuffle="none"))
    got = [{k: c(v) for k, v in row.items()} for row in rows]
    assert len(got) == len(want) == 40
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, (i, g, w)
    assert rows[1]["tag"] == "green" and rows[1]["dt"] == {"days": -47, "milliseconds": 86399}
    # only the selected columns: a dictionary column alone
    assert [r["tag"] for r in pd.Dataset(os.path.join(HERE, name), shuffle="none", columns=["tag"])] == \
        [r["tag"] for r in rows]


def test_duplicate_field_names_refused():
    """Two top-level fields of one name (Arrow C++'s golden file): a row is a
    dict keyed by name, so the Dataset refuses the rows naming both fields
    instead of dropping one; a struct with two members of one name likewise."""
    path = os.path.join(HERE, "dupnames.arrows")
    with pytest.raises(ValueError, match=r"both named"):
        list(pd.Dataset(path, shuffle="none"))
    with pytest.raises(ValueError, match=r"struct struct: members 0 and 1 are both named ''"):
        list(pd.Dataset(path, shuffle="none", columns=["struct"]))
    with pytest.raises(ValueError, match=r"ints.*names two columns \(0 and 1\)"):
        pd.Dataset(path, shuffle="none", columns=["ints"])
    from pagein.data import _duplicate_names
    with pytest.raises(pd.FormatError, match=r"x.arrow: fields 0 and 2 are both named 'ints'"):
        _duplicate_names(["x.arrow"], ["ints", "b", "ints"])


def _read(path, columns):
    ds = pd.Dataset(path, shuffle="none", columns=columns)
    rows = list(ds)
    return rows, ds.stats["bytes_read"]


def test_columns_one_rule_nested_paths():
    """columns= is one rule for every format (src/data/dscolumns.c): a
    top-level name or a dotted path through struct members selects that
    field; Parquet reads only the selected leaves' column chunks (their
    compressed sizes over the 3 row groups, `pagein inspect`: 1,880 bytes for
    messages.content, 383 for messages.role; the smallest other chunk total
    is 315, so a read of any other column would show); Arrow hands out
    only the selected members too."""
    pq = os.path.join(HERE, "nested.parquet")
    whole, b_all = _read(pq, ["messages"])
    content, b_content = _read(pq, ["messages.content"])
    role, b_role = _read(pq, ["messages.role"])
    assert 1880 <= b_content < 1880 + 315 and 383 <= b_role < 383 + 315, (b_content, b_role)
    assert 1880 + 383 <= b_all < 1880 + 383 + 315, b_all
    assert _read(pq, None)[1] == 7174  # every chunk, nothing else
    full, b_full = _read(pq, ["messages.list.item.content"])  # the full path names the same leaf
    assert full == content and b_full == b_content
    for kind, rows in (("parquet", content), ("arrow", _read(os.path.join(HERE, "nested.arrow"), ["messages.content"])[0])):
        msgs = [m for r in rows if r["messages"] for m in r["messages"] if m is not None]
        assert msgs and all(set(m) == {"content"} for m in msgs), kind
        assert [set(r) for r in rows] == [{"messages"}] * 120, kind
    arrow_whole = _read(os.path.join(HERE, "nested.arrow"), ["messages", "messages.content"])[0]
    assert [r["messages"] for r in arrow_whole] == [r["messages"] for r in whole]  # the whole field named wins


@pytest.mark.parametrize("path,name,listed", [
    ("nested.parquet", "messages.nope", "messages.role, messages.content"),
    ("nested.arrow", "messages.nope", "messages, messages.role, messages.content"),
    ("types.arrows", "nope", "tag, small, d256"),
])
def test_columns_unknown_name_lists_the_available(path, name, listed):
    with pytest.raises(pd.Error, match=r"field '%s': no such column \(the shard has: [^)]*%s" % (name, listed)):
        list(pd.Dataset(os.path.join(HERE, path), shuffle="none", columns=[name]))


def test_columns_flat_formats(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"a": 1}\n{"a": 2}\n')
    assert len(list(pd.Dataset(str(p), shuffle="none", columns=["text"]))) == 2
    with pytest.raises(pd.Error, match=r"field 'a': no such column \(the shard has: text\)"):
        list(pd.Dataset(str(p), shuffle="none", columns=["a"]))
    r = tmp_path / "r.bin"
    r.write_bytes(bytes(64))
    with pytest.raises(pd.Error, match=r"no such column \(the shard has: data\)"):
        list(pd.Dataset(str(r), record_size=16, columns=["x"]))


@pytest.mark.parametrize("name", ["chat.parquet", "map.parquet"])
def test_duckdb_written_parquet(name):
    """tests/data/duckdb/gen.mjs: DuckDB's COPY ... TO 'x.parquet' of a
    chat-shaped list<struct<role, content>> and of maps (map<varchar, int>,
    map<int, list<varchar>>), nulls and empties at every level: every value
    equals DuckDB's own read-back of the file."""
    c = canon()
    path = os.path.join(REPO, "tests", "data", "duckdb", name)
    want = [json.loads(l) for l in open(path + ".jsonl")]
    got = [{k: c(v) for k, v in row.items()} for row in pd.Dataset(path, shuffle="none")]
    assert len(got) == len(want) == 120
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, (i, g, w)



def test_chat_block_shuffle_exactly_once(monkeypatch):
    """DuckDB's chat.parquet (3 row groups) block-shuffled over 2 ranks x 2
    DataLoader workers: every row exactly once, each with its own value."""
    c = canon()
    path = os.path.join(REPO, "tests", "data", "duckdb", "chat.parquet")
    want = [json.loads(l) for l in open(path + ".jsonl")]
    seen = []
    for rank in range(2):
        for worker in range(2):
            ds = pd.Dataset(path, shuffle="block", seed=3, rank=rank, world_size=2, return_ids=True)
            monkeypatch.setattr(pd, "_worker", lambda w=worker: (w, 2))
            for i, row in iter(ds):
                assert {k: c(v) for k, v in row.items()} == want[int(i)], int(i)
                seen.append(int(i))
    assert sorted(seen) == list(range(120)) and seen != list(range(120))
