# lib.sh - helpers sourced by CLI tests.
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_exit CODE CMD...: runs CMD, checks its exit status, leaves output in $OUT_TXT
expect_exit() {
  local want=$1; shift
  OUT_TXT=$("$@" 2>&1); local got=$?
  [ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want; output: $OUT_TXT"
}
# skip_part REASON: a part of this script cannot run here; said as "SKIP
# (part): REASON" and counted in run.sh's closing line (the script goes on)
skip_part() { echo "SKIP (part): $*"; echo "$*" >> "$TMP/.skipped-parts"; }
expect_contains() { echo "$OUT_TXT" | grep -q -- "$1" || fail "output lacks '$1': $OUT_TXT"; }
PY=/usr/bin/python3

# running PID: the process has not exited. A zombie has exited (its memory
# and locks are gone); a daemon's zombie is reaped by init, which may take
# seconds, and kill -0 succeeds on it.
running() {
  local st
  st=$(sed -n 's/^.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || st=""
  if [ -n "$st" ]; then [ "$st" != Z ]; else kill -0 "$1" 2>/dev/null; fi
}

# need_curl: exit 77 (skip, said) where pagein is built without libcurl (a
# pull from a port where nothing listens says so)
need_curl() {
  local out
  out=$(PAGEIN_HTTP_RETRIES=0 "$PAGEIN" pull http://127.0.0.1:1/x.bin "$TMP/x" 2>&1)
  if echo "$out" | grep -q "built without libcurl"; then echo "pagein built without libcurl"; exit 77; fi
}

# start_hostile W S [ARGS...]: tools/hostile.py serving W (state in S,
# extra ARGS: a TLS certificate and key), stopped when this script exits;
# waits (bounded, 10 s) for its ports: PA PB PT.
start_hostile() {
  local w=$1 s=$2 i; shift 2
  $PY "$REPO/tools/hostile.py" "$w" "$s" $$ "$@" > "$s/server.log" 2>&1 &
  hpid=$!
  trap 'kill $hpid 2>/dev/null' EXIT
  for i in $(seq 1 100); do [ -s "$s/ports" ] && break; kill -0 $hpid 2>/dev/null || break; sleep 0.1; done
  [ -s "$s/ports" ] || fail "hostile.py did not start: $(cat "$s/server.log")"
  read -r PA PB PT < "$s/ports"
}

# need_loopback2: exit 77 (skip, said) where 127.0.0.2 is not a local
# address (tools/hostile.py listens on 127.0.0.1 and 127.0.0.2)
need_loopback2() {
  $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.2", 0))' 2>/dev/null ||
    { echo "127.0.0.2 is not a local address here (tools/hostile.py listens there too)"; exit 77; }
}

# start_servers DIR SERVER...: the remote tests' servers (tests/remote/
# servers.sh) for this suite, stopped when it exits; exit 77 (skip, with the
# reason) where they cannot run here; then DIR/env is sourced (HTTP, HTTPS,
# CA, S3, ...). RATE and DELAY_MS pass through the environment.
start_servers() {
  local dir=$1 out rc; shift
  trap "bash '$REPO/tests/remote/servers.sh' stop '$dir'" EXIT
  out=$(bash "$REPO/tests/remote/servers.sh" start "$dir" $$ "$@" 2>&1); rc=$?
  [ $rc = 77 ] && { echo "$out"; exit 77; }
  [ $rc = 0 ] || fail "servers did not start: $out"
  . "$dir/env"
}

# log_settle LOG BASE_URL: nginx writes a request's access-log line after
# its response, so a client that has finished may not see its lines yet.
# Requests a marker URL and polls (deadline 10 s) until the marker's line is
# in LOG: the servers run one nginx worker, which logs in order, so every
# earlier request's line is there too. No fixed sleep.
log_settle() {
  local log=$1 base=$2 m="log-settle-$$-$RANDOM" i
  curl -s -o /dev/null "$base/$m" || true
  for i in $(seq 1 200); do grep -q -- "$m" "$log" && return 0; sleep 0.05; done
  fail "nginx never logged the marker $m in $log"
}

# wait_for DESC CMD...: polls CMD until it succeeds, deadline 10 s.
wait_for() {
  local desc=$1 i; shift
  for i in $(seq 1 1000); do "$@" && return 0; sleep 0.01; done
  fail "timed out waiting for $desc"
}
