#!/usr/bin/env bash
# scripts/funclen.sh passes on the tree, fails naming the file, line and
# length of a function over 200 lines, and lets the named exception (the
# pickle opcode loop) through; its counts agree with a hand-made file.
set -u
. "$REPO/tests/cli/lib.sh"
expect_exit 0 bash "$REPO/scripts/funclen.sh"
mkdir -p "$TMP/t/scripts" "$TMP/t/src/x" "$TMP/t/src/format"
cp "$REPO/scripts/funclen.sh" "$TMP/t/scripts/"
# f: 201 lines from its header to its closing brace, with braces in
# strings, characters, comments and a macro that must not count
{
  echo '#define BRACE {'
  echo 'static int'
  echo 'f(int a) {'
  echo '    const char *s = "}}}{"; char c = '"'"'}'"'"'; /* } */ // }'
  for i in $(seq 1 196); do echo "    a += $i;"; done
  echo '    return a;'
  echo '}'
  echo 'struct s { int a; };'
  echo 'static const int tab[] = {1, 2, 3};'
  echo 'int g(void) { return 0; }'
} > "$TMP/t/src/x/long.c"
expect_exit 0 bash "$TMP/t/scripts/funclen.sh" --list 1
expect_contains 'src/x/long.c:2:f:201'
expect_contains 'src/x/long.c:205:g:1'
echo "$OUT_TXT" | grep -q ':s:\|:tab:' && fail "a struct or an initializer counted as a function: $OUT_TXT"
expect_exit 1 bash "$TMP/t/scripts/funclen.sh"
expect_contains 'funclen: src/x/long.c:2: f is 201 lines'
# at 200 lines it passes
sed -i '5d' "$TMP/t/src/x/long.c"
expect_exit 0 bash "$TMP/t/scripts/funclen.sh"
# the opcode loop is the named exception: long, and allowed by name only
sed 's/^f(int a)/pk_load(int a)/' "$TMP/t/src/x/long.c" > "$TMP/t/src/format/pickle.c"
sed -i '5i\    a++;' "$TMP/t/src/format/pickle.c"
expect_exit 0 bash "$TMP/t/scripts/funclen.sh"
sed 's/^f(int a)/pk_load(int a)/' "$TMP/t/src/format/pickle.c" > "$TMP/t/src/x/pickle.c"
expect_exit 1 bash "$TMP/t/scripts/funclen.sh"
expect_contains 'funclen: src/x/pickle.c:2: pk_load is 201 lines'
echo "funclen: ok"
