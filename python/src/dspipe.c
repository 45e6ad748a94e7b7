/* dspipe.c - the binding of the dataset-format table and the one pipeline
 * (pagein_dataset_open, pagein_pipe_*), included by _pagein.c after its
 * helpers (raise_rc, fs_bytes). Samples are copied into Python bytes as
 * they are handed out, so no view a caller holds is ever overwritten; the
 * GIL is released while the pipe waits for its loader thread. */

#define DSP_DATASET_CAPSULE "pagein.dataset" /* the same capsule as dataset_open_records */
#define DSP_PIPE_CAPSULE "pagein.pipe"

static void dsp_dataset_free(PyObject *cap) { pagein_dataset_close(PyCapsule_GetPointer(cap, DSP_DATASET_CAPSULE)); }

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
    res = PyCapsule_New(d, DSP_DATASET_CAPSULE, dsp_dataset_free);
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
    pagein_dataset *d = PyCapsule_GetPointer(cap, DSP_DATASET_CAPSULE);
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
    pagein_dataset *d = PyCapsule_GetPointer(cap, DSP_DATASET_CAPSULE);
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

/* One field as (name, type, width, shape or None, bytes or None). */
static PyObject *dsp_field(const pagein_field *f) {
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
            PyObject *f = dsp_field(&it.fields[j]);
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
    pagein_dataset *d = PyCapsule_GetPointer(cap, DSP_DATASET_CAPSULE);
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

/* _pagein.pipe_order(dataset, **opts) -> bytearray of count u64 */
static PyObject *py_pipe_order(PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O:pipe_order", &cap)) return NULL;
    pagein_dataset *d = PyCapsule_GetPointer(cap, DSP_DATASET_CAPSULE);
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

#define PAGEIN_DSPIPE_METHODS                                                                                      \
    {"ds_open", PYFN(py_ds_open), METH_VARARGS | METH_KEYWORDS,                                                    \
     "ds_open(spec, format=None, record_size=0, columns=None, group_bytes=0, cache_dir=None) -> dataset"},         \
    {"ds_shards", py_ds_shards, METH_O, "ds_shards(dataset) -> ([(path, format, size)], samples, groups)"},       \
    {"pipe_open", PYFN(py_pipe_open), METH_VARARGS | METH_KEYWORDS, "pipe_open(dataset, **opts) -> pipe"},         \
    {"pipe_next", py_pipe_next, METH_VARARGS, "pipe_next(pipe, n) -> [(id, [(name, type, width, shape, bytes)])]"}, \
    {"pipe_length", py_pipe_length, METH_O, "pipe_length(pipe) -> samples this consumer yields this epoch"},      \
    {"pipe_set_epoch", py_pipe_set_epoch, METH_VARARGS, "pipe_set_epoch(pipe, epoch)"},                            \
    {"pipe_stats", py_pipe_stats, METH_O, "pipe_stats(pipe) -> dict"},                                             \
    {"pipe_state", PYFN(py_pipe_state), METH_VARARGS | METH_KEYWORDS,                                              \
     "pipe_state(dataset, samples_seen, **opts) -> resume state (str)"},                                           \
    {"pipe_order", PYFN(py_pipe_order), METH_VARARGS | METH_KEYWORDS,                                              \
     "pipe_order(dataset, **opts) -> bytearray: the epoch's whole sequence of ids (u64)"},
