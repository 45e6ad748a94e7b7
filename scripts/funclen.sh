#!/usr/bin/env bash
# funclen.sh - no C function is longer than MAX lines (default 200), counted
# from the line that names it to its closing brace, in the library (src/),
# the tool (cli/), the Python extension (python/src/) and the benchmarks
# (bench/). The exceptions are named below, each with its reason.
#
#   scripts/funclen.sh            check; exit 1 naming each long function
#   scripts/funclen.sh --list N   print every function of N lines or more
#
# Braces are counted outside comments, string and character literals and
# preprocessor lines; a function is a brace block opened at file level after
# a header holding "(" (not a struct, union, enum or initializer). Run by
# `make` (with scripts/layers.sh) and tests/cli/funclen.test.sh.
set -u
cd "$(dirname "$0")/.."

MAX=200
LIST=
if [ "${1:-}" = "--list" ]; then LIST=${2:-$MAX}; fi

# file:function allowed to be longer, each with its reason:
# pk_load: the pickle opcode loop, one case per opcode of the protocol (a
#   switch that reads as a table; splitting it scatters the machine's state).
EXCEPT="
src/format/pickle.c:pk_load
"

files=$(ls src/*.c src/*/*.c cli/*.c python/src/*.c bench/*.c 2>/dev/null)
out=$(awk '
function report(   n) {
    n = NR_END - start + 1
    printf "%s:%d:%s:%d\n", FILENAME, start, name, n
}
FNR == 1 { depth = 0; incomment = 0; inmacro = 0; header = ""; hstart = 0 }
{
    line = $0
    # preprocessor lines (and their continuations) hold no function braces
    if (inmacro) { inmacro = (line ~ /\\$/); next }
    if (!incomment && line ~ /^[ \t]*#/) { inmacro = (line ~ /\\$/); next }
    # strip comments, strings and character literals, keeping the rest
    s = ""
    i = 1
    L = length(line)
    while (i <= L) {
        c = substr(line, i, 1)
        if (incomment) {
            if (c == "*" && substr(line, i + 1, 1) == "/") { incomment = 0; i += 2; continue }
            i++; continue
        }
        if (c == "/" && substr(line, i + 1, 1) == "*") { incomment = 1; i += 2; continue }
        if (c == "/" && substr(line, i + 1, 1) == "/") break
        if (c == "\"" || c == "\047") {
            q = c; i++
            while (i <= L) {
                d = substr(line, i, 1)
                if (d == "\\") { i += 2; continue }
                if (d == q) break
                i++
            }
            i++; s = s " "; continue
        }
        s = s c; i++
    }
    for (k = 1; k <= length(s); k++) {
        c = substr(s, k, 1)
        if (depth == 0 && c != "{" && c != "}" && c != ";" && c !~ /[ \t]/ && hstart == 0) hstart = FNR
        if (c == "{") {
            if (depth == 0) {
                h = header substr(s, 1, k - 1)
                isfn = (h ~ /\(/ && h !~ /(^|[^A-Za-z0-9_])(struct|union|enum)[ \t]+[A-Za-z0-9_]*[ \t]*$/ && h !~ /=[ \t]*$/)
                name = ""
                if (isfn) {
                    p = index(h, "(")
                    pre = substr(h, 1, p - 1)
                    sub(/[ \t]+$/, "", pre)
                    if (match(pre, /[A-Za-z_][A-Za-z0-9_]*$/)) name = substr(pre, RSTART, RLENGTH)
                    else isfn = 0
                }
                start = hstart ? hstart : FNR
                infn = isfn
            }
            depth++
        } else if (c == "}") {
            depth--
            if (depth == 0) {
                if (infn) { NR_END = FNR; report() }
                infn = 0; header = ""; hstart = 0
                s = substr(s, k + 1); k = 0
                continue
            }
            if (depth < 0) depth = 0
        } else if (c == ";" && depth == 0) {
            header = ""; hstart = 0
            s = substr(s, k + 1); k = 0
            continue
        }
    }
    if (depth == 0) header = header s " "
}
' $files)

if [ -n "$LIST" ]; then
    echo "$out" | awk -F: -v n="$LIST" '$4 >= n' | sort -t: -k4,4nr
    exit 0
fi
bad=0
while IFS=: read -r file line fn n; do
    [ -n "$file" ] || continue
    [ "$n" -gt "$MAX" ] || continue
    case "$EXCEPT" in *"
$file:$fn
"*) continue ;; esac
    echo "funclen: $file:$line: $fn is $n lines (at most $MAX; split it, or name it in scripts/funclen.sh with the reason)"
    bad=1
done <<< "$out"
exit $bad
