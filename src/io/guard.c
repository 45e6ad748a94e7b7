/* guard.c - reads through a file mapping that survive the file shrinking
 * underneath: MADV_POPULATE_READ where an error return is possible, a
 * per-thread sigsetjmp guard with a chaining SIGBUS handler where a plain
 * load is unavoidable. See src/internal.h "guards" and docs/SAFETY.md. */
#include "io.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/*
 * One guarded region on one thread. Frames live on the stack of
 * pi_guard_call and are linked per thread so guards nest.
 */
struct frame {
    sigjmp_buf jb;
    const uint8_t *lo, *hi;
    const uint8_t *volatile fault;
    struct frame *prev;
};

/* The innermost active frame of this thread. Read by the signal handler of
 * the same thread; volatile so the stores around fn() are not reordered
 * across the call or elided. */
static _Thread_local struct frame *volatile cur_frame;

/*
 * Process-wide registration. `previous` is written once under the mutex
 * before the handler is installed and only read afterwards (the handler runs
 * after sigaction, which is a full barrier: a system call).
 */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int registered;
static struct sigaction previous;

static void pass_on(int sig, siginfo_t *si, void *uc) {
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, si, uc);
        return;
    }
    if (previous.sa_handler == SIG_IGN) {
        /* A SIGBUS sent with kill() is ignored as the program asked. A real
         * fault cannot be ignored (the kernel would kill the process anyway):
         * fall through to the default action. */
        if (si->si_code <= 0) return;
    } else if (previous.sa_handler != SIG_DFL) {
        previous.sa_handler(sig);
        return;
    }
    /* Default action: die of SIGBUS as if pagein were not here. Raised
     * again at once (SA_NODEFER leaves it unblocked) rather than relying on
     * the faulting load to fault again on return, so that the outcome is the
     * same for faults and for kill(), and under valgrind. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    const uint8_t *a = si->si_addr;
    if (si->si_code > 0) { /* a real fault: look for a guard covering it */
        for (struct frame *f = cur_frame; f; f = f->prev) {
            if (a >= f->lo && a < f->hi) {
                f->fault = a;
                cur_frame = f->prev;
                siglongjmp(f->jb, 1);
            }
        }
    }
    pass_on(sig, si, uc);
}

int pi_guard_install(void) {
    if (atomic_load_explicit(&registered, memory_order_acquire)) return 0;
    int rc = 0;
    pthread_mutex_lock(&reg_lock);
    if (!atomic_load_explicit(&registered, memory_order_relaxed)) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        /* SA_NODEFER: the handler leaves by siglongjmp without restoring a
         * signal mask (sigsetjmp(jb, 0) avoids a system call per guard), so
         * SIGBUS must not be blocked while it runs. */
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, &previous) != 0)
            rc = pi_err(-errno, "cannot install the SIGBUS guard: %s", strerror(errno));
        else
            atomic_store_explicit(&registered, 1, memory_order_release);
    }
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

void pi_guard_uninstall(void) {
    pthread_mutex_lock(&reg_lock);
    if (atomic_load(&registered)) {
        sigaction(SIGBUS, &previous, NULL);
        atomic_store(&registered, 0);
    }
    pthread_mutex_unlock(&reg_lock);
}

static int truncated(const char *name, uint64_t file_off, uint64_t at, size_t len, int fd) {
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0)
        return pi_err(PAGEIN_E_TRUNCATED,
                      "%s: offset %llu: file shrank under the mapping (now %llu bytes; reading "
                      "[%llu, %llu))",
                      name ? name : "(file)", (unsigned long long)at, (unsigned long long)st.st_size,
                      (unsigned long long)file_off, (unsigned long long)(file_off + len));
    return pi_err(PAGEIN_E_TRUNCATED,
                  "%s: offset %llu: file shrank under the mapping (reading [%llu, %llu))",
                  name ? name : "(file)", (unsigned long long)at, (unsigned long long)file_off,
                  (unsigned long long)(file_off + len));
}

int pi_guard_call(const void *addr, size_t len, const char *name, uint64_t file_off, int fd,
                  pi_guard_fn fn, void *ctx) {
    int rc = pi_guard_install();
    if (rc < 0) return rc;
    struct frame fr;
    fr.lo = addr;
    fr.hi = (const uint8_t *)addr + len;
    fr.fault = NULL;
    fr.prev = cur_frame;
    if (sigsetjmp(fr.jb, 0)) {
        /* the handler already popped the frame */
        uint64_t at = file_off + (uint64_t)(fr.fault - fr.lo);
        return truncated(name, file_off, at, len, fd);
    }
    cur_frame = &fr;
    rc = fn(ctx);
    cur_frame = fr.prev;
    return rc;
}

/* ---- helpers built on the guard ----------------------------------------- */

struct touch_ctx {
    const volatile uint8_t *p;
    size_t len;
    size_t page;
};

static int touch_fn(void *arg) {
    struct touch_ctx *c = arg;
    uint8_t sink = 0;
    size_t i = 0;
    /* first byte of the range, then the first byte of every following page */
    for (; i < c->len;) {
        sink ^= c->p[i];
        size_t next = ((((uintptr_t)(c->p + i)) / c->page) + 1) * c->page - (uintptr_t)c->p;
        i = next;
    }
    __asm__ volatile("" ::"r"(sink)); /* keep the loads */
    return 0;
}

static size_t page_size(void) {
    static _Atomic size_t ps;
    size_t p = atomic_load_explicit(&ps, memory_order_relaxed);
    if (!p) {
        long v = sysconf(_SC_PAGESIZE);
        p = v > 0 ? (size_t)v : 4096;
        atomic_store_explicit(&ps, p, memory_order_relaxed);
    }
    return p;
}

int pi_guard_touch(const void *addr, size_t len, const char *name, uint64_t file_off, int fd) {
    if (len == 0) return 0;
    struct touch_ctx c = {addr, len, page_size()};
    return pi_guard_call(addr, len, name, file_off, fd, touch_fn, &c);
}

static _Atomic int no_populate; /* the kernel said EINVAL once: do not ask again */

int pi_guard_populate(const void *addr, size_t len, const char *name, uint64_t file_off, int fd) {
    if (len == 0) return 0;
    if (!atomic_load_explicit(&no_populate, memory_order_relaxed)) {
        size_t ps = page_size();
        uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(ps - 1);
        size_t l = len + ((uintptr_t)addr - a);
        for (;;) {
            if (madvise((void *)a, l, MADV_POPULATE_READ) == 0) return 0;
            int e = errno;
            if (e == EINTR || e == EAGAIN) continue;
            if (e == EINVAL) {
                /* pre-5.14 kernel, or a mapping type it refuses: touch */
                atomic_store_explicit(&no_populate, 1, memory_order_relaxed);
                break;
            }
            if (e == EFAULT) {
                /* A SIGBUS would have been raised: find the exact offset with
                 * a guarded touch (which also succeeds if the file grew back). */
                int rc = pi_guard_touch(addr, len, name, file_off, fd);
                if (rc < 0) return rc;
                return 0;
            }
            return pi_err(-e, "%s: cannot populate [%llu, %llu): %s", name ? name : "(file)",
                          (unsigned long long)file_off, (unsigned long long)(file_off + len),
                          strerror(e));
        }
    }
    return pi_guard_touch(addr, len, name, file_off, fd);
}

struct copy_ctx {
    void *dst;
    const void *src;
    size_t len;
};

static int copy_fn(void *arg) {
    struct copy_ctx *c = arg;
    memcpy(c->dst, c->src, c->len);
    return 0;
}

int pi_guard_copy(void *dst, const void *src, size_t len, const char *name, uint64_t file_off, int fd) {
    if (len == 0) return 0;
    struct copy_ctx c = {dst, src, len};
    return pi_guard_call(src, len, name, file_off, fd, copy_fn, &c);
}
