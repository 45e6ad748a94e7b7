#!/usr/bin/env bash
# meta_cache.test.sh - the metadata cache (src/file/metacache.c): headers of
# remote objects and of files on FUSE filesystems kept in
# $PAGEIN_META_CACHE_DIR. Against nginx (tests/remote/servers.sh; requests
# and the body bytes of each counted in its access log): the second plan of
# a sharded model costs one request per shard carrying at most the first
# 64 KiB (PI_PROBE_CHECK_BYTES: the entry's bytes are compared with them);
# a changed object (new ETag), a corrupt or truncated entry and a planted
# symlink are each a miss and read again (the symlink neither followed nor
# kept); two processes filling the same entries at once leave valid
# entries; entries are 0600 in a 0700 directory; PAGEIN_META_CACHE_MAX
# bounds the directory; PAGEIN_META_CACHE=0 turns it off. On slowfs: a fresh
# mount opened with the cache filled reads nothing through the filesystem;
# local-disk files are never cached.
. "$REPO/tests/cli/lib.sh"
set -u

need_curl

D=$TMP/srv
N=6
mkdir -p "$D/s3"
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/m" $N 20000   # 160 KB shards: more than the 64 KiB a hit fetches
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/alt" $N 20000 300   # the same tensors, other header bytes
cp -r "$D/www/m" "$D/s3/m"
cp "$TESTDATA/gguf/llama-2-tiny-random.gguf" "$D/www/"
start_servers "$D" nginx s3
export PAGEIN_HTTP_RETRIES=0 HOME=$TMP AWS_ENDPOINT_URL=$S3
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_PROFILE
unset PAGEIN_META_CACHE PAGEIN_META_CACHE_MAX
export PAGEIN_META_CACHE_DIR=$TMP/mc
log=$D/logs/nginx-access.log
URL=$HTTP/files/m/model.safetensors.index.json

# plan_reqs ARGS: plan (exit 0), output in $OUT_TXT, its access-log lines in $REQS
plan_reqs() {
  local before; before=$(wc -l < "$log")
  expect_exit 0 "$PAGEIN" plan "$@"
  log_settle "$log" "$HTTP"
  REQS=$(tail -n +$((before + 1)) "$log" | grep -v log-settle-)
}
shard_reqs() { echo "$REQS" | grep -c "model-0000$1-of-0000$N.safetensors HTTP"; }
# shard_bytes I: the body bytes nginx sent for shard I (all its requests)
shard_bytes() { echo "$REQS" | grep "model-0000$1-of-0000$N.safetensors HTTP" | awk '{s += $10} END {print s + 0}'; }
entries() { find "$PAGEIN_META_CACHE_DIR" -maxdepth 1 -type f ! -name '.tmp-*' | wc -l; }
CHECK=65536 # PI_PROBE_CHECK_BYTES
all_hits() { # every shard: one request, at most the check's bytes
  local i
  for i in $(seq 1 $N); do
    [ "$(shard_reqs $i)" = 1 ] || fail "$1: shard $i: $(shard_reqs $i) requests, want 1: $REQS"
    [ "$(shard_bytes $i)" -le $CHECK ] || fail "$1: shard $i: $(shard_bytes $i) body bytes, want <= $CHECK: $REQS"
  done
}

# cold: the index + one request per shard, an entry per shard
plan_reqs --json "$URL"
cold=$OUT_TXT
[ "$(echo "$REQS" | wc -l)" = $((1 + N)) ] || fail "cold plan: not $((1 + N)) requests: $REQS"
[ "$(shard_bytes 1)" -gt $CHECK ] || fail "cold plan read no header bytes? $REQS"
[ "$(entries)" = $((N + 1)) ] || fail "cold plan: $(entries) cache entries, want $((N + 1)) (the shards and the index)"
[ "$(stat -c %a "$PAGEIN_META_CACHE_DIR")" = 700 ] || fail "cache dir mode $(stat -c %a "$PAGEIN_META_CACHE_DIR")"
for e in "$PAGEIN_META_CACHE_DIR"/*; do
  [ "$(stat -c %a "$e")" = 600 ] || fail "entry $e: mode $(stat -c %a "$e")"
done

# warm: one request per shard and no header bytes; the same plan
plan_reqs --json "$URL"
[ "$OUT_TXT" = "$cold" ] || fail "warm plan differs from cold: $OUT_TXT / $cold"
all_hits "warm plan"
ib=$(echo "$REQS" | grep 'model.safetensors.index.json HTTP' | awk '{s += $10} END {print s + 0}')
[ "$(echo "$REQS" | grep -c 'index.json HTTP')" = 1 ] && [ "$ib" -le $CHECK ] || fail "warm plan: the index was not a one-request check: $REQS"
echo "warm plan: $(echo "$REQS" | wc -l) requests for $N shards + index"

# GGUF (metadata larger than the first request): inspected again from the
# entry, the same output, one short request (the entry's first bytes compared)
G=$HTTP/files/llama-2-tiny-random.gguf
b=$(wc -l < "$log"); expect_exit 0 "$PAGEIN" inspect --json "$G"; g1=$OUT_TXT
b=$(wc -l < "$log"); expect_exit 0 "$PAGEIN" inspect --json "$G"; log_settle "$log" "$HTTP"
REQS=$(tail -n +$((b + 1)) "$log" | grep -v log-settle-)
[ "$OUT_TXT" = "$g1" ] || fail "GGUF inspect from the cache differs"
[ "$(echo "$REQS" | wc -l)" = 1 ] && [ "$(echo "$REQS" | awk '{print $10}')" -le $CHECK ] || fail "GGUF from the cache: $REQS"
rm -f "$PAGEIN_META_CACHE_DIR"/$(cd "$PAGEIN_META_CACHE_DIR" && grep -l GGUF * | head -1)

# a plain HTTP folder: the probe for its index name (one short request), then the index is read
plan_reqs --json "$HTTP/files/m/"
idx=$(echo "$REQS" | grep 'model.safetensors.index.json HTTP' | awk '{print $10}' | sort -n | tr '\n' ' ')
[ "$(echo $idx | wc -w)" = 2 ] && [ "$(echo $idx | cut -d' ' -f1)" -le $CHECK ] || fail "folder probe: index requests with body bytes $idx: $REQS"

# S3 (s3rver): entries from the first plan of a listed prefix, the same plan from them
expect_exit 0 "$PAGEIN" plan --json s3://bkt/m/
s3cold=$OUT_TXT
[ "$(entries)" = $((2 * N + 2)) ] || fail "S3: $(entries) entries, want $((2 * N + 2))"
expect_exit 0 "$PAGEIN" plan --json s3://bkt/m/
[ "$OUT_TXT" = "$s3cold" ] || fail "S3: plan from the cache differs: $OUT_TXT / $s3cold"

# a changed object (new ETag): read again, and its new header is what plan shows
cp "$D/www/alt/model-00002-of-0000$N.safetensors" "$D/www/m/"
touch -d '2001-01-01' "$D/www/m/model-00002-of-0000$N.safetensors"   # a new mtime: a new ETag
e2=$(cd "$PAGEIN_META_CACHE_DIR" && grep -l "files/m/model-00002-of" * | head -1)
i2=$(stat -c %i "$PAGEIN_META_CACHE_DIR/$e2")
plan_reqs --json "$URL"
# read again (its header came with the probe's 64 KiB): the entry was written anew
[ "$(stat -c %i "$PAGEIN_META_CACHE_DIR/$e2")" != "$i2" ] || fail "changed shard 2: its entry was not written again: $REQS"
[ "$(shard_reqs 1)" = 1 ] && [ "$(shard_bytes 1)" -le $CHECK ] || fail "shard 1 not a hit after shard 2 changed: $REQS"
expect_exit 0 "$PAGEIN" inspect "$HTTP/files/m/model-00002-of-0000$N.safetensors"
expect_contains "pppppppppp"   # make_sharded's __metadata__ of the new header, not the cached old one
plan_reqs --json "$URL"
all_hits "after the change"

# corrupt and truncated entries: detected (checksum, lengths), removed, read again
rm -rf "$PAGEIN_META_CACHE_DIR"
plan_reqs --json "$URL"
[ "$(entries)" = $((N + 1)) ] || fail "entries: $(ls "$PAGEIN_META_CACHE_DIR")"
ents=($(grep -L weight_map "$PAGEIN_META_CACHE_DIR"/*))   # the shards' entries (not the index's)
[ "${#ents[@]}" = $N ] || fail "shard entries: ${ents[*]}"
$PY - "${ents[0]}" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x40
open(p, "wb").write(bytes(b))
EOF
truncate -s 30 "${ents[1]}"
plan_reqs --json "$URL"
echo "$OUT_TXT" | grep -q '"tensors": 12' || fail "plan with corrupt entries: $OUT_TXT"
miss=0
for i in $(seq 1 $N); do [ "$(shard_bytes $i)" -gt $CHECK ] && miss=$((miss + 1)); done
[ "$miss" = 2 ] || fail "corrupt + truncated entry: $miss shards read again, want 2: $REQS"
plan_reqs --json "$URL"
all_hits "after the corrupt entries were replaced"

# a symlink planted as an entry: not followed (its target untouched), removed, read again
echo "not a cache entry" > "$TMP/target"
victim=$(basename "$(grep -L weight_map "$PAGEIN_META_CACHE_DIR"/* | head -1)")
rm "$PAGEIN_META_CACHE_DIR/$victim"
ln -s "$TMP/target" "$PAGEIN_META_CACHE_DIR/$victim"
plan_reqs --json "$URL"
[ "$(cat "$TMP/target")" = "not a cache entry" ] || fail "the symlink's target changed"
[ -L "$PAGEIN_META_CACHE_DIR/$victim" ] && fail "the planted symlink is still there"
[ -f "$PAGEIN_META_CACHE_DIR/$victim" ] || fail "the entry was not written again"
miss=0
for i in $(seq 1 $N); do [ "$(shard_bytes $i)" -gt $CHECK ] && miss=$((miss + 1)); done
[ "$miss" = 1 ] || fail "planted symlink: $miss shards read again, want 1: $REQS"

# two processes filling the same (empty) cache at once: valid entries, no leftovers
rm -rf "$PAGEIN_META_CACHE_DIR"
"$PAGEIN" plan "$URL" >"$TMP/p1" 2>&1 & p1=$!
"$PAGEIN" plan "$URL" >"$TMP/p2" 2>&1 & p2=$!
wait $p1 || fail "concurrent plan 1: $(cat "$TMP/p1")"
wait $p2 || fail "concurrent plan 2: $(cat "$TMP/p2")"
[ "$(find "$PAGEIN_META_CACHE_DIR" -name '.tmp-*' | wc -l)" = 0 ] || fail "temporary files left"
[ "$(entries)" = $((N + 1)) ] || fail "concurrent fill: $(entries) entries"
plan_reqs --json "$URL"
all_hits "after a concurrent fill"

# PAGEIN_META_CACHE=0: not read, not written
PAGEIN_META_CACHE=0 plan_reqs --json "$URL"
[ "$(shard_bytes 3)" -gt $CHECK ] || fail "PAGEIN_META_CACHE=0 still used the cache: $REQS"
rm -rf "$PAGEIN_META_CACHE_DIR"
PAGEIN_META_CACHE=0 plan_reqs --json "$URL"
[ ! -e "$PAGEIN_META_CACHE_DIR" ] || [ "$(entries)" = 0 ] || fail "PAGEIN_META_CACHE=0 wrote entries"

# the size bound: the least recently used entries go (entry mtimes: the LRU clock)
one=$(mktemp -d "$TMP/one-XXXX")
PAGEIN_META_CACHE_DIR=$one expect_exit 0 "$PAGEIN" plan "$HTTP/files/m/model-00001-of-0000$N.safetensors"
e1=$(basename "$(ls "$one"/*)")
esz=$(stat -c %s "$one/$e1")
max=$((esz * 5))
rm -rf "$PAGEIN_META_CACHE_DIR"
expect_exit 0 "$PAGEIN" plan "$URL"
[ -e "$PAGEIN_META_CACHE_DIR/$e1" ] || fail "no entry $e1 for shard 1"
touch -d '2001-01-01' "$PAGEIN_META_CACHE_DIR"/*
touch -d '2000-01-01' "$PAGEIN_META_CACHE_DIR/$e1"   # shard 1: least recently used
PAGEIN_META_CACHE_MAX=$max expect_exit 0 "$PAGEIN" plan "$HTTP/files/m/model-00004-of-0000$N.safetensors?v=1"
total=$(find "$PAGEIN_META_CACHE_DIR" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
[ "$total" -le "$max" ] || fail "cache holds $total bytes, bound $max"
[ -e "$PAGEIN_META_CACHE_DIR/$e1" ] && fail "the least recently used entry (shard 1) was kept"
[ -n "$(find "$PAGEIN_META_CACHE_DIR" -type f -newermt '2002-01-01')" ] || fail "the new entry was evicted"
echo "size bound: $total bytes in $(entries) entries, bound $max"

# local disk: never cached
rm -rf "$PAGEIN_META_CACHE_DIR"
expect_exit 0 "$PAGEIN" plan "$D/www/m/"
[ ! -e "$PAGEIN_META_CACHE_DIR" ] || [ "$(entries)" = 0 ] || fail "a local-disk model was cached"

# slowfs (FUSE): a fresh mount with the cache filled reads no header
bash "$REPO/tools/slowfs.sh" check >/dev/null || { echo "slowfs part skipped: $(bash "$REPO/tools/slowfs.sh" check)"; echo "meta_cache: ok"; exit 0; }
reads() { awk '/^requests/ {print $2}' "$TMP/mnt/.slowfs-stats"; }
bash "$REPO/tools/slowfs.sh" mount "$D/www/m" "$TMP/mnt" --delay-us 200 >/dev/null || fail "slowfs mount"
trap 'bash "$REPO/tools/slowfs.sh" umount "$TMP/mnt" 2>/dev/null; bash "$REPO/tests/remote/servers.sh" stop "$D"' EXIT
expect_exit 0 "$PAGEIN" plan --json "$TMP/mnt/"
fcold=$OUT_TXT
[ "$(entries)" = $N ] || fail "slowfs: $(entries) entries after the first open, want $N"
bash "$REPO/tools/slowfs.sh" umount "$TMP/mnt"
bash "$REPO/tools/slowfs.sh" mount "$D/www/m" "$TMP/mnt" --delay-us 200 >/dev/null || fail "slowfs mount"
r0=$(reads)
expect_exit 0 "$PAGEIN" plan --json "$TMP/mnt/"
r1=$(reads)
[ "$OUT_TXT" = "$fcold" ] || fail "slowfs: plan from the cache differs"
# the index is read (1+ requests); no shard header is
[ $((r1 - r0)) -le 2 ] || fail "slowfs: $((r1 - r0)) read requests with the cache filled"
echo "slowfs fresh mount, cache filled: $((r1 - r0)) read requests for $N shards + index"
touch "$D/www/m/model-00003-of-0000$N.safetensors"   # a new mtime: that entry is stale
r0=$(reads)
expect_exit 0 "$PAGEIN" plan --json "$TMP/mnt/"
r1=$(reads)
[ $((r1 - r0)) -ge 1 ] || fail "slowfs: a changed file was not read again"
echo "meta_cache: ok"
