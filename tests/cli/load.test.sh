# pagein plan and pagein bench-load on a tiny generated model (runs the
# benchmark once, as make test must, without timing anything).
. "$REPO/tests/cli/lib.sh"
"$PAGEIN" make-sample "$TMP/m.safetensors" --size 3M -q || fail "make-sample failed"

expect_exit 0 "$PAGEIN" plan "$TMP/m.safetensors"
expect_contains "strategy: read"
expect_contains "small model"
expect_exit 0 "$PAGEIN" plan --json "$TMP/m.safetensors"
echo "$OUT_TXT" | $PY -m json.tool >/dev/null || fail "plan --json is not JSON: $OUT_TXT"
expect_exit 2 "$PAGEIN" plan "$TMP/missing.safetensors"
expect_exit 2 "$PAGEIN" plan
expect_exit 0 "$PAGEIN" plan --help
printf 'not a model at all, just some bytes' > "$TMP/bad.safetensors"
expect_exit 1 "$PAGEIN" plan "$TMP/bad.safetensors"

expect_exit 0 "$PAGEIN" bench load --help
expect_contains "read1m"
expect_exit 2 "$PAGEIN" bench-load
expect_exit 2 "$PAGEIN" bench-load "$TMP/m.safetensors" --runs 0
expect_exit 2 "$PAGEIN" bench-load "$TMP/missing.safetensors"

out=$("$PAGEIN" bench-load "$TMP/m.safetensors" --runs 1 --json --no-fio -q) || fail "bench-load --json failed: $out"
echo "$out" | $PY -c '
import json, sys
d = json.load(sys.stdin)
assert d["model_bytes"] > 0 and d["device_limit_gbps"] is None
names = {(r["strategy"], r["cache"]) for r in d["runs"]}
for s in ("lazy", "populate", "prefetch", "read", "auto", "read1m", "readall"):
    for c in ("cold", "warm"):
        assert (s, c) in names, (s, c)
keys = ("open_s", "first_layer_s", "all_s", "gbps", "peak_rss_bytes", "major_faults", "minor_faults", "read_bytes")
for r in d["runs"]:
    assert r["ok"], r
    for k in keys:
        assert k in r, k
    assert r["all_s"] > 0 and r["peak_rss_bytes"] > 0
assert [(p["strategy"], p["wait"]) for p in d["pipeline"]] == [("lazy", "none"), ("prefetch", "tensor"), ("prefetch", "layer"), ("populate", "none")], d["pipeline"]
for p in d["pipeline"]:
    assert 0 < p["first_output_s"] <= p["total_s"] and p["compute_only_s"] > 0, p
' || fail "bench-load JSON schema: $out"

out=$("$PAGEIN" bench-load "$TMP/m.safetensors" --runs 1 --only populate,read1m --cache cold --no-pipeline --no-fio -q) || fail "bench-load text failed"
echo "$out" | grep -q "^populate  cold" || fail "no populate row: $out"
echo "$out" | grep -q "verdicts" || fail "no verdicts: $out"
exit 0
