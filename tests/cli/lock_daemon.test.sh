# cli: serial
# The README's `pagein lock DIR --layers 0 --daemon --pidfile F` (no --wait):
# the holder survives its parent (it used to die of SIGPIPE sending its
# ready byte to a closed pipe, leaving a stale pidfile), the pidfile exists
# when the command returns, the layer stays resident through an evict, and
# SIGTERM by the pidfile removes it.
. "$REPO/tests/cli/lib.sh"
cd "$TMP"
case $(stat -f -c %T "$TMP") in tmpfs|ramfs) echo "SKIP: $TMP is on $(stat -f -c %T "$TMP"): DONTNEED cannot drop its pages"; exit 77;; esac
mkdir model-dir
"$PAGEIN" make-sample model-dir/model.safetensors --layers 3 --hidden 256 >/dev/null || fail "make-sample"
get() { $PY -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
"$PAGEIN" evict -q model-dir/

expect_exit 0 "$PAGEIN" lock model-dir/ --layers 0 --daemon --pidfile "$TMP/pagein.pid"
expect_contains "holder pid"
[ -s "$TMP/pagein.pid" ] || fail "no pidfile when lock --daemon returned"
pid=$(cat "$TMP/pagein.pid")
stop() { kill "$pid" 2>/dev/null; }
trap stop EXIT
# the holder locks after its parent returned: wait (bounded) for VmLck
locked=0
for i in $(seq 200); do
  running "$pid" || fail "holder $pid died (stale pidfile $(cat "$TMP/pagein.pid" 2>/dev/null))"
  kb=$(awk '/VmLck/ {print $2}' /proc/"$pid"/status 2>/dev/null)
  [ "${kb:-0}" -gt 0 ] && { locked=1; break; }
  sleep 0.05
done
[ $locked = 1 ] || fail "holder $pid locked nothing in 10 s"
# and it is still alive once it sent its ready byte (the SIGPIPE point):
# resident after an evict proves the lock, then the process is checked again
"$PAGEIN" evict -q model-dir/
J=$("$PAGEIN" resident --json --layers 0 model-dir/) || fail "resident: $J"
[ "$(get "$J" 'd["resident_bytes"] == d["bytes"] > 0')" = True ] || fail "layer 0 not resident under lock: $J"
J=$("$PAGEIN" resident --json --layers 2 model-dir/)
[ "$(get "$J" 'd["resident_bytes"]')" = 0 ] || fail "layer 2 resident though only layer 0 is locked: $J"
running "$pid" || fail "holder $pid died after locking"

kill "$(cat "$TMP/pagein.pid")"
for i in $(seq 200); do running "$pid" || break; sleep 0.05; done
running "$pid" && fail "holder $pid still running 10 s after SIGTERM"
[ -e "$TMP/pagein.pid" ] && fail "stale pidfile after the holder exited"
trap - EXIT

# a failed holder leaves no pidfile either: --wait reports the failure
expect_exit 2 "$PAGEIN" lock model-dir/ --layers 0 --daemon --pidfile "$TMP/no/such/dir/pid"
[ -e "$TMP/no/such/dir/pid" ] && fail "pidfile written"
expect_exit 1 "$PAGEIN" lock model-dir/ --tensors 'no_such_tensor_xyz' --daemon --wait --pidfile "$TMP/p2"
[ -e "$TMP/p2" ] && fail "stale pidfile after a failed lock"
exit 0
