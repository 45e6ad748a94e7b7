# pagein hash / verify --manifest on sharded models: a directory, its index
# and every spelling (dir, dir/) find one manifest; verify prints OK only
# after the data matched; errors carry verify's own name (issues 17.2, 19.10).
. "$REPO/tests/cli/lib.sh"
T="timeout 60"
"$PAGEIN" make-sample m.safetensors --layers 6 --hidden 64 --vocab 128 -q || fail "make-sample"
OUT_TXT=$("$PAGEIN" hash m.safetensors 2>&1); rc=$?
if [ $rc -eq 2 ] && echo "$OUT_TXT" | grep -q "libxxhash"; then
  echo "hashing not built: libxxhash-dev missing"; exit 77
fi
mkdir shard
"$PAGEIN" convert m.safetensors shard/model.safetensors --max-shard-size 100K -q || fail "convert to shards"

# one manifest place whatever the spelling
expect_exit 0 $T "$PAGEIN" hash shard/
[ -s shard/.pagein-manifest ] || fail "hash shard/ wrote no shard/.pagein-manifest"
rm shard/.pagein-manifest
expect_exit 0 $T "$PAGEIN" hash shard
[ -s shard/.pagein-manifest ] || fail "hash shard wrote elsewhere: $(ls -a . shard)"
[ -e shard.pagein-manifest ] && fail "hash shard wrote shard.pagein-manifest too"
for spelling in shard shard/ shard//; do
  expect_exit 0 $T "$PAGEIN" hash --check $spelling
  expect_contains "OK, matches"
done
# the index finds the directory's manifest too
expect_exit 0 $T "$PAGEIN" hash --check shard/model.safetensors.index.json
expect_contains "matches shard/.pagein-manifest"
# a manifest written by an older version next to the directory is still found
mv shard/.pagein-manifest shard.pagein-manifest
expect_exit 0 $T "$PAGEIN" hash --check shard/
mv shard.pagein-manifest shard/.pagein-manifest

# verify --manifest on the directory and on the index, like hash --check
M=shard/.pagein-manifest
for target in shard shard/ shard/model.safetensors.index.json; do
  expect_exit 0 $T "$PAGEIN" verify --manifest $M $target
  expect_contains "OK"
  expect_contains "data matches"
done
# plain verify of a sharded model: every shard validated
expect_exit 0 $T "$PAGEIN" verify shard shard/model.safetensors.index.json
expect_contains "in $(ls shard/*.safetensors | wc -l) files"

# a corrupted shard: MISMATCH, and never OK before it
cp -r shard bad
last=$(ls bad/model-*.safetensors | tail -1)
size=$(stat -c %s "$last")
printf '\x5a\x5a' | dd of="$last" bs=1 seek=$((size - 3)) conv=notrunc 2>/dev/null
expect_exit 1 $T "$PAGEIN" verify --manifest $M bad
expect_contains "MISMATCH"
echo "$OUT_TXT" | grep -q "OK" && fail "verify printed OK for a corrupted model: $OUT_TXT"
expect_contains "1 mismatch against"
# the same on a single file
"$PAGEIN" hash m.safetensors -q || fail "hash m"
cp m.safetensors c.safetensors
size=$(stat -c %s c.safetensors)
printf '\x5a\x5a' | dd of=c.safetensors bs=1 seek=$((size - 3)) conv=notrunc 2>/dev/null
expect_exit 1 $T "$PAGEIN" verify --manifest m.safetensors.pagein-manifest c.safetensors
echo "$OUT_TXT" | grep -q "OK" && fail "verify printed OK for a corrupted file: $OUT_TXT"
echo "$OUT_TXT" | grep -q "MISMATCH" || fail "no MISMATCH line: $OUT_TXT"

# errors are verify's, said once
expect_exit 2 $T "$PAGEIN" verify --manifest missing.manifest shard
expect_contains "pagein verify:"
echo "$OUT_TXT" | grep -q "pagein hash" && fail "verify's error carries hash's name: $OUT_TXT"
[ "$(echo "$OUT_TXT" | grep -o "missing.manifest" | wc -l)" = 1 ] || fail "path repeated: $OUT_TXT"
[ "$(echo "$OUT_TXT" | grep -o "No such file" | wc -l)" = 1 ] || fail "errno repeated: $OUT_TXT"
# a FIFO as the manifest or the model: refused at once
mkfifo fifo
expect_exit 2 $T "$PAGEIN" verify --manifest fifo m.safetensors
expect_contains "FIFO"
expect_exit 2 $T "$PAGEIN" hash -c -o fifo m.safetensors
expect_exit 2 $T "$PAGEIN" hash fifo
expect_contains "FIFO"
# one file counts as one
expect_exit 0 $T "$PAGEIN" hash m.safetensors
expect_contains "in 1 file,"
exit 0
