#!/usr/bin/env bash
# bench/dcp.sh - consolidating a torch Distributed Checkpoint, in one run:
#
#  slowfs (1 ms a request, tools/slowfs), every file cold before each run:
#    cat      `cat` of the checkpoint's files to /dev/null (the storage's limit)
#    pagein   `pagein convert MNT/ck OUT.safetensors` (one range-engine run)
#    torch    torch 1.13's own FileSystemReader + load_state_dict into memory
#  HTTP (nginx with `bench remote`'s pacing: DELAY_MS first byte, RATE per
#  connection; tests/remote/servers.sh nginx delay):
#    pagein   `pagein convert URL OUT.safetensors`
#    reader   torch 1.13's own load_state_dict driving pagein.dcp.Reader(URL)
#             (bench/dcp_ref.py pagein: one range-engine run per plan), into
#             fresh tensors and into tensors written before (DCP_REF_TOUCH=1)
#    pull     `pagein pull -c CONNS` of one object holding the same bytes
#    fsspec   a serial per-item fsspec reader (bench/dcp_ref.py: DCP's
#             FsspecReader before PyTorch PR #194881)
#
# The checkpoint: 4 gloo ranks, SIZE_MIB (default 512) MiB of bf16, written
# by torch 1.13's own writer (bench/dcp_gen.py) into WORK (default
# /var/tmp/pagein-dcp-bench; kept between runs, never committed). Output
# goes to OUT_DIR (default /dev/shm). RUNS (default 2) interleaved runs;
# the median is the result. Prints a table and the machine's load.
#   bench/dcp.sh [--skip-slowfs] [--skip-http]   (env: SIZE_MIB RUNS DELAY_US
#   DELAY_MS RATE CONNS WORK OUT_DIR PAGEIN PYBUILD SKIP_FSSPEC=1)
# A benchmark, not a test: timings move with the machine's load.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
PAGEIN=${PAGEIN:-$REPO/build/pagein}
PYBUILD=${PYBUILD:-$REPO/build/python}
export SLOWFS=${SLOWFS:-$REPO/build/slowfs}
PY=/usr/bin/python3
SIZE_MIB=${SIZE_MIB:-512} RUNS=${RUNS:-2} DELAY_US=${DELAY_US:-1000} CONNS=${CONNS:-16}
export RATE=${RATE:-100m} DELAY_MS=${DELAY_MS:-20}
WORK=${WORK:-/var/tmp/pagein-dcp-bench} OUT_DIR=${OUT_DIR:-/dev/shm}
do_slow=1 do_http=1
for a in "$@"; do
  case $a in
    --skip-slowfs) do_slow=0 ;;
    --skip-http) do_http=0 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  esac
done
CK=$WORK/ck-$SIZE_MIB
if [ ! -f "$CK/.metadata" ]; then
  rm -rf "$CK"; mkdir -p "$WORK"
  echo "writing a ${SIZE_MIB} MiB 4-rank checkpoint with torch's writer into $CK ..."
  $PY "$REPO/bench/dcp_gen.py" "$CK" "$SIZE_MIB" || { echo "bench dcp: dcp_gen.py failed" >&2; exit 2; }
fi
files=("$CK"/__*.distcp)
bytes=$(cat "${files[@]}" | wc -c)
T=$(mktemp -d /tmp/pagein-bench-dcp-XXXXXX)
OUT=$OUT_DIR/pagein-bench-dcp-$$.safetensors
cleanup() {
  [ -n "${MNT:-}" ] && bash "$REPO/tools/slowfs.sh" umount "$MNT" >/dev/null 2>&1
  bash "$REPO/tests/remote/servers.sh" stop "$T/srv" >/dev/null 2>&1
  rm -rf "$T" "$OUT" "$OUT_DIR/pagein-bench-dcp-$$.bin"
}
trap cleanup EXIT INT TERM
export PAGEIN_META_CACHE_DIR=$T/meta-cache XDG_CACHE_HOME=$T/xdg-cache HF_HOME=$T/hf-home
cold() { $PY -c 'import os, sys
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"; }
declare -A times
# run NAME CMD...: seconds appended to times[NAME] (null when it failed)
run() {
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  if "$@" > "$T/$name.log" 2>&1; then
    t1=$(date +%s.%N); times[$name]+="$($PY -c "print(round($t1 - $t0, 3))") "
  else
    times[$name]+="null "; echo "  $name failed: $(tail -2 "$T/$name.log")" >&2
  fi
}
median() { $PY -c 'import sys, statistics; v=[float(x) for x in sys.argv[1:] if x != "null"]; print(round(statistics.median(v), 3) if v else "null")' $@; }
ratio() { $PY -c 'import sys; a, b = sys.argv[1:]; print("n/a" if "null" in (a, b) else "%.2f" % (float(a) / float(b)))' "$1" "$2"; }
echo "bench dcp: $CK, $bytes bytes in ${#files[@]} files, RUNS=$RUNS, load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cpus"

if [ $do_slow = 1 ]; then
  if r=$(bash "$REPO/tools/slowfs.sh" check); then
    MNT=$T/mnt
    bash "$REPO/tools/slowfs.sh" mount "$CK" "$MNT" --delay-us "$DELAY_US" >/dev/null || exit 2
    mfiles=("$MNT"/__*.distcp)
    for r in $(seq 1 "$RUNS"); do
      cold "${files[@]}" "${mfiles[@]}" "$MNT/.metadata"; run s_cat cat "${mfiles[@]}" "$MNT/.metadata"
      cold "${files[@]}" "${mfiles[@]}" "$MNT/.metadata"; run s_pagein "$PAGEIN" convert "$MNT" "$OUT"
      cold "${files[@]}" "${mfiles[@]}" "$MNT/.metadata"; run s_torch $PY "$REPO/bench/dcp_ref.py" fs "$MNT"
      rm -f "$OUT"
    done
    grep -h "bytes read" "$T/s_pagein.log" | sed 's/^/  pagein: /'
    bash "$REPO/tools/slowfs.sh" umount "$MNT" >/dev/null 2>&1; MNT=
    c=$(median ${times[s_cat]}) p=$(median ${times[s_pagein]}) t=$(median ${times[s_torch]})
    echo "slowfs ${DELAY_US} us, cold | seconds (median of $RUNS) | runs"
    echo "  cat                  | $c | ${times[s_cat]}"
    echo "  pagein convert       | $p | ${times[s_pagein]}"
    echo "  torch FileSystemReader | $t | ${times[s_torch]}"
    echo "  pagein / cat = $(ratio "$p" "$c") (target <= 1.25); torch / pagein = $(ratio "$t" "$p") (target >= 5)"
  else
    echo "slowfs: skipped: $r"
  fi
fi

if [ $do_http = 1 ]; then
  mkdir -p "$T/srv/www/ck"
  cp "$CK"/.metadata "${files[@]}" "$T/srv/www/ck/"
  cat "${files[@]}" > "$T/srv/www/all.bin"
  out=$(bash "$REPO/tests/remote/servers.sh" start "$T/srv" $$ nginx delay 2>&1) || { echo "bench dcp: servers: $out" >&2; exit 2; }
  . "$T/srv/env"
  for r in $(seq 1 "$RUNS"); do
    run h_pagein "$PAGEIN" convert "$DELAY/ck" "$OUT"; rm -f "$OUT"
    run h_reader_wall env PYTHONPATH="$PYBUILD" $PY "$REPO/bench/dcp_ref.py" pagein "$DELAY/ck"
    # the load's own seconds (Python and torch imports excluded)
    v=$(grep -o 'load_s=[0-9.]*' "$T/h_reader_wall.log" | cut -d= -f2); times[h_reader]+="${v:-null} "
    # the same into tensors written before (an initialized model's parameters: no fresh pages)
    run h_readert_wall env DCP_REF_TOUCH=1 PYTHONPATH="$PYBUILD" $PY "$REPO/bench/dcp_ref.py" pagein "$DELAY/ck"
    v=$(grep -o 'load_s=[0-9.]*' "$T/h_readert_wall.log" | cut -d= -f2); times[h_readert]+="${v:-null} "
    run h_pull "$PAGEIN" pull --no-sync -q -c "$CONNS" "$DELAY/all.bin" "$OUT_DIR/pagein-bench-dcp-$$.bin"
    rm -f "$OUT_DIR/pagein-bench-dcp-$$.bin"
    if [ "${SKIP_FSSPEC:-0}" != 1 ] && $PY -c "import fsspec, aiohttp" 2>/dev/null; then run h_fsspec $PY "$REPO/bench/dcp_ref.py" fsspec "$DELAY/ck"; fi
  done
  grep -h "bytes read" "$T/h_pagein.log" | sed 's/^/  pagein: /'
  grep -h "runs" "$T/h_reader_wall.log" | sed 's/^/  reader: /'
  p=$(median ${times[h_pagein]}) u=$(median ${times[h_pull]}) f=$(median ${times[h_fsspec]:-null})
  rd=$(median ${times[h_reader]}) rt=$(median ${times[h_readert]})
  # pairs: each run's ratio to the pull of the same run (the machine's load moves between runs)
  pr=$($PY -c 'import sys, statistics
a, b = [x.split() for x in sys.argv[1:3]]
v = [float(u) / float(p) for p, u in zip(a, b) if "null" not in (p, u)]
print(" ".join("%.2f" % x for x in v))' "${times[h_pagein]}" "${times[h_pull]}")
  rr=$($PY -c 'import sys, statistics
a, b = [x.split() for x in sys.argv[1:3]]
v = [float(u) / float(p) for p, u in zip(a, b) if "null" not in (p, u)]
print(" ".join("%.2f" % x for x in v))' "${times[h_reader]}" "${times[h_pull]}")
  rrt=$($PY -c 'import sys
a, b = [x.split() for x in sys.argv[1:3]]
v = [float(u) / float(p) for p, u in zip(a, b) if "null" not in (p, u)]
print(" ".join("%.2f" % x for x in v))' "${times[h_readert]}" "${times[h_pull]}")
  echo "HTTP (${DELAY_MS} ms first byte, $RATE/s a connection) | seconds (median of $RUNS) | runs"
  echo "  pagein convert       | $p | ${times[h_pagein]}"
  echo "  torch load via pagein.dcp.Reader (imports excluded) | $rd | ${times[h_reader]}"
  echo "  the same into tensors written before (DCP_REF_TOUCH=1) | $rt | ${times[h_readert]}"
  echo "  pagein pull (same bytes, one object, -c $CONNS) | $u | ${times[h_pull]}"
  echo "  serial per-item fsspec | $f | ${times[h_fsspec]:-}"
  echo "  convert rate / pull rate = $(ratio "$u" "$p") (target >= 0.8; per run: $pr); fsspec / pagein = $(ratio "$f" "$p") (target >= 2.75)"
  echo "  Reader load rate / pull rate = $(ratio "$u" "$rd") (per run: $rr); into written tensors $(ratio "$u" "$rt") (per run: $rrt)"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
