# lib.sh - helpers sourced by CLI tests.
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_exit CODE CMD...: runs CMD, checks its exit status, leaves output in $OUT_TXT
expect_exit() {
  local want=$1; shift
  OUT_TXT=$("$@" 2>&1); local got=$?
  [ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want; output: $OUT_TXT"
}
expect_contains() { echo "$OUT_TXT" | grep -q -- "$1" || fail "output lacks '$1': $OUT_TXT"; }
PY=/usr/bin/python3

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
