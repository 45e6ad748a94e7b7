# cli: serial
# SIGINT/SIGTERM during convert (safetensors and GGUF
# output), make-sample and bench shuffle (with --slowfs when it can mount)
# leave no temporary file, no /var/tmp/pagein-shuffle-* directory, no mount
# and no slowfs daemon, and the command dies of the signal.
#
# Writers use O_TMPFILE here (nothing has a name until commit); with
# PAGEIN_ATOMIC_NAMED=1 they use named temporaries as on filesystems without
# O_TMPFILE, and the test waits until such a file exists before signalling,
# so the signal always lands mid-write. Every wait is bounded.
. "$REPO/tests/cli/lib.sh"
set -m # background jobs keep SIGINT (a non-interactive shell would ignore it for them)

# run_and_signal SIG WAIT_FOR_TMP(0|1) DELAY_S DIR CMD...: starts CMD, waits
# for a ".tmp-" file in DIR (when asked, up to 10 s) or DELAY_S, sends SIG,
# waits for it (up to 60 s) and checks nothing temporary is left in DIR.
run_and_signal() {
  local sig=$1 waittmp=$2 delay=$3 dir=$4; shift 4
  : > "$TMP/cmd.out" # emptied here: the child's own redirect may come after the first poll below
  "$@" > "$TMP/cmd.out" 2>&1 &
  local pid=$! seen=0
  if [ "$waittmp" = 1 ]; then
    for _ in $(seq 1000); do
      if ls -A "$dir" | grep -q '\.tmp-'; then seen=1; break; fi
      kill -0 $pid 2>/dev/null || break
      sleep 0.01
    done
    [ $seen = 1 ] || { kill -KILL $pid 2>/dev/null; wait $pid; fail "no named temporary appeared in $dir during '$*' ($(cat "$TMP/cmd.out"))"; }
  else
    sleep "$delay"
  fi
  kill -"$sig" $pid 2>/dev/null
  local rc
  for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  kill -0 $pid 2>/dev/null && { kill -KILL $pid; wait $pid; fail "'$*' still running 60 s after SIG$sig"; }
  wait $pid; rc=$?
  local want=130; [ "$sig" = TERM ] && want=143
  # finished before the signal: 0 is fine too (the O_TMPFILE case at late moments)
  if [ $rc -ne $want ] && { [ $rc -ne 0 ] || [ "$waittmp" = 1 ]; }; then
    fail "'$*' after SIG$sig exited $rc, expected $want: $(cat "$TMP/cmd.out")"
  fi
  local left
  left=$(ls -A "$dir" | grep '\.tmp-')
  [ -z "$left" ] || fail "SIG$sig during '$*' left: $left"
  KILLED=$((KILLED + (rc == want)))
}

W="$TMP/w"; mkdir -p "$W"
"$PAGEIN" make-sample "$TMP/in.safetensors" --size 48M -q || fail "make-sample"
KILLED=0
for sig in INT TERM; do
  for named in 1 0; do
    for d in 0.05 0.3; do
      [ $named = 1 ] && [ $d != 0.05 ] && continue # named: the wait is for the temp file
      export PAGEIN_ATOMIC_NAMED=$named
      rm -f "$W"/*
      run_and_signal $sig $named $d "$W" "$PAGEIN" make-sample "$W/s.safetensors" --size 48M -q
      run_and_signal $sig $named $d "$W" "$PAGEIN" make-sample "$W/s.gguf" --format gguf --size 48M -q
      run_and_signal $sig $named $d "$W" "$PAGEIN" convert "$TMP/in.safetensors" "$W/c.safetensors" --dtype f32 -q
      run_and_signal $sig $named $d "$W" "$PAGEIN" convert "$TMP/in.safetensors" "$W/c.gguf" -q
      # sharded: the set is written in a hidden temporary directory
      # (".sh.safetensors.tmp-XXXXXX", matched by the '.tmp-' check) that a
      # signal removes with the finished shards in it
      run_and_signal $sig $named $d "$W" "$PAGEIN" convert "$TMP/in.safetensors" "$W/sh.safetensors" --max-shard-size 4MB --dtype f32 -q
      # what is there is complete: each output that exists opens
      for f in "$W"/*; do
        [ -e "$f" ] || continue
        "$PAGEIN" verify "$f" > /dev/null 2>&1 || fail "$f left after a signal does not verify"
      done
    done
  done
done
unset PAGEIN_ATOMIC_NAMED
[ $KILLED -ge 10 ] || fail "only $KILLED of the writer runs were killed mid-way: the test did not test much"

# ---- bench shuffle: its /var/tmp directory, the slowfs mount and daemon ----
shuffle_dir() { sed -n 's/.* under \(\/var\/tmp\/pagein-shuffle-[A-Za-z0-9]*\) .*/\1/p' "$TMP/cmd.out" | head -1; }
mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }
SLOWFS=$(dirname "$PAGEIN")/slowfs
can_slowfs=0
if [ -x "$SLOWFS" ] && [ -c /dev/fuse ] && command -v fusermount3 > /dev/null; then can_slowfs=1; fi
[ $can_slowfs = 1 ] || echo "note: slowfs not built or /dev/fuse/fusermount3 missing: --slowfs cases skipped"
SKILLED=0
for sig in INT TERM; do
  for mode in local-early local-late slowfs slowfs-group; do
    case $mode in slowfs*) [ $can_slowfs = 1 ] || continue ;; esac
    extra="--size 96M"; case $mode in slowfs*) extra="--size 48M --slowfs-only --delay-us 3000" ;; esac
    : > "$TMP/cmd.out" # not the last run's output: the child truncates it only when it gets to run
    "$PAGEIN" bench shuffle $extra > "$TMP/cmd.out" 2>&1 &
    pid=$!
    dir=""
    for _ in $(seq 500); do dir=$(shuffle_dir); [ -n "$dir" ] && break; sleep 0.02; done
    [ -n "$dir" ] || { kill -KILL $pid; wait $pid; fail "bench shuffle printed no directory: $(cat "$TMP/cmd.out")"; }
    case $mode in
      local-late) sleep 0.2 ;;
      slowfs*)
        for _ in $(seq 500); do mounted "$dir.mnt" && break; sleep 0.02; done
        mounted "$dir.mnt" || { kill -KILL $pid; wait $pid; fail "slowfs never mounted $dir.mnt: $(cat "$TMP/cmd.out")"; }
        sleep 0.3 ;;
    esac
    if [ $mode = slowfs-group ]; then kill -"$sig" -- -$pid 2>/dev/null; else kill -"$sig" $pid 2>/dev/null; fi # group: like ^C at a terminal
    for _ in $(seq 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    kill -0 $pid 2>/dev/null && { kill -KILL $pid; wait $pid; fail "bench shuffle still running 60 s after SIG$sig"; }
    wait $pid; rc=$?
    [ $rc -eq 130 ] || [ $rc -eq 143 ] || [ $rc -eq 0 ] || fail "bench shuffle ($mode) after SIG$sig exited $rc: $(cat "$TMP/cmd.out")"
    [ $rc -ne 0 ] && SKILLED=$((SKILLED + 1))
    [ -e "$dir" ] && fail "SIG$sig during bench shuffle ($mode) left $dir: $(ls -A "$dir")"
    mounted "$dir.mnt" && fail "SIG$sig during bench shuffle ($mode) left a mount at $dir.mnt"
    [ -e "$dir.mnt" ] && fail "SIG$sig during bench shuffle ($mode) left $dir.mnt"
    for p in /proc/[0-9]*; do
      tr '\0' ' ' 2>/dev/null < "$p/cmdline" | grep -q -- "$dir" && fail "SIG$sig during bench shuffle ($mode) left a process: $(tr '\0' ' ' < "$p/cmdline")"
    done
  done
done
[ $SKILLED -ge 3 ] || fail "only $SKILLED bench shuffle runs were killed mid-way: the test did not test much"
exit 0
