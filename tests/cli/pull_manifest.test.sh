# pull_manifest.test.sh - `pagein pull` checks each file against a pagein
# manifest (`pagein hash`, docs/FORMAT-MANIFEST.md) found next to the
# source: INDEX.pagein-manifest, FILE.pagein-manifest or DIR/.pagein-manifest
# over HTTP (nginx), a manifest in an hf:// repository and under an s3://
# prefix (s3rver). A good manifest: "verified": "manifest" (with the Hub's
# sha256 or S3's MD5 first: "sha256+manifest", "md5+manifest"); a tampered
# file: exit 1, an error naming the file and both hashes, nothing installed
# and no part file left; no manifest: size+etag as before.
. "$REPO/tests/cli/lib.sh"
set -u

need_curl

D=$TMP/srv
mkdir -p "$D/www" "$D/www/hf/org" "$D/s3"
N=3
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/idx" $N 20000     # the index's own manifest
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/dir" $N 20000     # DIR/.pagein-manifest
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/none" $N 20000    # no manifest
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/bad" $N 20000     # a file changed after hashing
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/hf/org/good" $N 20000
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/hf/org/bad" $N 20000
$PY "$REPO/tests/remote/make_sharded.py" "$D/s3/pre" $N 20000
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/broken" 1 20000  # a manifest that does not parse
printf 'pagein-manifest 1\nhash xxh3-128\nfile 0 oops\n' > "$D/www/broken/.pagein-manifest"
$PY "$REPO/tests/remote/make_sharded.py" "$D/www/page" 1 20000    # a catch-all page, not a manifest
printf '<html>not found</html>\n' > "$D/www/page/.pagein-manifest"
hashout=$("$PAGEIN" hash "$D/www/idx/model.safetensors.index.json" 2>&1) ||
  { echo "pagein hash is not available: $hashout" | head -1; exit 77; }
expect_exit 0 "$PAGEIN" hash "$D/www/dir"
[ -f "$D/www/dir/.pagein-manifest" ] || fail "pagein hash DIR wrote no DIR/.pagein-manifest"
expect_exit 0 "$PAGEIN" hash "$D/www/bad/model.safetensors.index.json"
expect_exit 0 "$PAGEIN" hash "$D/www/hf/org/good"
expect_exit 0 "$PAGEIN" hash "$D/www/hf/org/bad"
expect_exit 0 "$PAGEIN" hash "$D/s3/pre"
# the same size, one byte of tensor data changed (the Hub's sha256 is taken
# when the servers start: it matches the changed file, the manifest does not)
flip() { printf 'X' | dd of="$1" bs=1 seek=1000 conv=notrunc 2>/dev/null; }
flip "$D/www/bad/model-00002-of-00003.safetensors"
flip "$D/www/hf/org/bad/model-00002-of-00003.safetensors"

start_servers "$D" nginx s3
export PAGEIN_HTTP_RETRIES=0 AWS_ENDPOINT_URL=$S3 HF_ENDPOINT=$HTTP HOME=$TMP
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_PROFILE HF_HUB_CACHE HF_HOME
log=$D/logs/nginx-access.log
verified() { echo "$OUT_TXT" | sed -n 's/.*"verified":"\([^"]*\)".*/\1/p'; }

# an index with INDEX.pagein-manifest: every shard checked against it
expect_exit 0 "$PAGEIN" pull --json --no-sync "$HTTP/files/idx/model.safetensors.index.json" "$TMP/idx/"
# (the index itself is not in the manifest: size and ETag for it)
[ "$(verified)" = size+etag,manifest ] || fail "index pull: verified '$(verified)', want size+etag,manifest: $OUT_TXT"
for i in 1 2 3; do
  cmp -s "$TMP/idx/model-0000$i-of-00003.safetensors" "$D/www/idx/model-0000$i-of-00003.safetensors" ||
    fail "shard $i differs"
done

# one shard with DIR/.pagein-manifest (`pagein hash DIR`), its own sidecar missing
before=$(wc -l < "$log")
expect_exit 0 "$PAGEIN" pull --json --no-sync "$HTTP/files/dir/model-00002-of-00003.safetensors" "$TMP/one.st"
[ "$(verified)" = manifest ] || fail "DIR/.pagein-manifest: verified '$(verified)': $OUT_TXT"
log_settle "$log" "$HTTP"
tail -n +$((before + 1)) "$log" | grep -q 'model-00002-of-00003.safetensors.pagein-manifest HTTP/1.1" 404' ||
  fail "the file's own manifest was not looked for first"
tail -n +$((before + 1)) "$log" | grep -q '/files/dir/.pagein-manifest HTTP/1.1" 20[06]' ||
  fail "DIR/.pagein-manifest was not fetched"
cmp -s "$TMP/one.st" "$D/www/dir/model-00002-of-00003.safetensors" || fail "pulled shard differs"

# a query string (the Hub's ?download=true) is not part of the manifest's
# name: the shard's own sidecar is looked for without it, then DIR's
before=$(wc -l < "$log")
expect_exit 0 "$PAGEIN" pull --json --no-sync "$HTTP/files/dir/model-00003-of-00003.safetensors?download=true" "$TMP/q.st"
[ "$(verified)" = manifest ] || fail "URL with a query: verified '$(verified)': $OUT_TXT"
log_settle "$log" "$HTTP"
tail -n +$((before + 1)) "$log" | grep -q 'download=true.pagein-manifest' &&
  fail "the manifest was looked for after the query string"
cmp -s "$TMP/q.st" "$D/www/dir/model-00003-of-00003.safetensors" || fail "pulled shard (query) differs"
# without DEST the file is named after the path, not the query
mkdir -p "$TMP/qd"
expect_exit 0 "$PAGEIN" pull --no-sync -q "$HTTP/files/dir/model-00003-of-00003.safetensors?download=true" "$TMP/qd/"
[ "$(ls "$TMP/qd")" = model-00003-of-00003.safetensors ] || fail "pulled with a query, named: $(ls "$TMP/qd")"

# no manifest: size and ETag, as before
expect_exit 0 "$PAGEIN" pull --json --no-sync "$HTTP/files/none/model.safetensors.index.json" "$TMP/none/"
[ "$(verified)" = size+etag ] || fail "no manifest: verified '$(verified)': $OUT_TXT"

# a manifest that does not parse is an error; a page that is not one is no manifest
expect_exit 2 "$PAGEIN" pull --no-sync "$HTTP/files/broken/model-00001-of-00001.safetensors" "$TMP/broken.st"
expect_contains "$HTTP/files/broken/.pagein-manifest"
[ ! -e "$TMP/broken.st" ] || fail "installed despite an unreadable manifest"
expect_exit 0 "$PAGEIN" pull --json --no-sync "$HTTP/files/page/model-00001-of-00001.safetensors" "$TMP/page.st"
[ "$(verified)" = size+etag ] || fail "catch-all page: verified '$(verified)': $OUT_TXT"

# a changed file: exit 1 naming it and both hashes; nothing installed, no part left
expect_exit 1 "$PAGEIN" pull --no-sync "$HTTP/files/bad/model.safetensors.index.json" "$TMP/bad/"
expect_contains "model-00002-of-00003.safetensors: tensor 'model.layers.1.weight'"
expect_contains "hashes to [0-9a-f]\{32\}, the manifest $HTTP/files/bad/model.safetensors.index.json.pagein-manifest states [0-9a-f]\{32\}"
[ ! -e "$TMP/bad/model-00002-of-00003.safetensors" ] || fail "the changed shard was installed"
left=$(ls "$TMP/bad" | grep pagein-) && fail "part or state files left: $left"
# the next run starts that file over (and fails the same way: the data is still wrong)
expect_exit 1 "$PAGEIN" pull --no-sync "$HTTP/files/bad/model.safetensors.index.json" "$TMP/bad/"
expect_contains "does not match"

# hf:// repository with .pagein-manifest: the Hub's sha256, then the manifest
expect_exit 0 "$PAGEIN" pull --json --no-sync hf://org/good --cache-dir "$TMP/hub"
# (.pagein-manifest itself and the index: the sha256 alone)
[ "$(verified)" = sha256,sha256+manifest ] || fail "hf repo: verified '$(verified)': $OUT_TXT"
snap=$TMP/hub/models--org--good/snapshots/$HF_COMMIT
cmp -s "$snap/model-00003-of-00003.safetensors" "$D/www/hf/org/good/model-00003-of-00003.safetensors" ||
  fail "hf shard differs"
[ -e "$snap/.pagein-manifest" ] || fail "the repository's manifest was not pulled with it"
# the sha256 the Hub states matches the changed file; the manifest catches it
expect_exit 1 "$PAGEIN" pull --no-sync hf://org/bad --cache-dir "$TMP/hub"
expect_contains "model-00002-of-00003.safetensors: tensor"
expect_contains "the manifest hf://org/bad@main/.pagein-manifest states"
ls "$TMP/hub/models--org--bad/blobs" 2>/dev/null | grep -q incomplete && fail "an .incomplete blob was left"
[ ! -e "$TMP/hub/models--org--bad/snapshots/$HF_COMMIT/model-00002-of-00003.safetensors" ] ||
  fail "the changed hf shard was linked into the snapshot"
# a blob already in the cache that the manifest rejects (changed on disk,
# same size) is fetched again, not linked as it is
blob=$(readlink -f "$snap/model-00002-of-00003.safetensors")
[ -f "$blob" ] || fail "no blob behind the snapshot link"
flip "$blob"
expect_exit 0 "$PAGEIN" pull --json --no-sync hf://org/good --cache-dir "$TMP/hub"
cmp -s "$blob" "$D/www/hf/org/good/model-00002-of-00003.safetensors" || fail "the damaged cached blob was kept"
# one file of the repository: the manifest at the repository's root
expect_exit 0 "$PAGEIN" pull --json --no-sync hf://org/good/model-00001-of-00003.safetensors "$TMP/hf1.st"
[ "$(verified)" = sha256+manifest ] || fail "hf file: verified '$(verified)': $OUT_TXT"

# s3:// prefix with its .pagein-manifest: S3's MD5 ETag, then the manifest
expect_exit 0 "$PAGEIN" pull --json --no-sync s3://bkt/pre/ "$TMP/s3/"
echo "$(verified)" | grep -q '^md5,md5+manifest$\|^md5+manifest,md5$' || fail "s3 prefix: verified '$(verified)': $OUT_TXT"
cmp -s "$TMP/s3/model-00002-of-00003.safetensors" "$D/s3/pre/model-00002-of-00003.safetensors" || fail "s3 shard differs"

expect_exit 0 "$PAGEIN" pull --help
expect_contains "manifest"
exit 0
