# Smaller CLI points: `resident --tensors REGEX` with a space,
# help texts that list what works (bench suites; --threads/--chunk only for
# warm), one size rule in make-sample, convert and -p, and bench load
# naming the filesystem and explaining its targets.
. "$REPO/tests/cli/lib.sh"
cd "$TMP"
get() { $PY -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1"; }
"$PAGEIN" make-sample m.safetensors --layers 2 --hidden 64 >/dev/null || fail "make-sample"

# ---- resident --tensors REGEX (a space, as warm/evict/lock take it) ----
expect_exit 0 "$PAGEIN" resident --tensors 'layers\.1\..*q_proj' m.safetensors
expect_contains "model.layers.1.self_attn.q_proj.weight"
echo "$OUT_TXT" | grep -q "k_proj" && fail "--tensors REGEX did not narrow: $OUT_TXT"
J=$("$PAGEIN" resident --json --tensors 'q_proj' m.safetensors) || fail "resident --json --tensors q_proj: $J"
[ "$(get "$J" 'sorted(t["name"] for t in d["tensors"])')" = "['model.layers.0.self_attn.q_proj.weight', 'model.layers.1.self_attn.q_proj.weight']" ] || fail "tensors: $J"
# a word that is an existing path (or the last argument) stays a path
expect_exit 0 "$PAGEIN" resident --tensors m.safetensors
expect_contains "lm_head.weight"
expect_contains "model.layers.0.mlp.up_proj.weight"
expect_exit 0 "$PAGEIN" resident --tensors=q_proj m.safetensors
echo "$OUT_TXT" | grep -q "up_proj" && fail "--tensors=REGEX did not narrow"

# ---- help texts ----
expect_exit 0 "$PAGEIN" bench --help
for s in $("$PAGEIN" --help | sed -n 's/^  bench-\([a-z]*\) .*/\1/p') gpu remote load share shuffle; do
  echo "$OUT_TXT" | grep -qE "^  $s +[a-zA-Z]" || fail "bench --help does not list '$s': $OUT_TXT"
done
for c in resident evict lock; do
  expect_exit 0 "$PAGEIN" $c --help
  echo "$OUT_TXT" | grep -qE -- "--threads|--chunk" && fail "$c --help lists --threads/--chunk, which are errors there"
  expect_exit 2 "$PAGEIN" $c --threads 2 m.safetensors
done
expect_exit 0 "$PAGEIN" warm --help
expect_contains "--threads N"
expect_contains "--chunk SIZE"

# ---- one size rule: K = KiB = 1024, KB = 1000, everywhere ----
head -c 3000000 /dev/zero > z.bin
for spec in "1M 1048576" "1MiB 1048576" "1mib 1048576" "1MB 1000000" "1mb 1000000" "1000 1000" "2K 2048" "2KB 2000"; do
  set -- $spec
  J=$("$PAGEIN" resident --json -p "0-$1" z.bin) || fail "resident -p 0-$1: $J"
  [ "$(get "$J" 'd["bytes"]')" = "$2" ] || fail "-p 0-$1 is $(get "$J" 'd["bytes"]') bytes, expected $2"
done
expect_exit 2 "$PAGEIN" resident -p 0-1XB z.bin
# make-sample --size: 2MB and 2MiB are different targets, each met from below
"$PAGEIN" make-sample a.safetensors --size 2MB -q || fail "make-sample --size 2MB"
"$PAGEIN" make-sample b.safetensors --size 2MiB -q || fail "make-sample --size 2MiB"
sa=$(stat -c %s a.safetensors); sb=$(stat -c %s b.safetensors)
[ "$sa" -le 2000000 ] || fail "--size 2MB made $sa bytes"
[ "$sb" -le 2097152 ] || fail "--size 2MiB made $sb bytes"
# convert --max-shard-size reads K as make-sample does (1024, not 1000)
$PY - <<'PYEOF'
import json, struct
hdr, data = {}, b""
for i, n in enumerate("abcd"):
    b = struct.pack("<128f", *([float(i)] * 128))
    hdr[n] = {"dtype": "F32", "shape": [128], "data_offsets": [len(data), len(data) + len(b)]}
    data += b
h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
open("four.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
PYEOF
for spec in "1K 2" "1KiB 2" "1KB 4"; do
  set -- $spec
  rm -rf s && mkdir s
  expect_exit 0 "$PAGEIN" convert -q four.safetensors s/model.safetensors --max-shard-size "$1"
  got=$($PY -c "import json; print(len(set(json.load(open('s/model.safetensors.index.json'))['weight_map'].values())))")
  [ "$got" = "$2" ] || fail "--max-shard-size $1: $got shards, expected $2"
done

# ---- bench load: the filesystem by name, the targets explained ----
expect_exit 0 "$PAGEIN" bench load m.safetensors --runs 1 --no-fio --no-pipeline --only lazy,read1m
echo "$OUT_TXT" | grep -q "fs magic" && fail "bench load still prints the statfs magic: $OUT_TXT"
fs=$(findmnt -n -o FSTYPE --target "$TMP" 2>/dev/null | head -1)
[ -n "$fs" ] && expect_contains "filesystem $fs;"
expect_contains "targets"
for t in populate RSS lazy pipeline; do
  n=$(echo "$OUT_TXT" | sed -n '/^targets$/,/^$/p' | grep -cE "^  $t ")
  [ "$n" = 1 ] || fail "bench load explains target '$t' on $n lines: $OUT_TXT"
done
J=$("$PAGEIN" bench load m.safetensors --runs 1 --no-fio --no-pipeline --only lazy --cache warm --json) || fail "bench load --json"
[ -z "$fs" ] || [ "$(get "$J" 'd["fs"]')" = "$fs" ] || fail "--json fs: $J"

# ---- bench SUITE: a thin front that finds its program (bench/bench_SUITE.c) ----
# installed: PREFIX/bin/pagein runs PREFIX/libexec/pagein/bench_load; with
# the program absent, exit 2 naming every path tried
mkdir -p "$TMP/p/bin" "$TMP/p/libexec/pagein"
cp "$PAGEIN" "$TMP/p/bin/pagein"
expect_exit 2 "$TMP/p/bin/pagein" bench load m.safetensors
expect_contains "bench_load is not there"
expect_contains "$TMP/p/bin/../libexec/pagein/bench_load"
cp "$(dirname "$PAGEIN")/bench/bench_load" "$TMP/p/libexec/pagein/"
expect_exit 0 "$TMP/p/bin/pagein" bench load --help
expect_contains "usage: pagein bench load MODEL"
exit 0
