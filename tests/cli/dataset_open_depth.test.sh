#!/usr/bin/env bash
# A dataset's shards open at the depth a model's files open at (src/load/
# model.c's open_depth): 32 at once on a filesystem, 64 for remote
# shards, PAGEIN_OPEN_DEPTH=N overriding both. 48 Parquet shards on slowfs
# (5 ms a request): the footer reads of more than 16 shards are in flight
# together (slowfs's own counter; it was at most 16 before), and the epoch's
# first samples are the same whatever the open depth. Nothing is timed.
set -u
. "$REPO/tests/cli/lib.sh"
FX=$REPO/tests/data/parquet/fixtures # committed (tests/data/regen.sh)
bash "$REPO/tools/slowfs.sh" check >/dev/null || { echo "slowfs: $(bash "$REPO/tools/slowfs.sh" check)"; exit 77; }
export PAGEIN_META_CACHE=0
mkdir -p "$TMP/src"
for i in $(seq -w 0 47); do cp "$FX/small_groups.parquet" "$TMP/src/s$i.parquet"; done
bash "$REPO/tools/slowfs.sh" mount "$TMP/src" "$TMP/mnt" --delay-us 5000 > /dev/null || fail "slowfs mount"
trap 'bash "$REPO/tools/slowfs.sh" umount "$TMP/mnt"' EXIT
peak() { awk '/^peak_inflight/ {print $2}' "$TMP/mnt/.slowfs-stats"; }
args=(--dataset "$TMP/mnt" --columns tok,s --order block --seed 3 --limit 40 --ids)
peak > /dev/null
PAGEIN_OPEN_DEPTH=1 "$PAGEIN" read-samples "${args[@]}" > "$TMP/seq.txt" 2> "$TMP/err" || fail "depth 1: $(cat "$TMP/err")"
peak > /dev/null
"$PAGEIN" read-samples "${args[@]}" > "$TMP/par.txt" 2> "$TMP/err" || fail "default depth: $(cat "$TMP/err")"
par_peak=$(peak)
[ "$(wc -l < "$TMP/par.txt")" -eq 40 ] || fail "40 ids expected: $(wc -l < "$TMP/par.txt")"
cmp -s "$TMP/seq.txt" "$TMP/par.txt" || fail "the epoch differs with the open depth"
echo "slowfs peak requests in flight, 48 shards at the default depth: $par_peak"
[ "$par_peak" -gt 16 ] || fail "dataset shards opened at most 16 at once: peak $par_peak in flight"
echo "dataset_open_depth: ok"
