# pagein bench shuffle --formats: every format of the table (records,
# webdataset, mds, lines, and Arrow IPC streams the benchmark writes from the
# spec) through the pipeline beside the sequential limit and the baselines
# (torch DataLoader with one pread a sample when Debian's torch imports;
# Arrow rows read at random through a mapping); JSON and --svg.
. "$REPO/tests/cli/lib.sh"
"$PAGEIN" bench shuffle --formats --size 3M --row 8K --mmap-rows 40 --json --svg fig.svg --dir d > out.json 2> err.txt \
  || { cat err.txt; fail "bench shuffle --formats failed"; }
$PY - out.json <<'PY' || fail "bench shuffle --formats JSON"
import json, sys
r = json.load(open(sys.argv[1]))
res = r["results"]
assert all(x["ok"] for x in res), res
for f in ("records", "webdataset", "mds", "lines", "arrow"):
    modes = {x["mode"]: x for x in res if x["format"] == f}
    for m in ("sequential", "none", "block", "global"):
        assert modes[m]["samples"] == r["rows"], (f, m)
    assert modes["block"]["quality"] > 0.5 and modes["none"]["quality"] == 0, f
    try:
        import torch  # noqa: F401
        assert modes["torch-dataloader"]["samples"] == r["rows"] and modes["torch-dataloader"]["quality"] is None, f
    except ImportError:
        assert "torch-dataloader" not in modes
    assert ("mmap-random" in modes) == (f == "arrow"), f
assert [x["samples"] for x in res if x["mode"] == "mmap-random"] == [40]
PY
grep -q "mmap-random" fig.svg || fail "the figure lacks the baselines"
grep -q "arrow, local" fig.svg || fail "the figure lacks the arrow row"
# the Arrow shards are what the dataset table reads back: the records' bytes
a=$("$PAGEIN" read-samples --dataset d/arrow --order none --format jsonl | $PY -c 'import sys,json,hashlib
print(hashlib.sha256("".join(json.loads(l)["fields"]["data"]["base64"] for l in sys.stdin).encode()).hexdigest())')
b=$("$PAGEIN" read-samples --dataset d/records --record-size 8K --order none --format jsonl | $PY -c 'import sys,json,hashlib
print(hashlib.sha256("".join(json.loads(l)["fields"]["data"]["base64"] for l in sys.stdin).encode()).hexdigest())')
[ -n "$a" ] && [ "$a" = "$b" ] || fail "arrow rows differ from the records"
