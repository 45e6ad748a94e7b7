# meta_cache_mirror.test.sh - the metadata cache checks content, not only a
# claimed identity (docs/SAFETY.md "Metadata cache"): tools/hostile.py on
# 127.0.0.1 first serves a safetensors file whose header has its two
# tensors swapped, then the honest file, at the same URL with the same
# ETag (it names only the size) and the same size. The entry written
# while the tampered header was served must not be handed out for the
# honest bytes: inspect must show the honest offsets, the entry must be
# replaced, and a warm open of the unchanged object still uses the entry.
. "$REPO/tests/cli/lib.sh"
set -u

need_curl
need_loopback2

W=$TMP/www S=$TMP/hs
mkdir -p "$W" "$S" "$TMP/home"
export HOME=$TMP/home XDG_CACHE_HOME=$TMP/home/.cache PAGEIN_META_CACHE_DIR=$TMP/mc PAGEIN_HTTP_RETRIES=0
unset PAGEIN_META_CACHE PAGEIN_META_TRUST_SECONDS
# write W/NAME: tensors a = [1, 2] and b = [3, 4] (F32), SWAP=1: the header
# gives a the bytes of b and b those of a (same length, same data bytes)
mk() {
  SWAP=$2 $PY - "$W/$1" <<'PY'
import json, os, struct, sys
sw = os.environ["SWAP"] == "1"
a, b = ([8, 16], [0, 8]) if sw else ([0, 8], [8, 16])
h = json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": a},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": b}}, separators=(",", ":")).encode()
with open(sys.argv[1] + ".tmp", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + struct.pack("<4f", 1, 2, 3, 4))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
PY
}
mk m.safetensors 1
start_hostile "$W" "$S"
URL=http://127.0.0.1:$PA/file/m.safetensors
offs() { echo "$OUT_TXT" | tr -d ' \n' | grep -o '"name":"[ab]"[^}]*' | sed 's/"dtype[^,]*,//' | tr '\n' ';'; }

# the tampering answer: cached (that much is the cache's job)
expect_exit 0 "$PAGEIN" inspect --json "$URL"
bad=$(offs)
[ "$(find "$PAGEIN_META_CACHE_DIR" -maxdepth 1 -type f ! -name '.tmp-*' | wc -l)" = 1 ] ||
  fail "no cache entry after the first inspect: $(ls -la "$PAGEIN_META_CACHE_DIR")"
# the honest bytes, same URL, same size, same ETag
mk m.safetensors 0
expect_exit 0 "$PAGEIN" inspect --json "$URL"
good=$(offs)
[ -n "$good" ] && [ "$good" != "$bad" ] ||
  fail "the honest object was described from the tampered entry: $good (tampered: $bad)"
cp "$W/m.safetensors" "$TMP/local.safetensors"
expect_exit 0 "$PAGEIN" inspect --json "$TMP/local.safetensors"
[ "$(offs)" = "$good" ] || fail "remote offsets $good differ from the local file's $(offs)"
# the entry now holds the honest header: a warm open agrees with it
expect_exit 0 "$PAGEIN" inspect --json "$URL"
[ "$(offs)" = "$good" ] || fail "warm inspect: $(offs), want $good"
grep -c '"HEAD\|"GET' "$S/requests.log" > /dev/null || true
exit 0
