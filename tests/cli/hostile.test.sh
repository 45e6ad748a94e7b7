# cli: serial
# hostile.test.sh - pull, inspect and plan against a hostile server
# (tools/hostile.py on 127.0.0.1 = the configured host "A", 127.0.0.2 =
# another host "B", and TLS on 127.0.0.1 with a private CA), the rules of
# docs/SAFETY.md "Remote sources": credentials stay with their origin (also
# on the range requests after a redirect), no https->http downgrade,
# X-Repo-Commit and revisions never name paths outside the cache, the Hub's
# checksum comes from the Hub and not from the redirect target, S3 listing
# keys outside the prefix are ignored, a symlink at the part file is not
# followed, the resume state is 0600 without secrets, secrets are never
# printed, and a server sending 2 bytes/s cannot hold a command past
# PAGEIN_HTTP_TIMEOUT.
. "$REPO/tests/cli/lib.sh"
set -u
# HOSTILE_ALL=1: go on after a failure and count them (to see every item
# that fails against an older build at once)
nfail=0
if [ "${HOSTILE_ALL:-}" = 1 ]; then fail() { echo "FAIL: $*" | head -c 600 >&2; echo >&2; nfail=$((nfail + 1)); }; fi

need_curl
need_loopback2
command -v openssl > /dev/null || { echo "openssl is not installed"; exit 77; }

W=$TMP/www S=$TMP/hs
mkdir -p "$W/subst" "$W/p" "$S" "$TMP/home"
cp "$TESTDATA/safetensors/burn-mnist-f32.safetensors" "$W/model.safetensors"   # 1.5 MB: range requests after the probe
head -c 1509296 /dev/urandom > "$W/subst/model.safetensors"
head -c 300000 /dev/urandom > "$W/p/one.bin"
head -c 200000 /dev/urandom > "$W/p/two.bin"
SHA=$(sha256sum "$W/model.safetensors" | cut -d' ' -f1)
( cd "$S" &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj /CN=pagein-hostile-CA &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 &&
  printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' > srv.ext &&
  openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile srv.ext
) > "$S/openssl.log" 2>&1 || fail "openssl: $(cat "$S/openssl.log")"

start_hostile "$W" "$S" "$S/srv.pem" "$S/srv.key"
A=http://127.0.0.1:$PA T=https://127.0.0.1:$PT
export CURL_CA_BUNDLE=$S/ca.pem HOME=$TMP/home PAGEIN_HTTP_RETRIES=0 PAGEIN_HTTP_BACKOFF_MS=10
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL HF_TOKEN HF_ENDPOINT
LOG=$S/requests.log

# headers SRV: "name: value" of every header server SRV received since the mark
mark() { MARK=0; [ -f "$LOG" ] && MARK=$(wc -l < "$LOG"); }
headers() {
  tail -n +$((MARK + 1)) "$LOG" | $PY -c '
import json, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
for l in sys.stdin:
    r = json.loads(l)
    if r["srv"] == sys.argv[1]:
        for k, v in r["headers"].items():
            print("%s %s: %s" % (r["path"], k, v))' "$1"
}
no_creds_at() { # SRV WHAT: SRV got no credential header
  local h
  h=$(headers "$1" | grep -iE ': ' | grep -iE '^[^ ]* (authorization|x-amz-security-token|x-amz-date|cookie):' || true)
  [ -z "$h" ] || fail "$2: credentials reached server $1: $h"
  headers "$1" | grep -q . || fail "$2: server $1 got no request at all (the check would be empty)"
}

# ---- 1. a token stays with its host: pull, plan, and the range requests after the redirect ----
mark
HF_ENDPOINT=$A HF_TOKEN=hf_s3cr3tvalue expect_exit 0 "$PAGEIN" pull --no-sync "hf://ok/repo/model.safetensors" \
  --cache-dir "$TMP/c1"
headers A | grep -q "authorization: Bearer hf_s3cr3tvalue" || fail "the token did not reach the Hub itself: $(headers A)"
no_creds_at B "pull hf:// (HF_TOKEN)"
[ "$(headers B | grep -c 'range: bytes=')" -ge 2 ] || fail "no range requests after the redirect: $(headers B)"
cmp "$TMP/c1/models--ok--repo/snapshots/0123456789abcdef0123456789abcdef01234567/model.safetensors" \
  "$W/model.safetensors" || fail "hf pull differs"
n=$(echo "$OUT_TXT" | grep -c "sent in clear") || true
[ "$n" = 1 ] || fail "expected one plain-http credentials warning, got $n: $OUT_TXT"
echo "$OUT_TXT" | grep -q s3cr3t && fail "the token was printed: $OUT_TXT"
mark
HF_ENDPOINT=$A HF_TOKEN=hf_s3cr3tvalue expect_exit 0 "$PAGEIN" plan --json "hf://ok/repo/model.safetensors"
no_creds_at B "plan hf:// (HF_TOKEN)"
# userinfo of a plain URL: not to the other host, and never printed
mark
expect_exit 0 "$PAGEIN" inspect --json "http://user:pw0rd@127.0.0.1:$PA/redir/model.safetensors"
no_creds_at B "inspect user:pass@"
echo "$OUT_TXT" | grep -q pw0rd && fail "the password was printed: $OUT_TXT"
mark
expect_exit 0 "$PAGEIN" pull --no-sync "http://user:pw0rd@127.0.0.1:$PA/redir/model.safetensors" "$TMP/ui/"
no_creds_at B "pull user:pass@"
[ "$(headers B | grep -c 'range: bytes=')" -ge 2 ] || fail "no range requests after the redirect: $(headers B)"
echo "$OUT_TXT" | grep -q pw0rd && fail "the password was printed: $OUT_TXT"
# a same-origin redirect keeps them (the Hub's own /cdn/ layout in nginx)
mark
expect_exit 0 "$PAGEIN" inspect "http://user:pw0rd@127.0.0.1:$PA/redir-same/model.safetensors"
headers A | grep -q "/file/model.safetensors authorization: Basic" || fail "same origin lost its credentials: $(headers A)"

# ---- 1. s3://: no signature, session token or key id to the redirect target ----
mark
AWS_ACCESS_KEY_ID=AKIDHOSTILE AWS_SECRET_ACCESS_KEY=s3cr3tkey AWS_SESSION_TOKEN=s3ssiontok AWS_ENDPOINT_URL=$A/s3 \
  expect_exit 0 "$PAGEIN" pull --no-sync "s3://bkt/model.safetensors" "$TMP/s3/"
headers A | grep -q "x-amz-security-token: s3ssiontok" || fail "the session token did not reach the endpoint: $(headers A)"
headers A | grep -q "authorization: AWS4-HMAC-SHA256" || fail "no signature at the endpoint: $(headers A)"
no_creds_at B "pull s3:// (SigV4 + AWS_SESSION_TOKEN)"
headers B | grep -q AKIDHOSTILE && fail "the key id reached the other host: $(headers B)"
cmp "$TMP/s3/model.safetensors" "$W/model.safetensors" || fail "s3 pull differs"

# ---- 1. https -> http downgrade refused ----
expect_exit 2 "$PAGEIN" inspect "$T/downgrade/model.safetensors"
expect_contains "https to plain http"
expect_contains "refused"
HF_ENDPOINT=$T HF_TOKEN=hf_s3cr3tvalue expect_exit 2 "$PAGEIN" pull --no-sync "hf://ok/repo/model.safetensors" \
  --cache-dir "$TMP/c1t"
expect_contains "https to plain http"

# ---- 2. X-Repo-Commit "../../../escaped" names nothing ----
HF_ENDPOINT=$A expect_exit 2 "$PAGEIN" pull --no-sync "hf://commit/repo/model.safetensors" --cache-dir "$TMP/c2/x/y"
expect_contains "X-Repo-Commit"
[ -z "$(find "$TMP" -name 'escaped*')" ] || fail "X-Repo-Commit named a path: $(find "$TMP" -name 'escaped*')"

# ---- 2. a revision that climbs out (percent-encoded) is refused before anything is written ----
for rev in '..%2F..%2F..%2Fesc2' '%2E%2E%2Fesc2' 'a%2F..%2F..%2Fesc2' '%2Fabs' 'x%00y'; do
  HF_ENDPOINT=$A expect_exit 2 "$PAGEIN" pull --no-sync "hf://ok/repo@$rev/model.safetensors" --cache-dir "$TMP/c3/x/y"
  expect_contains "invalid revision"
done
[ -z "$(find "$TMP" -name 'esc2*')" ] || fail "a revision named a path: $(find "$TMP" -name 'esc2*')"
[ ! -e "$TMP/c3" ] || [ -z "$(find "$TMP/c3" -type f)" ] || fail "files written for a refused revision: $(find "$TMP/c3")"

# ---- 3. the redirect target cannot substitute the Hub's checksum ----
HF_ENDPOINT=$A expect_exit 1 "$PAGEIN" pull --no-sync "hf://subst/repo/model.safetensors" --cache-dir "$TMP/c4"
expect_contains "sha256"
expect_contains "$SHA"
[ -z "$(find "$TMP/c4" -path '*snapshots*' -name model.safetensors)" ] || fail "a substituted file was installed"
# nor name the blob with its own ETag when the Hub sent none in X-Linked-Etag
HF_ENDPOINT=$A expect_exit 0 "$PAGEIN" pull --no-sync "hf://b64/repo/model.safetensors" --cache-dir "$TMP/c5"
[ -f "$TMP/c5/models--b64--repo/blobs/$SHA" ] || fail "the blob is not named by the Hub's ETag: $(ls "$TMP/c5/models--b64--repo/blobs")"

# ---- 4. keys outside the prefix in an S3 listing are ignored ----
AWS_ENDPOINT_URL=$A/s3 expect_exit 0 "$PAGEIN" pull --no-sync "s3://bkt/p/" "$TMP/s3p/"
[ "$(cd "$TMP/s3p" && find . -type f | sort | tr '\n' ' ')" = "./one.bin ./two.bin " ] ||
  fail "the prefix pull holds $(cd "$TMP/s3p" && find . | tr '\n' ' ')"
cmp "$TMP/s3p/one.bin" "$W/p/one.bin" || fail "one.bin differs"

# ---- 5. a symlink planted at the part file is not followed ----
mkdir -p "$TMP/d"
echo precious > "$TMP/outside.bin"
ln -s "$TMP/outside.bin" "$TMP/d/model.safetensors.pagein-part"
expect_exit 2 "$PAGEIN" pull --no-sync "$A/file/model.safetensors" "$TMP/d/model.safetensors"
expect_contains "symbolic link"
[ "$(cat "$TMP/outside.bin")" = precious ] || fail "the download was written through the symlink"
# one at the state file is replaced, not written through
ln -s "$TMP/outside.bin" "$TMP/d/m2.safetensors.pagein-part.pagein-state"
expect_exit 0 "$PAGEIN" pull --no-sync "$A/file/model.safetensors" "$TMP/d/m2.safetensors"
[ "$(cat "$TMP/outside.bin")" = precious ] || fail "the state was written through the symlink"
cmp "$TMP/d/m2.safetensors" "$W/model.safetensors" || fail "m2 differs"

# ---- 6. secrets never printed; the resume state is 0600 and holds none ----
url="$A/failrange/model.safetensors?X-Amz-Credential=AKIDX%2F20260101&X-Amz-Signature=deadbeefsig&x=1"
expect_exit 2 "$PAGEIN" pull --no-sync --json "$url" "$TMP/e/model.safetensors"
expect_contains '"ok":false'
expect_contains 'X-Amz-Signature=REDACTED'
echo "$OUT_TXT" | grep -qE "deadbeefsig|AKIDX" && fail "a signature was printed: $OUT_TXT"
st=$TMP/e/model.safetensors.pagein-part.pagein-state
[ -f "$st" ] || fail "no resume state after a failed pull"
[ "$(stat -c %a "$st")" = 600 ] || fail "the resume state is mode $(stat -c %a "$st")"
grep -qE "deadbeefsig|AKIDX" "$st" && fail "the resume state holds a secret: $(head -c 300 "$st")"
grep -q "X-Amz-Signature=REDACTED" "$st" || fail "the resume state lacks the (redacted) URL: $(head -c 300 "$st")"
expect_exit 2 "$PAGEIN" inspect "http://u:pw0rd@127.0.0.1:$PA/nonexistent.safetensors?sig=deadbeefsig"
echo "$OUT_TXT" | grep -qE "pw0rd|deadbeefsig" && fail "a secret was printed: $OUT_TXT"
expect_exit 1 "$PAGEIN" plan "http://u:pw0rd@127.0.0.1:$PA/nonexistent.safetensors?token=deadbeefsig"
echo "$OUT_TXT" | grep -qE "pw0rd|deadbeefsig" && fail "a secret was printed: $OUT_TXT"

# ---- 9. a server dribbling 2 bytes/s cannot hold inspect past the timeout ----
t0=$(date +%s.%N)
PAGEIN_HTTP_TIMEOUT=2 PAGEIN_HTTP_RETRIES=4 expect_exit 2 timeout 60 "$PAGEIN" inspect "$A/dribble/model.safetensors"
t1=$(date +%s.%N)
expect_contains "timed out"
expect_contains "after 1 attempt"   # a server that sends too slowly is not retried
$PY -c "import sys; d=$t1-$t0; sys.exit(0 if d < 8 else 1)" ||
  fail "inspect against a dribbling server took $($PY -c "print(round($t1-$t0,1))") s with PAGEIN_HTTP_TIMEOUT=2"
[ $nfail = 0 ] || { echo "$nfail check(s) failed"; exit 1; }
echo "ok"
