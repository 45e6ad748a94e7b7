/* cleanup.h - what an interrupted pagein command leaves behind: nothing.
 *
 * At start-up (a constructor, so no command has to remember it) the tool
 * installs one handler for SIGINT, SIGTERM and SIGHUP (unless the signal
 * is ignored, as under nohup). The handler removes the library's named
 * temporary files (pagein_temp_cleanup), stops registered daemons (SIGTERM,
 * then SIGKILL after 3 s) and unmounts their mounts, removes registered
 * files and then registered directories (newest first), restores the
 * default action and re-raises the signal, so the exit status still says
 * "killed by SIGINT". Everything it does is async-signal-safe. In a forked
 * child that has not exec'd, entries of the parent are left alone.
 *
 * Registration copies the path (under PATH_MAX); it returns a handle for
 * cli_cleanup_forget, or -1 when the 64 slots are full (the entry is then
 * not cleaned up). */
#ifndef PAGEIN_CLI_CLEANUP_H
#define PAGEIN_CLI_CLEANUP_H

#include <sys/types.h>

int cli_cleanup_file(const char *path);
int cli_cleanup_dir(const char *path); /* must be empty once registered files are gone */
/* A daemon serving a mount at mnt (may be NULL): killed, waited for, and
 * its mount (if still there) detached, mnt removed if empty. */
int cli_cleanup_daemon(pid_t pid, const char *mnt);
/* The work is done (or undone) normally: drop the entry. -1 is a no-op. */
void cli_cleanup_forget(int handle);

#endif
