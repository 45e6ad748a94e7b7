# pagein verify: OK / INVALID lines and exit codes 0, 1, 2.
. "$REPO/tests/cli/lib.sh"
ST=$TESTDATA/safetensors
[ -d "$ST" ] || { echo "no test data at $ST"; exit 77; }
expect_exit 0 "$PAGEIN" verify --help
expect_exit 2 "$PAGEIN" verify
expect_exit 0 "$PAGEIN" verify "$ST"/golden-rust-tests/*.safetensors "$ST"/samples-2022/*.safetensors "$ST"/*.safetensors
expect_contains "overall.safetensors: OK (9 tensors)"
for f in "$ST"/malformed/*.safetensors; do
  expect_exit 1 "$PAGEIN" verify "$f"
  expect_contains "INVALID"
done
expect_exit 1 "$PAGEIN" verify "$ST/malformed/test_validation_overflow_0.safetensors"
expect_contains "size overflow"
expect_exit 1 "$PAGEIN" verify "$ST/malformed/test_header_too_large.safetensors"
expect_contains "header too large"
# one bad among good ones: every file reported, exit 1
expect_exit 1 "$PAGEIN" verify "$ST/samples-2022/f.safetensors" "$ST/malformed/test_invalid_info.safetensors" "$ST/samples-2022/d.safetensors"
expect_contains "d.safetensors: OK"
expect_contains "expected 16"
# lenient: trailing bytes accepted
expect_exit 0 "$PAGEIN" verify --lenient "$ST/malformed/test_metadata_incomplete_buffer_0.safetensors"
# unreadable file: exit 2
expect_exit 2 "$PAGEIN" verify "$ST/samples-2022/f.safetensors" "$TMP/none.safetensors"
expect_contains "ERROR"
# -q prints only failures
expect_exit 0 "$PAGEIN" verify -q "$ST/samples-2022/f.safetensors"
[ -z "$OUT_TXT" ] || fail "-q printed: $OUT_TXT"
exit 0
