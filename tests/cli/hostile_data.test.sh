#!/usr/bin/env bash
# hostile_data.test.sh - untrusted training data under a 1 GB address-space
# limit and 10 s each (docs/SAFETY.md, "Counts and indexes"): tiny files
# claiming 2^28 .. 2^30 rows (Parquet, Arrow file and stream), a Parquet
# file without columns and one whose row groups' rows overflow, a 22 KB
# .jsonl.zst of 128 Mi lines, an MDS shard of 2^24 samples in 6 KB, are
# refused at open naming the file and the group; a 44 KB .mds.zstd of 1 GiB
# reads or fails cleanly (its 1 GiB is one group), never at open; a
# .jsonl.zst of exactly 64 KiB reads; a valid Parquet file of 257 columns
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
run_limited 1 "$C/lines/hostile-bomb.jsonl.zst"
expect_contains "hostile-bomb.jsonl.zst, group 0: claims [0-9]* rows in 22543 bytes of compressed lines"
run_limited 1 "$C/mds/hostile-count.mds.zstd" --data-format mds
expect_contains "claims 16777216 rows in [0-9]* bytes of zstd-compressed shard"
run_limited 0 "$C/lines/hostile-64k.jsonl.zst"
expect_contains "^64 samples"
run_limited any "$REPO/tests/data/hostile/mds_bomb"
echo "$OUT_TXT" | grep -q "cannot open" && fail "mds_bomb: refused at open: $OUT_TXT"

# more than 256 fields: one limit, the one at open (a valid 257-column file
# from parquet-wasm opened, then failed on its first sample)
expect_exit 0 "$PAGEIN" read-samples --dataset "$REPO/tests/data/hostile/wide.parquet" --check
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
