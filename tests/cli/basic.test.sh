# The tool's own surface: version, help, unknown commands.
. "$REPO/tests/cli/lib.sh"
expect_exit 0 "$PAGEIN" --version
expect_contains "pagein "
expect_exit 0 "$PAGEIN" --help
expect_contains "commands:"
expect_exit 2 "$PAGEIN" no-such-command
expect_contains "unknown command"
expect_exit 2 "$PAGEIN"
