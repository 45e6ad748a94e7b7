# parquet_remote.test.sh - Parquet over HTTP and S3 (nginx and s3rver on
# 127.0.0.1, tests/remote/servers.sh): `pagein inspect URL` reads the footer
# in one request (the 64 KiB tail holds it) and prints what the local file
# prints; `read-samples --dataset URL --columns` reads every row through the
# one pipeline, fetching only the selected columns' chunks.
. "$REPO/tests/cli/lib.sh"
set -u

need_curl
FX=$REPO/tests/data/parquet/fixtures # committed (tests/data/regen.sh)

D=$TMP/srv
mkdir -p "$D/www/pq" "$D/s3/pq"
cp "$FX/small_groups.parquet" "$FX/zstd_v2_dict.parquet" "$D/www/pq/"
cp "$FX/small_groups.parquet" "$D/s3/pq/"
start_servers "$D" nginx s3
export CURL_CA_BUNDLE=$CA PAGEIN_HTTP_RETRIES=0 AWS_ENDPOINT_URL=$S3 HOME=$TMP
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_PROFILE
log=$D/logs/nginx-access.log

# inspect: the same text as the local file (but the name), one ranged request
"$PAGEIN" inspect "$FX/small_groups.parquet" | tail -n +2 > "$TMP/local.txt" || fail "local inspect"
n0=$(wc -l < "$log")
"$PAGEIN" inspect "$HTTP/files/pq/small_groups.parquet" > "$TMP/remote.txt" 2>&1 || fail "remote inspect: $(cat "$TMP/remote.txt")"
n1=$(wc -l < "$log")
tail -n +2 "$TMP/remote.txt" | diff - "$TMP/local.txt" > /dev/null || fail "remote inspect differs: $(diff <(tail -n +2 "$TMP/remote.txt") "$TMP/local.txt" | head -5)"
[ $((n1 - n0)) -le 2 ] || fail "inspect over HTTP took $((n1 - n0)) requests"

# every row of two columns over HTTP and S3, as locally
"$PAGEIN" read-samples --dataset "$FX/small_groups.parquet" --columns tok,s --check > "$TMP/l.txt" || fail "local read"
grep -q "^1000 samples" "$TMP/l.txt" || fail "local read: $(cat "$TMP/l.txt")"
for url in "$HTTP/files/pq/small_groups.parquet" "$S3/bkt/pq/small_groups.parquet"; do
  case $url in "$S3"*) url=s3://bkt/pq/small_groups.parquet ;; esac
  "$PAGEIN" read-samples --dataset "$url" --columns tok,s --check > "$TMP/r.txt" 2>&1 || fail "read $url: $(cat "$TMP/r.txt")"
  diff "$TMP/r.txt" "$TMP/l.txt" > /dev/null || fail "read $url: $(cat "$TMP/r.txt") vs $(cat "$TMP/l.txt")"
done
# only the selected columns' chunks: far fewer bytes than the file
b=$(sed -n 's/.* \([0-9]*\) bytes read.*/\1/p' "$TMP/l.txt")
size=$(stat -c %s "$FX/small_groups.parquet")
[ -n "$b" ] && [ "$b" -lt $((size / 2)) ] || fail "read $b bytes of a $size-byte file for 2 of 14 columns"
