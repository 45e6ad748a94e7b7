#!/usr/bin/env bash
# depth_check.sh - the queue-depth check: N cold runs of `read` and of
# `populate` on slowfs (1 ms a request, 128 KiB readahead), interleaved,
# one `pagein bench load --cache cold --runs 1` each. Per pair: seconds to
# every tensor usable, requests in flight as slowfs saw them (mean, max),
# what the engine had submitted (mean), the seconds its issuing thread spent
# blocked in submission, whether the ring moved issuing to io-wq, and the
# load average. Passes when read's mean in flight (slowfs) >= half the
# planned depth and read <= 1.2x populate in every pair.
#
# Where the kernel's FUSE control files are mounted (/sys/fs/fuse/
# connections, fusectl; the script mounts it when it can), a sampler reads
# the connection's `waiting` (requests FUSE has queued for slowfs or sent
# it and not seen answered) every millisecond during each `read`: over the
# window where any request was waiting it gives the mean number at the
# FUSE connection, next to slowfs's own (serving: inside its read handler)
# over the same window, and the share of the window with none waiting
# (gaps: nothing issued). submitted > fuse: requests still being issued
# (pinning and faulting in their destination) or completed and not yet
# reaped; fuse > serving: queued for a daemon thread, or in libfuse's
# reply (the copy into the reader's memory).
#
#   bench/depth_check.sh [--runs 10] [--size 1300M] [--delay-us 1000] [--ra-kb 128]
#                        [--pause S] [--pause-first S] [--populate-first] [--splice] [--local]
#                        [--work DIR] [--json FILE]
# --pause S sleeps S seconds before each pair (an idle machine: in a VM
# whose balloon reports free memory to the host, memory freed by the last
# run is handed back after about 2 s); --pause-first S sleeps before the
# first pair only (the first load after an idle machine, then the pairs
# back to back); --populate-first runs each pair's populate before its read
# (after a pause the first run also pays the device waking up). --splice raises fs.pipe-max-size to
# 2 MiB while the check runs (root; put back at exit), so that slowfs
# splices its replies (one copy, see tools/slowfs.c) where this machine
# would otherwise refuse it a pipe that large. --local runs the same pairs on
# the local copy of the model (no slowfs, no FUSE sampler; ok is read <=
# 1.2x populate alone).
# Needs FUSE (tools/slowfs.sh check) and root for the readahead setting.
# A benchmark, not a test: timings move with the machine's load.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
PAGEIN=${PAGEIN:-$here/build/pagein}
export SLOWFS=${SLOWFS:-$here/build/slowfs}
runs=10 size=1300M us=1000 ra=128 work=${WORK:-/var/tmp/pagein-depth} json="" pause=0 pause1=0 splice=0 local=0 order="read populate"
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift ;;
    --size) size=$2; shift ;;
    --delay-us) us=$2; shift ;;
    --ra-kb) ra=$2; shift ;;
    --work) work=$2; shift ;;
    --pause) pause=$2; shift ;;
    --pause-first) pause1=$2; shift ;;
    --splice) splice=1 ;;
    --local) local=1 ;;
    --populate-first) order="populate read" ;;
    --json) json=$2; shift ;;
    -h|--help) sed -n 2,38p "$0"; exit 0 ;;
    *) echo "depth_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ "$local" = 0 ]; then
  r=$(bash "$here/tools/slowfs.sh" check) || { echo "depth_check: skipped: $r"; exit 77; }
fi
mkdir -p "$work/src"
model=$work/src/model-$size.safetensors
[ -f "$model" ] || "$PAGEIN" make-sample "$model" --size "$size" -q || exit 2
mnt=$work/mnt
out=$(mktemp -d /tmp/pagein-depth-XXXXXX)
# the metadata cache of what this runs goes here, never into ~/.cache
export PAGEIN_META_CACHE_DIR=$out/meta-cache
if [ "$local" = 1 ]; then
  target=$model waiting=""
  echo "depth_check: $(stat -c %s "$model") bytes on the local disk ($(stat -f -c %T "$model")), $runs pairs," \
       "$(nproc) CPUs, kernel $(uname -r), PAGEIN_READ_HUGEPAGE=${PAGEIN_READ_HUGEPAGE:-machine}, PAGEIN_READ_HUGETLB=${PAGEIN_READ_HUGETLB:-0}, pause ${pause} s, first ${pause1} s;" \
       "uptime:$(uptime)"
else
pmax=$(cat /proc/sys/fs/pipe-max-size)
if [ "$splice" = 1 ] && [ "$pmax" -lt 2097152 ]; then
  echo 2097152 > /proc/sys/fs/pipe-max-size || { echo "depth_check: cannot raise fs.pipe-max-size" >&2; exit 2; }
fi
bash "$here/tools/slowfs.sh" mount "$work/src" "$mnt" --delay-us "$us" --ra-kb "$ra" >/dev/null || exit 2
trap 'bash "$here/tools/slowfs.sh" umount "$mnt"; [ "$(cat /proc/sys/fs/pipe-max-size)" = "$pmax" ] || echo "$pmax" > /proc/sys/fs/pipe-max-size' EXIT INT TERM
target=$mnt/$(basename "$model")
ctl=/sys/fs/fuse/connections
[ -d "$ctl" ] && ! ls "$ctl"/*/waiting >/dev/null 2>&1 && mount -t fusectl none "$ctl" 2>/dev/null
waiting=$ctl/$(( $(stat -c %d "$mnt") & 0xff ))/waiting
[ -r "$waiting" ] || waiting=""
echo "depth_check: $(stat -c %s "$model") bytes on slowfs ${us} us, readahead ${ra} KiB, $runs pairs," \
     "$(nproc) CPUs, kernel $(uname -r), PAGEIN_URING_ASYNC=${PAGEIN_URING_ASYNC:-auto}," \
     "PAGEIN_READ_HUGEPAGE=${PAGEIN_READ_HUGEPAGE:-machine}, PAGEIN_READ_HUGETLB=${PAGEIN_READ_HUGETLB:-0}, pause ${pause} s, first ${pause1} s," \
     "slowfs splice $(sed -n 's/^splice //p' "$mnt/.slowfs-stats")," \
     "FUSE waiting ${waiting:-not readable}; uptime:$(uptime)"
fi
# sample FILE OUT: `waiting` every ms until OUT.stop exists; OUT gets
# "t0 t1 mean zero_share max" over the window where any request waited.
sample() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import os, sys, time
path, out = sys.argv[1], sys.argv[2]
pts = []
while not os.path.exists(out + ".stop"):
    with open(path) as f:
        pts.append((time.monotonic(), int(f.read())))
    time.sleep(0.001)
nz = [i for i, (_, w) in enumerate(pts) if w > 0]
if len(nz) < 2:
    open(out, "w").write("0 0 0 0 0\n"); sys.exit()
a, b = nz[0], nz[-1]
area = sum((pts[i + 1][0] - pts[i][0]) * pts[i][1] for i in range(a, b))
zero = sum(pts[i + 1][0] - pts[i][0] for i in range(a, b) if pts[i][1] == 0)
span = pts[b][0] - pts[a][0]
open(out, "w").write(f"{pts[a][0]} {pts[b][0]} {area / span} {zero / span} {max(w for _, w in pts)}\n")
PY
}
busy() { sed -n 's/^busy_ns //p' "$mnt/.slowfs-stats"; }
for i in $(seq 1 "$runs"); do
  [ "$pause" != 0 ] && sleep "$pause"
  [ "$i" = 1 ] && [ "$pause1" != 0 ] && sleep "$pause1"
  for s in $order; do
    l=$(cut -d' ' -f1 /proc/loadavg)
    sp=""
    if [ -n "$waiting" ]; then
      rm -f "$out/$s-$i.fuse.stop"; b0=$(busy)
      sample "$waiting" "$out/$s-$i.fuse" & sp=$!
    fi
    "$PAGEIN" bench load "$target" --json --cache cold --runs 1 --only "$s" \
      --no-pipeline --no-fio -q > "$out/$s-$i.json" || echo "depth_check: run $i $s failed" >&2
    if [ -n "$sp" ]; then
      touch "$out/$s-$i.fuse.stop"; wait "$sp"
      echo "$(( $(busy) - b0 ))" > "$out/$s-$i.busy"
    fi
    echo "$l" > "$out/$s-$i.load"
  done
done
/usr/bin/python3 - "$out" "$runs" "$json" "$local" <<'EOF'
import json, os, sys
out, runs, jpath, local = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
def fuse(s, i):
    """(mean waiting at FUSE, slowfs serving, share with none waiting, max) over the window any request waited"""
    try:
        t0, t1, mean, zero, mx = map(float, open(f"{out}/{s}-{i}.fuse").read().split())
        busy = float(open(f"{out}/{s}-{i}.busy").read()) / 1e9
    except (OSError, ValueError):
        return None
    return (mean, busy / (t1 - t0) if t1 > t0 else 0, zero, mx)
rows, ok_all = [], True
def one(s, i):
    d = json.load(open(f"{out}/{s}-{i}.json"))
    r = [x for x in d["runs"] if x["strategy"] == s and x["cache"] == "cold"][0]
    t = r.get("trace") or {}
    return r, t, float(open(f"{out}/{s}-{i}.load").read())
print("| pair | read s | populate s | read/populate | read in flight (slowfs mean/max) | engine submitted (mean) | issue blocked s | I/O window: FUSE waiting / slowfs serving (mean), none waiting | load | ok |")
print("|---|---|---|---|---|---|---|---|---|---|")
for i in range(1, runs + 1):
    try:
        rr, rt, rl = one("read", i)
        pr, pt, pl = one("populate", i)
    except (OSError, ValueError, IndexError, KeyError) as e:
        print(f"| {i} | failed: {e} |"); ok_all = False; continue
    depth = rt.get("engine_depth") or 0
    ratio = rr["all_s"] / pr["all_s"] if pr["all_s"] > 0 else float("inf")
    ok = (local or rt.get("mean_inflight", 0) >= depth / 2) and ratio <= 1.2
    ok_all &= ok
    rows.append({"pair": i, "read_s": rr["all_s"], "populate_s": pr["all_s"], "ratio": ratio,
                 "read_mean_inflight": rt.get("mean_inflight"), "read_max_inflight": rt.get("max_inflight"),
                 "planned_depth": depth, "submitted_mean_inflight": rt.get("submitted_mean_inflight"),
                 "issue_s": rt.get("issue_s"), "issue_async": rt.get("issue_async"),
                 "populate_mean_inflight": pt.get("mean_inflight"), "load": rl, "ok": ok, "read_fuse": fuse("read", i)})
    fz = fuse("read", i)
    fzs = f"{fz[0]:.1f} / {fz[1]:.1f}, {fz[2] * 100:.0f}%" if fz else "-"
    print(f"| {i} | {rr['all_s']:.2f} | {pr['all_s']:.2f} | {ratio:.2f} | {rt.get('mean_inflight', 0):.1f} / "
          f"{rt.get('max_inflight', 0):.0f} of {depth:.0f} | {rt.get('submitted_mean_inflight') or 0:.1f} | "
          f"{rt.get('issue_s') or 0:.2f} | {fzs} | {rl:.1f} | {'yes' if ok else 'no'} |")
print("depth_check:", "every pair within the targets" if ok_all else "some pairs miss the targets (see ok)")
if jpath:
    json.dump({"pairs": rows, "ok": ok_all}, open(jpath, "w"), indent=1)
sys.exit(0 if ok_all else 1)
EOF
rc=$?
rm -rf "$out"
exit $rc
