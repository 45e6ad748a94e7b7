#!/usr/bin/env bash
# meta_cache_vouch.test.sh - one check for many metadata-cache entries
# (src/file/metacache.c pi_meta_vouch_dir, src/load/model.c vouch_for):
#  - S3 (s3rver): a warm open of a sharded model checks every entry with
#    one ListObjectsV2 of the folder (ETag and size of each key) and opens
#    the shards with no request of their own (connections counted with
#    strace: 1 against 1 + N cold); a shard replaced after the cache was
#    filled is listed with a new ETag, read again, and the plan is the one
#    a cold open gives; the tensors read through the vouched sources hash
#    the same as without the cache (data reads carry If-Match);
#  - the Hub at a pinned commit (hf://ORG/NAME@<40 hex>): a warm open makes
#    no request at all (nginx's access log); at a branch (main) each shard
#    is still checked by its own request;
#  - plain HTTP: one request per entry, none with the opt-in
#    PAGEIN_META_TRUST_SECONDS=N for entries checked in the last N seconds
#    (older ones are checked again, which restarts their clock).
. "$REPO/tests/cli/lib.sh"
set -u

need_curl

D=$TMP/srv
N=6
mkdir -p "$D/s3" "$D/www/hf/org"
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/m" $N 1000
$PY "$REPO/tests/remote/make_sharded.py" "$TMP/alt" $N 1000 300   # the same tensors, other header bytes
cp -r "$D/www/m" "$D/s3/m"
cp -r "$D/www/m" "$D/www/hf/org/sh"
start_servers "$D" nginx s3
export PAGEIN_HTTP_RETRIES=0 HOME=$TMP AWS_ENDPOINT_URL=$S3 HF_ENDPOINT=$HTTP
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_PROFILE PAGEIN_META_CACHE PAGEIN_META_CACHE_MAX
export PAGEIN_META_CACHE_DIR=$TMP/mc
log=$D/logs/nginx-access.log
IDX=s3://bkt/m/model.safetensors.index.json
shard() { printf 'model-%05d-of-%05d.safetensors' "$1" $N; }
upload() { # FILE KEY: into bucket bkt
  local code
  code=$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" -u S3RVER:S3RVER \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T "$1" "$S3/bkt/$2")
  [ "$code" = 200 ] || fail "upload of $2: HTTP $code"
}
# conns CMD...: runs CMD (exit 0, output in $OUT_TXT) and sets CONNS to the
# TCP connections it opened (each remote source's open is its own)
CONNS=
conns() {
  if [ -n "$STRACE" ]; then
    OUT_TXT=$("$STRACE" -f -qq -e trace=connect -o "$TMP/st" "$@" 2>&1) || fail "'$*' failed: $OUT_TXT"
    CONNS=$(grep -c 'connect(.*AF_INET' "$TMP/st")
  else
    expect_exit 0 "$@"
  fi
}
STRACE=$(command -v strace || true)
[ -n "$STRACE" ] && ! "$STRACE" -qq -o /dev/null true 2>/dev/null && STRACE=
[ -n "$STRACE" ] || echo "strace cannot run here: request counts on S3 not checked"

# S3 cold: the index and every shard, each its own request
conns "$PAGEIN" plan --json "$IDX"
cold=$OUT_TXT
[ -z "$STRACE" ] || [ "$CONNS" -ge $((N + 1)) ] || fail "S3 cold: only $CONNS connections"
echo "S3 cold plan: ${CONNS:-?} connections"
# S3 warm: one listing checks them all
conns "$PAGEIN" plan --json "$IDX"
[ "$OUT_TXT" = "$cold" ] || fail "S3 warm plan differs: $OUT_TXT / $cold"
[ -z "$STRACE" ] || [ "$CONNS" -le 1 ] || fail "S3 warm plan: $CONNS connections, want 1 (the listing)"
echo "S3 warm plan: ${CONNS:-?} connections"
# tensors read through the vouched sources: the same bytes as without the cache
PAGEIN_META_CACHE=0 expect_exit 0 "$PAGEIN" hash -q -o "$TMP/man0" "$IDX"
expect_exit 0 "$PAGEIN" hash -q -o "$TMP/man1" "$IDX"
expect_exit 0 "$PAGEIN" hash --check -o "$TMP/man0" "$IDX"
grep -v '^#' "$TMP/man0" | sort > "$TMP/h0"; grep -v '^#' "$TMP/man1" | sort > "$TMP/h1"
cmp -s "$TMP/h0" "$TMP/h1" || fail "hashes through the vouched sources differ: $(diff "$TMP/h0" "$TMP/h1" | head -5)"

# a shard replaced after the cache was filled: a new ETag in the listing,
# so its entry is not vouched: read again, the plan is a cold open's
upload "$TMP/alt/$(shard 3)" "m/$(shard 3)"
conns "$PAGEIN" plan --json "$IDX"
changed=$OUT_TXT
[ "$changed" != "$cold" ] || fail "S3: the plan did not change with shard 3's header"
[ -z "$STRACE" ] || [ "$CONNS" -ge 2 ] || fail "S3: the replaced shard was not fetched ($CONNS connections)"
PAGEIN_META_CACHE=0 expect_exit 0 "$PAGEIN" plan --json "$IDX"
[ "$OUT_TXT" = "$changed" ] || fail "S3: the plan after the change is not a cold open's: $changed / $OUT_TXT"
expect_exit 0 "$PAGEIN" inspect "s3://bkt/m/$(shard 3)"
expect_contains "pppppppppp"   # make_sharded's __metadata__ of the new header
conns "$PAGEIN" plan --json "$IDX"
[ "$OUT_TXT" = "$changed" ] || fail "S3: warm plan after the change differs"
[ -z "$STRACE" ] || [ "$CONNS" -le 1 ] || fail "S3: warm again after the change: $CONNS connections"

# the Hub at a pinned commit: no request at all once the cache is filled
H="hf://org/sh@$HF_COMMIT/model.safetensors.index.json"
expect_exit 0 "$PAGEIN" plan --json "$H"
hcold=$OUT_TXT
log_settle "$log" "$HTTP"
b=$(wc -l < "$log")
expect_exit 0 "$PAGEIN" plan --json "$H"
[ "$OUT_TXT" = "$hcold" ] || fail "hf pinned: warm plan differs"
log_settle "$log" "$HTTP"
reqs=$(tail -n +$((b + 1)) "$log" | grep -vc log-settle-)
[ "$reqs" = 0 ] || fail "hf pinned: the warm plan made $reqs requests: $(tail -n +$((b + 1)) "$log")"
echo "hf pinned commit, warm plan: $reqs requests"
PAGEIN_META_CACHE=0 expect_exit 0 "$PAGEIN" hash -q -o "$TMP/hman0" "$H"
log_settle "$log" "$HTTP"
b=$(wc -l < "$log")
expect_exit 0 "$PAGEIN" hash --check -o "$TMP/hman0" "$H"
log_settle "$log" "$HTTP"
# opened with no request, each file asks the Hub where it lives once, at
# its first read, not at every read
res=$(tail -n +$((b + 1)) "$log" | grep -c "/resolve/$HF_COMMIT/model-")
cdn=$(tail -n +$((b + 1)) "$log" | grep -c "/cdn/org/sh/model-")
[ "$res" -le $N ] && [ "$cdn" -ge $N ] || fail "hf pinned reads: $res resolve requests for $cdn CDN reads of $N files"
# a branch may move: each file is checked by its own request
expect_exit 0 "$PAGEIN" plan --json "hf://org/sh/model.safetensors.index.json"
log_settle "$log" "$HTTP"
b=$(wc -l < "$log")
expect_exit 0 "$PAGEIN" plan --json "hf://org/sh/model.safetensors.index.json"
log_settle "$log" "$HTTP"
reqs=$(tail -n +$((b + 1)) "$log" | grep -v log-settle- | grep -c '/resolve/main/')
[ "$reqs" = $((N + 1)) ] || fail "hf main: $reqs checks, want $((N + 1))"

# plain HTTP has no listing: each entry is checked by its own request,
# unless the user opts in to trusting entries checked within N seconds
U=$HTTP/files/m/model.safetensors.index.json
export PAGEIN_META_CACHE_DIR=$TMP/mc-http
plan_log() { # ARGS: plan; REQS = its access-log lines
  log_settle "$log" "$HTTP"
  local b; b=$(wc -l < "$log")
  expect_exit 0 "$PAGEIN" plan --json "$@"
  log_settle "$log" "$HTTP"
  REQS=$(tail -n +$((b + 1)) "$log" | grep -v log-settle-)
}
nreq() { [ -z "$REQS" ] && echo 0 || echo "$REQS" | wc -l; }
plan_log "$U"; ucold=$OUT_TXT
plan_log "$U"
[ "$(nreq)" = $((N + 1)) ] || fail "plain HTTP warm: $(nreq) requests, want $((N + 1))"
PAGEIN_META_TRUST_SECONDS=3600 plan_log "$U"
[ "$OUT_TXT" = "$ucold" ] || fail "trusted plan differs"
[ "$(nreq)" = 0 ] || fail "PAGEIN_META_TRUST_SECONDS=3600: $(nreq) requests, want 0: $REQS"
# entries last checked two hours ago are not trusted for an hour: checked again
touch -d '2 hours ago' "$PAGEIN_META_CACHE_DIR"/*
PAGEIN_META_TRUST_SECONDS=3600 plan_log "$U"
[ "$(nreq)" = $((N + 1)) ] || fail "stale trust: $(nreq) requests, want $((N + 1)): $REQS"
[ -z "$(find "$PAGEIN_META_CACHE_DIR" -type f ! -newermt '1 hour ago')" ] || fail "the checked entries' clocks were not reset"
PAGEIN_META_TRUST_SECONDS=3600 plan_log "$U"
[ "$(nreq)" = 0 ] || fail "trust after a check: $(nreq) requests"
echo "meta_cache_vouch: ok"
