#!/usr/bin/env bash
# Opening a sharded model opens its shards at once (src/load/model.c
# add_files): the files keep the index's order, a bad shard among 64 is
# named, a directory given with trailing slashes names its files with one
# slash, and on a latency-bound filesystem (slowfs) the header reads of
# different shards are in flight together (slowfs's own counter; nothing is
# timed here: bench/open_many.sh has the figures).
set -u
. "$REPO/tests/cli/lib.sh"
"$PAGEIN" make-sample "$TMP/s.safetensors" --layers 62 --hidden 64 --dtype bf16 -q || fail "make-sample"
expect_exit 0 "$PAGEIN" convert "$TMP/s.safetensors" "$TMP/sh/model.safetensors" --max-shard-size 100KB
# an output that names a directory is refused, not written as "-00001-of-N"
# shards with a hidden ".index.json" no scan finds
expect_exit 1 "$PAGEIN" convert "$TMP/s.safetensors" "$TMP/sh3/" --max-shard-size 100KB
expect_contains "names a directory; give the output file's name, e.g. $TMP/sh3/model.safetensors"
[ ! -e "$TMP/sh3/.index.json" ] || fail "convert wrote a hidden index"
n=$(ls "$TMP/sh" | grep -c '^model-.*\.safetensors$')
[ "$n" -ge 32 ] || fail "only $n shards"
expect_exit 0 "$PAGEIN" plan "$TMP/sh//"
echo "$OUT_TXT" | grep -q '//model-' && fail "doubled slash: $OUT_TXT"
for i in 0 1 $((n - 1)); do
  want=$(printf 'model-%05d-of-%05d.safetensors' $((i + 1)) "$n")
  echo "$OUT_TXT" | grep -q "file $i: $TMP/sh/$want " || fail "file $i is not $want: $OUT_TXT"
done
# the same tensors, bytes and order as one after another
expect_exit 0 "$PAGEIN" plan --json "$TMP/sh/model.safetensors.index.json"
par=$(echo "$OUT_TXT" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d["files"]), d.get("tensors"), d.get("layers"))')
PAGEIN_OPEN_DEPTH=1 expect_exit 0 "$PAGEIN" plan --json "$TMP/sh/model.safetensors.index.json"
sq=$(echo "$OUT_TXT" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d["files"]), d.get("tensors"), d.get("layers"))')
[ -n "$par" ] && [ "$par" = "$sq" ] || fail "parallel and sequential opens differ: $par / $sq"
# a truncated shard in the middle is named
bad=$(printf 'model-%05d-of-%05d.safetensors' 37 "$n")
cp "$TMP/sh/$bad" "$TMP/keep"
truncate -s 100 "$TMP/sh/$bad"
expect_exit 1 "$PAGEIN" plan "$TMP/sh/"
expect_contains "$bad"
cp "$TMP/keep" "$TMP/sh/$bad"
rm "$TMP/sh/$(printf 'model-%05d-of-%05d.safetensors' 50 "$n")"
expect_exit 2 "$PAGEIN" plan "$TMP/sh/"
expect_contains "model-00050-of-.*No such file"

# slowfs: the shards' header reads overlap (without the metadata cache,
# which would serve the second open's headers: tests/cli/meta_cache.test.sh)
export PAGEIN_META_CACHE=0
bash "$REPO/tools/slowfs.sh" check >/dev/null || { echo "slowfs part skipped: $(bash "$REPO/tools/slowfs.sh" check)"; exit 0; }
cp "$TMP/keep" "$TMP/sh/$bad"
expect_exit 0 "$PAGEIN" convert "$TMP/s.safetensors" "$TMP/sh2/model.safetensors" --max-shard-size 100KB
pid=$(bash "$REPO/tools/slowfs.sh" mount "$TMP/sh2" "$TMP/mnt" --delay-us 2000) || fail "slowfs mount"
trap 'bash "$REPO/tools/slowfs.sh" umount "$TMP/mnt"' EXIT
peak() { awk '/^peak_inflight/ {print $2}' "$TMP/mnt/.slowfs-stats"; }
peak >/dev/null
PAGEIN_OPEN_DEPTH=1 expect_exit 0 "$PAGEIN" plan "$TMP/mnt/"
seq_peak=$(peak)
expect_exit 0 "$PAGEIN" plan "$TMP/mnt/"
par_peak=$(peak)
echo "slowfs peak requests in flight: one after another $seq_peak, at once $par_peak"
[ "$par_peak" -ge 4 ] || fail "shards were not opened concurrently: peak $par_peak in flight"
echo "open_many: ok"
