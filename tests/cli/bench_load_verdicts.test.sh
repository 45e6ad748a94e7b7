#!/usr/bin/env bash
# bench load's verdicts: the populate verdict names each target; a cold run
# faster than the device limit is flagged NOT COLD and not judged; the limit
# line says how it was had (here given by PAGEIN_BENCH_DEVICE_LIMIT: no fio
# needed); the JSON carries device_limit_how and the engine trace's memory
# counters. --reload: every row measured again in the same process after a
# close, the second read taking the first's memory (bytes_reused), with the
# read verdict against read1m (first load and reload).
. "$REPO/tests/cli/lib.sh"
M=$TMP/m.safetensors
"$PAGEIN" make-sample "$M" --layers 2 --hidden 128 -q || fail "make-sample"
out=$(PAGEIN_BENCH_DEVICE_LIMIT=0.000001 "$PAGEIN" bench load "$M" --runs 1 --no-pipeline --only populate,read,read1m -q) \
  || fail "bench load: $out"
echo "$out" | grep -q "device limit: 0.00 GB/s, measured in this run (given by PAGEIN_BENCH_DEVICE_LIMIT" \
  || fail "no device-limit line saying how: $out"
echo "$out" | grep -E '^  populate .*\[NOT COLD: .*-> NOT JUDGED \(>= 2.5x read1m: (met|MISSED); >= 70% of fio: met\)' -q \
  || fail "populate not flagged NOT COLD with each target named: $out"
echo "$out" | grep -E '^  read1m .*NOT COLD' -q && fail "read1m is the baseline, never flagged: $out"
j=$("$PAGEIN" bench load "$M" --runs 1 --no-pipeline --no-fio --only read --cache warm --json -q) || fail "json"
$PY - "$j" <<'PY' || fail "json: $j"
import json, sys
d = json.loads(sys.argv[1])
assert d["device_limit_how"] == "", d["device_limit_how"]
m = d["runs"][0]["trace"]["memory"]
assert set(m) == {"populate_s", "wait_s", "bytes_populated", "bytes_huge", "bytes_reused", "bytes_pool"}, m
PY
j=$("$PAGEIN" bench load "$M" --runs 1 --no-pipeline --no-fio --only read,read1m --cache warm --reload --json -q) \
  || fail "json --reload: $j"
$PY - "$j" <<'PY' || fail "json --reload: $j"
import json, sys
d = json.loads(sys.argv[1])
rs = {(r["strategy"], r["load_in_process"]): r for r in d["runs"]}
assert set(rs) == {("read", "first"), ("read", "reload"), ("read1m", "first"), ("read1m", "reload")}, list(rs)
assert all(r["ok"] for r in rs.values()), rs
first, again = rs[("read", "first")]["trace"]["memory"], rs[("read", "reload")]["trace"]["memory"]
assert first["bytes_reused"] == 0 and again["bytes_reused"] == d["model_bytes"], (first, again)
PY
out=$("$PAGEIN" bench load "$M" --runs 1 --no-pipeline --no-fio --only read,read1m --cache warm --reload -q) \
  || fail "text --reload: $out"
echo "$out" | grep -q "^reload: the same process loads the model again" || fail "no reload table: $out"
echo "$out" | grep -Eq '^  read      warm [0-9.]+x read1m warm, first load in the process -> (MEETS|MISSES) \(target >= 0.5x\); reload [0-9.]+x read1m -> (MEETS|MISSES)$' \
  || fail "no read verdict with the reload: $out"
echo ok
