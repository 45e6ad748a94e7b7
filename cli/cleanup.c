/* cleanup.c - the tool's SIGINT/SIGTERM/SIGHUP handler (see cleanup.h). */
#include "cli.h"
#include "cleanup.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { SLOTS = 64 };
enum { K_FILE = 1, K_DIR, K_DAEMON };

/* state: 0 free, 1 being filled, 2 live. seq orders directories (newest
 * removed first: a mount point inside a temporary directory goes first). */
static struct {
    _Atomic int state;
    int kind;
    pid_t owner, pid;
    unsigned seq;
    char path[PATH_MAX];
} slots[SLOTS];
static _Atomic unsigned next_seq;

static int add(int kind, const char *path, pid_t pid) {
    size_t n = path ? strlen(path) : 0;
    if (n >= PATH_MAX) return -1;
    for (int i = 0; i < SLOTS; i++) {
        int zero = 0;
        if (!atomic_compare_exchange_strong(&slots[i].state, &zero, 1)) continue;
        slots[i].kind = kind;
        slots[i].owner = getpid();
        slots[i].pid = pid;
        slots[i].seq = atomic_fetch_add(&next_seq, 1);
        memcpy(slots[i].path, path ? path : "", n + 1);
        atomic_store(&slots[i].state, 2);
        return i;
    }
    return -1;
}

int cli_cleanup_file(const char *path) { return add(K_FILE, path, 0); }
int cli_cleanup_dir(const char *path) { return add(K_DIR, path, 0); }
int cli_cleanup_daemon(pid_t pid, const char *mnt) { return add(K_DAEMON, mnt, pid); }

void cli_cleanup_forget(int h) {
    if (h >= 0 && h < SLOTS) atomic_store(&slots[h].state, 0);
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Stops a daemon and gets rid of its mount: the daemon unmounts itself on
 * SIGTERM (libfuse's handlers); if it does not exit in 3 s it is killed
 * and the mount detached (umount2 as root, else fusermount3 -u -z). */
static void stop_daemon(pid_t pid, const char *mnt) {
    int done = 0;
    if (pid > 0 && kill(pid, SIGTERM) == 0) {
        for (int i = 0; i < 150 && !done; i++) {
            pid_t r = waitpid(pid, NULL, WNOHANG);
            if (r == pid || (r < 0 && errno == ECHILD)) done = 1;
            else nap_ms(20);
        }
        if (!done) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
    }
    if (!mnt[0]) return;
    if (rmdir(mnt) == 0 || errno == ENOENT) return;
    if (umount2(mnt, MNT_DETACH) != 0) {
        /* _Fork runs no atfork handlers (fork's may take malloc's locks,
         * which the interrupted thread may hold) */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
        pid_t c = _Fork();
#else
        pid_t c = fork();
#endif
        if (c == 0) {
            char *const argv[] = {"fusermount3", "-u", "-z", (char *)mnt, NULL};
            char *const envp[] = {NULL};
            execve("/usr/bin/fusermount3", argv, envp);
            execve("/bin/fusermount3", argv, envp);
            _exit(127);
        }
        if (c > 0) waitpid(c, NULL, 0);
    }
    rmdir(mnt);
}

static void run_cleanup(void) {
    pid_t me = getpid();
    pagein_temp_cleanup();
    /* daemons first (their mounts may sit in a registered directory), then files */
    const int order[] = {K_DAEMON, K_FILE};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < SLOTS; i++) {
            if (atomic_load(&slots[i].state) != 2 || slots[i].owner != me || slots[i].kind != order[k]) continue;
            if (order[k] == K_DAEMON) stop_daemon(slots[i].pid, slots[i].path);
            else unlink(slots[i].path);
            atomic_store(&slots[i].state, 0);
        }
    /* directories last, newest first */
    for (;;) {
        int best = -1;
        for (int i = 0; i < SLOTS; i++)
            if (atomic_load(&slots[i].state) == 2 && slots[i].owner == me && slots[i].kind == K_DIR &&
                (best < 0 || slots[i].seq > slots[best].seq))
                best = i;
        if (best < 0) break;
        rmdir(slots[best].path);
        atomic_store(&slots[best].state, 0);
    }
}

static void on_signal(int sig) {
    int e = errno;
    run_cleanup();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
    errno = e; /* not reached for these signals' default action */
}

__attribute__((constructor)) static void install(void) {
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigfillset(&sa.sa_mask); /* one cleanup at a time, not interrupted by the others */
        sigaction(sigs[i], &sa, NULL);
    }
}
