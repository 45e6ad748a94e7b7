# pagein read-samples: ids once per epoch, bytes in order, seeds, Megatron, errors.
. "$REPO/tests/cli/lib.sh"
head -c 40000 /dev/urandom > a.bin
head -c 20000 /dev/urandom > b.bin
expect_exit 0 "$PAGEIN" read-samples --help
expect_contains "--megatron"
for m in global block ranges mmap; do
  "$PAGEIN" read-samples --records 100 a.bin b.bin --mode $m --seed 5 --ids > ids.$m || fail "mode $m"
  [ "$(sort -n ids.$m | uniq | wc -l)" = 600 ] || fail "mode $m: not 600 distinct ids"
  [ "$(wc -l < ids.$m)" = 600 ] || fail "mode $m: not 600 lines"
  "$PAGEIN" read-samples --records 100 a.bin b.bin --mode $m --seed 5 --ids > again.$m
  cmp -s ids.$m again.$m || fail "mode $m: same seed, different order"
  "$PAGEIN" read-samples --records 100 a.bin b.bin --mode $m --seed 5 --epoch 1 --ids > e1.$m
  cmp -s ids.$m e1.$m && fail "mode $m: epoch 1 has epoch 0's order"
  # in order, the bytes are the files' bytes
  "$PAGEIN" read-samples --records 100 a.bin b.bin --mode $m --in-order > out.$m || fail "mode $m bytes"
  cat a.bin b.bin | cmp -s - out.$m || fail "mode $m: in-order bytes differ"
done
"$PAGEIN" read-samples --records 100 a.bin --json --mode block --block-size 4K > j.json || fail "json"
$PY -m json.tool j.json > /dev/null || fail "invalid JSON"
$PY - j.json <<'PY' || fail "json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mode"] == "block" and d["samples"] == 400 and sorted(d["ids"]) == list(range(400)), d
assert 0 < d["quality"] <= 1.1 and d["memory_bound"] > 0, d  # the pipe's two units (the reader runs on it)
PY
# --block-size is the groups' size: 4x the block, 4x the bound (it was parsed and never read)
"$PAGEIN" read-samples --records 100 a.bin --json --mode block --block-size 16K > j16.json || fail "json 16K"
$PY - j.json j16.json <<'PY' || fail "--block-size not read"
import json, sys
a, b = (json.load(open(p))["memory_bound"] for p in sys.argv[1:])
assert b > 2 * a, (a, b)
PY
expect_exit 0 "$PAGEIN" read-samples --records 100 a.bin --ids --limit 3
[ "$(echo "$OUT_TXT" | wc -l)" = 3 ] || fail "--limit"
# a Megatron dataset: 3 sequences of int32 tokens
$PY - <<'PY'
import struct
lens = [3, 0, 2]
toks = [[1, 2, 3], [], [7, 8]]
S = len(lens); ptrs = [0, 12, 12]; docs = [0, 1, 3]
idx = b"MMIDIDX\0\0" + struct.pack("<QBQQ", 1, 4, S, len(docs))
idx += struct.pack("<3i", *lens) + struct.pack("<3q", *ptrs) + struct.pack("<3q", *docs)
open("m.idx", "wb").write(idx)
open("m.bin", "wb").write(b"".join(struct.pack("<%di" % len(t), *t) for t in toks))
open("bad.idx", "wb").write(idx[:-4]); open("bad.bin", "wb").write(open("m.bin", "rb").read())
PY
"$PAGEIN" read-samples --megatron m --in-order > m.out || fail "megatron"
cmp -s m.out m.bin || fail "megatron bytes"
expect_exit 1 "$PAGEIN" read-samples --megatron bad
expect_contains "bad.idx"
expect_exit 1 "$PAGEIN" read-samples --records 300 a.bin --ids
expect_contains "whole number"
expect_exit 2 "$PAGEIN" read-samples --records 100 missing.bin --ids
expect_exit 2 "$PAGEIN" read-samples --ids a.bin
expect_exit 2 "$PAGEIN" read-samples --records 100 a.bin --mode nope
exit 0
