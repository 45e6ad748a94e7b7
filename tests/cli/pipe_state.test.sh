#!/usr/bin/env bash
# cli: serial
# pipe_state.test.sh - resume states are never cut and never taken for
# another dataset (docs/TRAINING-DATA.md "Resume"): a state of 1004 ranks x
# 8 workers (8,000+ intervals, 150 KB; --state-after cut it at 64 KiB and the
# resume lost 40% of the epoch) is printed whole and resumes every remaining
# sample exactly once (--state @FILE); a state cut short, one with a key
# given twice, one edited, and one saved on [A, B] loaded on [B, A] are
# refused; resuming from the long state is fast (linear in its intervals).
set -u
. "$REPO/tests/cli/lib.sh"
N=900000
head -c $N /dev/zero > "$TMP/a.bin"
head -c 1000 /dev/zero > "$TMP/b.bin"
rs() { "$PAGEIN" read-samples --data-format records --record-size 1 --order global --seed 7 "$@"; }
rs --dataset "$TMP/a.bin" --world 1004 --workers 8 --batch-size 1 --state-after 10 > "$TMP/st" 2> "$TMP/err" ||
  fail "state-after: $(cat "$TMP/err")"
bytes=$(wc -c < "$TMP/st")
[ "$bytes" -gt 100000 ] || fail "the state is $bytes bytes: expected over 100 KB (8,000+ intervals)"
# every rank consumed 10: the rest, exactly once
start=$(date +%s%N)
rs --dataset "$TMP/a.bin" --state "@$TMP/st" --ids > "$TMP/ids" 2> "$TMP/err" || fail "resume: $(cat "$TMP/err")"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
got=$(wc -l < "$TMP/ids")
[ "$got" -eq $((N - 10040)) ] || fail "resume read $got samples, expected $((N - 10040))"
[ "$(sort -n "$TMP/ids" | uniq -d | head -1)" = "" ] || fail "resume read a sample twice"
echo "resume from a $bytes-byte state: $got samples in $ms ms"
[ "$ms" -lt 20000 ] || fail "resume took $ms ms"
# cut, duplicated, edited
head -c $((bytes / 2)) "$TMP/st" > "$TMP/cut"
expect_exit 1 rs --dataset "$TMP/a.bin" --state "@$TMP/cut" --ids
expect_contains "pipe state"
sed 's/ epoch=0 / epoch=0 epoch=1 /' "$TMP/st" > "$TMP/dup"
expect_exit 1 rs --dataset "$TMP/a.bin" --state "@$TMP/dup" --ids
expect_contains "'epoch=' given twice"
sed 's/remaining=\([0-9]*\)-/remaining=\1-1/' "$TMP/st" > "$TMP/edit"
expect_exit 1 rs --dataset "$TMP/a.bin" --state "@$TMP/edit" --ids
expect_contains "pipe state"
# another dataset: [A, B] then [B, A]
st=$(rs --dataset "$TMP/a.bin" --dataset "$TMP/b.bin" --state-after 5) || fail "state of [A, B]"
expect_exit 0 rs --dataset "$TMP/a.bin" --dataset "$TMP/b.bin" --state "$st" --limit 3 --ids
expect_exit 1 rs --dataset "$TMP/b.bin" --dataset "$TMP/a.bin" --state "$st" --ids
expect_contains "another dataset"
echo "pipe_state: ok"
