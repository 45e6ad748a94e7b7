# remote_plan.test.sh - `pagein plan URL` against real servers on 127.0.0.1
# (nginx, s3rver; tests/remote/servers.sh): a remote model opens from its
# headers only (strategy lazy over unmapped sources), so planning a sharded
# index costs the index plus one request per shard (two when a header is
# larger than the first request's 256 KiB), counted in nginx's access log,
# over plain HTTP and the Hub's layout; the output lists the shards and
# layers and says auto reads a remote model.
. "$REPO/tests/cli/lib.sh"
set -u

need_curl

D=$TMP/srv
mkdir -p "$D/www/hf/org/shard" "$D/www/hf/org/bighdr" "$D/s3"
N=3
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/sharded" $N 300000            # 2.4 MB shards, small headers
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/bighdr" $N 300000 400000      # headers of ~400 KB
cp "$D/www/sharded/"* "$D/www/hf/org/shard/"
cp "$D/www/bighdr/"* "$D/www/hf/org/bighdr/"
cp -r "$D/www/sharded" "$D/s3/sharded"
cp "$TESTDATA/gguf/llama-2-tiny-random.gguf" "$D/www/"

start_servers "$D" nginx s3
export CURL_CA_BUNDLE=$CA PAGEIN_HTTP_RETRIES=0 AWS_ENDPOINT_URL=$S3 HF_ENDPOINT=$HTTP HOME=$TMP
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_PROFILE
log=$D/logs/nginx-access.log

# plan_reqs URL [ARGS]: runs plan (exit 0 expected), leaves its output in
# $OUT_TXT and the access-log lines it caused in $REQS
plan_reqs() {
  local before; before=$(wc -l < "$log")
  expect_exit 0 "$PAGEIN" plan "$@"
  log_settle "$log" "$HTTP"   # nginx writes the log line after the response
  REQS=$(tail -n +$((before + 1)) "$log" | grep -v log-settle-)
}
count() { [ -z "$REQS" ] && echo 0 || echo "$REQS" | grep -c -- "$1"; }

# plain HTTP: the index + one request per shard (headers fit in 256 KiB)
plan_reqs "$HTTP/files/sharded/model.safetensors.index.json"
expect_contains "in 3 files, 6 tensors, 3 layers (0-2)"
expect_contains "file 2: $HTTP/files/sharded/model-00003-of-00003.safetensors"
expect_contains "layer 2 "
expect_contains "strategy: read"
expect_contains "not a local file"
n=$(echo "$REQS" | wc -l)
[ "$n" = $((1 + N)) ] || fail "plan of a $N-shard index over HTTP: $n requests, want $((1 + N)): $REQS"
[ "$(count 'index.json HTTP/1.1" 206')" = 1 ] || fail "index fetched other than once: $REQS"
for i in 1 2 3; do
  [ "$(count "model-0000$i-of-00003.safetensors HTTP")" = 1 ] || fail "shard $i: not one request: $REQS"
done

# headers larger than the first request: two requests per shard
plan_reqs "$HTTP/files/bighdr/model.safetensors.index.json" --json
expect_contains '"tensors": 6, "layers": 3'
n=$(echo "$REQS" | wc -l)
[ "$n" = $((1 + 2 * N)) ] || fail "plan of $N shards with 400 KB headers: $n requests, want $((1 + 2 * N)): $REQS"

# a single remote file: one request (GGUF: two, below)
plan_reqs "$HTTP/files/sharded/model-00002-of-00003.safetensors"
expect_contains "in 1 file, 2 tensors, 1 layer (1)"
[ "$(echo "$REQS" | wc -l)" = 1 ] || fail "plan of one file: not one request: $REQS"
plan_reqs "$HTTP/files/llama-2-tiny-random.gguf"
expect_contains "strategy: read"
# (its vocabulary makes the metadata larger than 256 KiB: a second request)
[ "$(echo "$REQS" | wc -l)" -le 2 ] || fail "plan of one GGUF file: more than 2 requests: $REQS"

# the Hub's layout: every file is a resolve (302) and one range from the
# CDN; the repository form adds the API listing
for repo in "hf://org/shard" "hf://org/shard/model.safetensors.index.json"; do
  plan_reqs "$repo"
  expect_contains "in 3 files, 6 tensors, 3 layers (0-2)"
  expect_contains "file 0: hf://org/shard.*/model-00001-of-00003.safetensors"
  cdn=$(count "GET /cdn/org/shard/"); res=$(count "GET /org/shard/resolve/main/"); api=$(count "GET /api/models/")
  [ "$cdn" = $((1 + N)) ] || fail "$repo: $cdn CDN requests, want $((1 + N)): $REQS"
  [ "$res" = $((1 + N)) ] || fail "$repo: $res resolve requests, want $((1 + N)): $REQS"
  want_api=0; [ "$repo" = hf://org/shard ] && want_api=1
  [ "$api" = $want_api ] || fail "$repo: $api API requests, want $want_api: $REQS"
done
plan_reqs "hf://org/bighdr"
cdn=$(count "GET /cdn/org/bighdr/")
[ "$cdn" = $((1 + 2 * N)) ] || fail "hf://org/bighdr: $cdn CDN requests, want $((1 + 2 * N)): $REQS"

# s3 (s3rver: no access log here): the index and its prefix plan alike
expect_exit 0 "$PAGEIN" plan --json s3://bkt/sharded/model.safetensors.index.json
expect_contains '"tensors": 6, "layers": 3'
expect_contains '"path": "s3://bkt/sharded/model-00003-of-00003.safetensors"'
expect_contains '"strategy": "read"'
expect_exit 0 "$PAGEIN" plan s3://bkt/sharded/
expect_contains "in 3 files, 6 tensors"

# inspect of an index URL points to plan, and that command works
expect_exit 2 "$PAGEIN" inspect "$HTTP/files/sharded/model.safetensors.index.json"
expect_contains "pagein plan $HTTP/files/sharded/model.safetensors.index.json"
expect_exit 0 "$PAGEIN" plan "$HTTP/files/sharded/model.safetensors.index.json"

# a missing shard is an error naming it (a remote error: exit 1)
rm "$D/www/sharded/model-00002-of-00003.safetensors"
expect_exit 1 "$PAGEIN" plan "$HTTP/files/sharded/model.safetensors.index.json"
expect_contains "model-00002-of-00003.safetensors"
expect_contains "404"
exit 0
