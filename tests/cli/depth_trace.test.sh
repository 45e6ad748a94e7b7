# tools/slowfs serves concurrent requests in parallel (each pays
# the delay at the same time, like the network filesystems it stands for),
# and `bench load`'s trace of `read` on it carries the submit side (what the
# engine handed the kernel and had not seen complete, the time spent
# issuing, whether issuing moved to io-wq). Counts, not timings: the
# machine may be loaded.
. "$REPO/tests/cli/lib.sh"
export SLOWFS=$(dirname "$PAGEIN")/slowfs
r=$(bash "$REPO/tools/slowfs.sh" check) || { echo "$r"; exit 77; }
mkdir -p "$TMP/src"
"$PAGEIN" make-sample "$TMP/src/m.safetensors" --size 48M -q || fail "make-sample"
MNT=$TMP/mnt
bash "$REPO/tools/slowfs.sh" mount "$TMP/src" "$MNT" --delay-us 20000 --ra-kb 128 > /dev/null || fail "mount"
trap 'bash "$REPO/tools/slowfs.sh" umount "$MNT"' EXIT

# 16 readers, 4 direct 1 MiB reads each (80 ms apiece at 20 ms a request):
# slowfs must have served at least 8 at once
cat "$MNT/.slowfs-stats" > /dev/null  # opening it starts a new peak window
pids=
for i in $(seq 0 15); do
  dd if="$MNT/m.safetensors" of=/dev/null bs=1M count=4 skip=$((i * 2)) iflag=direct 2> /dev/null & pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "dd through slowfs failed"; done
peak=$(sed -n 's/^peak_inflight //p' "$MNT/.slowfs-stats")
[ "${peak:-0}" -ge 8 ] || fail "slowfs served at most ${peak:-?} requests at once of 16 readers: it serialises"

# the submit side in bench load's trace, next to slowfs's own view
for mode in auto 1; do
  if [ $mode = auto ]; then unset PAGEIN_URING_ASYNC; else export PAGEIN_URING_ASYNC=1; fi
  "$PAGEIN" bench load "$MNT/m.safetensors" --cache cold --runs 1 --only read --no-pipeline --no-fio -q --json \
    > load-$mode.json || fail "bench load on slowfs ($mode): $(cat load-$mode.json)"
  $PY - load-$mode.json $mode <<'PY' || fail "trace ($mode)"
import json, sys
d = json.load(open(sys.argv[1]))
r = [x for x in d["runs"] if x["strategy"] == "read"][0]
t = r["trace"]
assert r["ok"] and t["source"] == "slowfs" and t["requests"] > 0, r
for k in ("submitted_mean_inflight", "submitted_max_inflight", "issue_s", "issue_async"):
    assert k in t, (k, t)
assert 1 <= t["submitted_max_inflight"] <= t["engine_depth"], t
assert 0 < t["submitted_mean_inflight"] <= t["engine_depth"], t
assert t["issue_s"] >= 0, t
if sys.argv[2] == "1":  # forced: io-wq issues every request (or the readv ran on threads: no issue time)
    assert t["issue_async"] or t["issue_s"] == 0, t
else:  # O_DIRECT to a latency-bound filesystem: the destination populated ahead by one thread
    assert t["memory"]["bytes_populated"] > 0, t
print("%s: slowfs saw %.1f in flight (max %d), the engine had %.1f submitted (max %d) of depth %d; "
      "issue %.3f s, io-wq %s" % (sys.argv[2], t["mean_inflight"], t["max_inflight"], t["submitted_mean_inflight"],
                                 t["submitted_max_inflight"], t["engine_depth"], t["issue_s"], t["issue_async"]))
PY
done

# PAGEIN_MEM_THREADS=0: nothing populated ahead, the issuing thread faults the pages in
PAGEIN_MEM_THREADS=0 "$PAGEIN" bench load "$MNT/m.safetensors" --cache cold --runs 1 --only read --no-pipeline --no-fio -q \
  --json > load-nofill.json || fail "bench load on slowfs without a fill: $(cat load-nofill.json)"
$PY - load-nofill.json <<'PY' || fail "trace without a fill"
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["runs"] if x["strategy"] == "read"][0]
assert r["ok"] and r["trace"]["memory"]["bytes_populated"] == 0, r["trace"]
PY
echo ok
