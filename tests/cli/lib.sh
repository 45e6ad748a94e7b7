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
