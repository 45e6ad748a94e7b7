#!/usr/bin/env bash
# hostile_data.test.sh - untrusted training data under a 1 GB address-space
# limit and 10 s each (docs/SAFETY.md, "Counts and indexes"): tiny files
# claiming 2^28 .. 2^30 rows (Parquet, Arrow file and stream), a Parquet
# file without columns and one whose row groups' rows overflow, a 22 KB
# .jsonl.zst of 128 Mi lines, an MDS shard of 2^24 samples in 6 KB, are
# refused at open naming the file (and the group); a 44 KB .mds.zstd of
# 1 GiB reads in groups of 16 MiB; a .jsonl.zst of exactly 64 KiB and one
# of 500,000 short lines in a few hundred bytes read; a valid Parquet file of 257 columns
# (parquet-wasm) reads. The files are the committed fuzz seeds
# (tests/data/hostile/gen.py, gen_arrow.mjs).
set -u
. "$REPO/tests/cli/lib.sh"
C=$REPO/fuzz/corpus
# run_limited WANT FILE ARGS...: read-samples --check under the limits
run_limited() {
  local want=$1 f=$2 got; shift 2
  OUT_TXT=$( (ulimit -v 1000000; timeout 10 "$PAGEIN" read-samples --dataset "$f" --check --order global "$@") 2>&1)
  got=$?
  [ "$got" -lt 124 ] || fail "$f: killed or timed out (exit $got): $OUT_TXT"
  [ "$want" = any ] || [ "$got" -eq "$want" ] || fail "$f: exit $got, expected $want: $OUT_TXT"
}
for f in parquet_footer/hostile-rows.parquet parquet_footer/hostile-nocols.parquet \
         parquet_footer/hostile-overflow.parquet arrow/hostile-null.arrow arrow/hostile-len.stream.arrow; do
  run_limited 1 "$C/$f"
  expect_contains "$(basename "$f"), group [0-9]*: claims [0-9]* rows in [0-9]* bytes"
done
# compressed text: more samples than the allowance (2^22 a shard) and 8 a
# compressed byte are refused at open, naming the file; what is read is
# read in groups of at most the decode budget (16 MiB), whatever it expands to
run_limited 1 "$C/lines/hostile-bomb.jsonl.zst"
expect_contains "hostile-bomb.jsonl.zst: claims [0-9]* samples in 22543 bytes of compressed lines"
run_limited 1 "$C/mds/hostile-count.mds.zstd" --data-format mds
expect_contains "claims 16777216 samples in [0-9]* bytes of zstd-compressed shard"
run_limited 0 "$C/lines/hostile-64k.jsonl.zst"
expect_contains "^64 samples"
# the 44 KB .mds.zstd of 1 GiB: read in order in groups of 16 MiB (it was
# one group of 1 GiB: out of memory under the limit); the first 48 MiB, one
# group a unit, to stay inside 10 s on a loaded machine (the whole shard
# reads too, in 280 MB: 6.5 s at load 14 on 2 cores)
run_limited 0 "$REPO/tests/data/hostile/mds_bomb" --order none --window 1 --limit 48
expect_contains "^48 samples, 48 fields, 50331456 field bytes"
# a valid .jsonl.zst of 500,000 short lines in a few hundred bytes (more than
# 8 lines a compressed byte: refused before), in groups of 1 MiB
if command -v zstd >/dev/null; then
  awk 'BEGIN { for (i = 0; i < 500000; i++) print "{\"a\": 1}" }' | zstd -q -19 -c > "$TMP/short.jsonl.zst"
  export PAGEIN_DS_DECODE_BUDGET=1048576
  run_limited 0 "$TMP/short.jsonl.zst"
  unset PAGEIN_DS_DECODE_BUDGET
  expect_contains "^500000 samples, 500000 fields, 4000000 field bytes"
else
  skip_part "short lines: no zstd tool"
fi
echo "hostile_data: compressed ok"

# more than 256 fields: one limit, the one at open (a valid 257-column file
# from parquet-wasm opened, then failed on its first sample)
run_limited 0 "$REPO/tests/data/hostile/wide.parquet"
expect_contains "^3 samples, 771 fields"
echo "hostile_data: wide ok"
# sparse tar members (Python's tarfile writes the pax form; the GNU one is
# a member's header with type S): refused by name, never dropped silently
# (GNU) or read as their raw map (pax)
for f in hostile-gnu-sparse.tar hostile-pax-sparse.tar; do
  run_limited 1 "$C/tar/$f"
  expect_contains "sparse member 'b.txt' at offset 1024"
done
echo "hostile_data: sparse ok"
