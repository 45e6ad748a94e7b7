/* auto.c - the AUTO strategy: facts about where the model lives, and a rule.
 *
 * The rule (pi_auto_decide) is a pure function of injected facts so tests
 * can check every branch; pi_auto_gather collects the facts:
 *   - statfs() f_type: network filesystems and FUSE pay a round trip per
 *     request, and page faults are single-page requests at queue depth 1
 *     (specs/LINUX-IO.md), so they get READ;
 *   - /proc/self/mountinfo: the filesystem type by name (catches FUSE
 *     subtypes such as fuse.sshfs, fuse.s3fs, and types whose magic we do
 *     not list);
 *   - /sys/dev/block/MAJ:MIN/queue/rotational (or the parent disk's, for a
 *     partition): rotating disks get large sequential reads (READ);
 *   - total size: small models get READ (one read beats mapping + faults);
 *   - MemAvailable: a model that does not fit gets PREFETCH with a budget.
 * Everything else gets POPULATE: parallel page-in of the mapping, zero copy.
 */
#include "load.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

static const struct {
    uint32_t magic;
    const char *name;
} remote_magic[] = {
    {0x6969u, "nfs"},        {0xFE534D42u, "smb2"},    {0xFF534D42u, "cifs"},  {0x517Bu, "smb"},
    {0x65735546u, "fuse"},   {0x0BD00BD0u, "lustre"},  {0x00C36400u, "ceph"},  {0x01021997u, "9p"},
    {0x47504653u, "gpfs"},   {0x19830326u, "beegfs"},  {0x6B414653u, "afs"},   {0x5346414Fu, "openafs"},
    {0x013111A8u, "ibrix"},  {0xAAD7AAEAu, "panfs"},   {0x564C0000u, "vxfs?"}, {0x73757245u, "coda"},
    {0x7461636Fu, "ocfs2"},  {0x01161970u, "gfs2"},
};

static const char *const remote_types[] = {
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "ceph", "9p", "gpfs", "beegfs", "afs", "glusterfs",
    "ocfs2", "gfs2", "virtiofs", "panfs", "orangefs", "pvfs2", "davfs", "sshfs",
};

static const char *magic_name(uint32_t magic) {
    for (size_t i = 0; i < PI_ARRAY_LEN(remote_magic); i++)
        if (remote_magic[i].magic == magic) return remote_magic[i].name;
    return NULL;
}

int pi_fs_is_remote(uint32_t magic, const char *fs_type) {
    if (magic_name(magic)) return 1;
    if (fs_type && *fs_type) {
        if (strncmp(fs_type, "fuse", 4) == 0) return 1; /* fuse, fuseblk, fuse.sshfs, ... */
        for (size_t i = 0; i < PI_ARRAY_LEN(remote_types); i++)
            if (strcmp(fs_type, remote_types[i]) == 0) return 1;
    }
    return 0;
}

/* Decodes mountinfo's octal escapes (\040 for space) in place. */
static void unescape(char *s) {
    char *d = s;
    while (*s) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
            *d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 4;
        } else {
            *d++ = *s++;
        }
    }
    *d = 0;
}

/* Type of the mount holding real (an absolute, resolved path): the entry
 * with the longest mount point that is a prefix of it. */
static void mount_type(const char *real, char *out, size_t len) {
    out[0] = 0;
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) return;
    char line[4096];
    size_t best = 0;
    while (fgets(line, sizeof line, f)) {
        /* id parent maj:min root mountpoint options [optional...] - type source super */
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        char *mp = NULL;
        for (int i = 0; tok && i < 4; i++) tok = strtok_r(NULL, " ", &save);
        mp = tok;
        if (!mp) continue;
        while ((tok = strtok_r(NULL, " ", &save)) && strcmp(tok, "-") != 0) {}
        char *type = tok ? strtok_r(NULL, " ", &save) : NULL;
        if (!type) continue;
        unescape(mp);
        size_t n = strlen(mp);
        int prefix = strcmp(mp, "/") == 0 ||
                     (strncmp(real, mp, n) == 0 && (real[n] == '/' || real[n] == 0));
        if (prefix && (n >= best)) {
            best = n;
            snprintf(out, len, "%s", type);
        }
    }
    fclose(f);
}

static int rotational(dev_t dev) {
    if (major(dev) == 0) return -1; /* anonymous device: overlay, btrfs subvolume, tmpfs */
    char p[128];
    /* virtio-blk reports rotational = 1 unless the host says otherwise, even
     * on NVMe-backed cloud volumes (this machine's disk delivers 6.4 GB/s):
     * the flag means nothing there. */
    snprintf(p, sizeof p, "/sys/dev/block/%u:%u", major(dev), minor(dev));
    char *real = realpath(p, NULL);
    int virtio = real && strstr(real, "/virtio") != NULL;
    free(real);
    if (virtio) return -1;
    const char *fmt[] = {"/sys/dev/block/%u:%u/queue/rotational", "/sys/dev/block/%u:%u/../queue/rotational"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, fmt[i], major(dev), minor(dev));
        FILE *f = fopen(p, "re");
        if (!f) continue;
        int v = -1;
        if (fscanf(f, "%d", &v) != 1) v = -1;
        fclose(f);
        if (v >= 0) return v != 0;
    }
    return -1;
}

static uint64_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

void pi_auto_gather(const char *const *paths, size_t n, struct pi_auto_facts *f) {
    memset(f, 0, sizeof *f);
    f->rotational = -1;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) == 0) f->model_bytes += (uint64_t)st.st_size;
    }
    if (n > 0) {
        struct statfs sf;
        if (statfs(paths[0], &sf) == 0) f->fs_magic = (uint32_t)sf.f_type;
        char *real = realpath(paths[0], NULL);
        if (real) {
            mount_type(real, f->fs_type, sizeof f->fs_type);
            free(real);
        }
        struct stat st;
        if (stat(paths[0], &st) == 0) f->rotational = rotational(st.st_dev);
    }
    f->mem_available = mem_available();
}

pagein_strategy pi_auto_decide(const struct pi_auto_facts *f, char *why, size_t len, uint64_t *budget) {
    if (budget) *budget = 0;
    double mib = (double)f->model_bytes / (1 << 20);
    if (pi_fs_is_remote(f->fs_magic, f->fs_type)) {
        const char *n = f->fs_type[0] ? f->fs_type : magic_name(f->fs_magic);
        snprintf(why, len,
                 "auto: %s is a network or FUSE filesystem (statfs magic 0x%x): explicit parallel reads, "
                 "since each page fault would be a round trip at queue depth 1",
                 n ? n : "?", f->fs_magic);
        return PAGEIN_STRATEGY_READ;
    }
    if (f->rotational == 1) {
        snprintf(why, len, "auto: rotating disk: large sequential reads instead of seeking page faults");
        return PAGEIN_STRATEGY_READ;
    }
    if (f->model_bytes < PI_AUTO_SMALL_BYTES) {
        snprintf(why, len, "auto: small model (%.1f MiB < %llu MiB): one parallel read beats mapping and faulting",
                 mib, (unsigned long long)(PI_AUTO_SMALL_BYTES >> 20));
        return PAGEIN_STRATEGY_READ;
    }
    if (f->mem_available && f->model_bytes > f->mem_available / 10 * 9) {
        uint64_t b = f->mem_available / 2;
        if (budget) *budget = b;
        snprintf(why, len,
                 "auto: model (%.0f MiB) does not fit in available memory (%.0f MiB): prefetch layers ahead "
                 "with a %.0f MiB budget",
                 mib, (double)f->mem_available / (1 << 20), (double)b / (1 << 20));
        return PAGEIN_STRATEGY_PREFETCH;
    }
    snprintf(why, len, "auto: local %s storage, model (%.0f MiB) fits in memory: map and populate in parallel "
                       "(zero copy)",
             f->rotational == 0 ? "solid-state" : "non-network", mib);
    return PAGEIN_STRATEGY_POPULATE;
}

pagein_strategy pagein_model_auto_plan(const pagein_model *m, uint64_t *budget, char *why, size_t len) {
    char tmp[256];
    if (budget) *budget = 0;
    if (!m) {
        if (why && len) snprintf(why, len, "no model");
        return PAGEIN_STRATEGY_AUTO;
    }
    const char **paths = pi_malloc((m->nfiles ? m->nfiles : 1) * sizeof *paths);
    struct pi_auto_facts f;
    if (paths) {
        for (size_t i = 0; i < m->nfiles; i++) paths[i] = m->files[i]->path;
        pi_auto_gather(paths, m->nfiles, &f);
        pi_free(paths);
    } else {
        memset(&f, 0, sizeof f);
        f.rotational = -1;
    }
    return pi_auto_decide(&f, why && len ? why : tmp, why && len ? len : sizeof tmp, budget);
}
