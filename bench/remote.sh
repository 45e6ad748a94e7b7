#!/usr/bin/env bash
# bench/remote.sh - `pagein bench remote`: pagein pull against its peers in
# one run, from nginx emulating an object store (docs/REMOTE.md,
# docs/BENCHMARKS.md): RATE per connection (nginx limit_rate, default 100m =
# 100 MiB/s) and DELAY_MS before each request's first byte (default 20;
# tools/delayhdr.py), on 127.0.0.1.
#
#   curl         one stream
#   aria2c       -x16 -s16 (Debian aria2)
#   fsspec       HTTPFileSystem.cat_ranges over CHUNK-sized ranges (Debian
#                python3-fsspec + python3-aiohttp; the approach of PyTorch PR
#                #194881)
#   pagein pull  -c CONNS (its own chunking unless CHUNK is set), its peak
#                RSS, and a resume
#   load         pagein.open_model(URL, strategy="read") into memory
#   walk         the layers walked with COMPUTE_MS (default 30) of simulated
#                compute each: read (all first) vs prefetch (layers read
#                ahead of the walk): first layer and total
#   cat_ranges   pagein.fsspec's cat_ranges of RANGES (default 1000) ranges
#                of RANGE_LEN (default 1M) spread over a RANGES_OBJ (default
#                1300M) object against fsspec's HTTPFileSystem.cat_ranges,
#                RUNS times each, interleaved (bench/fsspec_ranges.py)
#
# Usage: bench/remote.sh [--json]   (env: SIZE=256M RATE=100m DELAY_MS=20
# CONNS=16 CHUNK= (pull's --chunk; fsspec's ranges, default 8M) RUNS=3 COMPUTE_MS=30
# QUICK=1 for a 16 MiB smoke run of one run each (cat_ranges: 50 ranges over
# 64 MiB); RANGES=0 skips cat_ranges; PAGEIN=build/pagein)
# Every tool runs RUNS times, interleaved; the median is the result (all
# runs are in the JSON). Prints a table, or one JSON object with --json.
# Ratios inside one run are the result; absolute rates depend on the
# machine's load (printed).
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
PAGEIN=${PAGEIN:-$REPO/build/pagein}
JSON=0
[ "${1:-}" = --json ] && JSON=1
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
SIZE=${SIZE:-256M}; RUNS=${RUNS:-3}; [ "${QUICK:-0}" = 1 ] && SIZE=16M RUNS=1
RANGES=${RANGES:-1000}; RANGE_LEN=${RANGE_LEN:-1M}; RANGES_OBJ=${RANGES_OBJ:-1300M}
[ "${QUICK:-0}" = 1 ] && RANGES=50 RANGES_OBJ=64M
export RATE=${RATE:-100m} DELAY_MS=${DELAY_MS:-20}
CONNS=${CONNS:-16}; COMPUTE_MS=${COMPUTE_MS:-30}; PULL_CHUNK=()
[ -n "${CHUNK:-}" ] && PULL_CHUNK=(--chunk "$CHUNK"); CHUNK=${CHUNK:-8M}
PY=/usr/bin/python3

D=$(mktemp -d /tmp/pagein-bench-remote-XXXXXX)
trap 'bash "$REPO/tests/remote/servers.sh" stop "$D" >/dev/null 2>&1; rm -rf "$D"' EXIT
mkdir -p "$D/www"
# caches of this run stay in its temp folder, never the user's ~/.cache
# (the metadata cache of remote headers; the Hub cache should pull use it)
export PAGEIN_META_CACHE_DIR=${PAGEIN_META_CACHE_DIR:-$D/meta-cache} HF_HOME=${HF_HOME:-$D/hf-home} XDG_CACHE_HOME=$D/xdg-cache
bytes=$($PY -c "import sys; s=sys.argv[1]; m={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))" "$SIZE")
chunk=$($PY -c "import sys; s=sys.argv[1]; m={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))" "$CHUNK")
# a real safetensors model (so that it can also be loaded, not only pulled)
"$PAGEIN" make-sample "$D/www/model.bin" --size "$bytes" -q > /dev/null 2>&1 || head -c "$bytes" /dev/urandom > "$D/www/model.bin"
bytes=$(stat -c %s "$D/www/model.bin")
out=$(bash "$REPO/tests/remote/servers.sh" start "$D" $$ nginx delay 2>&1) || { echo "bench remote: servers: $out" >&2; exit 2; }
. "$D/env"
URL="$DELAY/model.bin"

now() { date +%s.%N; }
# run NAME CMD...: appends the seconds to times[NAME], or "null" when the
# tool failed or its output differs from the object
declare -A times note
run() {
  local name=$1; shift
  rm -f "$D/out.bin"
  local t0 t1 ok=1
  t0=$(now)
  "$@" > "$D/$name.log" 2>&1 || { ok=0; note[$name]="failed: $(tail -1 "$D/$name.log")"; }
  t1=$(now)
  if [ $ok = 1 ] && ! cmp -s "$D/out.bin" "$D/www/model.bin"; then
    ok=0; note[$name]="output differs"
  fi
  if [ $ok = 1 ]; then times[$name]+="$($PY -c "print(round($t1 - $t0, 3))") "; else times[$name]+="null "; fi
}

times_last() { local v=(${times[$1]:-}); echo "${v[${#v[@]}-1]:-null}"; }
have_curl=0; have_aria=0; have_fsspec=0; have_py=0
if command -v curl >/dev/null; then have_curl=1; else note[curl]="curl missing"; fi
if command -v aria2c >/dev/null; then have_aria=1; else note[aria2c]="aria2c missing (Debian aria2)"; fi
if $PY -c "import fsspec, aiohttp" 2>/dev/null; then have_fsspec=1; else note[fsspec]="python3-fsspec/python3-aiohttp missing"; fi
if [ -f "$REPO/build/python/pagein/__init__.py" ]; then have_py=1; cp "$D/www/model.bin" "$D/www/model.safetensors"
else note[load]="build/python missing (make python)"; fi
cat > "$D/catranges.py" <<'EOF'
import sys, fsspec
url, size, chunk, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fs = fsspec.filesystem("http")
starts = list(range(0, size, chunk))
ends = [min(s + chunk, size) for s in starts]
parts = fs.cat_ranges([url] * len(starts), starts, ends)
with open(out, "wb") as f:
    for p in parts:
        f.write(p)
EOF
# pull's progress over time (the last run): the chunks its state file marks
# done, sampled every 10 ms, as [seconds, bytes] pairs (`bench remote --svg`)
cat > "$D/progress.py" <<'PROGRESS'
import json, os, sys, time
state, size, stop, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
t0, pts, chunk, deadline = time.monotonic(), [[0.0, 0]], 0, time.monotonic() + 600
while not os.path.exists(stop) and time.monotonic() < deadline:
    try:
        with open(state, "rb") as f:
            b = f.read()
        if not chunk:
            for line in b[:4096].split(b"\n"):
                if line.startswith(b"chunk "): chunk = int(line.split()[1])
        if chunk: pts.append([round(time.monotonic() - t0, 4), min(size, b[4096:].count(b"1") * chunk)])
    except (OSError, ValueError):
        pass
    time.sleep(0.01)
json.dump(pts, open(out, "w"))
PROGRESS
rss_kib=0
for r in $(seq 1 "$RUNS"); do  # interleaved, so that drift hits every tool alike
  [ $have_curl = 1 ] && run curl curl -sf -o "$D/out.bin" "$URL"
  [ $have_aria = 1 ] && run aria2c aria2c -q -x16 -s16 -k1M --file-allocation=none --allow-overwrite=true -d "$D" -o out.bin "$URL"
  [ $have_fsspec = 1 ] && run fsspec $PY "$D/catranges.py" "$URL" "$bytes" "$chunk" "$D/out.bin"
  # pagein pull, under a wrapper that reports the child's peak RSS
  if [ "$r" = "$RUNS" ]; then
    rm -f "$D/progress.stop"
    $PY "$D/progress.py" "$D/out.bin.pagein-part.pagein-state" "$bytes" "$D/progress.stop" "$D/progress.json" & ppid=$!
  fi
  run pull $PY -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[2:])
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(r.returncode)' "$D/rss" "$PAGEIN" pull --no-sync -q -c "$CONNS" "${PULL_CHUNK[@]}" "$URL" "$D/out.bin"
  if [ "$r" = "$RUNS" ]; then
    touch "$D/progress.stop"; wait $ppid 2>/dev/null
    echo "$(times_last pull)" > "$D/progress.total"
  fi
  k=$(cat "$D/rss" 2>/dev/null || echo 0); [ "$k" -gt "$rss_kib" ] && rss_kib=$k
  # remote load into memory: pagein_model_open(URL, read) through the
  # Python binding (build/python), timed inside the process: the
  # interpreter's start and numpy's import are not the load
  if [ $have_py = 1 ]; then
    rm -f "$D/load.s"
    if env PYTHONPATH="$REPO/build/python" $PY -c '
import sys, time, pagein
t0 = time.perf_counter()
m = pagein.open_model(sys.argv[1], strategy="read")
t1 = time.perf_counter()
assert len(m.keys()) > 0
open(sys.argv[2], "w").write("%.3f" % (t1 - t0))
' "$DELAY/model.safetensors" "$D/load.s" > "$D/load.log" 2>&1 && [ -s "$D/load.s" ]; then
      times[load]+="$(cat "$D/load.s") "
    else
      times[load]+="null "; note[load]="failed: $(tail -1 "$D/load.log")"
    fi
  fi
  # a layer walk with COMPUTE_MS of simulated compute per layer (a sleep:
  # the accelerator's time): read (everything first) against prefetch
  # (layers read ahead of the walk); time to the first layer and in all
  if [ $have_py = 1 ]; then
    for strat in read prefetch; do
      rm -f "$D/walk.s"
      if env PYTHONPATH="$REPO/build/python" $PY -c '
import sys, time, pagein
url, strat, ms, out = sys.argv[1], sys.argv[2], float(sys.argv[3]) / 1000, sys.argv[4]
t0 = time.perf_counter()
m = pagein.open_model(url, strategy=strat)
first = None
for layer, tensors in m.layers():
    if first is None:
        first = time.perf_counter() - t0
    time.sleep(ms)
open(out, "w").write("%.3f %.3f" % (first, time.perf_counter() - t0))
' "$DELAY/model.safetensors" "$strat" "$COMPUTE_MS" "$D/walk.s" > "$D/walk.log" 2>&1 && [ -s "$D/walk.s" ]; then
        read -r a b < "$D/walk.s"
        times[walk_${strat}_first]+="$a "; times[walk_${strat}]+="$b "
      else
        times[walk_${strat}_first]+="null "; times[walk_${strat}]+="null "; note[walk_$strat]="failed: $(tail -1 "$D/walk.log")"
      fi
    done
  fi
done
rm -f "$D/www/model.safetensors"
[ "$rss_kib" = 0 ] && rss_kib=null

# cat_ranges: pagein.fsspec against fsspec's own HTTPFileSystem, same
# server, same pacing, same process (bench/fsspec_ranges.py)
catranges=null
if [ "$RANGES" != 0 ] && [ $have_fsspec = 1 ] && [ $have_py = 1 ]; then
  rbytes=$($PY -c "import sys; s=sys.argv[1]; m={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))" "$RANGES_OBJ")
  rlen=$($PY -c "import sys; s=sys.argv[1]; m={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))" "$RANGE_LEN")
  head -c "$rbytes" /dev/urandom > "$D/www/ranges.bin"
  if env PYTHONPATH="$REPO/build/python" $PY "$REPO/bench/fsspec_ranges.py" "$DELAY/ranges.bin" "$rbytes" "$RANGES" "$rlen" \
      "$RUNS" > "$D/catranges.json" 2> "$D/catranges.log"; then
    catranges=$(cat "$D/catranges.json")
  else
    note[cat_ranges]="failed: $(tail -1 "$D/catranges.log")"
  fi
  rm -f "$D/www/ranges.bin"
elif [ "$RANGES" != 0 ]; then
  note[cat_ranges]="needs python3-fsspec, python3-aiohttp and build/python"
fi

# resume: kill -9 half-way, run again; nginx's log says what was sent twice
rm -f "$D/out.bin" "$D"/out.bin.pagein-part*
lines_before=$(wc -l < "$D/logs/nginx-access.log")
"$PAGEIN" pull --no-sync -q -c "$CONNS" "${PULL_CHUNK[@]}" "$URL" "$D/out.bin" & pid=$!
pchunk=0
st="$D/out.bin.pagein-part.pagein-state"
for i in $(seq 1 400); do  # bounded: 10 s
  [ "$pchunk" = 0 ] && pchunk=$(sed -n 's/^chunk \([0-9]*\).*/\1/p' "$st" 2>/dev/null | head -1)
  pchunk=${pchunk:-0}
  n=$(tail -c +4097 "$st" 2>/dev/null | tr -cd 1 | wc -c)
  [ "$pchunk" -gt 0 ] && [ "${n:-0}" -ge $(( bytes / pchunk / 2 )) ] && break
  sleep 0.025
done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
resume=$("$PAGEIN" pull --no-sync --json -c "$CONNS" "${PULL_CHUNK[@]}" "$URL" "$D/out.bin" 2>/dev/null)
cmp -s "$D/out.bin" "$D/www/model.bin" || resume=null
sleep 0.2
sent=$(tail -n +$((lines_before + 1)) "$D/logs/nginx-access.log" | awk '$7 ~ /model.bin/ { s += $10 } END { print s + 0 }')

load=$(cut -d' ' -f1-3 /proc/loadavg)
export PROGRESS_JSON="$D/progress.json" PROGRESS_TOTAL="$D/progress.total"
$PY - "$JSON" "$bytes" "$RATE" "$DELAY_MS" "$CONNS" "${pchunk:-0}" "$load" "$rss_kib" "${times[curl]:-null}" "${times[aria2c]:-null}" \
  "${times[fsspec]:-null}" "${times[pull]:-null}" "${resume:-null}" "${n:-0}" "${note[curl]:-}" "${note[aria2c]:-}" "${note[fsspec]:-}" \
  "${note[pull]:-}" "$sent" "${times[load]:-null}" "${note[load]:-}" "$RUNS" "${times[walk_read_first]:-null}" \
  "${times[walk_read]:-null}" "${times[walk_prefetch_first]:-null}" "${times[walk_prefetch]:-null}" "$COMPUTE_MS" \
  "${note[walk_read]:-}${note[walk_prefetch]:-}" "$catranges" "${note[cat_ranges]:-}" <<'EOF'
import json, sys
a = sys.argv[1:]
js, size, rate, delay, conns, chunk, load, rss = int(a[0]), int(a[1]), a[2], int(a[3]), int(a[4]), int(a[5]), a[6], a[7]
runs = int(a[21])
def times(x):  # "1.2 null 1.3 " -> [1.2, None, 1.3]
    return [None if v == "null" else float(v) for v in x.split()]
def f(x):  # the median of the runs; None if any failed
    v = times(x)
    if not v or None in v: return None
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else round((v[len(v) // 2 - 1] + v[len(v) // 2]) / 2, 3)
every = {k: times(a[i]) for k, i in (("curl", 8), ("aria2c", 9), ("fsspec", 10), ("pull", 11), ("load", 19))}
t = {"curl": f(a[8]), "aria2c": f(a[9]), "fsspec": f(a[10]), "pull": f(a[11])}
try:
    resume = json.loads(a[12])
except Exception:
    resume = None
done_at_kill = int(a[13])
notes = {k: v for k, v in zip(["curl", "aria2c", "fsspec", "pull"], a[14:18]) if v}
if a[20]: notes["load"] = a[20]
load_s = f(a[19])
res = {"size": size, "rate_per_connection": rate, "first_byte_ms": delay, "connections": conns, "pull_chunk": chunk,
       "runs": runs, "loadavg": load, "seconds": t, "seconds_every_run": every,
       "MB_per_s": {k: (round(size / v / 1e6, 1) if v else None) for k, v in t.items()},
       "pull_peak_rss_kib": None if rss == "null" else int(rss)}
p = t["pull"]
res["pull_vs"] = {k: (round(v / p, 2) if v and p else None) for k, v in t.items() if k != "pull"}
import os
try:  # pull's progress in its last run: [seconds, bytes done] (bench remote --svg draws it)
    res["pull_progress"] = {"seconds_total": json.load(open(os.environ["PROGRESS_TOTAL"])),
                            "points": json.load(open(os.environ["PROGRESS_JSON"]))}
except Exception:
    res["pull_progress"] = None
res["load_seconds"] = load_s
walk = {k: f(a[i]) for k, i in (("read_first_layer", 22), ("read_total", 23), ("prefetch_first_layer", 24),
                                 ("prefetch_total", 25))}
res["walk"] = dict(walk, compute_ms_per_layer=float(a[26]),
                   every_run={k: times(a[i]) for k, i in (("read_total", 23), ("prefetch_total", 25))})
if a[27]: notes["walk"] = a[27]
try:
    res["cat_ranges"] = json.loads(a[28])
except Exception:
    res["cat_ranges"] = None
if a[29]: notes["cat_ranges"] = a[29]
res["load_vs_pull_rate"] = round(p / load_s, 2) if load_s and p else None
cb = chunk
sent = int(a[18])
res["resume"] = None
if resume and resume.get("ok"):
    # sent over both runs minus the object minus the two opens' 256 KiB probes
    extra = max(0, sent - size - 2 * (256 << 10))
    res["resume"] = {"chunks_done_seen_before_kill": done_at_kill, "resumed_bytes": resume["resumed"],
                     "fetched_bytes": resume["fetched"], "server_sent_bytes": sent,
                     "refetched_bytes": extra, "refetched_chunks": round(extra / cb, 2) if cb else None,
                     "at_most_chunks": conns}
if notes: res["notes"] = notes
if os.environ.get("PAGEIN_BENCH_FIGURE"):  # bench remote --svg: the figure's numbers, as plain lines
    with open(os.environ["PAGEIN_BENCH_FIGURE"], "w") as f:
        f.write("size %d\nrate %s\nfirst_byte_ms %d\nconnections %d\n" % (size, rate, delay, conns))
        for k, v in res["MB_per_s"].items():
            if v: f.write("ref %s %.1f\n" % (k, v))
        pts = (res["pull_progress"] or {}).get("points") or []
        last = pts[0] if pts else None
        win = max(0.02, (pts[-1][0] if pts else 0) / 10)
        if pts: f.write("point 0 0\n")
        for tp, bp in pts[1:]:  # MB/s of completed chunks over windows of a 10th of the run, at each window's end
            if tp - last[0] >= win:
                f.write("point %.3f %.1f\n" % (tp, (bp - last[1]) / (tp - last[0]) / 1e6))
                last = [tp, bp]
if js:
    print(json.dumps(res))
else:
    print("bench remote: %d bytes, %s/connection, %d ms first byte, pull -c %d (chunks of %.2f MiB), median of %d runs, load %s"
          % (size, rate, delay, conns, chunk / 1048576, runs, load))
    print("%-8s %10s %10s %14s   %s" % ("tool", "seconds", "MB/s", "pull faster by", "every run"))
    for k in ("curl", "aria2c", "fsspec", "pull"):
        v = t[k]
        print("%-8s %10s %10s %14s   %s" % (k, "-" if v is None else "%.3f" % v, "-" if v is None else "%.1f" % (size / v / 1e6),
                                       "" if k == "pull" or res["pull_vs"].get(k) is None else "%.2fx" % res["pull_vs"][k],
                                       " ".join("-" if x is None else "%.3f" % x for x in every[k])))
    print("pull peak RSS: %s KiB" % res["pull_peak_rss_kib"])
    if load_s:
        print("remote load into memory (open_model read): %.3f s, %.2fx pull's rate   (every run: %s)"
              % (load_s, res["load_vs_pull_rate"], " ".join("-" if x is None else "%.3f" % x for x in every["load"])))
    if walk["read_total"] and walk["prefetch_total"]:
        print("layer walk, %g ms compute a layer: read first layer %.3f s, total %.3f s; prefetch first layer %.3f s, "
              "total %.3f s (%.2fx faster)" % (float(a[26]), walk["read_first_layer"], walk["read_total"],
                                             walk["prefetch_first_layer"], walk["prefetch_total"],
                                             walk["read_total"] / walk["prefetch_total"]))
    cr = res["cat_ranges"]
    if cr:
        print("cat_ranges, %d ranges of %.2f MiB over %.2f GB: pagein.fsspec %.3f s (%.1f MB/s), fsspec HTTP %.3f s "
              "(%.1f MB/s): pagein %.2fx faster   (every run: pagein %s, fsspec %s)"
              % (cr["ranges"], cr["range_bytes"] / 1048576, cr["object_bytes"] / 1e9, cr["seconds"]["pagein"],
                 cr["MB_per_s"]["pagein"], cr["seconds"]["fsspec_http"], cr["MB_per_s"]["fsspec_http"],
                 cr["pagein_faster_by"], " ".join("%.3f" % x for x in cr["seconds_every_run"]["pagein"]),
                 " ".join("%.3f" % x for x in cr["seconds_every_run"]["fsspec_http"])))
        print("cat_ranges CPU seconds (median): pagein.fsspec %.3f, fsspec HTTP %.3f"
              % (cr["cpu_seconds"]["pagein"], cr["cpu_seconds"]["fsspec_http"]))
    if res["resume"]:
        print("resume after kill -9: %(resumed_bytes)d bytes kept, %(fetched_bytes)d fetched, "
              "%(refetched_chunks).2f chunks sent twice by the server" % res["resume"])
    for k, v in notes.items(): print("note %s: %s" % (k, v))
EOF
