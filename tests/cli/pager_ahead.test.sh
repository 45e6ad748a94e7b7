# `bench load --ahead` with 2^31 and UINT_MAX finishes (the
# library clamps "layers ahead" to the layer count; it used to hang), and
# values that do not fit an unsigned int are refused instead of wrapping.
# bench_torch_open runs once on tiny inputs (never timed here).
. "$REPO/tests/cli/lib.sh"
"$PAGEIN" make-sample "$TMP/s.safetensors" --layers 4 --hidden 64 -q || fail "make-sample"
for a in 2147483648 4294967295; do
  timeout 60 "$PAGEIN" bench load "$TMP/s.safetensors" --only prefetch --ahead $a --runs 1 --no-fio > "$TMP/out" 2>&1
  rc=$?
  [ $rc -eq 124 ] && fail "bench load --ahead $a hung (killed after 60 s)"
  [ $rc -eq 0 ] || fail "bench load --ahead $a exited $rc: $(cat "$TMP/out")"
  grep -q "^prefetch" "$TMP/out" || fail "bench load --ahead $a printed no prefetch row: $(cat "$TMP/out")"
done
for a in -1 4294967296 18446744073709551617 2x ""; do
  expect_exit 2 timeout 60 "$PAGEIN" bench load "$TMP/s.safetensors" --only prefetch --ahead "$a" --runs 1 --no-fio
  expect_contains "--ahead must be"
done
B=$(dirname "$PAGEIN")/bench/bench_torch_open
[ -x "$B" ] || { echo "bench_torch_open not built"; exit 77; }
TMPDIR=$TMP timeout 60 "$B" --small 2000 --large 8000 --iters 1 --json > "$TMP/t.json" || fail "bench_torch_open"
$PY -c "import json; j=json.load(open('$TMP/t.json')); assert [r['tuples'] for r in j['runs']]==[2000,8000] and all(r['open_rc']==0 for r in j['runs'])" || fail "bench_torch_open json: $(cat "$TMP/t.json")"
exit 0
