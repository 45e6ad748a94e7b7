# docs/CLI.md matches the tool: every --option that any command's --help
# names is documented in that command's section of docs/CLI.md (a heading
# that names the command, to the next heading of the same or a higher
# level), and every command of `pagein --help` has such a section. Then
# both spellings of options that take a value (`--opt VALUE` and
# `--opt=VALUE`) give the same result, as getopt_long users expect.
. "$REPO/tests/cli/lib.sh"
cd "$TMP"
mkdir help
cmds=$("$PAGEIN" --help | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p')
[ -n "$cmds" ] || fail "pagein --help lists no commands"
for c in $cmds; do
  "$PAGEIN" $c --help > "help/$c" 2>&1 || fail "pagein $c --help exited $?"
done
$PY - "$REPO/docs/CLI.md" help $cmds <<'PYEOF' || exit 1
import re, sys
doc, hdir, cmds = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = open(doc).read().split("\n")
heads = []  # (line index, level, text)
fence = False
for i, l in enumerate(lines):
    if l.startswith("```"):
        fence = not fence
    m = None if fence else re.match(r"(#+) (.*)", l)
    if m:
        heads.append((i, len(m.group(1)), m.group(2)))
def sections(cmd):
    names = {cmd}
    if cmd.startswith("bench-"):
        names.add("bench " + cmd[6:])
    out = []
    for k, (i, lvl, text) in enumerate(heads):
        words = re.sub(r"[`,:()\[\]]", " ", text)
        if not any(re.search(r"(^|\s)" + re.escape(n) + r"(\s|$)", words) for n in names):
            continue
        end = next((j for j, l2, _ in heads[k + 1:] if l2 <= lvl), len(lines))
        out.append("\n".join(lines[i:end]))
    return "\n".join(out)
bad = []
for c in cmds:
    body = sections(c)
    if not body:
        bad.append("%s: no section of docs/CLI.md names it in a heading" % c)
        continue
    text = open("%s/%s" % (hdir, c)).read()
    opts = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text)) - {"--help"})
    for o in opts:
        # an option shared by many commands may have its own section
        # ("Figures: `--svg FILE`") instead
        shared = "\n".join(t for _, _, t in heads if re.search(re.escape(o) + r"(?![a-z0-9-])", t))
        if not re.search(re.escape(o) + r"(?![a-z0-9-])", body) and not shared:
            bad.append("%s %s: in --help, not in its docs/CLI.md section" % (c, o))
if bad:
    print("FAIL: docs/CLI.md does not match the tool:\n  " + "\n  ".join(bad))
    sys.exit(1)
print("ok: %d commands, every --help option documented" % len(cmds))
PYEOF

# ---- --opt VALUE and --opt=VALUE alike ----
"$PAGEIN" make-sample m.safetensors --layers 2 --hidden 64 -q || fail "make-sample"
"$PAGEIN" make-sample m2.safetensors --layers=2 --hidden=64 -q || fail "make-sample --layers=2 --hidden=64"
cmp m.safetensors m2.safetensors || fail "make-sample --layers=2 made another file than --layers 2"
same() { # same DESC "ARGS A" "ARGS B": both exit 0 with the same stdout
  local a b
  a=$(eval "\"\$PAGEIN\" $2" 2>&1) || fail "$1: pagein $2: $a"
  b=$(eval "\"\$PAGEIN\" $3" 2>&1) || fail "$1: pagein $3: $b"
  [ "$a" = "$b" ] || fail "$1: 'pagein $2' and 'pagein $3' differ: $a /// $b"
}
# the issue's case: the regex last, after the path
expect_exit 0 "$PAGEIN" resident m.safetensors --tensors 'layers\.0\.'
expect_contains "model.layers.0.self_attn.q_proj.weight"
echo "$OUT_TXT" | grep -q "layers\.1\." && fail "resident M --tensors REGEX did not narrow: $OUT_TXT"
same "resident --tensors" "resident m.safetensors --tensors 'layers\.0\.'" "resident m.safetensors --tensors='layers\.0\.'"
same "resident --layers" "resident --json --layers 1 m.safetensors" "resident --json --layers=1 m.safetensors"
same "plan --threads" "plan --json --threads 3 --chunk 1M m.safetensors" "plan --json --threads=3 --chunk=1M m.safetensors"
same "hash --threads" "hash -q --threads 2 -o h1 m.safetensors && cat h1" "hash -q --threads=2 -o h1 m.safetensors && cat h1"
head -c 4096 /dev/urandom > rec.bin
same "read-samples --records" "read-samples --records 64 --seed 3 --ids rec.bin" "read-samples --records=64 --seed=3 --ids rec.bin"
same "read-samples --dataset" "read-samples --dataset rec.bin --record-size 64 --order global --seed 5 --ids" \
  "read-samples --dataset=rec.bin --record-size=64 --order=global --seed=5 --ids"
same "convert --dtype" "convert m.safetensors c1.safetensors --dtype f16 -q && $PAGEIN inspect --json c1.safetensors" \
  "convert m.safetensors c1.safetensors --dtype=f16 -q && $PAGEIN inspect --json c1.safetensors"
# `--` ends the options: a later --x=y is a path, not split
expect_exit 1 "$PAGEIN" resident -- --tensors=x
expect_contains "tensors=x"

# ---- read-samples --dataset writes bytes, as its help and docs/CLI.md say ----
"$PAGEIN" read-samples --dataset rec.bin --record-size 64 --order none > all.bin || fail "--dataset raw"
cmp all.bin rec.bin || fail "--dataset --order none did not write the records' bytes in order"
"$PAGEIN" read-samples --dataset rec.bin --record-size 64 --order global --seed 2 --format raw > g.bin || fail "--format raw"
[ "$(stat -c %s g.bin)" = 4096 ] || fail "--format raw wrote $(stat -c %s g.bin) bytes"
"$PAGEIN" read-samples --dataset rec.bin --record-size 64 --order global --seed 2 --format framed > f.bin || fail "--format framed"
$PY - <<'PYEOF' || fail "framed samples differ from the file's records"
import struct
rec, f, g = open("rec.bin", "rb").read(), open("f.bin", "rb").read(), open("g.bin", "rb").read()
pos, raw = 0, b""
while pos < len(f):
    i, n = struct.unpack_from("<QQ", f, pos); pos += 16
    assert n == 64 and f[pos:pos + n] == rec[i * 64:(i + 1) * 64], i
    raw += f[pos:pos + n]; pos += n
assert raw == g
PYEOF
printf '{"text": "a"}\n{"text": "bc"}\n' > t.jsonl
"$PAGEIN" read-samples --dataset t.jsonl --order none > t.out || fail "--dataset jsonl raw"
[ "$(cat t.out)" = '{"text": "a"}{"text": "bc"}' ] || fail "jsonl raw: $(cat t.out)"
expect_exit 2 "$PAGEIN" read-samples --dataset rec.bin --record-size 64 --format raw --ids
expect_exit 2 "$PAGEIN" read-samples --dataset rec.bin --record-size 64 --format text
echo ok
