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
#
# Inside a folder, the calls between its files form no circle (nm over the
# built objects: file A calls B and B, through any others, calls A); and no
# file outside src/source/ holds a URL scheme as a string literal ("s3://",
# "gs://", "hf://", "http(s)://": the source rows own their schemes).
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
# Folders that still hold a circle between their files (none: every
# folder's file graph calls down; a folder named here would be reported,
# with LAYERS_CIRCLES=1, instead of failing on its first circle).
CIRCLES_KNOWN=" "
# Files outside src/source/ that may name a scheme in a string, each with
# its reason (none: what a scheme means is the source rows' business).
SCHEMES_KNOWN=" "
# Scheme strings: candidate files by a grep, then their lines with the
# comments blanked (one awk, strings kept) searched for a literal.
strip_comments() {
  awk 'FNR == 1 { st = 0 }
  { s = $0; o = ""; n = length(s); if (st == 2) st = 0
    for (i = 1; i <= n; i++) {
      c = substr(s, i, 1); d = substr(s, i, 2)
      if (st == 1) { if (d == "*/") { st = 0; i++ } continue }
      if (st == 3 || st == 4) { o = o c; if (c == "\\") { o = o substr(s, i + 1, 1); i++ } else if ((st == 3 && c == "\"") || (st == 4 && c == "\047")) st = 0; continue }
      if (d == "/*") { st = 1; i++; continue }
      if (d == "//") { st = 2; break }
      if (c == "\"") st = 3; else if (c == "\047") st = 4
      o = o c }
    if (st >= 3) st = 0
    print FILENAME ":" FNR ":" o }' "$@"
}
cand=()
while read -r f; do
  case "$f" in src/source/*) continue ;; esac
  case "$SCHEMES_KNOWN" in *" $f "*) continue ;; esac
  cand+=("$f")
done < <(grep -lE '(s3|gs|hf|https?)://' src/*.c src/*/*.c src/*.h src/*/*.h 2>/dev/null)
if [ ${#cand[@]} -gt 0 ]; then
  while IFS= read -r hit; do
    echo "layers: ${hit%%:*}:$(echo "$hit" | cut -d: -f2): a URL scheme in a string outside src/source/ (ask the source table: pi_source_is_remote, pi_source_list, ...)"
    bad=1
  done < <(strip_comments "${cand[@]}" | grep -E '"[^"]*\b(s3|gs|hf|https?)://')
fi
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
  declare -A DEF=() DEFO=()
  # nm -A names the object on each line ("obj:addr T sym", "obj: U sym"); one nm for all
  while read -r obj sym; do
    l=${obj#"$objdir"/}; DEFO[$sym]=$l; case "$l" in */*) l=${l%%/*} ;; *) l=core ;; esac
    DEF[$sym]=$l
  done < <([ ${#objs[@]} -gt 0 ] && nm -A -g --defined-only "${objs[@]}" 2>/dev/null | awk 'NF == 3 { sub(/:[^:]*$/, "", $1); print $1, $3 }')
  edges=()
  while read -r obj sym; do
    l=${obj#"$objdir"/}; from=$l; case "$l" in */*) l=${l%%/*} ;; *) l=core ;; esac
    [ -n "${ALLOWED[$l]+x}" ] || continue
    to=${DEF[$sym]:-}
    # a call to another file of the same folder: an edge of its file graph
    [ "$to" = "$l" ] && [ "${DEFO[$sym]}" != "$from" ] && edges+=("$l ${from%.o}.c ${DEFO[$sym]%.o}.c $sym")
    [ -z "$to" ] || [ "$to" = "$l" ] || [ "$to" = core ] && continue
    case " ${ALLOWED[$l]} " in *" $to "*) continue ;; esac
    echo "layers: ${obj#"$objdir"/}: $l -> $to is not a downward call ($sym)"
    bad=1
  done < <([ ${#objs[@]} -gt 0 ] && nm -A -u "${objs[@]}" 2>/dev/null | awk 'NF == 3 && $2 == "U" { sub(/:[^:]*$/, "", $1); print $1, $3 }')
  # circles between the files of a folder: drop every file that calls no
  # file still standing until none drops (what stands is on or behind a
  # circle), then walk from one that stands until a file repeats: one awk
  while read -r folder circle; do
    case "$CIRCLES_KNOWN" in
      *" $folder "*) [ "${LAYERS_CIRCLES:-0}" = 1 ] && echo "layers: src/$folder (known): a circle between files: $circle" ;;
      *) echo "layers: src/$folder: a circle between files: $circle (calls go down: docs/ARCHITECTURE.md)"; bad=1 ;;
    esac
  done < <([ ${#edges[@]} -gt 0 ] && printf '%s\n' "${edges[@]}" | awk '
    { k = $1 SUBSEP $2 SUBSEP $3
      if (!(k in E)) { E[k] = $4; out[$1, $2] = out[$1, $2] " " $3 } else if (length(E[k]) < 60) E[k] = E[k] ", " $4
      F[$1] = 1; N[$1, $2] = 1; N[$1, $3] = 1 }
    END {
      for (f in F) {
        split("", live)
        for (k in N) { split(k, a, SUBSEP); if (a[1] == f) live[a[2]] = 1 }
        do {
          ch = 0
          for (n in live) {
            m = split(out[f, n], t, " "); keep = 0
            for (i = 1; i <= m; i++) if (t[i] in live) keep = 1
            if (!keep) { delete live[n]; ch = 1 }
          }
        } while (ch)
        for (n in live) {
          split("", seen); cur = n; step = 0
          while (!(cur in seen)) {
            seen[cur] = ++step; order[step] = cur
            m = split(out[f, cur], t, " "); nx = ""
            for (i = 1; i <= m && nx == ""; i++) if (t[i] in live) nx = t[i]
            cur = nx
          }
          s = cur
          for (i = seen[cur]; i <= step; i++) { nx = i < step ? order[i + 1] : cur; s = s " -> " nx " (" E[f, order[i], nx] ")" }
          print f, s
          break
        }
      }
    }')
fi
[ $bad = 0 ] || { echo "layers: the include or call graph goes up or sideways (scripts/layers.sh)"; exit 1; }
exit 0
