# pagein read-samples --dataset: every format of the dataset-format table
# through the one pipeline; exactly once over 4 ranks x 2 workers; the CLI
# order equals the library's (Python checks its side in test_dataformats.py);
# resume onto another world size; malformed shards exit 1 naming the file.
. "$REPO/tests/cli/lib.sh"
$PY "$REPO/tests/dataformats_gen.py" fx || fail "fixtures"
expect_exit 0 "$PAGEIN" read-samples --help
expect_contains "--dataset SPEC"
for spec in fx/wds fx/mds fx/lines 'fx/wds/shard-{00..03}.tar' fx/wds-gz.tar.gz; do
  n=$("$PAGEIN" read-samples --dataset "$spec" --check | cut -d' ' -f1) || fail "$spec: check"
  [ "$n" -gt 0 ] || fail "$spec: no samples"
  for order in none block global; do
    : > all.$order
    for r in 0 1 2 3; do for w in 0 1; do
      "$PAGEIN" read-samples --dataset "$spec" --order $order --seed 7 --window 2 \
        --rank $r --world 4 --worker $w --workers 2 --batch-size 3 --ids >> all.$order || fail "$spec $order r$r w$w"
    done; done
    [ "$(wc -l < all.$order)" = "$n" ] || fail "$spec $order: $(wc -l < all.$order) ids, expected $n"
    [ "$(sort -n all.$order | uniq | wc -l)" = "$n" ] || fail "$spec $order: duplicate ids"
    "$PAGEIN" read-samples --dataset "$spec" --order $order --seed 7 --window 2 --ids > one.$order
    "$PAGEIN" read-samples --dataset "$spec" --order $order --seed 7 --window 2 --ids > again.$order
    cmp -s one.$order again.$order || fail "$spec $order: same seed, another order"
  done
done
# jsonl: typed fields
"$PAGEIN" read-samples --dataset fx/mds --order none --format jsonl --limit 3 > m.jsonl || fail "jsonl"
$PY - m.jsonl <<'PY' || fail "mds jsonl content"
import base64, json, struct, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["id"] for r in rows] == [0, 1, 2], rows
for r in rows:
    f = r["fields"]; i = r["id"]
    assert base64.b64decode(f["text"]["base64"]) == b"sample %d" % i and f["text"]["type"] == "utf8"
    assert f["tokens"]["type"] == "int32" and f["tokens"]["shape"] == [i % 9 + 1]
    assert struct.unpack("<q", base64.b64decode(f["id"]["base64"]))[0] == i
PY
# columns=
"$PAGEIN" read-samples --dataset fx/mds --columns text --format jsonl --limit 1 > c.jsonl || fail "columns"
grep -q '"text"' c.jsonl && ! grep -q '"tokens"' c.jsonl || fail "columns: $(cat c.jsonl)"
expect_exit 1 "$PAGEIN" read-samples --dataset fx/mds --columns nope --check
expect_contains "nope"
# resume: 4 ranks x 2 workers consumed 6 samples each, then 3 ranks finish the epoch
for order in block global; do
  st=$("$PAGEIN" read-samples --dataset fx/wds --order $order --seed 3 --world 4 --workers 2 --batch-size 2 --state-after 6) || fail "state"
  case "$st" in pagein-pipe/2*) ;; *) fail "state: $st";; esac
  : > rest
  for r in 0 1 2; do
    "$PAGEIN" read-samples --dataset fx/wds --order $order --seed 3 --world 3 --rank $r --state "$st" --ids >> rest || fail "resume r$r"
  done
  [ "$(wc -l < rest)" = $((200 - 4 * 6)) ] || fail "resume $order: $(wc -l < rest) ids"
  [ "$(sort -n rest | uniq | wc -l)" = $((200 - 4 * 6)) ] || fail "resume $order: duplicates"
  expect_exit 1 "$PAGEIN" read-samples --dataset fx/wds --order $order --seed 4 --state "$st" --ids
  expect_contains "seed"
done
# JSON summary
"$PAGEIN" read-samples --dataset fx/wds --order block --json > j.json || fail "json"
$PY - j.json <<'PY' || fail "json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "webdataset" and d["samples"] == 200 and sorted(d["ids"]) == list(range(200)), d
assert d["groups"] >= 5 and d["bytes_read"] > 0 and 0 < d["quality"] <= 1.1, d
PY
# malformed: exit 1, the file named
head -c 700 fx/wds/shard-00.tar > cut.tar
expect_exit 1 "$PAGEIN" read-samples --dataset cut.tar --check
expect_contains "cut.tar"
printf '{"shards": [{"format": "mds", "samples": 1, "raw_data": {"basename": "../x", "bytes": 1}}], "version": 2}' > idx.json
mkdir bad && mv idx.json bad/index.json
expect_exit 1 "$PAGEIN" read-samples --dataset bad --check
expect_contains "basename"
exit 0
