# pagein read-samples --dataset on Arrow IPC written by npm apache-arrow
# (tests/data/arrow/gen.mjs): a save_to_disk directory in every order, over
# ranks and workers, values against the writer's, columns=, compressed
# bodies, refusals naming the column and file; then the same shard over
# HTTP (nginx on 127.0.0.1) giving the same samples.
. "$REPO/tests/cli/lib.sh"
# the committed fixtures, shared with the unit tests (tests/data/regen.sh)
FX=$REPO/tests/data/arrow/fixtures
ln -s "$FX" fx

for o in none block global; do
  "$PAGEIN" read-samples --dataset fx/ds --order $o --seed 3 --ids > ids.$o || fail "order $o"
  [ "$(sort -n ids.$o | uniq | wc -l)" = 35 ] && [ "$(wc -l < ids.$o)" = 35 ] || fail "order $o: not 35 distinct ids"
  # 2 ranks x 2 workers: every sample once
  for r in 0 1; do for w in 0 1; do
    "$PAGEIN" read-samples --dataset fx/ds --order $o --seed 3 --rank $r --world 2 --worker $w --workers 2 --ids
  done; done > part.$o || fail "order $o: parts"
  [ "$(sort -n part.$o | uniq | wc -l)" = 35 ] && [ "$(wc -l < part.$o)" = 35 ] || fail "order $o: parts not exactly once"
done
seq 0 34 | cmp -s - ids.none || fail "order none is not 0..34"
cmp -s ids.none ids.global && fail "global order is the identity"

# values: what the writer was given (ds.expected.tsv), read back through the CLI
"$PAGEIN" read-samples --dataset fx/ds --order global --seed 9 --format jsonl > all.jsonl || fail "jsonl"
"$PAGEIN" read-samples --dataset fx/ds --order none --format jsonl --columns input_ids > ids.jsonl || fail "jsonl columns"
$PY - fx/ds.expected.tsv all.jsonl ids.jsonl <<'PY' || fail "values differ from the writer's"
import base64, json, struct, sys
want, n = {}, {}
base, key = 0, None
for line in open(sys.argv[1]):
    f, b, col, row, val = line.rstrip("\n").split("\t")
    if (f, b) != key:
        base += n.get(key, 0); key = (f, b)
    n[key] = max(n.get(key, 0), int(row) + 1)
    want[(base + int(row), col)] = val
def text(fld):
    raw = base64.b64decode(fld["base64"])
    if fld["type"] == "utf8": return "s:" + raw.hex()
    w = {"int32": 4, "int64": 8}[fld["type"]]
    vals = [struct.unpack_from("<" + ("i" if w == 4 else "q"), raw, i)[0] for i in range(0, len(raw), w)]
    return "[" + ",".join(map(str, vals)) + "]" if fld["shape"] else str(vals[0])
seen = set()
for line in open(sys.argv[2]):
    s = json.loads(line); seen.add(s["id"])
    assert sorted(s["fields"]) == ["input_ids", "label", "text"], s
    for col, fld in s["fields"].items():
        assert text(fld) == want[(s["id"], col)], (s["id"], col, text(fld), want[(s["id"], col)])
assert seen == set(range(35)), seen
for line in open(sys.argv[3]):
    s = json.loads(line)
    assert list(s["fields"]) == ["input_ids"], s
    assert text(s["fields"]["input_ids"]) == want[(s["id"], "input_ids")]
PY

# compressed bodies (LZ4 frame, ZSTD), stream and file
for f in types.lz4.stream types.zstd.file types.stream types.file; do
  expect_exit 0 "$PAGEIN" read-samples --dataset fx/$f.arrow --columns i8,s,ll,st,f64 --check
done
# a list with a null element is a nested value (a list of items, null among them);
# a list of strings likewise
"$PAGEIN" read-samples --dataset fx/types.zstd.stream.arrow --columns li --order none --format jsonl > li.jsonl 2> li.err \
  || fail "a list with a null element was not read: $(cat li.err)"
grep -q '"li": {"type": "list", "items": \[.*null\]}' li.jsonl || fail "no list value with a null element: $(head -c 400 li.jsonl)"
expect_exit 0 "$PAGEIN" read-samples --dataset fx/types.file.arrow --columns lstr --order none --format jsonl --limit 3
expect_contains '"type": "utf8"'
# a dictionary-encoded column reads as its values ("green")
expect_exit 0 "$PAGEIN" read-samples --dataset fx/dict.stream.arrow --order none --format jsonl
expect_contains '"base64": "Z3JlZW4="'
# refusals: a truncated shard, a writer's wrong declared length
head -c 1500 fx/ds/data-00000-of-00002.arrow > cut.arrow
expect_exit 1 "$PAGEIN" read-samples --dataset cut.arrow --check
expect_contains "cut.arrow"
expect_exit 1 "$PAGEIN" read-samples --dataset fx/types.lz4js.stream.arrow --columns i8 --check
expect_contains "declared"

# bench/bench_arrow runs once on the fixtures so it does not rot (not timed)
B=$(dirname "$PAGEIN")/bench/bench_arrow
if [ -x "$B" ]; then
  "$B" decode fx/types.zstd.file.arrow --iters 1 --json > dec.json || fail "bench_arrow decode"
  "$B" mmap-random fx/ds/data-00000-of-00002.arrow --rows 50 --json > mm.json || fail "bench_arrow mmap-random"
  "$B" pipe fx/ds/data-00000-of-00002.arrow --order global --json > pipe.json || fail "bench_arrow pipe"
  $PY -c "import json; d=json.load(open('dec.json')); assert d['rows']==169 and d['cells']==169*25, d
m=json.load(open('mm.json')); assert m['rows']==50, m
p=json.load(open('pipe.json')); assert p['rows']==23 and p['bytes_read']>0, p" || fail "bench_arrow output"
fi

# the same shard over HTTP: the same samples in the same order
D=$TMP/srv
mkdir -p "$D/www"
cp fx/ds/data-00000-of-00002.arrow "$D/www/"
start_servers "$D" nginx
export CURL_CA_BUNDLE=$CA PAGEIN_HTTP_RETRIES=0 HOME=$TMP
"$PAGEIN" read-samples --dataset fx/ds/data-00000-of-00002.arrow --order block --seed 4 --format jsonl > local.jsonl || fail "local shard"
"$PAGEIN" read-samples --dataset "$HTTP/files/data-00000-of-00002.arrow" --order block --seed 4 --format jsonl > http.jsonl 2> http.err \
  || fail "over HTTP: $(cat http.err)"
[ "$(wc -l < http.jsonl)" = 23 ] || fail "over HTTP: $(wc -l < http.jsonl) samples"
cmp -s local.jsonl http.jsonl || fail "over HTTP: different samples"
exit 0
