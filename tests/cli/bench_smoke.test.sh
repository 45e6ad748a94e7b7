# The safetensors benchmarks run once on tiny inputs so they do not rot
# (never timed here).
. "$REPO/tests/cli/lib.sh"
B=$(dirname "$PAGEIN")/bench
[ -x "$B/bench_parse" ] && [ -x "$B/bench_readall" ] || { echo "benchmarks not built in $B"; exit 77; }
"$PAGEIN" make-sample "$TMP/s.safetensors" --layers 2 --hidden 64 -q || fail "make-sample"
TMPDIR=$TMP "$B/bench_parse" --tensors 50 --iters 2 --file "$TMP/s.safetensors" --json > "$TMP/p.json" || fail "bench_parse"
$PY -c "import json; j=json.load(open('$TMP/p.json')); assert j['synthetic']['tensors']==50 and j['open']['tensors']==21" || fail "bench_parse json"
"$B/bench_readall" "$TMP/s.safetensors" --json > "$TMP/r.json" || fail "bench_readall"
$PY -c "import json; j=json.load(open('$TMP/r.json')); assert len(j['runs'])==4 and all(r['bytes']>0 for r in j['runs'])" || fail "bench_readall json"
exit 0
