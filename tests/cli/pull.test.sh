# pull.test.sh - `pagein pull` against real servers on 127.0.0.1 (nginx,
# s3rver; tests/remote/servers.sh), stopped at the end: HTTP(S), S3 (object,
# prefix, sharded index), the Hugging Face cache layout, resume after
# kill -9 (re-fetching at most one chunk per connection, counted in nginx's
# access log), verification failure, errors and their exit codes.
. "$REPO/tests/cli/lib.sh"
set -u

expect_exit 0 "$PAGEIN" pull --help
out=$(PAGEIN_HTTP_RETRIES=0 "$PAGEIN" pull http://127.0.0.1:1/x.bin "$TMP/x" 2>&1)
if echo "$out" | grep -q "built without libcurl"; then echo "pagein built without libcurl"; exit 77; fi
expect_contains "resume"
expect_exit 2 "$PAGEIN" pull
expect_exit 2 "$PAGEIN" pull --connections 0 http://127.0.0.1:1/x
expect_exit 2 "$PAGEIN" pull /local/file
expect_contains "not a remote URL"
echo "$out" | grep -q "http://127.0.0.1:1/x.bin" || fail "no URL in: $out"
[ ! -e "$TMP/x" ] && [ ! -e "$TMP/x.pagein-part" ] || fail "a failed pull left a file"

D=$TMP/srv
mkdir -p "$D/www/hf/org/tiny/sub" "$D/s3" "$D/www/hf/org/bad"
head -c $((16 << 20)) /dev/urandom > "$D/www/big.bin"
cp "$TESTDATA/safetensors/burn-mnist-f32.safetensors" "$D/www/hf/org/tiny/model.safetensors"
cp "$TESTDATA/gguf/llama-2-tiny-random.gguf" "$D/www/hf/org/tiny/sub/tiny.gguf"
echo '{"model_type": "tiny"}' > "$D/www/hf/org/tiny/config.json"
head -c 100000 /dev/urandom > "$D/www/hf/org/bad/w.bin"
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/sharded" 3 50000
cp -r "$D/www/sharded" "$D/s3/sharded"
cp "$D/www/hf/org/tiny/model.safetensors" "$D/s3/model.safetensors"

RATE=4m DELAY_MS=5 start_servers "$D" nginx s3 delay
export CURL_CA_BUNDLE=$CA PAGEIN_HTTP_RETRIES=1 PAGEIN_HTTP_BACKOFF_MS=10
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_PROFILE AWS_SESSION_TOKEN
export HOME=$TMP/home AWS_ENDPOINT_URL=$S3

# ---- one file over HTTPS, --json --------------------------------------------------
expect_exit 0 "$PAGEIN" pull --no-sync --json "$HTTPS/files/hf/org/tiny/model.safetensors" "$TMP/a/"
expect_contains '"ok":true'
expect_contains '"verified":"size+etag"'
cmp "$TMP/a/model.safetensors" "$D/www/hf/org/tiny/model.safetensors" || fail "https pull differs"
ls "$TMP/a" | grep -q pagein && fail "leftover files: $(ls "$TMP/a")"

# ---- resume after kill -9 -----------------------------------------------------------
# 16 MiB at 4 MiB/s per connection (/delayed/: every 1 MiB GET takes 0.25 s;
# nginx's /limited/ would let each through at once), 2 connections
url="$DELAY/big.bin"
"$PAGEIN" pull --no-sync -q -c 2 --chunk 1M "$url" "$TMP/big.bin" > "$TMP/pull-bg.out" 2>&1 &
pid=$!
# the state: a 4 KiB header, one mark per chunk (16 here), the chunks' hashes
state="$TMP/big.bin.pagein-part.pagein-state"
for i in $(seq 1 200); do  # bounded: 10 s
  n=$(tail -c +4097 "$state" 2>/dev/null | head -c 16 | tr -cd 1 | wc -c)
  [ "${n:-0}" -ge 4 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
if ! kill -0 $pid 2>/dev/null; then
  wait $pid; brc=$?
  fail "the pull to be killed ended on its own (exit $brc, $n chunks seen) before 4 chunks: $(cat "$TMP/pull-bg.out")"
fi
kill -9 $pid; wait $pid 2>/dev/null
[ "${n:-0}" -ge 4 ] || fail "no progress before the kill ($n chunks): $(cat "$TMP/pull-bg.out")"
[ ! -e "$TMP/big.bin" ] || fail "a killed pull left the final file"
done_at_kill=$(tail -c +4097 "$state" | head -c 16 | tr -cd 1 | wc -c)
expect_exit 0 "$PAGEIN" pull --no-sync --json -c 2 --chunk 1M "$url" "$TMP/big.bin"
cmp "$TMP/big.bin" "$D/www/big.bin" || fail "resumed pull differs"
resumed=$(echo "$OUT_TXT" | sed -n 's/.*"resumed":\([0-9]*\).*/\1/p')
fetched=$(echo "$OUT_TXT" | sed -n 's/.*"fetched":\([0-9]*\).*/\1/p')
[ "$resumed" -eq $((done_at_kill << 20)) ] || fail "resumed $resumed, expected $done_at_kill chunks"
[ $((resumed + fetched)) -eq $((16 << 20)) ] || fail "resumed $resumed + fetched $fetched != 16 MiB"
[ ! -e "$state" ] || fail "state file left after success"
# what nginx sent for that URL over both runs: the file, at most one chunk
# per connection again, plus each open's 256 KiB probe
sent=$(awk '$7 == "/delayed/big.bin" { s += $10 } END { print s + 0 }' "$D/logs/nginx-access.log")
max=$(( (16 << 20) + 2 * (1 << 20) + 2 * (256 << 10) ))
[ "$sent" -ge $((16 << 20)) ] || fail "the access log shows only $sent bytes for big.bin"
[ "$sent" -le "$max" ] || fail "nginx sent $sent bytes for a 16 MiB file (max $max)"

# an object that changed between the runs is fetched from the start
"$PAGEIN" pull --no-sync -q -c 2 --chunk 1M "$url" "$TMP/big2.bin" &
pid=$!
for i in $(seq 1 100); do
  n=$(tail -c +4097 "$TMP/big2.bin.pagein-part.pagein-state" 2>/dev/null | head -c 16 | tr -cd 1 | wc -c)
  [ "${n:-0}" -ge 2 ] && break
  sleep 0.1
done
kill -9 $pid; wait $pid 2>/dev/null
sleep 1  # nginx's ETag has a one-second clock
head -c $((16 << 20)) /dev/urandom > "$D/www/big.bin.new" && mv "$D/www/big.bin.new" "$D/www/big.bin"
expect_exit 0 "$PAGEIN" pull --no-sync --json -c 2 --chunk 1M "$url" "$TMP/big2.bin"
expect_contains '"resumed":0,'
cmp "$TMP/big2.bin" "$D/www/big.bin" || fail "pull after the object changed differs"

# ---- the Hugging Face cache layout ----------------------------------------------------
export HF_ENDPOINT=$HTTP HF_HUB_CACHE=$TMP/hub HF_TOKEN=hf_test
expect_exit 0 "$PAGEIN" pull --no-sync hf://org/tiny
expect_contains "verified sha256"
snap="$TMP/hub/models--org--tiny/snapshots/$HF_COMMIT"
[ "$(cat "$TMP/hub/models--org--tiny/refs/main")" = "$HF_COMMIT" ] || fail "refs/main"
for f in model.safetensors sub/tiny.gguf config.json; do
  [ -L "$snap/$f" ] || fail "$snap/$f is not a symlink"
  cmp "$snap/$f" "$D/www/hf/org/tiny/$f" || fail "$f differs in the cache"
done
sha=$(sha256sum "$D/www/hf/org/tiny/sub/tiny.gguf" | cut -d' ' -f1)
[ "$(readlink "$snap/sub/tiny.gguf")" = "../../../blobs/$sha" ] || fail "link target $(readlink "$snap/sub/tiny.gguf")"
expect_exit 0 "$PAGEIN" pull --no-sync --json hf://org/tiny
expect_contains '"fetched":0,'
grep -q 'Bearer hf_test' "$D/logs/nginx-access.log" 2>/dev/null || true
# a file whose bytes do not match the stated sha256: exit 1, nothing installed
head -c 100000 /dev/urandom > "$D/www/hf/org/bad/w.bin"
expect_exit 1 "$PAGEIN" pull --no-sync hf://org/bad/w.bin
expect_contains "sha256"
[ -z "$(ls "$TMP/hub/models--org--bad/blobs" 2>/dev/null)" ] || fail "a mismatching blob was kept: $(ls "$TMP/hub/models--org--bad/blobs")"
expect_exit 2 "$PAGEIN" pull --no-sync hf://org/tiny/none.bin
expect_contains "HTTP 404"
# a folder of a repository (listed through the source table): into the cache
# under its path in the repository, and into a folder relative to it
expect_exit 0 "$PAGEIN" pull --no-sync --cache-dir "$TMP/hub2" hf://org/tiny/sub/
cmp "$TMP/hub2/models--org--tiny/snapshots/$HF_COMMIT/sub/tiny.gguf" "$D/www/hf/org/tiny/sub/tiny.gguf" \
  || fail "hf folder pull into the cache"
[ ! -e "$TMP/hub2/models--org--tiny/snapshots/$HF_COMMIT/model.safetensors" ] || fail "a file outside the folder was pulled"
expect_exit 0 "$PAGEIN" pull --no-sync hf://org/tiny/sub/ "$TMP/hfsub/"
cmp "$TMP/hfsub/tiny.gguf" "$D/www/hf/org/tiny/sub/tiny.gguf" || fail "hf folder pull into a folder"
unset HF_HUB_CACHE HF_TOKEN

# ---- S3: an object (MD5 ETag), a sharded index, a prefix staged ----------------------------
expect_exit 0 "$PAGEIN" pull --no-sync s3://bkt/model.safetensors "$TMP/s3one"
expect_contains "verified md5"
cmp "$TMP/s3one" "$D/s3/model.safetensors" || fail "s3 object differs"
expect_exit 0 "$PAGEIN" pull --no-sync s3://bkt/sharded/model.safetensors.index.json "$TMP/shards/"
expect_contains "4 file(s)"
for f in "$D"/s3/sharded/*; do cmp "$f" "$TMP/shards/$(basename "$f")" || fail "$f differs"; done
expect_exit 0 "$PAGEIN" pull --no-sync --stage "$TMP/stage" s3://bkt/sharded/
for f in "$D"/s3/sharded/*; do cmp "$f" "$TMP/stage/$(basename "$f")" || fail "staged $f differs"; done
expect_exit 2 "$PAGEIN" pull --no-sync s3://bkt/none/ "$TMP/none"
expect_contains "no objects"
# over HTTP, the index brings its shards too
expect_exit 0 "$PAGEIN" pull --no-sync "$HTTP/files/sharded/model.safetensors.index.json" "$TMP/hshards"
for f in "$D"/www/sharded/*; do cmp "$f" "$TMP/hshards/$(basename "$f")" || fail "$f differs"; done

# ---- errors ----------------------------------------------------------------------------------
expect_exit 2 "$PAGEIN" pull --no-sync "$HTTP/status/403" "$TMP/e403"
expect_contains "HTTP 403 Forbidden"
expect_contains "$HTTP/status/403"
[ ! -e "$TMP/e403" ] || fail "403 left a file"
# a server that ignores Range: one plain stream, said on stderr
# (tests/cli/pull_reliability.test.sh has more)
expect_exit 0 "$PAGEIN" pull --no-sync "$HTTP/norange/big.bin" "$TMP/norange"
expect_contains "ignores Range"
cmp "$TMP/norange" "$D/www/big.bin" || fail "plain-stream pull differs"
exit 0
