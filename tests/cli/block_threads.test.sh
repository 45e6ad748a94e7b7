#!/usr/bin/env bash
# block_threads.test.sh - the block order does not start threads for every
# unit: a window of tiny row groups is several small spans, and a local read
# of them started 7 copy threads each time (20-40 times the time of the none
# order, whose window is one span). 500 row groups of 2 rows
# (tests/data/hostile/tiny_groups.parquet, parquet-wasm): strace -f counts
# the clone calls of both orders; the samples are the same set.
set -u
. "$REPO/tests/cli/lib.sh"
command -v strace > /dev/null || { echo "strace is not installed"; exit 77; }
strace -f -o /dev/null true 2> /dev/null || { echo "strace cannot trace here (ptrace refused)"; exit 77; }
F=$REPO/tests/data/hostile/tiny_groups.parquet
for o in none block; do
  strace -f -e trace=clone,clone3 -o "$TMP/$o.strace" "$PAGEIN" read-samples --dataset "$F" --order $o --ids > "$TMP/$o.ids" 2> "$TMP/err" ||
    fail "$o: $(cat "$TMP/err")"
  n=$(grep -c 'clone' "$TMP/$o.strace")
  echo "$o: $n clone calls"
  [ "$n" -le 4 ] || fail "order $o started $n threads for 500 tiny row groups (at most 4: the loader)"
done
[ "$(sort -n "$TMP/none.ids")" = "$(sort -n "$TMP/block.ids")" ] || fail "the orders read different samples"
[ "$(wc -l < "$TMP/block.ids")" -eq 1000 ] || fail "$(wc -l < "$TMP/block.ids") samples, expected 1000"
echo "block_threads: ok"
