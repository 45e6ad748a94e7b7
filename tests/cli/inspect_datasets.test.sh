# pagein inspect on training data: a shard of every dataset format (Arrow
# from npm apache-arrow, WebDataset tar and MDS and JSONL(.gz/.zst) and
# Megatron from tests/dataformats_gen.py) and a folder of shards as a whole
# (a datasets save_to_disk folder, an MDS folder, a folder of tars): schema,
# samples, groups, codecs and the index cost, as text and --json, and the
# counts agree with what read-samples --dataset reads.
. "$REPO/tests/cli/lib.sh"
cd "$TMP"
$PY "$REPO/tests/dataformats_gen.py" fx > /dev/null || fail "fixtures"
# check SPEC FORMAT CODECS FIELDS: inspect --json agrees with read-samples
check() {
  local spec=$1 fmt=$2 codecs=$3 fields=$4 n j
  n=$("$PAGEIN" read-samples --dataset "$spec" --check | cut -d' ' -f1) || fail "$spec: read-samples --check"
  j=$("$PAGEIN" inspect --json "$spec") || fail "inspect --json $spec: $j"
  $PY - "$j" "$n" "$fmt" "$codecs" "$fields" <<'PYEOF' || fail "inspect --json $spec: $j"
import json, sys
d = json.loads(sys.argv[1]); n = int(sys.argv[2])
ds = d["dataset"]
assert d["kind"] == "dataset", d
assert ds["samples"] == n, (ds["samples"], n)
assert ds["formats"] == [sys.argv[3]], ds["formats"]
assert sorted({f["codec"] for f in ds["files"]}) == sorted(sys.argv[4].split(",")), ds["files"]
assert [c["name"] for c in ds["schema"]] == sys.argv[5].split(","), ds["schema"]
assert ds["shards"] == len(ds["files"]) and sum(f["samples"] for f in ds["files"]) == n
assert ds["groups"] == sum(f["groups"] for f in ds["files"]) and ds["groups"] >= 1
assert 1 <= ds["group_samples"]["min"] <= ds["group_samples"]["max"]
assert ds["bytes"] == sum(f["bytes"] for f in ds["files"])
assert sys.argv[3] in ds["index"] and d["open"]["seconds"] >= 0
assert d["open"]["read_bytes"] is None or d["open"]["read_bytes"] > 0
PYEOF
  expect_exit 0 "$PAGEIN" inspect "$spec"
  expect_contains "samples:   $n"
  expect_contains "schema:"
  expect_contains "index:     $fmt:"
}
check fx/wds webdataset none __key__,txt,cls,bin
check fx/wds/shard-01.tar webdataset none __key__,txt,cls,bin
check fx/mds mds none,zstd id,label,raw,text,tokens,vec
check fx/mds/index.json mds none,zstd id,label,raw,text,tokens,vec
check fx/lines/a.jsonl lines none text
check fx/lines/c.jsonl.gz lines gzip text
check fx/lines/d.jsonl.zst lines zstd text
check fx/mega/m.idx megatron none tokens
check fx/mega/m.bin megatron none tokens
# the MDS folder's schema, as text: tokens vary per sample, vec is [4]
expect_exit 0 "$PAGEIN" inspect fx/mds
echo "$OUT_TXT" | grep -qE '^  tokens +int32 +\[\*\]' || fail "tokens not int32 [*]: $OUT_TXT"
echo "$OUT_TXT" | grep -qE '^  vec +float32 +\[4\]' || fail "vec not float32 [4]: $OUT_TXT"
# a folder of many shards lists 64 of them, --full every one
mkdir many
for i in $(seq -w 0 69); do printf '{"text": "%s"}\n' "$i" > many/s$i.jsonl; done
J=$("$PAGEIN" inspect --json many) || fail "many: $J"
$PY -c "import json,sys; f=json.loads(sys.argv[1])['dataset']['files']; assert len(f) == 65 and f[-1] == {'...truncated': {'count': 70, 'shown': 64}}" "$J" \
  || fail "many: not cut at 64: $J"
J=$("$PAGEIN" inspect --json --full many) || fail "many --full: $J"
$PY -c "import json,sys; d=json.loads(sys.argv[1]); assert len(d['dataset']['files']) == 70 and d['dataset']['samples'] == 70" "$J" \
  || fail "--full lists every shard: $J"
expect_exit 0 "$PAGEIN" inspect many
expect_contains "... 6 more shards"
# a model folder still points at plan; a file of no format says both
"$PAGEIN" make-sample m.safetensors --layers 1 --hidden 64 -q || fail "make-sample"
mkdir model && cp m.safetensors model/ && echo "x" > model/merges.txt
expect_exit 2 "$PAGEIN" inspect model
expect_contains "pagein plan model"
head -c 300 /dev/urandom > junk.bin
expect_exit 1 "$PAGEIN" inspect junk.bin
expect_contains "not a model file"
expect_contains "nor a training-data shard"
# a model file is still a model
expect_exit 0 "$PAGEIN" inspect m.safetensors
expect_contains "model.embed_tokens.weight"

# ---- Arrow: a datasets save_to_disk folder and its files (npm apache-arrow) ----
AF=$REPO/tests/data/arrow/fixtures # committed (tests/data/regen.sh)
check "$AF/ds" arrow none text,input_ids,label
check "$AF/ds/data-00000-of-00002.arrow" arrow none text,input_ids,label
J=$("$PAGEIN" inspect --json "$AF/ds") || fail "ds"
$PY -c "
import json,sys; d=json.loads(sys.argv[1])['dataset']
assert d['shards'] == 2 and [c['type'] for c in d['schema']] == ['utf8', 'int32', 'int64'], d
assert d['schema'][1]['shape'] == [None], d['schema']" "$J" || fail "ds schema: $J"
echo ok
