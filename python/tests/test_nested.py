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
