#!/usr/bin/env bash
# bench load's verdicts: the populate verdict names each target; a cold run
# faster than the device limit is flagged NOT COLD and not judged; the limit
# line says how it was had (here given by PAGEIN_BENCH_DEVICE_LIMIT: no fio
# needed); the JSON carries device_limit_how and the engine trace's memory
# counters.
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
assert set(m) == {"populate_s", "wait_s", "bytes_populated", "bytes_huge", "bytes_reused"}, m
PY
echo ok
