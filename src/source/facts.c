/* facts.c - what the local storage behind a path is: filesystem type by
 * statfs magic and by mountinfo name, rotational flag, the device's
 * read_ahead_kb, available memory. Used by the local-file source
 * (source/file.c) to declare its facts and by the auto rule (load/auto.c).
 * Never fails: unknown facts stay 0, -1 or "". */
#include "source.h"

#include <sched.h>
#include <stdatomic.h>
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

const char *pi_fs_magic_name(uint32_t magic) {
    for (size_t i = 0; i < PI_ARRAY_LEN(remote_magic); i++)
        if (remote_magic[i].magic == magic) return remote_magic[i].name;
    return NULL;
}

int pi_fs_is_remote(uint32_t magic, const char *fs_type) {
    if (pi_fs_magic_name(magic)) return 1;
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
void pi_fs_mount_type(const char *real, char *out, size_t len) {
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

int pi_fs_rotational(dev_t dev) {
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

uint64_t pi_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

/* The device's read_ahead_kb (the bdi of the filesystem holding dev):
 * /sys/dev/block/MAJ:MIN/queue/read_ahead_kb, or the parent disk's for a
 * partition, or /sys/class/bdi/MAJ:MIN/read_ahead_kb (FUSE and other
 * anonymous devices have a bdi too). 0 unknown. */
uint32_t pi_fs_read_ahead_kb(dev_t dev) {
    const char *fmt[] = {"/sys/class/bdi/%u:%u/read_ahead_kb", "/sys/dev/block/%u:%u/queue/read_ahead_kb",
                         "/sys/dev/block/%u:%u/../queue/read_ahead_kb"};
    char p[128];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, fmt[i], major(dev), minor(dev));
        FILE *f = fopen(p, "re");
        if (!f) continue;
        unsigned v = 0;
        int ok = fscanf(f, "%u", &v) == 1;
        fclose(f);
        if (ok) return v;
    }
    return 0;
}

static const char *const memory_types[] = {"tmpfs", "ramfs", "hugetlbfs", "devtmpfs"};

void pi_local_facts(int fd, const char *path, struct pi_source_facts *f) {
    memset(f, 0, sizeof *f);
    f->rotational = -1;
    struct statfs sf;
    if ((fd >= 0 ? fstatfs(fd, &sf) : statfs(path, &sf)) == 0) f->fs_magic = (uint32_t)sf.f_type;
    char *real = path ? realpath(path, NULL) : NULL;
    if (real) {
        pi_fs_mount_type(real, f->fs_type, sizeof f->fs_type);
        free(real);
    }
    struct stat st;
    if ((fd >= 0 ? fstat(fd, &st) : stat(path, &st)) == 0) {
        f->rotational = pi_fs_rotational(st.st_dev);
        f->read_ahead_kb = pi_fs_read_ahead_kb(st.st_dev);
    }
    if (strncmp(f->fs_type, "fuse", 4) == 0 || f->fs_magic == 0x65735546u) {
        f->storage = PI_STORAGE_FUSE;
    } else if (pi_fs_is_remote(f->fs_magic, f->fs_type)) {
        f->storage = PI_STORAGE_NETFS;
    } else {
        f->storage = PI_STORAGE_LOCAL;
        for (size_t i = 0; i < PI_ARRAY_LEN(memory_types); i++)
            if (strcmp(f->fs_type, memory_types[i]) == 0 || f->fs_magic == 0x01021994u /* TMPFS_MAGIC */)
                f->storage = PI_STORAGE_MEMORY;
    }
}

/* A source's facts: a local file gathers them here on the first call
 * (file.c's open marks them to gather), once, whichever thread asks. */
struct pi_source_facts *pi_source_facts(struct pi_source *s) {
    int one = 1;
    if (atomic_load(&s->facts_state) == 0) return &s->facts;
    if (atomic_compare_exchange_strong(&s->facts_state, &one, 2)) {
        const char *path = strncmp(s->name, "file://", 7) == 0 ? s->name + 7 : s->name;
        pi_local_facts(s->fd, path, &s->facts);
        atomic_store(&s->facts_state, 0);
    } else {
        while (atomic_load(&s->facts_state) != 0) sched_yield(); /* another thread is gathering them */
    }
    return &s->facts;
}
