# data_remote_shards.test.sh - a block-shuffled epoch over four Parquet shards
# on nginx (tests/remote/servers.sh): block units take their row groups from
# several shards, whose spans the pipeline reads on one thread a source, all
# at once; the epoch must give every row exactly once, in the same order and
# with the same bytes as the same shards read locally, for several seeds and
# for each rank of two. A shard whose reads start failing mid-epoch (a
# presigned URL that expires after two requests: tools/httpfault.py) fails
# the epoch with an error naming it, while the other shards' reads of the
# same unit are in flight.
. "$REPO/tests/cli/lib.sh"
set -u

need_curl
FX=$REPO/tests/data/parquet/fixtures # committed (tests/data/regen.sh)

D=$TMP/srv
mkdir -p "$D/www/pq" "$TMP/loc"
for i in 0 1 2 3; do
  cp "$FX/small_groups.parquet" "$D/www/pq/s$i.parquet"
  cp "$FX/small_groups.parquet" "$TMP/loc/s$i.parquet"
done
start_servers "$D" nginx fault
export CURL_CA_BUNDLE=$CA PAGEIN_HTTP_RETRIES=0 HOME=$TMP PAGEIN_META_CACHE=0
loc=() rem=()
for i in 0 1 2 3; do loc+=(--dataset "$TMP/loc/s$i.parquet"); rem+=(--dataset "$HTTP/files/pq/s$i.parquet"); done

for seed in 1 7; do
  for rank in "0 1" "0 2" "1 2"; do
    set -- $rank
    a=(--columns tok,s --order block --window 4 --seed $seed --rank $1 --world $2 --format jsonl)
    "$PAGEIN" read-samples "${loc[@]}" "${a[@]}" > "$TMP/l.jsonl" || fail "local epoch seed $seed rank $rank"
    "$PAGEIN" read-samples "${rem[@]}" "${a[@]}" > "$TMP/r.jsonl" 2> "$TMP/r.err" || fail "remote epoch seed $seed rank $rank: $(cat "$TMP/r.err")"
    [ -s "$TMP/l.jsonl" ] || fail "local epoch seed $seed rank $rank: no samples"
    cmp -s "$TMP/l.jsonl" "$TMP/r.jsonl" || fail "remote epoch seed $seed rank $rank differs from the local one"
  done
  # every row exactly once (4,000 rows in four shards)
  "$PAGEIN" read-samples "${rem[@]}" --columns tok,s --order block --window 4 --seed $seed --check > "$TMP/c.txt" 2>&1 \
    || fail "remote --check seed $seed: $(cat "$TMP/c.txt")"
  grep -q "^4000 samples" "$TMP/c.txt" || fail "remote --check seed $seed: $(cat "$TMP/c.txt")"
done

# a shard that fails after its open: the error names it, no hang, no partial
# success. It needs a shard of 3,000 rows with token lists of up to 40 (the
# committed files are fetched in so few requests that one re-resolution of
# the expired URL carries them): written by tests/data/parquet/gen.sh where
# npm is, else this part is skipped (said and counted).
if why=$(ROWS=3000 TOK_MAX=40 bash "$REPO/tests/data/parquet/gen.sh" "$TMP/big" 2>&1); then
  cp "$TMP/big/small_groups.parquet" "$D/www/pq/big.parquet"
  flt=(--dataset "$FAULT/ok/pq/s0.parquet" --dataset "$FAULT/ok/pq/s1.parquet" --dataset "$FAULT/presign/2/pq/big.parquet"
       --dataset "$FAULT/ok/pq/s3.parquet")
  timeout 120 "$PAGEIN" read-samples "${flt[@]}" --columns tok,s --order block --window 4 --check > "$TMP/f.txt" 2>&1
  rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "a shard failing mid-epoch: exit $rc: $(cat "$TMP/f.txt")"
  grep -q "reading failed after .*presign/2/pq/big.parquet.*403" "$TMP/f.txt" || fail "the error does not name the failing shard: $(cat "$TMP/f.txt")"
else
  skip_part "a shard failing mid-epoch (no 3,000-row shard: $why)"
fi
