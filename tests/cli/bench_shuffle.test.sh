# pagein bench shuffle: runs every mode on a tiny dataset, table and JSON;
# through slowfs too when FUSE works here.
. "$REPO/tests/cli/lib.sh"
expect_exit 0 "$PAGEIN" bench shuffle --help
expect_contains "--slowfs"
expect_exit 0 "$PAGEIN" bench shuffle --dir "$TMP/d" --size 2M --row 32K --block-size 256K
for m in sequential mmap-in-order mmap-shuffled global block ranges; do expect_contains "$m"; done
extra=
if SLOWFS=$(dirname "$PAGEIN")/slowfs bash "$REPO/tools/slowfs.sh" check > /dev/null; then extra=--slowfs; fi
"$PAGEIN" bench shuffle --dir "$TMP/d" --size 2M --block-size 256K --delay-us 100 $extra --json > b.json || fail "bench --json"
$PY - b.json "$extra" <<'PY' || fail "bench JSON"
import json, sys
d = json.load(open(sys.argv[1]))
modes = d["modes"]
fss = ["local"] + (["slowfs"] if sys.argv[2] else [])
assert len(modes) == 6 * len(fss), modes
for m in modes:
    for k in ("mode", "fs", "seconds", "major_faults", "read_bytes", "requests", "mean_request_bytes", "quality"):
        assert k in m, (k, m)
    assert m["ok"] and m["fs"] in fss and m["seconds"] > 0
    if m["fs"] == "slowfs":
        assert m["requests"] > 0 and m["mean_request_bytes"] > 0 and m["read_bytes"] >= 2 << 20, m
    else:
        assert m["requests"] is None
    if m["mode"] in ("global", "ranges", "mmap-shuffled"):
        assert m["quality"] > 0.8, m
    if m["mode"] in ("sequential", "mmap-in-order"):
        assert m["quality"] == 0, m
PY
expect_exit 2 "$PAGEIN" bench shuffle --size 1K
expect_exit 2 "$PAGEIN" bench shuffle --modes nope
expect_exit 2 "$PAGEIN" bench nosuchsuite
[ -n "$extra" ] || { echo "ran local only: FUSE/slowfs unavailable here"; }
exit 0
