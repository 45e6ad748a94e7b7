/*
 * data.c - training data for pagein.data: datasets (by file list, Megatron
 * prefix, or the dataset-format table: pagein_dataset_open), range reads,
 * shuffles, and the one pipeline (pagein_pipe_*). Samples are read or
 * copied into memory Python owns (see each section).
 */
#include "pagein_py.h"

#include <string.h>

/* ---- datasets by file list or Megatron prefix, range reads, shuffles ------ */
/*
 * A dataset is a PyCapsule owning one pagein_dataset (closed by the
 * capsule's destructor). Sample bytes are read into buffers that Python
 * owns (a fresh bytearray per call, or a caller's writable buffer), never
 * into library memory, so every view the Python layer hands out keeps its
 * bytes alive and no later read can overwrite them.
 */

#define DATASET_CAPSULE "pagein.dataset"

static void dataset_capsule_free(PyObject *cap) {
    pagein_dataset_close(PyCapsule_GetPointer(cap, DATASET_CAPSULE));
}

static pagein_dataset *dataset_of(PyObject *cap) {
    return PyCapsule_GetPointer(cap, DATASET_CAPSULE);
}

/* _pagein.dataset_open_records([paths], record_size) -> capsule */
static PyObject *py_dataset_open_records(PyObject *self, PyObject *args) {
    PyObject *seq;
    unsigned long long rec;
    if (!PyArg_ParseTuple(args, "OK:dataset_open_records", &seq, &rec)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "paths must be a sequence of str");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **enc = PyMem_Calloc((size_t)n + 1, sizeof *enc);
    const char **paths = PyMem_Calloc((size_t)n + 1, sizeof *paths);
    PyObject *res = NULL;
    Py_ssize_t i;
    if (!enc || !paths) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < n; i++) {
        PyObject *p = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyUnicode_Check(p)) {
            PyErr_SetString(PyExc_TypeError, "paths must be a sequence of str");
            goto done;
        }
        if (!(enc[i] = fs_bytes(p))) goto done;
        paths[i] = PyBytes_AS_STRING(enc[i]);
    }
    pagein_dataset *d = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_dataset_open_records(&d, paths, (size_t)n, rec);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_rc(rc, n == 1 ? PySequence_Fast_GET_ITEM(fast, 0) : NULL);
        goto done;
    }
    res = PyCapsule_New(d, DATASET_CAPSULE, dataset_capsule_free);
    if (!res) pagein_dataset_close(d);
done:
    for (i = 0; enc && i < n; i++) Py_XDECREF(enc[i]);
    PyMem_Free(enc);
    PyMem_Free(paths);
    Py_DECREF(fast);
    return res;
}

/* _pagein.dataset_open_megatron(prefix) -> capsule */
static PyObject *py_dataset_open_megatron(PyObject *self, PyObject *args) {
    PyObject *prefix;
    if (!PyArg_ParseTuple(args, "U:dataset_open_megatron", &prefix)) return NULL;
    PyObject *pb = fs_bytes(prefix);
    if (!pb) return NULL;
    pagein_dataset *d = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_dataset_open_megatron(&d, PyBytes_AS_STRING(pb));
    Py_END_ALLOW_THREADS
    Py_DECREF(pb);
    if (rc < 0) return raise_rc(rc, prefix);
    PyObject *res = PyCapsule_New(d, DATASET_CAPSULE, dataset_capsule_free);
    if (!res) pagein_dataset_close(d);
    return res;
}

/* _pagein.dataset_info(cap) -> (count, [(path, size), ...]) */
/* _pagein.dataset_detect(path) -> (row name or None, score): the C table's detection */
static PyObject *py_dataset_detect(PyObject *self, PyObject *arg) {
    const char *uri = PyUnicode_AsUTF8(arg);
    if (!uri) return NULL;
    char name[64];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_dataset_detect(uri, name, sizeof name);
    Py_END_ALLOW_THREADS
    if (rc < 0) return raise_rc(rc, arg);
    if (rc == 0) return Py_BuildValue("(Oi)", Py_None, 0);
    return Py_BuildValue("(si)", name, rc);
}

static PyObject *py_dataset_info(PyObject *self, PyObject *cap) {
    pagein_dataset *d = dataset_of(cap);
    if (!d) return NULL;
    size_t nf = pagein_dataset_file_count(d);
    PyObject *files = PyList_New((Py_ssize_t)nf);
    if (!files) return NULL;
    for (size_t i = 0; i < nf; i++) {
        const char *p = pagein_dataset_path(d, i);
        PyObject *t = Py_BuildValue("(NK)", PyUnicode_DecodeFSDefault(p ? p : ""),
                                    (unsigned long long)pagein_dataset_file_size(d, i));
        if (!t) {
            Py_DECREF(files);
            return NULL;
        }
        PyList_SET_ITEM(files, (Py_ssize_t)i, t);
    }
    return Py_BuildValue("(KN)", (unsigned long long)pagein_dataset_count(d), files);
}

/* A C-contiguous buffer of n elements of `size` bytes (format not checked
 * beyond the item size: the Python layer passes numpy uint64/uint32). */
static int get_array(PyObject *o, Py_buffer *b, size_t size, const char *what) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (b->len % (Py_ssize_t)size) {
        PyErr_Format(PyExc_ValueError, "%s: buffer of %zd bytes is not a whole number of %zu-byte items", what,
                     b->len, size);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* _pagein.dataset_read(cap, ids: u64 buffer, queue_depth=0, max_gap=0, no_merge=False)
 *   -> (bytearray data, bytes offsets: u64[n+1], stats tuple)
 * Sample k is data[offsets[k]:offsets[k+1]]; one fresh bytearray per call. */
static PyObject *py_dataset_read(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dataset", "ids", "queue_depth", "max_gap", "no_merge", NULL};
    PyObject *cap, *ido;
    unsigned qd = 0;
    unsigned long long gap = 0;
    int no_merge = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|IKp:dataset_read", kwlist, &cap, &ido, &qd, &gap, &no_merge))
        return NULL;
    pagein_dataset *d = dataset_of(cap);
    if (!d) return NULL;
    Py_buffer ib;
    if (get_array(ido, &ib, 8, "ids") < 0) return NULL;
    size_t n = (size_t)ib.len / 8;
    const uint64_t *ids = ib.buf;
    PyObject *offs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((n + 1) * 8));
    pagein_range *reqs = PyMem_Calloc(n ? n : 1, sizeof *reqs);
    size_t nf = pagein_dataset_file_count(d);
    int *fds = PyMem_Calloc(nf ? nf : 1, sizeof *fds);
    PyObject *data = NULL, *res = NULL;
    if (!offs || !reqs || !fds) {
        if (offs) PyErr_NoMemory();
        goto done;
    }
    uint64_t *off = (uint64_t *)PyBytes_AS_STRING(offs);
    uint64_t total = 0;
    size_t nreq = 0;
    for (size_t i = 0; i < n; i++) {
        pagein_sample_loc loc;
        int rc = pagein_dataset_locate(d, ids[i], &loc);
        if (rc < 0) {
            raise_rc(rc, NULL);
            goto done;
        }
        off[i] = total;
        if (loc.length) reqs[nreq++] = (pagein_range){loc.file, loc.offset, loc.length, (void *)(uintptr_t)total};
        total += loc.length;
    }
    off[n] = total;
    if (total > (uint64_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "dataset_read: batch too large");
        goto done;
    }
    data = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!data) goto done;
    char *base = PyByteArray_AS_STRING(data);
    for (size_t i = 0; i < nreq; i++) reqs[i].dst = base + (uintptr_t)reqs[i].dst;
    for (size_t i = 0; i < nf; i++) fds[i] = pagein_dataset_fd(d, i);
    pagein_ranges_opts o = PAGEIN_RANGES_OPTS_INIT;
    o.queue_depth = qd;
    o.max_gap = gap;
    if (no_merge) o.flags |= PAGEIN_RANGES_NO_MERGE;
    pagein_ranges_stats st = {0};
    int rc = 0;
    if (nreq) {
        Py_BEGIN_ALLOW_THREADS
        rc = pagein_read_ranges(fds, nf, reqs, nreq, &o, &st);
        Py_END_ALLOW_THREADS
    }
    if (rc < 0) {
        raise_rc(rc, NULL);
        goto done;
    }
    res = Py_BuildValue("(OON)", data, offs, ranges_stats_tuple(&st));
done:
    Py_XDECREF(data);
    Py_XDECREF(offs);
    PyMem_Free(reqs);
    PyMem_Free(fds);
    PyBuffer_Release(&ib);
    return res;
}

/* _pagein.read_ranges(fds, files: u32 buf, offsets: u64 buf, lengths: u64 buf,
 *                     out: writable buffer, dst: u64 buf, queue_depth=0,
 *                     max_gap=0, no_merge=False) -> stats tuple
 * Request i reads lengths[i] bytes at offsets[i] of fds[files[i]] into
 * out[dst[i]:dst[i]+lengths[i]]; every request is checked against out. */
static PyObject *py_read_ranges(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"fds",         "files",   "offsets",  "lengths", "out", "dst",
                             "queue_depth", "max_gap", "no_merge", NULL};
    PyObject *fdo, *fo, *oo, *lo, *outo, *dsto;
    unsigned qd = 0;
    unsigned long long gap = 0;
    int no_merge = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOO|IKp:read_ranges", kwlist, &fdo, &fo, &oo, &lo, &outo, &dsto,
                                     &qd, &gap, &no_merge))
        return NULL;
    Py_buffer fb = {0}, ob = {0}, lb = {0}, db = {0}, outb = {0};
    PyObject *res = NULL, *fast = NULL;
    int *fds = NULL;
    pagein_range *reqs = NULL;
    int have_f = 0, have_o = 0, have_l = 0, have_d = 0, have_out = 0;
    if (get_array(fo, &fb, 4, "files") < 0) goto done;
    have_f = 1;
    if (get_array(oo, &ob, 8, "offsets") < 0) goto done;
    have_o = 1;
    if (get_array(lo, &lb, 8, "lengths") < 0) goto done;
    have_l = 1;
    if (get_array(dsto, &db, 8, "dst") < 0) goto done;
    have_d = 1;
    if (PyObject_GetBuffer(outo, &outb, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    have_out = 1;
    size_t n = (size_t)fb.len / 4;
    if ((size_t)ob.len / 8 != n || (size_t)lb.len / 8 != n || (size_t)db.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "read_ranges: files, offsets, lengths and dst differ in length");
        goto done;
    }
    if (!(fast = PySequence_Fast(fdo, "fds must be a sequence of int"))) goto done;
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(fast);
    fds = PyMem_Calloc((size_t)nf + 1, sizeof *fds);
    reqs = PyMem_Calloc(n ? n : 1, sizeof *reqs);
    if (!fds || !reqs) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nf; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) goto done;
        fds[i] = (int)v;
    }
    const uint32_t *files = fb.buf;
    const uint64_t *offs = ob.buf, *lens = lb.buf, *dst = db.buf;
    size_t nreq = 0;
    for (size_t i = 0; i < n; i++) {
        if (dst[i] > (uint64_t)outb.len || lens[i] > (uint64_t)outb.len - dst[i]) {
            PyErr_Format(PyExc_ValueError,
                         "read_ranges: request %zu (%llu bytes at %llu of the output) overruns the %zd-byte output",
                         i, (unsigned long long)lens[i], (unsigned long long)dst[i], outb.len);
            goto done;
        }
        if (lens[i]) reqs[nreq++] = (pagein_range){files[i], offs[i], lens[i], (char *)outb.buf + dst[i]};
    }
    pagein_ranges_opts o = PAGEIN_RANGES_OPTS_INIT;
    o.queue_depth = qd;
    o.max_gap = gap;
    if (no_merge) o.flags |= PAGEIN_RANGES_NO_MERGE;
    pagein_ranges_stats st = {0};
    int rc = 0;
    if (nreq) {
        Py_BEGIN_ALLOW_THREADS
        rc = pagein_read_ranges(fds, (size_t)nf, reqs, nreq, &o, &st);
        Py_END_ALLOW_THREADS
    }
    if (rc < 0) {
        raise_rc(rc, NULL);
        goto done;
    }
    res = ranges_stats_tuple(&st);
done:
    if (have_f) PyBuffer_Release(&fb);
    if (have_o) PyBuffer_Release(&ob);
    if (have_l) PyBuffer_Release(&lb);
    if (have_d) PyBuffer_Release(&db);
    if (have_out) PyBuffer_Release(&outb);
    Py_XDECREF(fast);
    PyMem_Free(fds);
    PyMem_Free(reqs);
    return res;
}

/* _pagein.permutation(n, seed) -> bytearray of n native u64: pagein_permutation */
static PyObject *py_permutation(PyObject *self, PyObject *args) {
    unsigned long long n, seed;
    if (!PyArg_ParseTuple(args, "KK:permutation", &n, &seed)) return NULL;
    if (n > (unsigned long long)PY_SSIZE_T_MAX / 8) return PyErr_NoMemory();
    PyObject *b = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    if (!b) return NULL;
    uint64_t *ids = (uint64_t *)(void *)PyByteArray_AS_STRING(b);
    Py_BEGIN_ALLOW_THREADS
    pagein_permutation(ids, n, seed);
    Py_END_ALLOW_THREADS
    return b;
}

/* _pagein.epoch_seed(seed, epoch) -> int */
static PyObject *py_epoch_seed(PyObject *self, PyObject *args) {
    unsigned long long seed, epoch;
    if (!PyArg_ParseTuple(args, "KK:epoch_seed", &seed, &epoch)) return NULL;
    return PyLong_FromUnsignedLongLong(pagein_epoch_seed(seed, epoch));
}

/* _pagein.shuffle_quality(ids: u64 buffer) -> float */
static PyObject *py_shuffle_quality(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (get_array(arg, &b, 8, "ids") < 0) return NULL;
    double q = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_shuffle_quality(b.buf, (size_t)b.len / 8, &q);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (rc < 0) return raise_rc(rc, NULL);
    return PyFloat_FromDouble(q);
}

/* ---- the dataset-format table and the pipeline ----------------------------- */
/*
 * pagein_dataset_open and pagein_pipe_*. Samples are copied into Python
 * bytes as they are handed out, so no view a caller holds is ever
 * overwritten; the GIL is released while the pipe waits for its loader
 * thread.
 */
#define DSP_PIPE_CAPSULE "pagein.pipe"

/* _pagein.ds_open(spec, format=None, record_size=0, columns=None, group_bytes=0, cache_dir=None) -> dataset */
static PyObject *py_ds_open(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"spec", "format", "record_size", "columns", "group_bytes", "cache_dir", NULL};
    PyObject *spec, *cols = Py_None;
    const char *format = NULL, *cache = NULL;
    unsigned long long rec = 0, gb = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|zKOKz:ds_open", kwlist, &spec, &format, &rec, &cols, &gb, &cache))
        return NULL;
    PyObject *sb = fs_bytes(spec);
    if (!sb) return NULL;
    PyObject *fast = NULL, **enc = NULL;
    const char **cv = NULL;
    Py_ssize_t nc = 0;
    PyObject *res = NULL;
    if (cols != Py_None) {
        fast = PySequence_Fast(cols, "columns must be a sequence of str");
        if (!fast) goto done;
        nc = PySequence_Fast_GET_SIZE(fast);
        enc = PyMem_Calloc((size_t)nc + 1, sizeof *enc);
        cv = PyMem_Calloc((size_t)nc + 1, sizeof *cv);
        if (!enc || !cv) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < nc; i++) {
            PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
            if (!PyUnicode_Check(o)) {
                PyErr_SetString(PyExc_TypeError, "columns must be str");
                goto done;
            }
            if (!(enc[i] = PyUnicode_AsUTF8String(o))) goto done;
            cv[i] = PyBytes_AS_STRING(enc[i]);
        }
    }
    pagein_dataset_opts o = PAGEIN_DATASET_OPTS_INIT;
    o.format = format;
    o.record_bytes = rec;
    o.columns = cols != Py_None ? cv : NULL;
    o.ncolumns = (size_t)nc;
    o.group_bytes = gb;
    o.cache_dir = cache;
    pagein_dataset *d = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_dataset_open(&d, PyBytes_AS_STRING(sb), &o);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_rc(rc, spec);
        goto done;
    }
    res = PyCapsule_New(d, DATASET_CAPSULE, dataset_capsule_free);
    if (!res) pagein_dataset_close(d);
done:
    for (Py_ssize_t i = 0; enc && i < nc; i++) Py_XDECREF(enc[i]);
    PyMem_Free(enc);
    PyMem_Free(cv);
    Py_XDECREF(fast);
    Py_DECREF(sb);
    return res;
}

/* _pagein.ds_shards(dataset) -> [(path, format, size)] , count, groups */
static PyObject *py_ds_shards(PyObject *self, PyObject *cap) {
    pagein_dataset *d = PyCapsule_GetPointer(cap, DATASET_CAPSULE);
    if (!d) return NULL;
    size_t nf = pagein_dataset_file_count(d);
    PyObject *l = PyList_New((Py_ssize_t)nf);
    if (!l) return NULL;
    for (size_t i = 0; i < nf; i++) {
        const char *p = pagein_dataset_path(d, i);
        PyObject *t = Py_BuildValue("(NsK)", PyUnicode_DecodeFSDefault(p ? p : ""), pagein_dataset_format(d, i),
                                    (unsigned long long)pagein_dataset_file_size(d, i));
        if (!t) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, t);
    }
    return Py_BuildValue("(NKK)", l, (unsigned long long)pagein_dataset_count(d),
                         (unsigned long long)pagein_dataset_group_count(d));
}

/* Pipe options from keywords (shared by pipe_open, pipe_state, pipe_order). */
static int dsp_opts(PyObject *kw, pagein_pipe_opts *o) {
    *o = (pagein_pipe_opts)PAGEIN_PIPE_OPTS_INIT;
    if (!kw) return 0;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &k, &v)) {
        const char *name = PyUnicode_AsUTF8(k);
        if (!name) return -1;
        if (!strcmp(name, "state")) {
            if (v == Py_None) o->state = NULL;
            else if (!(o->state = PyUnicode_AsUTF8(v))) return -1;
            continue;
        }
        if (!strcmp(name, "order")) {
            const char *s = PyUnicode_AsUTF8(v);
            if (!s) return -1;
            int ord = pagein_order_from_name(s);
            if (ord < 0) {
                PyErr_Format(PyExc_ValueError, "order must be none, block or global, not %R", v);
                return -1;
            }
            o->order = (pagein_order)ord;
            continue;
        }
        unsigned long long x = PyLong_AsUnsignedLongLong(v);
        if (x == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        int big = x > UINT32_MAX;
        if (!strcmp(name, "seed")) o->seed = x, big = 0;
        else if (!strcmp(name, "epoch")) o->epoch = x, big = 0;
        else if (!strcmp(name, "rank")) o->rank = (uint32_t)x;
        else if (!strcmp(name, "world_size")) o->world_size = (uint32_t)x;
        else if (!strcmp(name, "worker")) o->worker = (uint32_t)x;
        else if (!strcmp(name, "num_workers")) o->num_workers = (uint32_t)x;
        else if (!strcmp(name, "batch")) o->batch = (uint32_t)x;
        else if (!strcmp(name, "window")) o->window = (uint32_t)x;
        else if (!strcmp(name, "read_batch")) o->read_batch = (uint32_t)x;
        else if (!strcmp(name, "queue_depth")) o->queue_depth = (unsigned)x;
        else {
            PyErr_Format(PyExc_TypeError, "unknown pipe option '%s'", name);
            return -1;
        }
        if (big) {
            PyErr_Format(PyExc_OverflowError, "pipe option %s=%llu too large", name, x);
            return -1;
        }
    }
    return 0;
}

struct dsp_pipe {
    pagein_pipe *p;
    PyObject *ds; /* keeps the dataset alive */
};

static void dsp_pipe_free(PyObject *cap) {
    struct dsp_pipe *w = PyCapsule_GetPointer(cap, DSP_PIPE_CAPSULE);
    if (!w) return;
    pagein_pipe_close(w->p);
    Py_XDECREF(w->ds);
    PyMem_Free(w);
}

/* _pagein.pipe_open(dataset, **opts) -> pipe */
static PyObject *py_pipe_open(PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O:pipe_open", &cap)) return NULL;
    pagein_dataset *d = PyCapsule_GetPointer(cap, DATASET_CAPSULE);
    if (!d) return NULL;
    pagein_pipe_opts o;
    if (dsp_opts(kw, &o) < 0) return NULL;
    struct dsp_pipe *w = PyMem_Calloc(1, sizeof *w);
    if (!w) return PyErr_NoMemory();
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_pipe_open(&w->p, d, &o);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyMem_Free(w);
        return raise_rc(rc, NULL);
    }
    Py_INCREF(cap);
    w->ds = cap;
    PyObject *res = PyCapsule_New(w, DSP_PIPE_CAPSULE, dsp_pipe_free);
    if (!res) {
        pagein_pipe_close(w->p);
        Py_DECREF(cap);
        PyMem_Free(w);
    }
    return res;
}

static struct dsp_pipe *dsp_pipe_of(PyObject *cap) { return PyCapsule_GetPointer(cap, DSP_PIPE_CAPSULE); }

/* ---- values built here: nested values and annotated scalars ---------------
 * A LIST is a list, a STRUCT a dict of its members, a MAP a list of (key,
 * value) tuples (keys may repeat and need not be hashable); DECIMAL a
 * decimal.Decimal (exact), TIMESTAMP/DATE/INT96 a numpy.datetime64 in the
 * field's unit, TIME/DURATION a numpy.timedelta64; inside nested values
 * numbers are Python ints, floats and bools. */
static PyObject *dsp_decimal_cls, *dsp_dt64, *dsp_td64;

static int dsp_lazy_imports(void) {
    if (dsp_decimal_cls) return 0;
    PyObject *dm = PyImport_ImportModule("decimal"), *np = dm ? PyImport_ImportModule("numpy") : NULL;
    if (!np) {
        Py_XDECREF(dm);
        return -1;
    }
    dsp_decimal_cls = PyObject_GetAttrString(dm, "Decimal");
    dsp_dt64 = PyObject_GetAttrString(np, "datetime64");
    dsp_td64 = PyObject_GetAttrString(np, "timedelta64");
    Py_DECREF(dm);
    Py_DECREF(np);
    return dsp_decimal_cls && dsp_dt64 && dsp_td64 ? 0 : -1;
}

static const char *dsp_unit(unsigned u) {
    static const char *n[] = {"generic", "D", "s", "ms", "us", "ns"};
    return u < 6 ? n[u] : "generic";
}

/* A little-endian integer of width w (1, 2, 4, 8). */
static int64_t dsp_le_int(const uint8_t *p, unsigned w, int is_signed, uint64_t *u) {
    uint64_t x = 0;
    for (unsigned i = 0; i < w; i++) x |= (uint64_t)p[i] << (8 * i);
    *u = x;
    if (is_signed && w < 8 && (x >> (8 * w - 1)) & 1) x |= ~0ull << (8 * w);
    return (int64_t)x;
}

static PyObject *dsp_number(const pagein_field *f) {
    const uint8_t *p = f->data;
    uint64_t u;
    switch (f->type) {
    case PAGEIN_FIELD_BOOL: return PyBool_FromLong(p[0] != 0);
    case PAGEIN_FIELD_INT:
        if (f->width > 8) break;
        return PyLong_FromLongLong(dsp_le_int(p, f->width, 1, &u));
    case PAGEIN_FIELD_UINT:
        if (f->width > 8) break;
        dsp_le_int(p, f->width, 0, &u);
        return PyLong_FromUnsignedLongLong(u);
    case PAGEIN_FIELD_FLOAT:
        if (f->width == 2) return PyFloat_FromDouble(PyFloat_Unpack2((const char *)p, 1));
        if (f->width == 4) {
            float x;
            memcpy(&x, p, 4);
            return PyFloat_FromDouble(x);
        }
        if (f->width == 8) {
            double x;
            memcpy(&x, p, 8);
            return PyFloat_FromDouble(x);
        }
        break;
    }
    return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)f->nbytes);
}

static PyObject *dsp_annotated(const pagein_field *f) {
    const uint8_t *p = f->data;
    uint64_t u;
    if (dsp_lazy_imports() < 0) return NULL;
    switch (f->logical) {
    case PAGEIN_LOGICAL_DECIMAL: {
        PyObject *unscaled;
        if (f->type == PAGEIN_FIELD_BINARY) /* Parquet: big-endian */
            unscaled = f->nbytes ? _PyLong_FromByteArray(p, (size_t)f->nbytes, 0, 1) : PyLong_FromLong(0);
        else if (f->width > 8) /* Arrow's Decimal128: little-endian */
            unscaled = _PyLong_FromByteArray(p, f->width, 1, 1);
        else
            unscaled = PyLong_FromLongLong(dsp_le_int(p, f->width <= 8 ? f->width : 8, 1, &u));
        if (!unscaled) return NULL;
        PyObject *txt = PyUnicode_FromFormat("%SE%d", unscaled, -(int)f->scale);
        Py_DECREF(unscaled);
        if (!txt) return NULL;
        PyObject *r = PyObject_CallOneArg(dsp_decimal_cls, txt);
        Py_DECREF(txt);
        return r;
    }
    case PAGEIN_LOGICAL_INT96: {
        if (f->nbytes != 12) break;
        int64_t nanos = dsp_le_int(p, 8, 1, &u);
        int64_t jday = dsp_le_int(p + 8, 4, 1, &u);
        /* Julian day 2440588 is 1970-01-01 */
        int64_t ns = (jday - 2440588) * 86400LL * 1000000000LL + nanos;
        return PyObject_CallFunction(dsp_dt64, "Ls", (long long)ns, "ns");
    }
    case PAGEIN_LOGICAL_TIMESTAMP:
    case PAGEIN_LOGICAL_DATE:
    case PAGEIN_LOGICAL_TIME:
    case PAGEIN_LOGICAL_DURATION: {
        if (f->type != PAGEIN_FIELD_INT && f->type != PAGEIN_FIELD_UINT) break;
        int64_t v = dsp_le_int(p, f->width <= 8 ? f->width : 8, f->type == PAGEIN_FIELD_INT, &u);
        PyObject *fn = f->logical == PAGEIN_LOGICAL_TIME || f->logical == PAGEIN_LOGICAL_DURATION ? dsp_td64 : dsp_dt64;
        return PyObject_CallFunction(fn, "Ls", (long long)v, dsp_unit(f->unit));
    }
    }
    if (f->type == PAGEIN_FIELD_UTF8) return PyUnicode_DecodeUTF8(f->data, (Py_ssize_t)f->nbytes, "surrogateescape");
    if (f->type == PAGEIN_FIELD_BINARY) return PyBytes_FromStringAndSize(f->data, (Py_ssize_t)f->nbytes);
    return dsp_number(f);
}

static PyObject *dsp_value(const pagein_item *it, const pagein_field *f, int depth);

/* An array field (ndim >= 1) inside a nested value: nested lists of numbers. */
static PyObject *dsp_array(const pagein_field *f, unsigned d, const uint8_t **p) {
    PyObject *l = PyList_New(0);
    if (!l) return NULL;
    for (uint64_t i = 0; i < f->shape[d]; i++) {
        PyObject *v;
        if (d + 1 < f->ndim) {
            v = dsp_array(f, d + 1, p);
        } else {
            pagein_field e = *f;
            e.ndim = 0;
            e.data = *p;
            e.nbytes = f->width;
            *p += f->width;
            v = e.logical ? dsp_annotated(&e) : dsp_number(&e);
        }
        if (!v || PyList_Append(l, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(v);
    }
    return l;
}

static PyObject *dsp_value(const pagein_item *it, const pagein_field *f, int depth) {
    if (f->null || f->type == PAGEIN_FIELD_NULL) Py_RETURN_NONE;
    if (depth > 64) return PyErr_Format(PyExc_ValueError, "pagein: a value nested deeper than 64 levels");
    if (f->type == PAGEIN_FIELD_LIST || f->type == PAGEIN_FIELD_STRUCT || f->type == PAGEIN_FIELD_MAP) {
        if ((uint64_t)f->child + f->nchild > it->nnodes)
            return PyErr_Format(PyExc_ValueError, "pagein: field %s has children past the item", f->name);
        const pagein_field *k = it->fields + f->child;
        if (f->type == PAGEIN_FIELD_STRUCT) {
            PyObject *d = PyDict_New();
            for (uint32_t i = 0; d && i < f->nchild; i++) {
                PyObject *v = dsp_value(it, &k[i], depth + 1);
                if (!v || PyDict_SetItemString(d, k[i].name ? k[i].name : "", v) < 0) {
                    Py_XDECREF(v);
                    Py_DECREF(d);
                    return NULL;
                }
                Py_DECREF(v);
            }
            if (d && PyDict_GET_SIZE(d) != (Py_ssize_t)f->nchild) { /* two members of one name: refused, not lost */
                for (uint32_t i = 0; i < f->nchild; i++)
                    for (uint32_t j = i + 1; j < f->nchild; j++)
                        if (strcmp(k[i].name ? k[i].name : "", k[j].name ? k[j].name : "") == 0) {
                            Py_DECREF(d);
                            return PyErr_Format(PyExc_ValueError,
                                                "pagein: struct %s: members %u and %u are both named '%s': a struct is "
                                                "a dict keyed by name, so one would be lost (rename one with the writer)",
                                                f->name ? f->name : "", i, j, k[i].name ? k[i].name : "");
                        }
            }
            return d;
        }
        PyObject *l = PyList_New(f->nchild);
        for (uint32_t i = 0; l && i < f->nchild; i++) {
            PyObject *v;
            if (f->type == PAGEIN_FIELD_MAP && k[i].type == PAGEIN_FIELD_STRUCT && !k[i].null && k[i].nchild >= 1 &&
                (uint64_t)k[i].child + k[i].nchild <= it->nnodes) {
                const pagein_field *kv = it->fields + k[i].child;
                PyObject *key = dsp_value(it, &kv[0], depth + 2);
                PyObject *val = key && k[i].nchild >= 2 ? dsp_value(it, &kv[1], depth + 2) : (Py_XINCREF(Py_None), key ? Py_None : NULL);
                v = key && val ? PyTuple_Pack(2, key, val) : NULL;
                Py_XDECREF(key);
                Py_XDECREF(val);
            } else {
                v = dsp_value(it, &k[i], depth + 1);
            }
            if (!v) {
                Py_DECREF(l);
                return NULL;
            }
            PyList_SET_ITEM(l, i, v);
        }
        return l;
    }
    if (f->ndim) {
        const uint8_t *p = f->data;
        return dsp_array(f, 0, &p);
    }
    if (f->logical) return dsp_annotated(f);
    if (f->type == PAGEIN_FIELD_UTF8) return PyUnicode_DecodeUTF8(f->data, (Py_ssize_t)f->nbytes, "surrogateescape");
    if (f->type == PAGEIN_FIELD_BINARY) return PyBytes_FromStringAndSize(f->data, (Py_ssize_t)f->nbytes);
    return dsp_number(f);
}

/* One field as (name, type, width, shape or None, bytes or None); a nested
 * value, an annotated scalar or the NULL type as (name, -1, 0, None, value)
 * with the value built above. */
static PyObject *dsp_field(const pagein_item *it, const pagein_field *f) {
    if (f->type == PAGEIN_FIELD_LIST || f->type == PAGEIN_FIELD_STRUCT || f->type == PAGEIN_FIELD_MAP ||
        f->type == PAGEIN_FIELD_NULL || (f->logical && !f->ndim && f->logical != PAGEIN_LOGICAL_JSON &&
                                         f->logical != PAGEIN_LOGICAL_ENUM)) {
        PyObject *v = dsp_value(it, f, 0);
        return v ? Py_BuildValue("(siiON)", f->name, -1, 0, Py_None, v) : NULL;
    }
    PyObject *shape = Py_None, *data = Py_None;
    Py_INCREF(Py_None);
    Py_INCREF(Py_None);
    if (f->ndim) {
        Py_DECREF(shape);
        shape = PyTuple_New(f->ndim);
        if (!shape) {
            Py_DECREF(data);
            return NULL;
        }
        for (unsigned j = 0; j < f->ndim; j++) PyTuple_SET_ITEM(shape, j, PyLong_FromUnsignedLongLong(f->shape[j]));
    }
    if (!f->null) {
        Py_DECREF(data);
        data = PyBytes_FromStringAndSize(f->nbytes ? f->data : "", (Py_ssize_t)f->nbytes);
        if (!data) {
            Py_DECREF(shape);
            return NULL;
        }
    }
    return Py_BuildValue("(siiNN)", f->name, (int)f->type, (int)f->width, shape, data);
}

/* _pagein.pipe_next(pipe, n) -> [(id, [fields...])], at most n; [] at the end */
static PyObject *py_pipe_next(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On:pipe_next", &cap, &n)) return NULL;
    struct dsp_pipe *w = dsp_pipe_of(cap);
    if (!w) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        pagein_item it;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = pagein_pipe_next(w->p, &it);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            Py_DECREF(out);
            return raise_rc(rc, NULL);
        }
        if (rc == 0) break;
        PyObject *fl = PyList_New((Py_ssize_t)it.nfields);
        if (!fl) goto fail;
        for (size_t j = 0; j < it.nfields; j++) {
            PyObject *f = dsp_field(&it, &it.fields[j]);
            if (!f) {
                Py_DECREF(fl);
                goto fail;
            }
            PyList_SET_ITEM(fl, (Py_ssize_t)j, f);
        }
        PyObject *t = Py_BuildValue("(KN)", (unsigned long long)it.id, fl);
        if (!t || PyList_Append(out, t) < 0) {
            Py_XDECREF(t);
            goto fail;
        }
        Py_DECREF(t);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *py_pipe_length(PyObject *self, PyObject *cap) {
    struct dsp_pipe *w = dsp_pipe_of(cap);
    return w ? PyLong_FromUnsignedLongLong(pagein_pipe_length(w->p)) : NULL;
}

static PyObject *py_pipe_set_epoch(PyObject *self, PyObject *args) {
    PyObject *cap;
    unsigned long long e;
    if (!PyArg_ParseTuple(args, "OK:pipe_set_epoch", &cap, &e)) return NULL;
    struct dsp_pipe *w = dsp_pipe_of(cap);
    if (!w) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_pipe_set_epoch(w->p, e);
    Py_END_ALLOW_THREADS
    if (rc < 0) return raise_rc(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *py_pipe_stats(PyObject *self, PyObject *cap) {
    struct dsp_pipe *w = dsp_pipe_of(cap);
    if (!w) return NULL;
    pagein_pipe_stats st;
    pagein_pipe_get_stats(w->p, &st);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K}", "samples", (unsigned long long)st.samples, "units",
                         (unsigned long long)st.units, "groups", (unsigned long long)st.groups, "requests",
                         (unsigned long long)st.requests, "bytes_read", (unsigned long long)st.bytes_read,
                         "memory_peak", (unsigned long long)st.memory_peak);
}

/* _pagein.pipe_state(dataset, samples_seen, **opts) -> str */
static PyObject *py_pipe_state(PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *cap;
    unsigned long long seen;
    if (!PyArg_ParseTuple(args, "OK:pipe_state", &cap, &seen)) return NULL;
    pagein_dataset *d = PyCapsule_GetPointer(cap, DATASET_CAPSULE);
    if (!d) return NULL;
    pagein_pipe_opts o;
    if (dsp_opts(kw, &o) < 0) return NULL;
    int n = pagein_pipe_state(d, &o, seen, NULL, 0);
    if (n < 0) return raise_rc(n, NULL);
    char *buf = PyMem_Malloc((size_t)n + 1);
    if (!buf) return PyErr_NoMemory();
    int rc = pagein_pipe_state(d, &o, seen, buf, (size_t)n + 1);
    PyObject *res = rc < 0 ? raise_rc(rc, NULL) : PyUnicode_FromStringAndSize(buf, n);
    PyMem_Free(buf);
    return res;
}

/* _pagein.pipe_ids(dataset, **opts) -> bytearray of this consumer's u64 ids (no reads) */
static PyObject *py_pipe_ids(PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O:pipe_ids", &cap)) return NULL;
    pagein_dataset *d = PyCapsule_GetPointer(cap, DATASET_CAPSULE);
    if (!d) return NULL;
    pagein_pipe_opts o;
    if (dsp_opts(kw, &o) < 0) return NULL;
    uint64_t n = 0;
    int rc = pagein_pipe_ids(d, &o, NULL, 0, &n);
    if (rc < 0) return raise_rc(rc, NULL);
    if (n > (uint64_t)PY_SSIZE_T_MAX / 8) return PyErr_NoMemory();
    PyObject *b = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    if (!b) return NULL;
    if (n && (rc = pagein_pipe_ids(d, &o, (uint64_t *)PyByteArray_AS_STRING(b), n, &n)) < 0) {
        Py_DECREF(b);
        return raise_rc(rc, NULL);
    }
    return b;
}

/* _pagein.pipe_order(dataset, **opts) -> bytearray of count u64 */
static PyObject *py_pipe_order(PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O:pipe_order", &cap)) return NULL;
    pagein_dataset *d = PyCapsule_GetPointer(cap, DATASET_CAPSULE);
    if (!d) return NULL;
    pagein_pipe_opts o;
    if (dsp_opts(kw, &o) < 0) return NULL;
    uint64_t n = pagein_dataset_count(d);
    if (n > (uint64_t)PY_SSIZE_T_MAX / 8) return PyErr_NoMemory();
    PyObject *b = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    if (!b) return NULL;
    int rc = pagein_pipe_order(d, &o, (uint64_t *)PyByteArray_AS_STRING(b), n);
    if (rc < 0) {
        Py_DECREF(b);
        return raise_rc(rc, NULL);
    }
    return b;
}

/* _pagein.order_groups(n, group_samples, **opts) -> bytearray of n u64:
 * pagein_order_groups (the orders' one implementation) */
static PyObject *py_order_groups(PyObject *self, PyObject *args, PyObject *kw) {
    unsigned long long n, per;
    if (!PyArg_ParseTuple(args, "KK:order_groups", &n, &per)) return NULL;
    pagein_pipe_opts o;
    if (dsp_opts(kw, &o) < 0) return NULL;
    if (n > (uint64_t)PY_SSIZE_T_MAX / 8) return PyErr_NoMemory();
    PyObject *b = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    if (!b) return NULL;
    int rc = pagein_order_groups(n, per, &o, (uint64_t *)PyByteArray_AS_STRING(b));
    if (rc < 0) {
        Py_DECREF(b);
        return raise_rc(rc, NULL);
    }
    return b;
}

/* _pagein.pipe_part(m, **opts) -> (offset, count): pagein_pipe_part */
static PyObject *py_pipe_part(PyObject *self, PyObject *args, PyObject *kw) {
    unsigned long long m;
    if (!PyArg_ParseTuple(args, "K:pipe_part", &m)) return NULL;
    pagein_pipe_opts o;
    if (dsp_opts(kw, &o) < 0) return NULL;
    uint64_t off, cnt;
    int rc = pagein_pipe_part(m, &o, &off, &cnt);
    if (rc < 0) return raise_rc(rc, NULL);
    return Py_BuildValue("KK", (unsigned long long)off, (unsigned long long)cnt);
}

/* _pagein.pipe_state_parse(state) -> dict: what a pipe state says
 * (pagein_pipe_state_parse; Python keeps no parser of the text) */
static PyObject *py_pipe_state_parse(PyObject *self, PyObject *arg) {
    const char *st = PyUnicode_AsUTF8(arg);
    if (!st) return NULL;
    pagein_pipe_state_info in;
    int rc = pagein_pipe_state_parse(st, &in);
    if (rc < 0) return raise_rc(rc, NULL);
    return Py_BuildValue("{sssKsKsKsKsIsK}", "order", pagein_order_name(in.order), "seed",
                         (unsigned long long)in.seed, "epoch", (unsigned long long)in.epoch, "samples",
                         (unsigned long long)in.samples, "groups", (unsigned long long)in.groups, "window",
                         (unsigned)in.window, "remaining", (unsigned long long)in.remaining);
}

static PyObject *str_tuple(const char *const *v) {
    Py_ssize_t n = 0;
    while (v && v[n]) n++;
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t && i < n; i++) {
        PyObject *x = PyUnicode_FromString(v[i]);
        if (!x) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* _pagein.dataset_formats() -> [dict]: the dataset-format table's rows
 * (pagein_dataset_format_get): name, aliases, suffixes, index_names,
 * content, companion */
static PyObject *py_dataset_formats(PyObject *self, PyObject *noargs) {
    size_t n = pagein_dataset_format_count();
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out && i < n; i++) {
        pagein_dataset_format_info in;
        int rc = pagein_dataset_format_get(i, &in);
        if (rc < 0) {
            Py_DECREF(out);
            return raise_rc(rc, NULL);
        }
        PyObject *row = Py_BuildValue("{sssNsNsNsOsO}", "name", in.name, "aliases", str_tuple(in.aliases), "suffixes",
                                      str_tuple(in.suffixes), "index_names", str_tuple(in.index_names), "content",
                                      in.content ? Py_True : Py_False, "companion",
                                      in.companion ? Py_True : Py_False);
        if (!row || PyList_Append(out, row) < 0) Py_CLEAR(out);
        Py_XDECREF(row);
    }
    return out;
}

/* _pagein.dataset_detect_name(name) -> row name or None, from the name
 * alone (companion files beside a local name looked for) */
static PyObject *py_dataset_detect_name(PyObject *self, PyObject *arg) {
    const char *nm = PyUnicode_AsUTF8(arg);
    if (!nm) return NULL;
    char row[64];
    int rc = pagein_dataset_detect_name(nm, row, sizeof row);
    if (rc < 0) return raise_rc(rc, arg);
    if (rc == 0) Py_RETURN_NONE;
    return PyUnicode_FromString(row);
}

PyMethodDef pyp_data_functions[] = {
    {"pipe_state_parse", py_pipe_state_parse, METH_O, "pipe_state_parse(state) -> dict: what a pipe state says"},
    {"dataset_formats", py_dataset_formats, METH_NOARGS, "dataset_formats() -> [dict]: the dataset-format table"},
    {"dataset_detect_name", py_dataset_detect_name, METH_O,
     "dataset_detect_name(name) -> the row a name says (companions, then names), or None"},
    {"dataset_open_records", py_dataset_open_records, METH_VARARGS, "dataset_open_records(paths, record_size) -> dataset"},
    {"dataset_open_megatron", py_dataset_open_megatron, METH_VARARGS, "dataset_open_megatron(prefix) -> dataset"},
    {"dataset_info", py_dataset_info, METH_O, "dataset_info(dataset) -> (count, [(path, size)])"},
    {"dataset_read", PYFN(py_dataset_read), METH_VARARGS | METH_KEYWORDS,
     "dataset_read(dataset, ids, queue_depth=0, max_gap=0, no_merge=False) -> (bytearray, offsets, stats)"},
    {"read_ranges", PYFN(py_read_ranges), METH_VARARGS | METH_KEYWORDS,
     "read_ranges(fds, files, offsets, lengths, out, dst, queue_depth=0, max_gap=0, no_merge=False) -> stats"},
    {"permutation", py_permutation, METH_VARARGS, "permutation(n, seed) -> bytearray of n u64"},
    {"epoch_seed", py_epoch_seed, METH_VARARGS, "epoch_seed(seed, epoch) -> int"},
    {"shuffle_quality", py_shuffle_quality, METH_O, "shuffle_quality(ids) -> float"},
    {"ds_open", PYFN(py_ds_open), METH_VARARGS | METH_KEYWORDS,
     "ds_open(spec, format=None, record_size=0, columns=None, group_bytes=0, cache_dir=None) -> dataset"},
    {"ds_shards", py_ds_shards, METH_O, "ds_shards(dataset) -> ([(path, format, size)], samples, groups)"},
    {"pipe_open", PYFN(py_pipe_open), METH_VARARGS | METH_KEYWORDS, "pipe_open(dataset, **opts) -> pipe"},
    {"dataset_detect", py_dataset_detect, METH_O, "dataset_detect(path) -> (format name or None, 2 content / 1 name)"},
    {"pipe_next", py_pipe_next, METH_VARARGS, "pipe_next(pipe, n) -> [(id, [(name, type, width, shape, bytes)])]"},
    {"pipe_length", py_pipe_length, METH_O, "pipe_length(pipe) -> samples this consumer yields this epoch"},
    {"pipe_set_epoch", py_pipe_set_epoch, METH_VARARGS, "pipe_set_epoch(pipe, epoch)"},
    {"pipe_stats", py_pipe_stats, METH_O, "pipe_stats(pipe) -> dict"},
    {"pipe_state", PYFN(py_pipe_state), METH_VARARGS | METH_KEYWORDS,
     "pipe_state(dataset, samples_seen, **opts) -> resume state (str)"},
    {"pipe_ids", PYFN(py_pipe_ids), METH_VARARGS | METH_KEYWORDS,
     "pipe_ids(dataset, **opts) -> bytearray: this rank and worker's ids (u64) in order, without reading"},
    {"order_groups", PYFN(py_order_groups), METH_VARARGS | METH_KEYWORDS,
     "order_groups(n, group_samples, **opts) -> bytearray: the epoch sequence over groups of group_samples ids"},
    {"pipe_part", PYFN(py_pipe_part), METH_VARARGS | METH_KEYWORDS,
     "pipe_part(m, **opts) -> (offset, count): this rank and worker's part of m remaining positions"},
    {"pipe_order", PYFN(py_pipe_order), METH_VARARGS | METH_KEYWORDS,
     "pipe_order(dataset, **opts) -> bytearray: the epoch's whole sequence of ids (u64)"},
    {NULL, NULL, 0, NULL},
};
