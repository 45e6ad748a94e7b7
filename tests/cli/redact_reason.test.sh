# redact_reason.test.sh - the strategy's reason ("auto: URL is not a local
# file ...") names a remote model's URL redacted in plan, plan --json and
# Python's strategy_reason: it quoted user:pass@ and X-Amz-Signature=
# as given (docs/SAFETY.md "Remote sources").
. "$REPO/tests/cli/lib.sh"
set -u
need_curl
need_loopback2
W=$TMP/www S=$TMP/hs
mkdir -p "$W" "$S"
cp "$TESTDATA/safetensors/burn-mnist-f32.safetensors" "$W/model.safetensors"
start_hostile "$W" "$S"
export PAGEIN_HTTP_RETRIES=0
U="http://user:Passw0rdZ@127.0.0.1:$PA/file/model.safetensors?X-Amz-Signature=SigValueZ"
for args in "plan" "plan --json"; do
  # shellcheck disable=SC2086
  expect_exit 0 "$PAGEIN" $args "$U"
  echo "$OUT_TXT" | grep -q "not a local file" || fail "$args: no reason printed: $OUT_TXT"
  echo "$OUT_TXT" | grep -qE "Passw0rdZ|SigValueZ" && fail "$args printed a secret: $(echo "$OUT_TXT" | grep -E "Passw0rdZ|SigValueZ")"
done
expect_exit 0 "$PAGEIN" plan "$U"
expect_contains 'auto: http://\*\*\*@127.0.0.1:'"$PA"'/file/model.safetensors?X-Amz-Signature=REDACTED is not a local file'
# the Python module built next to the tool, when it was built
PYP=$(dirname "$PAGEIN")/python
if [ -d "$PYP/pagein" ] && PYTHONPATH=$PYP $PY -c 'import pagein' 2>/dev/null; then
  r=$(PYTHONPATH=$PYP $PY -c 'import sys, pagein
m = pagein.open_model(sys.argv[1], strategy="auto")
print(m.strategy_reason)' "$U" 2>&1) || fail "open_model: $r"
  echo "$r" | grep -q "not a local file" || fail "Python: no reason: $r"
  echo "$r" | grep -qE "Passw0rdZ|SigValueZ" && fail "Python strategy_reason has a secret: $r"
fi
echo "redact_reason: ok"
