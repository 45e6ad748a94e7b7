# Remote errors that explain, and a static Hub mirror: an HTTP folder
# listing (200, chunked, no length) says that plain HTTP cannot list folders
# and what to do; pulling hf://ORG/NAME@COMMIT/FILE into the Hugging Face
# cache from a static mirror (nginx serving files: its ETag "mtime-size" is
# no hash, no X-Repo-Commit) names the blob by the sha256 of the bytes, as
# the Hub names an LFS blob, and a second pull finds it cached.
. "$REPO/tests/cli/lib.sh"
cd "$TMP"
need_curl
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for i in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# ---- a folder listing: 200, chunked, no Content-Length ----
LP=$(free_port)
$PY - "$LP" > listing.log 2>&1 <<'PYEOF' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = b"<html><body><a href='model.safetensors'>model.safetensors</a></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PYEOF
LPID=$!
trap 'kill $LPID 2>/dev/null' EXIT
wait_port "$LP" || fail "listing server did not start"
export PAGEIN_HTTP_RETRIES=0
expect_exit 2 "$PAGEIN" inspect "http://127.0.0.1:$LP/models/"
expect_contains "without a usable Content-Range or Content-Length"
expect_contains "Plain HTTP cannot list folders"
expect_contains "docs/REMOTE.md"
expect_exit 2 "$PAGEIN" inspect "http://127.0.0.1:$LP/models"
expect_contains "Plain HTTP cannot list folders"
kill $LPID 2>/dev/null; trap - EXIT

# ---- a static Hub mirror ----
COMMIT=89abcdef0123456789abcdef0123456789abcdef
D=$TMP/srv
mkdir -p "$D/www/mirror/org/tiny/resolve/$COMMIT/sub"
"$PAGEIN" make-sample "$D/www/mirror/org/tiny/resolve/$COMMIT/model.safetensors" --layers 1 --hidden 64 -q || fail "make-sample"
echo '{"model_type": "tiny"}' > "$D/www/mirror/org/tiny/resolve/$COMMIT/sub/config.json"
start_servers "$D" nginx
export HF_ENDPOINT=$HTTP/files/mirror HF_HUB_CACHE=$TMP/hub HOME=$TMP
src=$D/www/mirror/org/tiny/resolve/$COMMIT
etag=$(curl -sI "$HTTP/files/mirror/org/tiny/resolve/$COMMIT/model.safetensors" | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: //p')
echo "$etag" | grep -qE '^"[0-9a-f]+-[0-9a-f]+"$' || fail "nginx's ETag is not mtime-size: '$etag'"
repo=$TMP/hub/models--org--tiny
for f in model.safetensors sub/config.json; do
  expect_exit 0 "$PAGEIN" pull --no-sync --json "hf://org/tiny@$COMMIT/$f"
  sha=$(sha256sum "$src/$f" | cut -d' ' -f1)
  [ -f "$repo/blobs/$sha" ] || fail "$f: no blob named by its sha256 ($sha): $(ls -a "$repo/blobs")"
  cmp "$repo/blobs/$sha" "$src/$f" || fail "$f: blob differs"
  [ -L "$repo/snapshots/$COMMIT/$f" ] || fail "$f: no snapshot link"
  cmp "$repo/snapshots/$COMMIT/$f" "$src/$f" || fail "$f: snapshot link leads elsewhere"
  want=$(echo "$f" | sed 's|[^/]*/|../|g; s|[^/]*$||')../../blobs/$sha
  [ "$(readlink "$repo/snapshots/$COMMIT/$f")" = "$want" ] || fail "$f: link $(readlink "$repo/snapshots/$COMMIT/$f"), expected $want"
  # pulled again: in the cache, nothing fetched
  expect_exit 0 "$PAGEIN" pull --no-sync --json "hf://org/tiny@$COMMIT/$f"
  expect_contains '"fetched":0,'
done
ls -a "$repo/blobs" | grep -q 'pagein-unnamed\|incomplete' && fail "temporary blobs left: $(ls -a "$repo/blobs")"
# huggingface_hub reads it offline, when it is installed
if $PY -c 'import huggingface_hub' 2>/dev/null; then
  HF_HUB_OFFLINE=1 $PY -c "
import sys, huggingface_hub as h
p = h.hf_hub_download('org/tiny', 'model.safetensors', revision='$COMMIT', cache_dir='$TMP/hub')
assert open(p, 'rb').read() == open('$src/model.safetensors', 'rb').read()" || fail "huggingface_hub does not find the blob"
else
  echo "note: huggingface_hub is not installed: the offline lookup is not checked"
fi

# ---- libcurl and libcrypto are loaded on first use, not at start ----
LD_DEBUG=libs "$PAGEIN" --version > start.log 2>&1 || fail "pagein --version: $(tail -3 start.log)"
grep -qE "libcurl|libcrypto" start.log && fail "pagein --version loaded libcurl or libcrypto: $(grep -E 'libcurl|libcrypto' start.log | head -3)"
# one that cannot be loaded: an error naming the source and the library, no crash
url=$HTTP/files/mirror/org/tiny/resolve/$COMMIT/model.safetensors
PAGEIN_CURL_LIBRARY=$TMP/none/libcurl.so.4 expect_exit 2 "$PAGEIN" inspect "$url"
expect_contains "$url"
expect_contains "libcurl4"
expect_contains "$TMP/none/libcurl.so.4"
HF_HUB_CACHE=$TMP/hub-nocrypto PAGEIN_CRYPTO_LIBRARY=$TMP/none/libcrypto.so.3 \
  expect_exit 2 "$PAGEIN" pull --no-sync "hf://org/tiny@$COMMIT/model.safetensors"
expect_contains "$TMP/none/libcrypto.so.3"
expect_contains "libssl3"
[ -e "$TMP/hub-nocrypto/models--org--tiny/snapshots/$COMMIT/model.safetensors" ] && fail "a snapshot link without a hash"
echo ok
