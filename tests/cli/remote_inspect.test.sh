# remote_inspect.test.sh - `pagein inspect URL` against real servers on
# 127.0.0.1 (nginx HTTP/HTTPS, s3rver; tests/remote/servers.sh), stopped at
# the end: every real test file inspected over HTTPS, S3 and hf:// prints
# what inspecting the local file prints, in at most 2 requests per file
# (counted in nginx's access log). Remote sharded models are loaded in
# tests/test_remote.c (remote_model_load).
. "$REPO/tests/cli/lib.sh"
set -u

need_curl

D=$TMP/srv
mkdir -p "$D/www/hf/org/tiny" "$D/s3"
cp -r "$TESTDATA/safetensors" "$TESTDATA/gguf" "$D/www/"
cp -r "$TESTDATA/safetensors" "$TESTDATA/gguf" "$D/s3/"
cp "$TESTDATA/gguf/llama-2-tiny-random.gguf" "$D/www/hf/org/tiny/model.gguf"
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/sharded" 3 300000   # 2.4 MB shards: headers only
cp -r "$D/www/sharded" "$D/s3/sharded"

start_servers "$D" nginx s3
export CURL_CA_BUNDLE=$CA PAGEIN_HTTP_RETRIES=0 AWS_ENDPOINT_URL=$S3 HF_ENDPOINT=$HTTP HOME=$TMP
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_PROFILE

log=$D/logs/nginx-access.log
# the library opens URLs only once its source registry has the remote rows
probe=$("$PAGEIN" inspect "$HTTP/files/gguf/llama-2-tiny-random.gguf" 2>&1)
if echo "$probe" | grep -qi "no such file\|no source handles"; then
  echo "pagein_open does not take URLs in this build (source registry without the remote sources): $probe" | head -1
  exit 77
fi
n=0
while IFS= read -r f; do
  rel=${f#"$TESTDATA/"}
  want=$("$PAGEIN" inspect --json "$f" 2>&1); wrc=$?
  before=$(wc -l < "$log")
  got=$("$PAGEIN" inspect --json "$HTTPS/files/$rel" 2>&1); grc=$?
  sleep 0.05
  reqs=$(( $(wc -l < "$log") - before ))
  [ $grc = $wrc ] || fail "$rel: exit $grc over HTTPS, $wrc locally: $got"
  if [ $wrc = 0 ]; then
    # the same tensors, offsets, dtypes and metadata; only the path differs
    a=$(echo "$want" | sed "s|$f|X|g"); b=$(echo "$got" | sed "s|$HTTPS/files/$rel|X|g")
    [ "$a" = "$b" ] || fail "$rel: inspect over HTTPS differs from the local file"
  fi
  [ $reqs -le 2 ] || fail "$rel: $reqs requests for inspect (at most 2)"
  got=$("$PAGEIN" inspect --json "s3://bkt/$rel" 2>&1); src=$?
  [ $src = $wrc ] || fail "$rel: exit $src over S3, $wrc locally: $got"
  if [ $wrc = 0 ]; then
    b=$(echo "$got" | sed "s|s3://bkt/$rel|X|g")
    [ "$a" = "$b" ] || fail "$rel: inspect over S3 differs from the local file"
  fi
  n=$((n + 1))
done < <(find "$TESTDATA/safetensors" "$TESTDATA/gguf" -type f | sort)
[ $n -ge 20 ] || fail "only $n files inspected"

expect_exit 0 "$PAGEIN" inspect hf://org/tiny/model.gguf
expect_exit 2 "$PAGEIN" inspect "$HTTP/files/none.safetensors"
expect_contains "HTTP 404"

# a sharded index is not one file: inspect says so for URLs as for paths
expect_exit 2 "$PAGEIN" inspect "$HTTP/files/sharded/model.safetensors.index.json"
expect_contains "index of a sharded checkpoint"
exit 0
