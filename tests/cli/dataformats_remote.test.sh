# pagein read-samples --dataset over HTTP and S3 (nginx, s3rver on 127.0.0.1;
# tests/remote/servers.sh): a WebDataset shard and an MDS index.json by URL,
# an S3 prefix listed and detected, every sample once, the same ids as the
# local copies.
. "$REPO/tests/cli/lib.sh"
set -u
out=$(PAGEIN_HTTP_RETRIES=0 "$PAGEIN" read-samples --dataset http://127.0.0.1:1/x.tar --check 2>&1)
if echo "$out" | grep -q "built without libcurl"; then echo "pagein built without libcurl"; exit 77; fi
$PY "$REPO/tests/dataformats_gen.py" fx || fail "fixtures"
D=$TMP/srv
mkdir -p "$D/www" "$D/s3"
cp -r fx/wds fx/mds "$D/www/"
cp -r fx/wds "$D/s3/wds"
rm -f "$D"/www/wds/*.pagein-idx "$D"/s3/wds/*.pagein-idx
start_servers "$D" nginx s3
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_PROFILE AWS_SESSION_TOKEN
export HOME=$TMP/home AWS_ENDPOINT_URL=$S3 PAGEIN_HTTP_RETRIES=1
for spec in "$HTTP/files/wds/shard-01.tar" "$HTTP/files/mds/index.json" "s3://bkt/wds/"; do
  case "$spec" in
    *shard-01.tar) local=fx/wds/shard-01.tar n=40 ;;
    *index.json) local=fx/mds n=60 ;;
    *) local=fx/wds n=200 ;;
  esac
  for order in none block global; do
    "$PAGEIN" read-samples --dataset "$spec" --order $order --seed 2 --ids > r.ids || fail "$spec $order"
    "$PAGEIN" read-samples --dataset "$local" --order $order --seed 2 --ids > l.ids || fail "$local $order"
    [ "$(wc -l < r.ids)" = $n ] || fail "$spec $order: $(wc -l < r.ids) samples, expected $n"
    cmp -s r.ids l.ids || fail "$spec $order: another order than the local copy"
  done
  "$PAGEIN" read-samples --dataset "$spec" --order none --format jsonl > r.jsonl || fail "$spec jsonl"
  "$PAGEIN" read-samples --dataset "$local" --order none --format jsonl > l.jsonl
  cmp -s r.jsonl l.jsonl || fail "$spec: fields differ from the local copy"
done
# a remote prefix that holds nothing the table reads
expect_exit 1 "$PAGEIN" read-samples --dataset "s3://bkt/nothing/" --check
exit 0
