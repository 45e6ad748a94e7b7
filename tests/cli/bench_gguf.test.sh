# bench_gguf runs once on tiny inputs (never timed in make test) and prints valid JSON.
. "$REPO/tests/cli/lib.sh"
B="$REPO/${BUILD:-build}/bench/bench_gguf"
[ -x "$B" ] || { echo "skip: $B not built"; exit 77; }
expect_exit 0 "$B" --vocab 200 --tensors 12 --iters 1 --json
echo "$OUT_TXT" | $PY -m json.tool >/dev/null || fail "bench_gguf --json is not JSON: $OUT_TXT"
expect_contains '"vocab": 200'
expect_exit 2 "$B" --bogus
