#!/usr/bin/env bash
# layers.sh - the folders of src/ are layers, and every include points down.
#
# Each "#include" of a project header in src/ is resolved to the folder it
# lands in; an edge from folder A to folder B must be in ALLOWED below (a
# folder may always include its own headers and the core's). The consumers
# (cli/, python/src/, bench/) see the public header pagein.h and their own
# headers only. Run by `make` (every build, CI's -Werror builds too) and
# `make check`; docs/ARCHITECTURE.md draws the same table. Exit 1 naming each
# offending file, line and edge.
set -u
cd "$(dirname "$0")/.."

# layer: the layers it may include (besides itself and core). Bottom first.
declare -A ALLOWED=(
  [core]=""
  [io]=""
  [source]="io"
  [format]="io"
  [file]="io source format"
  [engine]="io source"
  [load]="io source format file engine"
  [ops]="io source format file engine load"
  [data]="io source format file engine"
  [dist]="io source format file engine load"
  [gpu]="io source format file engine load"
)

# norm DIR/REL: sets NORM to the path with "." and ".." folded, in bash
# alone and without a subshell (one realpath, or one $(...), per include
# cost a process each: 30 s on a loaded machine)
norm() {
  local IFS=/ part out=()
  for part in $1; do
    case "$part" in ""|.) ;; ..) [ ${#out[@]} -gt 0 ] && unset 'out[${#out[@]}-1]' ;; *) out+=("$part") ;; esac
  done
  NORM="${out[*]}"
}
# every project include of the tree, one awk: FILE LINE HEADER
includes() {
  awk '/^[[:space:]]*#[[:space:]]*include[[:space:]]*"/ { h = $0; sub(/^[^"]*"/, "", h); sub(/".*/, "", h); print FILENAME, FNR, h }' "$@" 2>/dev/null
}

bad=0
for f in src/*.h src/*/*.c src/*/*.h; do
  [ -e "$f" ] || continue
  dir=${f%/*}; layer=${dir#src}; layer=${layer#/}; [ -z "$layer" ] && layer=core
  if [ -z "${ALLOWED[$layer]+x}" ]; then
    echo "layers: $f: folder src/$layer is not in the layer table (scripts/layers.sh, docs/ARCHITECTURE.md)"
    bad=1
  fi
done
while read -r f line inc; do
  dir=${f%/*}; layer=${dir#src}; layer=${layer#/}; [ -z "$layer" ] && layer=core
  [ -n "${ALLOWED[$layer]+x}" ] || continue
  case "$inc" in pagein.h) continue ;; esac
  norm "$dir/$inc"; target=$NORM
  case "$target" in
    src/internal.h|src/core/*) to=core ;;
    src/*/*) to=${target#src/}; to=${to%%/*} ;;
    *) echo "layers: $f:$line: includes $inc, outside src/"; bad=1; continue ;;
  esac
  [ "$to" = "$layer" ] || [ "$to" = core ] && continue
  case " ${ALLOWED[$layer]} " in *" $to "*) continue ;; esac
  echo "layers: $f:$line: $layer -> $to is not a downward edge (includes $inc)"
  bad=1
done < <(includes src/*.h src/*/*.c src/*/*.h)
# White-box micro-benchmarks that time a private parser on its own (like the
# unit tests and fuzz targets, which may include anything): named here, each
# with its reason.
# bench_arrow: the Arrow decoder against memcpy; bench_parquet: the Parquet
# decoder against libsnappy on the same pages; both below the dataset table
WHITEBOX_BENCH=" bench/bench_arrow.c bench/bench_parquet.c "
while read -r f line inc; do
  case "$WHITEBOX_BENCH" in *" $f "*) continue ;; esac
  case "$inc" in */*) echo "layers: $f:$line: a consumer includes $inc (only pagein.h and its own headers)"; bad=1 ;; esac
done < <(includes cli/*.c cli/*.h python/src/*.c bench/*.c)
# Calls: with the objects built (BUILD, default build), every symbol an
# object of src/ uses must be defined in its own layer, the core, or a layer
# it may include (a declaration in the wrong header cannot hide an upward call).
objdir=${BUILD:-build}/obj/src
if [ -d "$objdir" ] && command -v nm >/dev/null; then
  objs=()
  for o in "$objdir"/*.o "$objdir"/*/*.o; do
    [ -e "$o" ] || continue
    s=${o#"$objdir"/}; [ -e "src/${s%.o}.c" ] || continue # stale: its source moved or was deleted
    objs+=("$o")
  done
  declare -A DEF=()
  # nm -A names the object on each line ("obj:addr T sym", "obj: U sym"); one nm for all
  while read -r obj sym; do
    l=${obj#"$objdir"/}; case "$l" in */*) l=${l%%/*} ;; *) l=core ;; esac
    DEF[$sym]=$l
  done < <([ ${#objs[@]} -gt 0 ] && nm -A -g --defined-only "${objs[@]}" 2>/dev/null | awk 'NF == 3 { sub(/:[^:]*$/, "", $1); print $1, $3 }')
  while read -r obj sym; do
    l=${obj#"$objdir"/}; case "$l" in */*) l=${l%%/*} ;; *) l=core ;; esac
    [ -n "${ALLOWED[$l]+x}" ] || continue
    to=${DEF[$sym]:-}
    [ -z "$to" ] || [ "$to" = "$l" ] || [ "$to" = core ] && continue
    case " ${ALLOWED[$l]} " in *" $to "*) continue ;; esac
    echo "layers: ${obj#"$objdir"/}: $l -> $to is not a downward call ($sym)"
    bad=1
  done < <([ ${#objs[@]} -gt 0 ] && nm -A -u "${objs[@]}" 2>/dev/null | awk 'NF == 3 && $2 == "U" { sub(/:[^:]*$/, "", $1); print $1, $3 }')
fi
[ $bad = 0 ] || { echo "layers: the include or call graph goes up or sideways (scripts/layers.sh)"; exit 1; }
exit 0
