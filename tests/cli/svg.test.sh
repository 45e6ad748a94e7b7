# --svg of the bench commands and of resident: every figure renders with a
# real renderer (librsvg's rsvg-convert) into a non-empty PNG, and every
# number drawn (text of class "value", keyed by data-key) matches the JSON
# printed by the same run. A file name with XML's special characters checks
# the escaping; an unwritable --svg fails naming the file and leaves nothing.
. "$REPO/tests/cli/lib.sh"
command -v rsvg-convert > /dev/null || { echo "rsvg-convert missing (Debian librsvg2-bin; scripts/deps.sh test)"; exit 77; }

# check_svg SVG JSON KIND: renders SVG, compares its values with JSON
check_svg() {
  rsvg-convert -o "$1.png" "$1" 2> "$1.err" || fail "rsvg-convert $1: $(cat "$1.err")"
  $PY - "$1" "$2" "$3" "$1.png" <<'PY' || fail "$1 against $2"
import json, sys, xml.etree.ElementTree as ET
svg, js, kind, png = sys.argv[1:5]
p = open(png, "rb").read()
assert p[:8] == b"\x89PNG\r\n\x1a\n" and len(p) > 2000, "not a PNG, or empty: %d bytes" % len(p)
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(svg).getroot()
vals = {}
for t in root.iter(ns + "text"):
    if t.get("class") == "value":
        vals[t.get("data-key")] = t.text
d = json.load(open(js))
want = {}  # key -> (number, tolerance)
if kind == "load":  # cold runs where there are any (warm ones would dwarf the device limit)
    cold = any(r["cache"] == "cold" for r in d["runs"])
    for r in d["runs"]:
        if r["ok"] and r["gbps"] is not None and (r["cache"] == "cold") == cold:
            want["%s/%s" % (r["strategy"], r["cache"])] = (r["gbps"], 0.0051)
    if d.get("device_limit_gbps"):
        want["device_limit"] = (d["device_limit_gbps"], 0.0051)
elif kind == "shuffle":
    for m in d["modes"]:
        if m["ok"]:
            v = d["rows"] / m["seconds"]
            want["%s/%s" % (m["mode"], m["fs"])] = (v, max(1.0, 2e-3 * v))
elif kind == "share":
    for s in d["strategies"]:
        want["%s/" % s["strategy"]] = (s["pss_sum_over_model"], 0.0051)
    want["one_copy"] = (1.0, 0.0051)
elif kind == "gpu":
    for r in d["rows"]:
        if r["ok"]:
            want["%s/%s" % (r["name"], r["cache"])] = (r["gbps"], 0.0051)
elif kind == "resident":
    for l in d["layers"]:
        want["layer/%d" % l["layer"]] = (100.0 * l["resident_bytes"] / l["bytes"] if l["bytes"] else 0.0, 0.051)
elif kind == "remote":
    for k, v in d["MB_per_s"].items():
        if v is not None:
            want["%s/MB_per_s" % k] = (v, 0.051)
assert want, "the JSON has no figure"
for k, (v, tol) in want.items():
    assert k in vals, "%s: not in the picture (it has %s)" % (k, sorted(vals))
    got = float(vals[k].rstrip("%"))
    assert abs(got - v) <= tol, "%s: picture %s, JSON %s" % (k, vals[k], v)
extra = set(vals) - set(want)
assert not extra, "numbers in the picture that the JSON lacks: %s" % sorted(extra)
print("%s: %d numbers match" % (svg, len(want)))
PY
}

M="$TMP/m&<x>'s.safetensors"
"$PAGEIN" make-sample "$M" --size 8M -q || fail "make-sample"

"$PAGEIN" bench load "$M" --runs 1 --no-pipeline --no-fio -q --only lazy,populate,read --json --svg load.svg > load.json \
  || fail "bench load --svg: $(cat load.json)"
check_svg load.svg load.json load
grep -q "m&amp;&lt;x&gt;&#39;s.safetensors" load.svg || fail "the title is not escaped: $(grep -m1 '<title>' load.svg)"
"$PAGEIN" bench load "$M" --runs 1 --no-pipeline --no-fio -q --only lazy,read --cache warm --json --svg warm.svg \
  > warm.json || fail "bench load --cache warm --svg"
check_svg warm.svg warm.json load  # warm only: the warm bars
grep -q 'data-key="read/warm"' warm.svg || fail "no warm bar in warm.svg"

"$PAGEIN" bench shuffle --dir "$TMP/d" --size 2M --block-size 256K --json --svg shuffle.svg > shuffle.json \
  || fail "bench shuffle --svg"
check_svg shuffle.svg shuffle.json shuffle
# a log axis: every bar's height is a + b log10(value), one line for all
$PY - shuffle.svg <<'PY' || fail "shuffle.svg: the bars are not on a log axis"
import math, re, sys
s = open(sys.argv[1]).read()
assert "(log scale)" in s, "no log-scale axis title"
bars = [(float(h), float(v)) for h, v in re.findall(r'height="([0-9.]+)" fill="#[0-9a-f]+"><title>[^<]*: ([0-9.]+) samples/s', s)]
assert len(bars) >= 3, bars
(h0, v0), (h1, v1) = min(bars, key=lambda b: b[1]), max(bars, key=lambda b: b[1])
if v1 > v0 * 1.01:
    k = (h1 - h0) / (math.log10(v1) - math.log10(v0))
    for h, v in bars:
        assert abs(h0 + k * (math.log10(v) - math.log10(v0)) - h) < 0.6, (h, v, bars)
PY

"$PAGEIN" bench share "$M" --workers 2 --json --svg share.svg > share.json || fail "bench share --svg"
check_svg share.svg share.json share

# bench gpu: the pagein-host row runs without a GPU; the GPU rows are drawn as "-"
"$PAGEIN" bench gpu "$M" --runs 1 --cache cold --no-python --no-fio -q --json --svg gpu.svg > gpu.json \
  || fail "bench gpu --svg: $(cat gpu.json)"
check_svg gpu.svg gpu.json gpu

# resident: everything warm but layers 2-3 (warming a few layers of a small
# file would read the rest ahead)
sync "$M"  # freshly written pages are dirty: written back first, or evict cannot drop them
"$PAGEIN" warm "$M" -q || fail "warm"
"$PAGEIN" evict "$M" --layers 2-3 -q || fail "evict"
"$PAGEIN" resident "$M" --json --svg res.svg > res.json || fail "resident --svg"
check_svg res.svg res.json resident
# labels: a "layer" heading over the row labels and the columns headed by
# layer 0's tensor names without "model.layers.0." (as resident --tensors lists them)
"$PAGEIN" resident "$M" --json --tensors 'layers\.0\.' > t0.json || fail "resident --tensors"
$PY - res.svg t0.json <<'PY' || fail "res.svg: tensor and layer labels"
import json, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
texts = list(ET.parse(sys.argv[1]).getroot().iter(ns + "text"))
cols = [t.text for t in texts if t.get("class") == "collabel"]
names = [t["name"] for t in json.load(open(sys.argv[2]))["tensors"]]
want = [n.split("model.layers.0.", 1)[1] for n in names]
assert sorted(cols) == sorted(want) and len(cols) == len(want), (cols, want)
rows = [t.text for t in texts if t.get("class") == "row"]
assert rows[0] == "embed" and rows[-1] == "head" and "0" in rows and "3" in rows, rows
assert any(t.get("class") == "rowtitle" and t.text == "layer" for t in texts)
PY
$PY - res.json <<'PY' || fail "resident: layers 0-1 should be resident, 2 not"
import json, sys
d = {l["layer"]: l for l in json.load(open(sys.argv[1]))["layers"]}
assert d[0]["resident_bytes"] == d[0]["bytes"] and d[1]["resident_bytes"] == d[1]["bytes"], d
assert d[2]["resident_bytes"] < d[2]["bytes"] and d[3]["resident_bytes"] < d[3]["bytes"], d[2]
PY
# without --svg the output is the same command's (residency itself may move
# between two runs: the machine's memory pressure, so the layout is compared)
"$PAGEIN" resident "$M" --json > res2.json || fail "resident"
$PY - res.json res2.json <<'PY' || fail "resident --svg changed the JSON"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
shape = lambda d: (sorted(d), [(l["layer"], l["bytes"]) for l in d["layers"]], [(f["path"], f["bytes"]) for f in d["files"]])
assert shape(a) == shape(b), (shape(a), shape(b))
PY

# errors: a figure that cannot be written names the file and leaves nothing
expect_exit 2 "$PAGEIN" bench share "$M" --workers 1 --svg "$TMP/no/such/dir/x.svg"
expect_contains "no/such/dir/x.svg"
expect_exit 2 "$PAGEIN" resident "$M" --svg "$TMP/no/such/dir/r.svg"
expect_contains "no/such/dir/r.svg"
expect_exit 2 "$PAGEIN" resident "$TMP/d" --svg "$TMP/notamodel.svg"
expect_contains "no model"
[ ! -e "$TMP/notamodel.svg" ] || fail "a figure was left for a directory without models"
ls "$TMP"/no 2>/dev/null && fail "a partial figure was left"

# bench remote (QUICK: 16 MiB, one run of each tool, cat_ranges of 50
# ranges): needs nginx and the remote test servers; pull's throughput over
# time and every tool's mean. This is also make test's run of
# bench/remote.sh, so that it cannot rot: pull must have run, and nothing
# is written into HOME (a fresh one here).
if command -v nginx > /dev/null || [ -x /usr/sbin/nginx ]; then
  mkdir -p "$TMP/rhome"
  HOME=$TMP/rhome QUICK=1 PAGEIN_REPO="$REPO" "$PAGEIN" bench remote --json --svg remote.svg > remote.json 2> remote.err \
    || fail "bench remote --svg: $(tail -3 remote.err)"
  grep -q '"pull": [0-9]' remote.json || fail "bench remote: pull did not run: $(head -c 600 remote.json)"
  left=$(cd "$TMP/rhome" && find . -mindepth 1 | head -3)
  [ -z "$left" ] || fail "bench remote wrote into HOME: $left"
  check_svg remote.svg remote.json remote
  grep -q "<polyline" remote.svg || fail "no throughput line in remote.svg"
else
  echo "bench remote --svg: skipped (nginx missing)"
fi
echo ok
