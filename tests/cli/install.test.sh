# pagein install: atomic replacement; kill -9 mid-copy leaves the old file.
. "$REPO/tests/cli/lib.sh"
expect_exit 0 "$PAGEIN" install --help
expect_contains "atomically"
expect_exit 2 "$PAGEIN" install onlyone
expect_exit 2 "$PAGEIN" install --bogus a b
expect_exit 2 "$PAGEIN" install "$TMP/missing" "$TMP/dest"

# 16 MiB old and new versions with different content
head -c 16777216 /dev/zero | tr '\0' 'o' > "$TMP/old.bin"
head -c 16777216 /dev/zero | tr '\0' 'n' > "$TMP/new.bin"
cp "$TMP/old.bin" "$TMP/dest.bin"
chmod 640 "$TMP/dest.bin"
ino_before=$(stat -c %i "$TMP/dest.bin")

# kill -9 while the copy is throttled to 8 MiB/s (about 2 s): dest intact
"$PAGEIN" install --no-validate --rate 8M "$TMP/new.bin" "$TMP/dest.bin" &
pid=$!
# kill it mid-copy: once it has written 1 MiB (its temporary file may be
# unnamed, O_TMPFILE, so watch the process's own write counter)
partial() { local w; w=$(awk '/^wchar:/ {print $2}' "/proc/$pid/io" 2>/dev/null); [ "${w:-0}" -gt 1048576 ]; }
wait_for "install to write its first MiB" partial
kill -9 $pid
wait $pid 2>/dev/null
cmp -s "$TMP/old.bin" "$TMP/dest.bin" || fail "dest changed after kill -9 during install"
[ "$(stat -c %i "$TMP/dest.bin")" = "$ino_before" ] || fail "dest replaced after kill -9"
left=$(ls -A "$TMP" | grep -c '\.tmp-\|\.pagein-' || true)
[ "$left" -eq 0 ] || fail "temporary files left after kill -9: $(ls -A "$TMP")"

# a complete install replaces dest with a new inode and keeps dest's mode
expect_exit 0 "$PAGEIN" install --no-validate "$TMP/new.bin" "$TMP/dest.bin"
expect_contains "installed"
cmp -s "$TMP/new.bin" "$TMP/dest.bin" || fail "dest differs from src after install"
[ "$(stat -c %i "$TMP/dest.bin")" != "$ino_before" ] || fail "dest written in place"
[ "$(stat -c %a "$TMP/dest.bin")" = 640 ] || fail "mode not kept: $(stat -c %a "$TMP/dest.bin")"

# into a directory, under the source's name
mkdir "$TMP/d"
expect_exit 0 "$PAGEIN" install -q --no-validate --no-sync "$TMP/old.bin" "$TMP/d"
cmp -s "$TMP/old.bin" "$TMP/d/old.bin" || fail "install into a directory"
# same file: refused
expect_exit 2 "$PAGEIN" install --no-validate "$TMP/d/old.bin" "$TMP/d/old.bin"
expect_contains "same file"
# validation (default) refuses a file that is not a model, leaving dest alone
printf 'not a model at all' > "$TMP/junk.bin"
expect_exit 1 "$PAGEIN" install "$TMP/junk.bin" "$TMP/dest.bin"
cmp -s "$TMP/new.bin" "$TMP/dest.bin" || fail "dest changed by a refused install"
exit 0
