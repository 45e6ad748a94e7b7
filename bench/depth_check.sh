#!/usr/bin/env bash
# depth_check.sh - issue 29's benchmark check: N cold runs of `read` and of
# `populate` on slowfs (1 ms a request, 128 KiB readahead), interleaved,
# one `pagein bench load --cache cold --runs 1` each. Per pair: seconds to
# every tensor usable, requests in flight as slowfs saw them (mean, max),
# what the engine had submitted (mean), the seconds its issuing thread spent
# blocked in submission, whether the ring moved issuing to io-wq, and the
# load average. Passes when read's mean in flight (slowfs) >= half the
# planned depth and read <= 1.2x populate in every pair.
#
#   bench/depth_check.sh [--runs 10] [--size 1300M] [--delay-us 1000] [--ra-kb 128]
#                        [--work DIR] [--json FILE]
# Needs FUSE (tools/slowfs.sh check) and root for the readahead setting.
# A benchmark, not a test: timings move with the machine's load.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
PAGEIN=${PAGEIN:-$here/build/pagein}
export SLOWFS=${SLOWFS:-$here/build/slowfs}
runs=10 size=1300M us=1000 ra=128 work=${WORK:-/var/tmp/pagein-depth} json=""
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift ;;
    --size) size=$2; shift ;;
    --delay-us) us=$2; shift ;;
    --ra-kb) ra=$2; shift ;;
    --work) work=$2; shift ;;
    --json) json=$2; shift ;;
    -h|--help) sed -n 2,15p "$0"; exit 0 ;;
    *) echo "depth_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
r=$(bash "$here/tools/slowfs.sh" check) || { echo "depth_check: skipped: $r"; exit 77; }
mkdir -p "$work/src"
model=$work/src/model-$size.safetensors
[ -f "$model" ] || "$PAGEIN" make-sample "$model" --size "$size" -q || exit 2
mnt=$work/mnt
bash "$here/tools/slowfs.sh" mount "$work/src" "$mnt" --delay-us "$us" --ra-kb "$ra" >/dev/null || exit 2
trap 'bash "$here/tools/slowfs.sh" umount "$mnt"' EXIT INT TERM
out=$(mktemp -d /tmp/pagein-depth-XXXXXX)
echo "depth_check: $(stat -c %s "$model") bytes on slowfs ${us} us, readahead ${ra} KiB, $runs pairs," \
     "$(nproc) CPUs, kernel $(uname -r), PAGEIN_URING_ASYNC=${PAGEIN_URING_ASYNC:-auto}," \
     "PAGEIN_READ_HUGEPAGE=${PAGEIN_READ_HUGEPAGE:-1}"
for i in $(seq 1 "$runs"); do
  for s in read populate; do
    l=$(cut -d' ' -f1 /proc/loadavg)
    "$PAGEIN" bench load "$mnt/$(basename "$model")" --json --cache cold --runs 1 --only "$s" \
      --no-pipeline --no-fio -q > "$out/$s-$i.json" || echo "depth_check: run $i $s failed" >&2
    echo "$l" > "$out/$s-$i.load"
  done
done
/usr/bin/python3 - "$out" "$runs" "$json" <<'EOF'
import json, sys
out, runs, jpath = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows, ok_all = [], True
def one(s, i):
    d = json.load(open(f"{out}/{s}-{i}.json"))
    r = [x for x in d["runs"] if x["strategy"] == s and x["cache"] == "cold"][0]
    t = r.get("trace") or {}
    return r, t, float(open(f"{out}/{s}-{i}.load").read())
print("| pair | read s | populate s | read/populate | read in flight (slowfs mean/max) | engine submitted (mean) | issue blocked s | io-wq | load | ok |")
print("|---|---|---|---|---|---|---|---|---|---|")
for i in range(1, runs + 1):
    try:
        rr, rt, rl = one("read", i)
        pr, pt, pl = one("populate", i)
    except (OSError, ValueError, IndexError, KeyError) as e:
        print(f"| {i} | failed: {e} |"); ok_all = False; continue
    depth = rt.get("engine_depth") or 0
    ratio = rr["all_s"] / pr["all_s"] if pr["all_s"] > 0 else float("inf")
    ok = rt.get("mean_inflight", 0) >= depth / 2 and ratio <= 1.2
    ok_all &= ok
    rows.append({"pair": i, "read_s": rr["all_s"], "populate_s": pr["all_s"], "ratio": ratio,
                 "read_mean_inflight": rt.get("mean_inflight"), "read_max_inflight": rt.get("max_inflight"),
                 "planned_depth": depth, "submitted_mean_inflight": rt.get("submitted_mean_inflight"),
                 "issue_s": rt.get("issue_s"), "issue_async": rt.get("issue_async"),
                 "populate_mean_inflight": pt.get("mean_inflight"), "load": rl, "ok": ok})
    print(f"| {i} | {rr['all_s']:.2f} | {pr['all_s']:.2f} | {ratio:.2f} | {rt.get('mean_inflight', 0):.1f} / "
          f"{rt.get('max_inflight', 0):.0f} of {depth:.0f} | {rt.get('submitted_mean_inflight') or 0:.1f} | "
          f"{rt.get('issue_s') or 0:.2f} | {'yes' if rt.get('issue_async') else 'no'} | {rl:.1f} | {'yes' if ok else 'no'} |")
print("depth_check:", "every pair within the targets" if ok_all else "some pairs miss the targets (see ok)")
if jpath:
    json.dump({"pairs": rows, "ok": ok_all}, open(jpath, "w"), indent=1)
sys.exit(0 if ok_all else 1)
EOF
rc=$?
rm -rf "$out"
exit $rc
