/* assemble.c - assembled tensors (PAGEIN_TENSOR_ASSEMBLED): a tensor whose
 * bytes are stored as several pieces (a DCP tensor saved in chunks, or as
 * a strided view; the pieces come from the format row's dir_table,
 * format.h). The strategies bring the pieces' byte ranges in like any
 * tensor's (pi_tensor_ranges: the group ranges, load_tensors, residency);
 * building a tensor copies each piece's elements into place in the
 * model's own memory, once, when the tensor is made resident (the access
 * calls) or at open for the strategies that keep everything resident. A
 * leaf: it calls nothing else of src/load/. */
#include "load.h"
#include "../io/io.h"

#include <sys/mman.h>

#include <stdio.h>

static const struct pi_piece *pieces_of(const pagein_model *m, const pagein_tensor *t, size_t *n) {
    *n = 0;
    if (!(t->flags & PAGEIN_TENSOR_ASSEMBLED) || !m->pieces.first) return NULL;
    size_t i = (size_t)(t - m->tab.t);
    *n = m->pieces.first[i + 1] - m->pieces.first[i];
    return m->pieces.p + m->pieces.first[i];
}

size_t pi_tensor_nranges(const pagein_model *m, const pagein_tensor *t) {
    size_t n;
    pieces_of(m, t, &n);
    return t->flags & PAGEIN_TENSOR_ASSEMBLED ? n : 1;
}

size_t pi_tensor_ranges(const pagein_model *m, const pagein_tensor *t, struct pi_range *r) {
    size_t n;
    const struct pi_piece *p = pieces_of(m, t, &n);
    if (!(t->flags & PAGEIN_TENSOR_ASSEMBLED)) {
        r[0] = (struct pi_range){t->file, t->offset, t->nbytes};
        return 1;
    }
    for (size_t k = 0; k < n; k++) r[k] = (struct pi_range){p[k].file, p[k].off, p[k].span};
    return n;
}

size_t pi_tensor_load_ranges(const pagein_model *m, const pagein_tensor *t, struct pi_range *r) {
    if ((t->flags & PAGEIN_TENSOR_ASSEMBLED) && m->abuilt && atomic_load(&m->abuilt[t - m->tab.t])) return 0;
    return pi_tensor_ranges(m, t, r);
}

int pi_assemble_pending(const pagein_model *m, const pagein_tensor *t) {
    return (t->flags & PAGEIN_TENSOR_ASSEMBLED) && m->abuilt && !atomic_load(&m->abuilt[t - m->tab.t]);
}

size_t pi_group_nranges(const pagein_model *m, int32_t g) {
    size_t k = 0;
    for (size_t i = m->lstart[g]; i < m->lstart[g + 1]; i++) k += pi_tensor_nranges(m, m->lt[i]);
    return k;
}

/* ---- copying a piece's elements into a box -------------------------------- */

struct box_copy {
    uint32_t ndim;
    uint64_t es;
    const struct pi_piece *p;
    const uint8_t *src;                 /* the piece's first element */
    const uint64_t *start, *count;      /* the destination box in the tensor */
    uint8_t *dst;
};

/* Copies the elements of piece p inside the box [start, start + count)
 * into dst (the box, row-major). No allocation: runs under the guard. */
static int copy_piece(void *arg) {
    const struct box_copy *c = arg;
    const struct pi_piece *p = c->p;
    uint32_t nd = c->ndim;
    if (nd == 0) {
        memcpy(c->dst, c->src, c->es);
        return 0;
    }
    uint64_t lo[PI_DCP_MAX_NDIM_LOAD], hi[PI_DCP_MAX_NDIM_LOAD], idx[PI_DCP_MAX_NDIM_LOAD],
        dstr[PI_DCP_MAX_NDIM_LOAD];
    for (uint32_t d = 0; d < nd; d++) {
        lo[d] = p->at[d] > c->start[d] ? p->at[d] : c->start[d];
        uint64_t pe = p->at[d] + p->len[d], be = c->start[d] + c->count[d];
        hi[d] = pe < be ? pe : be;
        if (lo[d] >= hi[d]) return 0; /* no overlap */
        idx[d] = lo[d];
    }
    dstr[nd - 1] = 1;
    for (uint32_t d = nd - 1; d > 0; d--) dstr[d - 1] = dstr[d] * c->count[d];
    /* trailing dimensions the box takes whole, in the piece and in the
     * destination, with the piece row-major over them: one run (a chunk
     * of whole rows is one memcpy) */
    uint32_t nr = nd;
    uint64_t inner = 1;
    while (nr > 1) {
        uint32_t d = nr - 1;
        if (lo[d] != c->start[d] || hi[d] != c->start[d] + c->count[d] || lo[d] != p->at[d] ||
            hi[d] != p->at[d] + p->len[d] || p->strides[d] != (int64_t)inner)
            break;
        inner *= p->len[d];
        nr--;
    }
    uint64_t run = hi[nr - 1] - lo[nr - 1], blk = inner * c->es;
    int64_t ist = p->strides[nr - 1];
    for (;;) {
        int64_t so = 0;
        uint64_t dof = 0;
        for (uint32_t d = 0; d < nr; d++) {
            so += (int64_t)(idx[d] - p->at[d]) * p->strides[d];
            dof += (idx[d] - c->start[d]) * dstr[d];
        }
        const uint8_t *s = c->src + so * (int64_t)c->es;
        uint8_t *o = c->dst + dof * c->es;
        if (ist == (int64_t)inner) {
            memcpy(o, s, run * blk);
        } else {
            for (uint64_t k = 0; k < run; k++) memcpy(o + k * blk, s + (int64_t)k * ist * (int64_t)c->es, blk);
        }
        /* the next run: the odometer over the dimensions before it */
        uint32_t d = nr - 1;
        while (d > 0) {
            d--;
            if (++idx[d] < hi[d]) break;
            idx[d] = lo[d];
            if (d == 0) return 0;
        }
        if (nr == 1) return 0;
    }
}

/* The piece's bytes: READ's private copy of its file, else the mapping. */
static int piece_copy(const pagein_model *m, const pagein_tensor *t, const struct pi_piece *p,
                      const uint64_t *start, const uint64_t *count, void *dst) {
    const pagein_file *f = m->files[p->file];
    RETURN_IF(t->ndim > PI_DCP_MAX_NDIM_LOAD, PAGEIN_E_LIMIT, "tensor '%s': %u dimensions", t->name, t->ndim);
    struct box_copy c = {t->ndim, pagein_dtype_get(t->dtype)->bits / 8, p, NULL, start, count, dst};
    if (m->rbuf && m->rbuf[p->file]) {
        c.src = m->rbuf[p->file] + p->off;
        return copy_piece(&c);
    }
    RETURN_IF(!f->base || !f->mapped, PAGEIN_E_UNSUPPORTED, "tensor '%s': %s is not mapped", t->name, f->path);
    c.src = f->base + p->off;
    int rc = pi_guard_call(f->base, f->len, f->path, 0, f->fd, copy_piece, &c);
    if (rc < 0) pi_err_prefix(t->name);
    return rc;
}

/* Once a tensor is built, its pieces' whole pages are given back: a
 * mapping's (the page cache keeps them, the process maps them no more: a
 * built tensor is not counted twice in its RSS), READ's copies (read
 * again by nothing: slices of a built tensor read the tensor). */
static void release_pieces(const pagein_model *m, const struct pi_piece *p, size_t n) {
    uint64_t ps = pagein_page_size();
    for (size_t k = 0; k < n; k++) {
        const pagein_file *f = m->files[p[k].file];
        uint8_t *base = m->rbuf && m->rbuf[p[k].file] ? m->rbuf[p[k].file] : f->mapped ? (uint8_t *)f->base : NULL;
        uint64_t a = pi_align_up(p[k].off, ps), e = (p[k].off + p[k].span) & ~(ps - 1);
        if (base && e > a) madvise(base + a, e - a, MADV_DONTNEED);
    }
}

static int build(pagein_model *m, const pagein_tensor *t) {
    size_t i = (size_t)(t - m->tab.t), n;
    if (atomic_load(&m->abuilt[i])) return 0;
    const struct pi_piece *p = pieces_of(m, t, &n);
    int rc = 0;
    pthread_mutex_lock(&m->amu);
    if (!atomic_load(&m->abuilt[i])) {
        uint64_t zero[PI_DCP_MAX_NDIM_LOAD] = {0};
        for (size_t k = 0; k < n && rc == 0; k++) rc = piece_copy(m, t, &p[k], zero, t->shape, (void *)t->data);
        if (rc == 0) atomic_store(&m->abuilt[i], 1);
        if (rc == 0) release_pieces(m, p, n);
    }
    pthread_mutex_unlock(&m->amu);
    return rc;
}

int pi_assemble(pagein_model *m, const pagein_tensor *const *t, size_t n) {
    if (!m->abuilt) return 0;
    if (!t) n = m->tab.n;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *x = t ? t[i] : &m->tab.t[i];
        if (x && (x->flags & PAGEIN_TENSOR_ASSEMBLED)) FORWARD_IF(build(m, x));
    }
    return 0;
}

int pi_assemble_group(pagein_model *m, int32_t g) {
    if (!m->abuilt) return 0;
    return pi_assemble(m, m->lt + m->lstart[g], m->lstart[g + 1] - m->lstart[g]);
}

int pi_assemble_start(pagein_model *m) {
    if (!m->pieces.first) return 0;
    size_t ps = pagein_page_size();
    uint64_t total = 0;
    /* sized by the checkpoint, never believed: each tensor's bytes within
     * what its pieces store, the sum checked; nothing allocated before */
    for (size_t i = 0; i < m->tab.n; i++) {
        const pagein_tensor *t = &m->tab.t[i];
        if (!(t->flags & PAGEIN_TENSOR_ASSEMBLED)) continue;
        size_t n;
        const struct pi_piece *p = pieces_of(m, t, &n);
        uint64_t stored = 0;
        for (size_t k = 0; k < n; k++)
            if (pi_add_overflow(stored, p[k].span, &stored)) stored = UINT64_MAX;
        RETURN_IF(t->nbytes > stored, PAGEIN_E_BAD_TENSOR_INFO,
                  "%s: tensor '%s' is %llu bytes, its chunks store %llu", m->files[t->file]->path, t->name,
                  (unsigned long long)t->nbytes, (unsigned long long)stored);
        RETURN_IF(t->nbytes > UINT64_MAX - ps || pi_add_overflow(total, pi_align_up(t->nbytes, ps), &total) ||
                  total > SIZE_MAX,
                  PAGEIN_E_OVERFLOW, "%s: tensor '%s': %llu bytes of assembled tensors overflow",
                  m->files[t->file]->path, t->name, (unsigned long long)t->nbytes);
    }
    m->abuilt = pi_calloc(m->tab.n ? m->tab.n : 1, sizeof *m->abuilt);
    if (!m->abuilt) return pi_err(-ENOMEM, "out of memory");
    pthread_mutex_init(&m->amu, NULL);
    m->amu_ready = 1;
    if (total) {
        /* the memory policy's blocks (core/mem.h): one already resident
         * when a block was given back, else huge pages where the machine
         * has them (a 4 KiB fault each cost ~57 us on the test VM: 1.4 s
         * for 96 MiB of first touches) */
        int reused = 0;
        void *b = pi_mem_get((size_t)total, &m->alen, 0, &reused);
        if (!b)
            return pi_err(-errno, "%s: out of memory for %llu bytes of assembled tensors", m->files[0]->path,
                          (unsigned long long)total);
        if (!reused)
            pi_mem_advise(b, m->alen, (m->opts.hints & PAGEIN_HINT_HUGEPAGE) ? PI_MEM_PAGES_HUGE : PI_MEM_PAGES_MEASURE);
        else if (!(pi_model_flags(m) & PI_ST_RESIDENT))
            memset(b, 0, (size_t)total); /* an unbuilt tensor reads zeros, never a block's former bytes */
        m->abuf = b;
    }
    size_t at = 0;
    for (size_t i = 0; i < m->tab.n; i++) {
        pagein_tensor *t = &m->tab.t[i];
        if (!(t->flags & PAGEIN_TENSOR_ASSEMBLED)) continue;
        t->data = m->abuf + at;
        at += pi_align_up(t->nbytes, ps);
    }
    if (pi_model_flags(m) & PI_ST_RESIDENT) return pi_assemble(m, NULL, 0);
    return 0;
}

void pi_assemble_free(pagein_model *m) {
    if (m->abuf) pi_mem_put(m->abuf, m->alen);
    pi_free((void *)m->abuilt);
    if (m->amu_ready) pthread_mutex_destroy(&m->amu);
    pi_arena_free(&m->pieces.arena);
}

int pi_read_box(pagein_model *m, const pagein_tensor *t, const void *src, const uint64_t *start,
                const uint64_t *count, void *dst, size_t len) {
    RETURN_IF(t->ndim > PI_DCP_MAX_NDIM_LOAD, PAGEIN_E_LIMIT, "tensor '%s': %u dimensions", t->name, t->ndim);
    const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
    RETURN_IF(!di || !di->bits || di->bits % 8 || (t->flags & (PAGEIN_TENSOR_BYTES |
              PAGEIN_TENSOR_SWAPPED | PAGEIN_TENSOR_NONCONTIGUOUS)),
              PAGEIN_E_INVALID, "tensor '%s': no element boxes of this tensor (%s%s)", t->name,
              di ? di->name : "?", t->flags & PAGEIN_TENSOR_BYTES ? ", stored bytes" : "");
    uint64_t es = di->bits / 8, ne = 1;
    for (uint32_t d = 0; d < t->ndim; d++) {
        RETURN_IF(!start || !count || start[d] > t->shape[d] || count[d] > t->shape[d] - start[d], PAGEIN_E_RANGE,
                  "tensor '%s': the box [%llu, +%llu) in dimension %u is outside its %llu", t->name,
                  start ? (unsigned long long)start[d] : 0ull, count ? (unsigned long long)count[d] : 0ull, d,
                  (unsigned long long)t->shape[d]);
        ne *= count[d];
    }
    RETURN_IF(ne * es > len, PAGEIN_E_INVALID, "tensor '%s': the box is %llu bytes, the buffer %zu", t->name,
              (unsigned long long)(ne * es), len);
    if (!ne) return 0;
    size_t n;
    const struct pi_piece *p = pieces_of(m, t, &n);
    if (p) {
        /* under the build lock: a build gives the pieces' pages back (READ's
         * copies then read as zeros), so a box is copied either from the
         * pieces before that or from the built tensor after */
        pthread_mutex_lock(&m->amu);
        int built = atomic_load(&m->abuilt[t - m->tab.t]), rc = 0;
        for (size_t k = 0; k < n && !built && rc == 0; k++) rc = piece_copy(m, t, &p[k], start, count, dst);
        pthread_mutex_unlock(&m->amu);
        if (!built) return rc;
        src = t->data; /* built: the tensor itself */
    }
    /* one row-major piece: the tensor's own bytes */
    int64_t st[PI_DCP_MAX_NDIM_LOAD];
    uint64_t zero[PI_DCP_MAX_NDIM_LOAD] = {0};
    for (uint32_t d = t->ndim; d-- > 0;) st[d] = d + 1 == t->ndim ? 1 : st[d + 1] * (int64_t)t->shape[d + 1];
    struct pi_piece one = {t->file, t->offset, t->nbytes, zero, t->shape, st};
    struct box_copy c = {t->ndim, es, &one, src, start, count, dst};
    const pagein_file *f = m->files[t->file];
    if (f->mapped && (const uint8_t *)src >= f->base && (const uint8_t *)src < f->base + f->len) {
        int rc = pi_guard_call(f->base, f->len, f->path, 0, f->fd, copy_piece, &c);
        if (rc < 0) pi_err_prefix(t->name);
        return rc;
    }
    return copy_piece(&c);
}
