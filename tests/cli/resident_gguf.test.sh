# `pagein resident` (and inspect) on GGUF must not fill the cache it
# measures: opening reads the header only, none of the tensor data (a
# normal mapping's first fault read up to read_ahead_kb, 8 MiB, around it).
. "$REPO/tests/cli/lib.sh"
cd "$TMP"
case $(stat -f -c %T "$TMP") in tmpfs|ramfs) echo "SKIP: $TMP is on $(stat -f -c %T "$TMP"): DONTNEED cannot drop its pages"; exit 77;; esac
"$PAGEIN" make-sample g.gguf --format gguf --dtype q8_0 --layers 2 --hidden 256 >/dev/null || fail "make-sample"
get() { $PY -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
J=$("$PAGEIN" inspect --json g.gguf) || fail "inspect: $J"
ds=$(get "$J" 'd["data_start"]')
[ "$ds" -gt 100000 ] || fail "sample header too small to test ($ds bytes)"
ps=$(getconf PAGESIZE)
first=$(( (ds + ps - 1) / ps * ps ))   # the first page holding only tensor data
data_resident() { get "$("$PAGEIN" resident --json -p "$first-" g.gguf)" 'd["resident_bytes"]'; }
for cmd in "resident g.gguf" "resident --tensors g.gguf" "inspect g.gguf" "verify g.gguf"; do
  "$PAGEIN" evict -q -p 0- g.gguf   # plain-file evict: every page, header too
  [ "$(data_resident)" = 0 ] || fail "evict left tensor data resident"
  "$PAGEIN" $cmd >/dev/null || fail "$cmd failed"
  r=$(data_resident)
  [ "$r" = 0 ] || fail "'pagein $cmd' made $r bytes of tensor data resident (data from byte $ds)"
  h=$(get "$("$PAGEIN" resident --json -p "0-$first" g.gguf)" 'd["resident_bytes"]')
  [ "$h" -gt 0 ] || fail "'pagein $cmd' read no header pages?"
done
exit 0
