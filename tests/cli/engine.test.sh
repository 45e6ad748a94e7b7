# The range engine from the tool: plan's facts and the engine's choice (with
# the environment overrides), the access trace in bench-load's JSON, and the
# storage matrix script on one local cell (nothing timed).
. "$REPO/tests/cli/lib.sh"
"$PAGEIN" make-sample "$TMP/m.safetensors" --size 3M -q || fail "make-sample failed"

expect_exit 0 "$PAGEIN" plan "$TMP/m.safetensors"
expect_contains "range engine (read):"
expect_contains "storage:"
PAGEIN_REQUEST_BYTES=256K PAGEIN_QUEUE_DEPTH=3 expect_exit 0 "$PAGEIN" plan "$TMP/m.safetensors"
expect_contains "request 256 KiB (PAGEIN_REQUEST_BYTES), depth 3 (PAGEIN_QUEUE_DEPTH)"
expect_exit 0 "$PAGEIN" plan "$TMP/m.safetensors" --threads 5 --chunk 2M
expect_contains "request 2048 KiB (option), depth 5 (option)"
expect_exit 2 "$PAGEIN" plan "$TMP/m.safetensors" --threads 0
expect_exit 0 "$PAGEIN" plan --json "$TMP/m.safetensors"
echo "$OUT_TXT" | $PY -c '
import json, sys
d = json.load(sys.stdin)
io = d["io"]
assert io["request_bytes"] > 0 and io["depth"] > 0 and io["engine_why"], io
assert io["storage"] in ("local", "memory", "netfs", "fuse", "remote", "unknown"), io
' || fail "plan --json io: $OUT_TXT"

out=$(PAGEIN_REQUEST_BYTES=1M PAGEIN_QUEUE_DEPTH=2 "$PAGEIN" bench-load "$TMP/m.safetensors" --runs 1 --json --no-fio \
      --no-pipeline --only read,populate,auto --cache cold -q) || fail "bench-load --json failed: $out"
echo "$out" | $PY -c '
import json, sys
d = json.load(sys.stdin)
runs = {r["strategy"]: r for r in d["runs"]}
t = runs["read"]["trace"]
assert runs["read"]["chosen"] == "read", runs["read"]
# the file in 1 MiB requests, two in flight, from the engine (no slowfs here)
n = (d["model_bytes"] + (1 << 20) - 1) >> 20
assert t["source"] == "engine" and t["requests"] == n and t["engine_depth"] == 2, t
assert t["max_inflight"] <= 2 and sum(t["size_hist"].values()) == n, t
assert t["lat_p50_us"] > 0 and t["lat_p50_us"] <= t["lat_p99_us"], t
assert runs["populate"]["trace"] is None, runs["populate"]
assert runs["auto"]["chosen"] in ("read", "populate", "prefetch", "lazy"), runs["auto"]
' || fail "bench-load trace: $out"

WORK=$TMP/matrix bash "$REPO/bench/matrix.sh" --size 3M --cells ext4 --no-shuffle --out "$TMP/mx" \
  --only populate,read,auto,read1m > "$TMP/mx.out" 2>&1 || fail "matrix.sh failed: $(cat "$TMP/mx.out")"
$PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
L = d["cells"]["ext4"]["load"]
assert L["best"] in ("populate", "read"), L
assert L["auto_over_best"] > 0 and "read" in L["strategies"], L
' "$TMP/mx/matrix.json" || fail "matrix.json: $(cat "$TMP/mx/matrix.json")"
grep -q "| ext4 |" "$TMP/mx.out" || fail "matrix table missing: $(cat "$TMP/mx.out")"
exit 0
