#!/usr/bin/env bash
# scripts/layers.sh passes on the tree, and fails, naming the file, line and
# edge, when an include goes up a layer or a consumer reaches into src/.
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
BUILD=$TMP/none expect_exit 1 bash "$TMP/t/scripts/layers.sh"
expect_contains 'cli/main.c:[0-9]*: a consumer includes ../src/internal.h'
cp "$REPO/cli/main.c" "$TMP/t/cli/main.c"
BUILD=$TMP/none expect_exit 0 bash "$TMP/t/scripts/layers.sh"
echo "layers: ok"
