#!/usr/bin/env bash
# install_readme.sh BUILD - the README's C recipe, verbatim: the ```c block
# after "## C API" is prog.c and the ```sh block after it is run with HOME
# set to a temporary folder (so `make install PREFIX=$HOME/.local` installs
# there), against a sample model. Then the DESTDIR staging: files land under
# DESTDIR and pagein.pc names PREFIX. Run by `make install-test` (make test).
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD_ARG=${1:-build}   # as make knows it (relative to the repository)
BUILD=$(cd "$REPO" && cd "$BUILD_ARG" && pwd)
T=$(mktemp -d /tmp/pagein-install-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL install_readme: $*" >&2; exit 1; }

block() { # block LANG: the first ```LANG block after "## C API"
  awk -v lang="$1" '/^## C API/ {on=1} on && $0 == "```" lang {inb=1; next} inb && /^```/ {exit} inb {print}' "$REPO/README.md"
}
block c > "$T/prog.c"
block sh > "$T/recipe.sh"
[ -s "$T/prog.c" ] && [ -s "$T/recipe.sh" ] || fail "README has no C API code blocks"
grep -q 'make install' "$T/recipe.sh" || fail "README's recipe does not install: $(cat "$T/recipe.sh")"

mkdir -p "$T/work"
"$BUILD/pagein" make-sample "$T/work/model.safetensors" --layers 2 --hidden 64 >/dev/null
cp "$T/prog.c" "$T/work/prog.c"
# `make` in the recipe is this repository's make with this build folder
(cd "$T/work" && env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH HOME="$T" REPO="$REPO" BUILD="$BUILD_ARG" bash -euc '
  make() { command make -s -C "$REPO" BUILD="$BUILD" "$@" >/dev/null; }
  . ../recipe.sh') > "$T/out" 2>&1 || fail "the README's recipe failed: $(cat "$T/out")"
grep -q '^lm_head.weight BF16 \[[0-9]* x 64\] layer -1$' "$T/out" || fail "prog printed: $(cat "$T/out")"
# the program runs again without the environment the recipe exported
(cd "$T/work" && env -u LD_LIBRARY_PATH ./prog model.safetensors) >/dev/null || fail "prog does not run on its own"
grep -q -- '-lm' "$T/.local/lib/pkgconfig/pagein.pc" || fail "pagein.pc lacks -lm"
readelf -d "$T/.local/lib/libpagein.so" | grep -q 'NEEDED.*libm\.so' || fail "libpagein.so is not linked with libm"
[ -x "$T/.local/bin/pagein" ] || fail "make install put no pagein tool in PREFIX/bin"

# DESTDIR stages the tree; the .pc names the final PREFIX
make -s -C "$REPO" BUILD="$BUILD_ARG" install PREFIX=/opt/pagein-test DESTDIR="$T/stage" >/dev/null
[ -f "$T/stage/opt/pagein-test/include/pagein.h" ] || fail "DESTDIR: no header under the stage"
grep -qx 'prefix=/opt/pagein-test' "$T/stage/opt/pagein-test/lib/pkgconfig/pagein.pc" || fail "DESTDIR leaked into pagein.pc"
echo "install-test: the README's C recipe builds and runs against an installed prefix"
