#!/usr/bin/env bash
# scripts/layers.sh passes on the tree, and fails, naming the file, line and
# edge, when an include goes up a layer or a consumer reaches into src/; its
# second half (nm over the built objects) fails, naming the object, the edge
# and the symbol, on a call that goes up a layer with no include to show it,
# and on a circle between the files of a folder; a URL scheme in a string
# outside src/source/ fails too.
set -u
. "$REPO/tests/cli/lib.sh"
expect_exit 0 bash "$REPO/scripts/layers.sh"
mkdir -p "$TMP/t"
cp -r "$REPO/src" "$REPO/scripts" "$REPO/cli" "$TMP/t/"
echo '#include "../load/load.h"' >> "$TMP/t/src/source/facts.c"
BUILD=$TMP/none expect_exit 1 bash "$TMP/t/scripts/layers.sh"
expect_contains 'src/source/facts.c:[0-9]*: source -> load is not a downward edge'
cp "$REPO/src/source/facts.c" "$TMP/t/src/source/facts.c"
echo '#include "../src/internal.h"' >> "$TMP/t/cli/main.c"
# in the same run: a URL scheme in a string outside src/source/ fails,
# naming the file and line; the same text in a comment does not
printf '/* "s3://b/p/" in a comment */\nstatic const char *planted_scheme = "hf://org/name";\n' >> "$TMP/t/src/load/resolve.c"
BUILD=$TMP/none expect_exit 1 bash "$TMP/t/scripts/layers.sh"
expect_contains 'cli/main.c:[0-9]*: a consumer includes ../src/internal.h'
expect_contains "src/load/resolve.c:$(( $(wc -l < "$REPO/src/load/resolve.c") + 2 )): a URL scheme in a string outside src/source/"
echo "$OUT_TXT" | grep -q "resolve.c:$(( $(wc -l < "$REPO/src/load/resolve.c") + 1 )):" && fail "a scheme in a comment was reported: $OUT_TXT"
cp "$REPO/cli/main.c" "$TMP/t/cli/main.c"
cp "$REPO/src/load/resolve.c" "$TMP/t/src/load/resolve.c"
BUILD=$TMP/none expect_exit 0 bash "$TMP/t/scripts/layers.sh"

# the symbol half, in a tree of its own (two planted files: quick): a
# source object calling a function that load/ defines (declared locally, so
# the include check cannot see it), and load/ calling down into source/,
# which is allowed
CC=${CC:-cc}
command -v "$CC" > /dev/null && command -v nm > /dev/null || { echo "no $CC or nm to build the planted objects"; exit 77; }
N=$TMP/n
mkdir -p "$N/src/source" "$N/src/load" "$N/b/obj/src/source" "$N/b/obj/src/load"
cp -r "$REPO/scripts" "$N/"
plant() { # plant LAYER NAME CODE: the source and its object
  printf '%b' "$3" > "$N/src/$1/$2.c" && "$CC" -c -o "$N/b/obj/src/$1/$2.o" "$N/src/$1/$2.c" || fail "cc $1/$2.c"
}
plant source planted 'int pi_planted_up(int);\nint pi_planted_down(int x) { return x + 1; }\nint pi_planted_caller(int x) { return pi_planted_up(x); }\n'
plant load planted 'int pi_planted_down(int);\nint pi_planted_up(int x) { return pi_planted_down(x) * 2; }\n'
# and, in the same run, a circle between the files of a folder (load/:
# a -> b -> c -> a) fails, naming the files and symbols
plant load circ_a 'int pi_circ_b(int);\nint pi_circ_a(int x) { return x ? pi_circ_b(x - 1) : 0; }\n'
plant load circ_b 'int pi_circ_c(int);\nint pi_circ_b(int x) { return pi_circ_c(x) + 1; }\n'
plant load circ_c 'int pi_circ_a(int);\nint pi_circ_c(int x) { return pi_circ_a(x); }\n'
BUILD=$N/b expect_exit 1 bash "$N/scripts/layers.sh"
expect_contains 'source/planted.o: source -> load is not a downward call (pi_planted_up)'
echo "$OUT_TXT" | grep -q 'load/planted.o' && fail "a downward call was reported: $OUT_TXT"
expect_contains 'src/load: a circle between files: load/circ_[abc].c -> load/circ_[abc].c (pi_circ_[abc]) -> '
expect_contains '-> load/circ_a.c (pi_circ_a)'
# the upward call and the circle's closing call removed: the same objects pass
plant source planted 'int pi_planted_down(int x) { return x + 1; }\n'
plant load circ_c 'int pi_circ_c(int x) { return x; }\n'
BUILD=$N/b expect_exit 0 bash "$N/scripts/layers.sh"
# an object whose source is gone (moved or deleted) is not read
plant source gone 'int pi_planted_up(int);\nint pi_planted_caller(int x) { return pi_planted_up(x); }\n'
rm "$N/src/source/gone.c"
BUILD=$N/b expect_exit 0 bash "$N/scripts/layers.sh"
echo "layers: ok"
