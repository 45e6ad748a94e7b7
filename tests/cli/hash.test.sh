# pagein hash / hash --check / verify --manifest: data integrity manifests.
. "$REPO/tests/cli/lib.sh"
expect_exit 0 "$PAGEIN" hash --help
expect_contains "XXH3-128"
expect_exit 2 "$PAGEIN" hash
expect_exit 2 "$PAGEIN" hash --bogus m
"$PAGEIN" make-sample "$TMP/m.safetensors" --size 4M --seed 3 -q || fail "make-sample"
OUT_TXT=$("$PAGEIN" hash "$TMP/m.safetensors" 2>&1); rc=$?
if [ $rc -eq 2 ] && echo "$OUT_TXT" | grep -q "libxxhash"; then
  echo "hashing not built: libxxhash-dev missing"; exit 77
fi
[ $rc -eq 0 ] || fail "hash exited $rc: $OUT_TXT"
expect_contains "GB/s"
M="$TMP/m.safetensors.pagein-manifest"
[ -s "$M" ] || fail "no manifest written"
head -1 "$M" | grep -qx "pagein-manifest 1" || fail "manifest magic"
tail -1 "$M" | grep -q "^end 1 " || fail "manifest end line"

# an independent implementation agrees on one tensor's hash (xxhsum -H2 = XXH128)
if command -v xxhsum >/dev/null; then
  set -- $(grep '^tensor 0 .* model.norm.weight$' "$M")
  off=$3 n=$4 want=$5
  dd if="$TMP/m.safetensors" of="$TMP/t.bin" bs=1 skip="$off" count="$n" 2>/dev/null
  got=$(xxhsum -H2 "$TMP/t.bin" | cut -d' ' -f1)
  [ "$got" = "$want" ] || fail "xxhsum says $got for model.norm.weight, manifest $want"
fi

expect_exit 0 "$PAGEIN" hash --check "$TMP/m.safetensors"
expect_contains "OK, matches"
expect_exit 0 "$PAGEIN" verify --manifest "$M" "$TMP/m.safetensors"
"$PAGEIN" hash --check --json "$TMP/m.safetensors" | $PY -m json.tool >/dev/null || fail "hash --check --json"
"$PAGEIN" hash --json -o "$TMP/other.manifest" "$TMP/m.safetensors" | $PY -m json.tool >/dev/null || fail "hash --json"
cmp -s "$M" "$TMP/other.manifest" || fail "hashing is not deterministic"

# flip one byte of the last tensor's data (the header is untouched, so plain
# verify still passes: only the manifest check sees it)
cp "$TMP/m.safetensors" "$TMP/bad.safetensors"
size=$(stat -c %s "$TMP/bad.safetensors")
printf '\x5a' | dd of="$TMP/bad.safetensors" bs=1 seek=$((size - 3)) conv=notrunc 2>/dev/null
expect_exit 0 "$PAGEIN" verify "$TMP/bad.safetensors"
expect_exit 1 "$PAGEIN" verify --manifest "$M" "$TMP/bad.safetensors"
expect_contains "MISMATCH"
expect_contains "data hash differs"
expect_exit 1 "$PAGEIN" hash -c -o "$M" "$TMP/bad.safetensors"
"$PAGEIN" hash -c --json -o "$M" "$TMP/bad.safetensors" | $PY -m json.tool >/dev/null || fail "mismatch --json"

# a damaged manifest is invalid input (exit 1), a missing one an I/O error (2)
head -c 100 "$M" > "$TMP/cut.manifest"
expect_exit 1 "$PAGEIN" verify --manifest "$TMP/cut.manifest" "$TMP/m.safetensors"
expect_exit 2 "$PAGEIN" hash -c -o "$TMP/missing.manifest" "$TMP/m.safetensors"
expect_exit 2 "$PAGEIN" verify --manifest "$M" "$TMP/m.safetensors" "$TMP/bad.safetensors"
exit 0
