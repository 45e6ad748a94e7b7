# The documentation names only files inside the repository: every relative
# markdown link and every backticked path that looks like one (docs/..,
# src/.., ../x.md) resolves from the repository; no /work/, ../shared/ or
# other paths outside it.
. "$REPO/tests/cli/lib.sh"
cd "$REPO"
bad=$(grep -nE '(/work/|\.\./shared/|\]\(/)' README.md docs/*.md CHANGES.md 2>/dev/null)
[ -z "$bad" ] && true || fail "docs point outside the repository: $bad"
# relative markdown links: ](path) without a scheme
for f in README.md docs/*.md; do
  d=$(dirname "$f")
  grep -oE '\]\([^)#: ]+(#[^)]*)?\)' "$f" | sed -E 's/^\]\(//; s/\)$//; s/#.*//' | while read -r l; do
    [ -z "$l" ] && continue
    [ -e "$d/$l" ] || [ -e "$l" ] || echo "$f: link to $l: no such file"
  done
done > "$TMP/links"
[ -s "$TMP/links" ] && fail "$(cat "$TMP/links")"
exit 0
