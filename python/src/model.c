/*
 * model.c - files and models (Source), views over tensor bytes (View),
 * metadata, and the model-only methods (layers, waits, loads). The
 * page-cache methods of a Source are in cache.c; see module.c for the
 * lifetime rules.
 */
#include "pagein_py.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Source: one open file or model (struct in pagein_py.h)                   */
/* ------------------------------------------------------------------------ */

static size_t src_count(const Source *s) {
    return s->f ? pagein_tensor_count(s->f) : pagein_model_tensor_count(s->m);
}

static const pagein_tensor *src_at(const Source *s, size_t i) {
    return s->f ? pagein_tensor_at(s->f, i) : pagein_model_tensor_at(s->m, i);
}

static const pagein_tensor *src_by_layer(const Source *s, size_t i) {
    return s->f ? pagein_tensor_by_layer(s->f, i) : pagein_model_tensor_by_layer(s->m, i);
}

/* Looks a tensor up by Python str name; sets NotFoundError if absent. */
const pagein_tensor *src_find(const Source *s, PyObject *name) {
    Py_ssize_t len;
    const char *u = PyUnicode_AsUTF8AndSize(name, &len);
    if (!u) return NULL;
    const pagein_tensor *t;
    if (s->f) {
        t = pagein_tensor_find(s->f, u, (size_t)len);
    } else {
        t = (strlen(u) == (size_t)len) ? pagein_model_tensor_get(s->m, u) : NULL;
    }
    if (!t) PyErr_Format(NotFoundError, "no tensor named '%U'", name);
    return t;
}

static PyObject *shape_tuple(const pagein_tensor *t) {
    PyObject *shape = PyTuple_New(t->ndim);
    if (!shape) return NULL;
    for (uint32_t d = 0; d < t->ndim; d++) {
        PyObject *v = PyLong_FromUnsignedLongLong(t->shape[d]);
        if (!v) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, d, v);
    }
    return shape;
}

static const char *dtype_name(pagein_dtype d) {
    const pagein_dtype_info *di = pagein_dtype_get(d);
    return di ? di->name : "INVALID";
}

/* (name, dtype, shape, offset, nbytes, layer, file, flags, index) */
static PyObject *tensor_tuple(const pagein_tensor *t) {
    PyObject *name = str_from(t->name, t->name_len);
    PyObject *shape = shape_tuple(t);
    if (!name || !shape) {
        Py_XDECREF(name);
        Py_XDECREF(shape);
        return NULL;
    }
    return Py_BuildValue("(NsNKKiIII)", name, dtype_name(t->dtype), shape,
                         (unsigned long long)t->offset, (unsigned long long)t->nbytes, (int)t->layer,
                         (unsigned)t->file, (unsigned)t->flags, (unsigned)t->index);
}

static void Source_dealloc(Source *s) {
    if (s->weakreflist) PyObject_ClearWeakRefs((PyObject *)s);
    /* Closing unmaps; nothing can point into the mapping any more because
     * every View holds a reference to us. */
    pagein_close(s->f);
    pagein_model_close(s->m);
    if (s->has_mem) PyBuffer_Release(&s->mem);
    Py_XDECREF(s->path);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static Source *source_new(PyObject *path) {
    Source *s = PyObject_New(Source, &SourceType);
    if (!s) return NULL;
    s->f = NULL;
    s->m = NULL;
    s->weakreflist = NULL;
    s->writable = 0;
    s->has_mem = 0;
    memset(&s->mem, 0, sizeof s->mem);
    Py_INCREF(path);
    s->path = path;
    return s;
}

/* Wraps an open file or model (exactly one of f, m) in a Source; closes it
 * if the Source cannot be made. */
static PyObject *source_wrap(PyObject *path, pagein_file *f, pagein_model *m, int writable) {
    Source *s = source_new(path);
    if (!s) {
        pagein_close(f);
        pagein_model_close(m);
        return NULL;
    }
    s->f = f;
    s->m = m;
    s->writable = writable;
    return (PyObject *)s;
}

/* _pagein.open_file(path: str, lenient: bool = False) -> Source */
static PyObject *py_open_file(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "lenient", "writable", NULL};
    PyObject *path;
    int lenient = 0, writable = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|pp:open_file", kwlist, &path, &lenient, &writable)) return NULL;
    PyObject *pb = fs_bytes(path);
    if (!pb) return NULL;
    const char *p = PyBytes_AS_STRING(pb);
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    if (lenient) o.flags |= PAGEIN_OPEN_LENIENT;
    if (writable) o.flags |= PAGEIN_OPEN_PRIVATE;
    pagein_file *f = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_open(&f, p, &o);
    Py_END_ALLOW_THREADS
    Py_DECREF(pb);
    if (rc < 0) return raise_rc(rc, path);
    return source_wrap(path, f, NULL, writable);
}

/* _pagein.open_memory(data, name="<memory>", writable=False) -> Source over
 * a file image in memory (pagein_open_memory). data is any buffer (bytes,
 * bytearray, ...); the Source holds it until the last View goes. writable
 * needs a writable buffer and hands out writable Views (the caller's
 * private copy, e.g. a bytearray made for this). */
static PyObject *py_open_memory(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"data", "name", "writable", NULL};
    PyObject *data, *name = NULL;
    int writable = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Up:open_memory", kwlist, &data, &name, &writable)) return NULL;
    PyObject *nm = name ? (Py_INCREF(name), name) : PyUnicode_FromString("<memory>");
    if (!nm) return NULL;
    Source *s = source_new(nm);
    Py_DECREF(nm);
    if (!s) return NULL;
    if (PyObject_GetBuffer(data, &s->mem, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    s->has_mem = 1;
    PyObject *nb = fs_bytes(s->path);
    if (!nb) {
        Py_DECREF(s);
        return NULL;
    }
    pagein_open_opts o = PAGEIN_OPEN_OPTS_INIT;
    pagein_file *f = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_open_memory(&f, s->mem.buf, (size_t)s->mem.len, PyBytes_AS_STRING(nb), &o);
    Py_END_ALLOW_THREADS
    Py_DECREF(nb);
    if (rc < 0) {
        raise_rc(rc, NULL);
        Py_DECREF(s);
        return NULL;
    }
    s->f = f;
    s->writable = writable;
    return (PyObject *)s;
}

/* _pagein.open_model(path, strategy="auto", threads=0, prefetch=0,
 *                    budget=0, hints=0, lenient=False) -> Source */
static PyObject *py_open_model(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "strategy", "threads", "prefetch", "budget", "hints", "lenient", "writable", NULL};
    PyObject *path;
    const char *strategy = "auto";
    /* Bounds: threads up to PY_MAX_THREADS;
     * prefetch layers any unsigned 32-bit count (the C pager clamps to the
     * layer count: every value the library takes works); hints the
     * uint32 flag word; budget any byte count. */
    int_arg threads = UINT_ARG("threads", PY_MAX_THREADS), prefetch = UINT_ARG("prefetch", UINT32_MAX);
    int_arg budget = UINT_ARG("budget", UINT64_MAX), hints = UINT_ARG("hints", UINT32_MAX);
    int lenient = 0, writable = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|sO&O&O&O&pp:open_model", kwlist, &path, &strategy, int_arg_conv,
                                     &threads, int_arg_conv, &prefetch, int_arg_conv, &budget, int_arg_conv, &hints,
                                     &lenient, &writable))
        return NULL;
    int st = pagein_strategy_from_name(strategy);
    if (st < 0) {
        PyErr_Format(FormatError, "unknown strategy '%s' (auto, lazy, populate, prefetch, read)", strategy);
        return NULL;
    }
    PyObject *pb = fs_bytes(path);
    if (!pb) return NULL;
    const char *p = PyBytes_AS_STRING(pb);
    pagein_model_opts o = PAGEIN_MODEL_OPTS_INIT;
    o.strategy = (pagein_strategy)st;
    o.threads = (unsigned)threads.u;
    o.prefetch_ahead = (unsigned)prefetch.u;
    o.budget_bytes = budget.u;
    o.hints = (uint32_t)hints.u;
    if (lenient) o.open_flags |= PAGEIN_OPEN_LENIENT;
    if (writable) o.open_flags |= PAGEIN_OPEN_PRIVATE;
    pagein_model *m = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_model_open(&m, p, &o);
    Py_END_ALLOW_THREADS
    Py_DECREF(pb);
    if (rc < 0) return raise_rc(rc, path);
    return source_wrap(path, NULL, m, writable);
}

/* tensors(order="file") -> list of tensor tuples; order "layer" gives layer order. */
static PyObject *Source_tensors(Source *s, PyObject *args) {
    const char *order = "file";
    if (!PyArg_ParseTuple(args, "|s:tensors", &order)) return NULL;
    int by_layer = strcmp(order, "layer") == 0;
    if (!by_layer && strcmp(order, "file") != 0) return raise_msg(PyExc_ValueError, "order must be 'file' or 'layer'");
    size_t n = src_count(s);
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (size_t i = 0; i < n; i++) {
        const pagein_tensor *t = by_layer ? src_by_layer(s, i) : src_at(s, i);
        PyObject *tup = t ? tensor_tuple(t) : NULL;
        if (!tup) {
            Py_DECREF(list);
            if (!PyErr_Occurred()) raise_msg(FormatError, "tensor table changed");
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, tup);
    }
    return list;
}

static PyObject *Source_tensor(Source *s, PyObject *name) {
    if (!PyUnicode_Check(name)) return raise_msg(PyExc_TypeError, "tensor name must be str");
    const pagein_tensor *t = src_find(s, name);
    return t ? tensor_tuple(t) : NULL;
}

static PyObject *Source_count(Source *s, PyObject *unused) { return PyLong_FromSize_t(src_count(s)); }

/* ---- View: a read-only buffer over one tensor's bytes -------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *owner; /* the Source keeping the bytes alive */
    const void *ptr;
    Py_ssize_t len;
    Py_ssize_t exports;
    void *own;       /* a private copy read through the source (header-only remote model), or NULL */
} View;

static PyTypeObject ViewType;

static int View_getbuffer(View *v, Py_buffer *b, int flags) {
    static char empty;
    /* Writable only over a copy-on-write (PAGEIN_OPEN_PRIVATE) source: a
     * write then lands in a private page of this process, never the file. */
    int ro = !(v->owner && PyObject_TypeCheck(v->owner, &SourceType) && ((Source *)v->owner)->writable) || !v->ptr;
    int rc = PyBuffer_FillInfo(b, (PyObject *)v, (void *)(v->ptr ? v->ptr : &empty), v->len, ro, flags);
    if (rc == 0) v->exports++;
    return rc;
}

static void View_releasebuffer(View *v, Py_buffer *b) { v->exports--; }

static PyBufferProcs View_as_buffer = {
    (getbufferproc)View_getbuffer,
    (releasebufferproc)View_releasebuffer,
};

static void View_dealloc(View *v) {
    PyMem_RawFree(v->own);
    Py_XDECREF(v->owner);
    Py_TYPE(v)->tp_free((PyObject *)v);
}

static Py_ssize_t View_length(View *v) { return v->len; }

static PySequenceMethods View_as_sequence = {.sq_length = (lenfunc)View_length};

static PyObject *View_get_owner(View *v, void *c) {
    Py_INCREF(v->owner);
    return v->owner;
}

static PyObject *View_get_address(View *v, void *c) { return PyLong_FromVoidPtr((void *)v->ptr); }

/* willneed(offset, length): asks the kernel to read [offset, offset+length)
 * of these bytes now (madvise MADV_WILLNEED on the enclosing pages). Used
 * before copying a slice so that exactly the needed pages are read in large
 * requests, instead of page faults each pulling in the mapping's whole
 * read-around window (read_ahead_kb, often megabytes). Advice only: errors
 * are ignored (anonymous memory, for instance, has nothing to read). */
static PyObject *View_willneed(View *v, PyObject *args) {
    Py_ssize_t off, len;
    if (!PyArg_ParseTuple(args, "nn:willneed", &off, &len)) return NULL;
    if (off < 0 || len < 0 || off > v->len || len > v->len - off)
        return raise_msg(PyExc_ValueError, "range outside the tensor");
    if (len == 0 || !v->ptr) Py_RETURN_NONE;
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)v->ptr + (uintptr_t)off, hi = lo + (uintptr_t)len;
    lo &= ~(uintptr_t)(ps - 1);
    hi = (hi + (uintptr_t)ps - 1) & ~(uintptr_t)(ps - 1);
    Py_BEGIN_ALLOW_THREADS
    (void)madvise((void *)lo, hi - lo, MADV_WILLNEED);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef View_methods[] = {
    {"willneed", PYFN(View_willneed), METH_VARARGS, "willneed(offset, length): read these bytes in now"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef View_getset[] = {
    {"owner", (getter)View_get_owner, NULL, "the file or model keeping these bytes alive", NULL},
    {"address", (getter)View_get_address, NULL, "address of the first byte", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ViewType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pagein._pagein.View",
    .tp_basicsize = sizeof(View),
    .tp_dealloc = (destructor)View_dealloc,
    .tp_as_buffer = &View_as_buffer,
    .tp_as_sequence = &View_as_sequence,
    .tp_getset = View_getset,
    .tp_methods = View_methods,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only buffer over one tensor's bytes; keeps its file or model open.",
};

/* A model's tensor bytes, readable (pagein_model_tensor_data: a model
 * prefetched from a remote source reads them first if its pager has not,
 * instead of handing out zeros). */
static int tensor_bytes(Source *s, const pagein_tensor *t, const void **ptr) {
    *ptr = t->data;
    if (!s->m || !t->nbytes) return 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_model_tensor_data(s->m, t, ptr);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_rc(rc, NULL);
        return -1;
    }
    return 0;
}

/* A tensor without a data pointer in a file that is not mapped (a model
 * opened lazy over a URL: headers only) is read now through the file's
 * source (pagein_tensor_copy) into memory the View owns: one copy per
 * View, as its bytes were never fetched. Stored bytes only: strided and
 * byte-swapped records (which pagein_tensor_copy gathers or swaps into
 * another layout) are refused. Returns the copy or NULL with an exception. */
static void *read_unmapped(Source *s, const pagein_tensor *t) {
    const pagein_file *f = s->f ? s->f : pagein_model_file(s->m, t->file);
    pagein_file_info fi;
    if (f) pagein_file_get_info(f, &fi);
    if (!f || fi.base || !fi.file_size) {
        PyErr_Format(FormatError, "tensor '%s' has no data in memory", t->name);
        return NULL;
    }
    if (t->flags & (PAGEIN_TENSOR_NONCONTIGUOUS | PAGEIN_TENSOR_SWAPPED)) {
        PyErr_Format(FormatError,
                     "tensor '%s' of %s: strided or byte-swapped, and the model was opened header-only (lazy over "
                     "a remote source): open it with strategy 'read' or 'auto'",
                     t->name, fi.path);
        return NULL;
    }
    void *buf = PyMem_RawMalloc((size_t)t->nbytes);
    if (!buf) {
        PyErr_NoMemory();
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_tensor_copy(f, t, 0, buf, (size_t)t->nbytes);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyMem_RawFree(buf);
        raise_rc(rc, NULL);
        return NULL;
    }
    return buf;
}

/* t's bytes, readable: in the mapping or buffer (tensor_bytes), or for a
 * header-only model read now into *own (read_unmapped; the caller frees
 * it with PyMem_RawFree). 0, or -1 with an exception. */
static int readable_bytes(Source *s, const pagein_tensor *t, const void **ptr, void **own) {
    *own = NULL;
    *ptr = t->data;
    if (t->nbytes && !t->data) {
        if (!(*own = read_unmapped(s, t))) return -1;
        *ptr = *own;
        return 0;
    }
    return tensor_bytes(s, t, ptr);
}

static PyObject *view_new(Source *s, const pagein_tensor *t) {
    if (t->nbytes > (uint64_t)PY_SSIZE_T_MAX) return raise_msg(FormatError, "tensor larger than the address space");
    void *own = NULL; /* header-only remote model (lazy): read now into the View's own copy */
    const void *ptr;
    if (readable_bytes(s, t, &ptr, &own) < 0) return NULL;
    View *v = PyObject_New(View, &ViewType);
    if (!v) {
        PyMem_RawFree(own);
        return NULL;
    }
    Py_INCREF(s);
    v->owner = (PyObject *)s;
    v->ptr = ptr;
    v->len = (Py_ssize_t)t->nbytes;
    v->exports = 0;
    v->own = own;
    return (PyObject *)v;
}

/* A read-only View of len bytes at ptr that owner keeps alive (dcp.c). */
PyObject *pyp_view_over(PyObject *owner, const void *ptr, Py_ssize_t len) {
    View *v = PyObject_New(View, &ViewType);
    if (!v) return NULL;
    Py_INCREF(owner);
    v->owner = owner, v->ptr = ptr, v->len = len, v->exports = 0, v->own = NULL;
    return (PyObject *)v;
}

/* buffer(name_or_index) -> View */
static PyObject *Source_buffer(Source *s, PyObject *key) {
    const pagein_tensor *t;
    if (PyLong_Check(key)) {
        Py_ssize_t i = PyLong_AsSsize_t(key);
        if (i == -1 && PyErr_Occurred()) return NULL;
        t = i >= 0 ? src_at(s, (size_t)i) : NULL;
        if (!t) return raise_msg(PyExc_IndexError, "tensor index out of range");
    } else if (PyUnicode_Check(key)) {
        t = src_find(s, key);
        if (!t) return NULL;
    } else {
        return raise_msg(PyExc_TypeError, "tensor name must be str");
    }
    return view_new(s, t);
}

/* read_slice(name, start, count) -> bytearray: the box's elements,
 * row-major (pagein_model_read_slice: an assembled tensor reads only the
 * pieces the box overlaps). Models only. */
static PyObject *Source_read_slice(Source *s, PyObject *args) {
    PyObject *name, *st, *ct;
    if (!PyArg_ParseTuple(args, "UOO:read_slice", &name, &st, &ct)) return NULL;
    if (!s->m) return raise_msg(PyExc_TypeError, "read_slice: a model's tensors only");
    const pagein_tensor *t = src_find(s, name);
    if (!t) return NULL;
    uint64_t start[64], count[64];
    Py_ssize_t n = PySequence_Size(st);
    if (n < 0 || n != (Py_ssize_t)t->ndim || n > 64 || PySequence_Size(ct) != n)
        return raise_msg(PyExc_ValueError, "read_slice: start and count need one value per dimension");
    uint64_t ne = 1;
    int outside = 0;
    for (Py_ssize_t d = 0; d < n; d++) {
        PyObject *a = PySequence_GetItem(st, d), *b = a ? PySequence_GetItem(ct, d) : NULL;
        start[d] = a ? PyLong_AsUnsignedLongLong(a) : 0;
        count[d] = b ? PyLong_AsUnsignedLongLong(b) : 0;
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (PyErr_Occurred()) return NULL;
        if (start[d] > t->shape[d] || count[d] > t->shape[d] - start[d]) outside = 1;
        if (!outside) ne *= count[d]; /* within the shape: no overflow past the tensor's element count */
    }
    if (outside) {
        /* the box against the shape before any allocation: the library's
         * own check and error (it reads nothing into a NULL buffer) */
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = pagein_model_read_slice(s->m, t, start, count, NULL, 0);
        Py_END_ALLOW_THREADS
        return rc < 0 ? raise_rc(rc, NULL) : raise_msg(PyExc_ValueError, "read_slice: the box is outside the tensor");
    }
    const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
    uint64_t es = di && di->bits % 8 == 0 ? di->bits / 8 : 0;
    if (!es || ne > (uint64_t)PY_SSIZE_T_MAX / es) return raise_msg(PyExc_ValueError, "read_slice: no element box");
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(ne * es));
    if (!out) return NULL;
    int rc;
    char *dst = PyByteArray_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_model_read_slice(s->m, t, n ? start : NULL, n ? count : NULL, dst, (size_t)(ne * es));
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        Py_DECREF(out);
        return raise_rc(rc, NULL);
    }
    return out;
}

/* ---- metadata ------------------------------------------------------------ */

/* Metadata values come from the library's accessors (pagein_meta_at and
 * pagein_meta_array_*), which know every GGUF version's length widths and
 * byte order; this file decodes nothing itself. */

#define META_MAX_DEPTH 16 /* nested arrays; the parser's own limit is lower */

static PyObject *meta_array(const pagein_file *f, const pagein_meta *m, int depth);

/* Element i of array m as a Python value of its native type. */
static PyObject *meta_array_elem(const pagein_file *f, const pagein_meta *m, uint64_t i, int depth) {
    int rc;
    switch (m->elem_type) {
    case PAGEIN_META_U8: case PAGEIN_META_U16: case PAGEIN_META_U32: case PAGEIN_META_U64:
    case PAGEIN_META_BOOL: {
        uint64_t u;
        if ((rc = pagein_meta_array_u64(f, m, i, &u)) < 0) break;
        return m->elem_type == PAGEIN_META_BOOL ? PyBool_FromLong(u != 0) : PyLong_FromUnsignedLongLong(u);
    }
    case PAGEIN_META_I8: case PAGEIN_META_I16: case PAGEIN_META_I32: case PAGEIN_META_I64: {
        int64_t v;
        if ((rc = pagein_meta_array_i64(f, m, i, &v)) < 0) break;
        return PyLong_FromLongLong(v);
    }
    case PAGEIN_META_F32: case PAGEIN_META_F64: {
        double d;
        if ((rc = pagein_meta_array_f64(f, m, i, &d)) < 0) break;
        return PyFloat_FromDouble(d);
    }
    case PAGEIN_META_STRING: {
        const char *p = NULL;
        size_t n = 0;
        if ((rc = pagein_meta_array_str(f, m, i, &p, &n)) < 0) break;
        return str_from(p ? p : "", n);
    }
    case PAGEIN_META_ARRAY: {
        pagein_meta inner;
        if ((rc = pagein_meta_array_at(f, m, i, &inner)) < 0) break;
        return meta_array(f, &inner, depth + 1);
    }
    default:
        return raise_msg(FormatError, "metadata array of an unknown element type");
    }
    return raise_rc(rc, NULL);
}

static PyObject *meta_array(const pagein_file *f, const pagein_meta *m, int depth) {
    if (depth > META_MAX_DEPTH) return raise_msg(FormatError, "metadata arrays nested too deeply");
    if (m->count > (uint64_t)PY_SSIZE_T_MAX) return raise_msg(FormatError, "metadata array too long");
    PyObject *list = PyList_New((Py_ssize_t)m->count);
    if (!list) return NULL;
    for (uint64_t i = 0; i < m->count; i++) {
        PyObject *v = meta_array_elem(f, m, i, depth);
        if (!v) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

/* One entry's value as a Python value of its native type. */
static PyObject *meta_value(const pagein_file *f, const pagein_meta *e) {
    switch (e->type) {
    case PAGEIN_META_STRING: return str_from(e->str ? e->str : "", (size_t)e->str_len);
    case PAGEIN_META_ARRAY: return meta_array(f, e, 0);
    case PAGEIN_META_F32: case PAGEIN_META_F64: return PyFloat_FromDouble(e->v.f);
    case PAGEIN_META_BOOL: return PyBool_FromLong(e->v.b);
    case PAGEIN_META_I8: case PAGEIN_META_I16: case PAGEIN_META_I32: case PAGEIN_META_I64:
        return PyLong_FromLongLong(e->v.i);
    case PAGEIN_META_U8: case PAGEIN_META_U16: case PAGEIN_META_U32: case PAGEIN_META_U64:
        return PyLong_FromUnsignedLongLong(e->v.u);
    default: return raise_msg(FormatError, "metadata value of an unknown type");
    }
}

/* Appends (key, value) pairs of one file's metadata to list. */
static int file_meta(const pagein_file *f, PyObject *list) {
    size_t n = pagein_meta_count(f);
    for (size_t i = 0; i < n; i++) {
        const pagein_meta *e = pagein_meta_at(f, i);
        if (!e) continue;
        PyObject *k = str_from(e->key, e->key_len);
        PyObject *v = k ? meta_value(f, e) : NULL;
        PyObject *kv = v ? PyTuple_Pack(2, k, v) : NULL;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (!kv || PyList_Append(list, kv) < 0) {
            Py_XDECREF(kv);
            return -1;
        }
        Py_DECREF(kv);
    }
    return 0;
}

/* metadata() -> list of (key, value) in file order (every file of a model,
 * in shard order; keys may repeat across shards). */
static PyObject *Source_metadata(Source *s, PyObject *unused) {
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    if (s->f) {
        if (file_meta(s->f, list) < 0) goto fail;
    } else {
        size_t nf = pagein_model_file_count(s->m);
        for (size_t i = 0; i < nf; i++)
            if (file_meta(pagein_model_file(s->m, i), list) < 0) goto fail;
    }
    return list;
fail:
    Py_DECREF(list);
    return NULL;
}

static PyObject *file_info_dict(const pagein_file *f) {
    pagein_file_info i;
    pagein_file_get_info(f, &i);
    return Py_BuildValue("{s:s,s:s,s:K,s:K,s:K,s:I,s:I,s:n,s:n,s:O}", "path", i.path ? i.path : "", "format",
                         pagein_format_name(i.format), "file_size", (unsigned long long)i.file_size, "data_start",
                         (unsigned long long)i.data_start, "header_len", (unsigned long long)i.header_len,
                         "version", (unsigned)i.version, "alignment", (unsigned)i.alignment, "n_tensors",
                         (Py_ssize_t)i.n_tensors, "n_meta", (Py_ssize_t)i.n_meta, "big_endian",
                         i.big_endian ? Py_True : Py_False);
}

/* files() -> list of file info dicts (one for a single file). */
static PyObject *Source_files(Source *s, PyObject *unused) {
    size_t nf = s->f ? 1 : pagein_model_file_count(s->m);
    PyObject *list = PyList_New((Py_ssize_t)nf);
    if (!list) return NULL;
    for (size_t i = 0; i < nf; i++) {
        PyObject *d = file_info_dict(s->f ? s->f : pagein_model_file(s->m, i));
        if (!d) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    return list;
}

/* strides(name) -> tuple of element strides for a tensor of a PyTorch
 * checkpoint (pagein_torch_tensor_get_info), or None for other formats. */
static PyObject *Source_strides(Source *s, PyObject *name) {
    if (!PyUnicode_Check(name)) return raise_msg(PyExc_TypeError, "tensor name must be str");
    const pagein_tensor *t = src_find(s, name);
    if (!t) return NULL;
    const pagein_file *f = s->f ? s->f : pagein_model_file(s->m, t->file);
    pagein_file_info info;
    pagein_file_get_info(f, &info);
    if (info.format != PAGEIN_FORMAT_TORCH) Py_RETURN_NONE;
    pagein_torch_tensor_info ti;
    int rc = pagein_torch_tensor_get_info(f, t, &ti);
    if (rc < 0) return raise_rc(rc, NULL);
    PyObject *tup = PyTuple_New(t->ndim);
    if (!tup) return NULL;
    for (uint32_t d = 0; d < t->ndim; d++) {
        PyObject *v = PyLong_FromLongLong(ti.strides ? ti.strides[d] : 0);
        if (!v) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, d, v);
    }
    return tup;
}

/* dequantize(name, out) -> bytearray: the tensor's values converted to out
 * ("F32", "F16" or "BF16"), nelements * out size bytes in native byte
 * order (pagein_tensor_dequantize: ggml's reference dequantization for the
 * block types, exact conversion or round-to-nearest-even for float types).
 * Builds without the library function raise pagein.Error. */
static PyObject *Source_dequantize(Source *s, PyObject *args) {
    PyObject *name;
    const char *outname;
    if (!PyArg_ParseTuple(args, "Us:dequantize", &name, &outname)) return NULL;
    const pagein_tensor *t = src_find(s, name);
    if (!t) return NULL;
    pagein_dtype out = pagein_dtype_from_name(outname, strlen(outname));
    if (out != PAGEIN_DTYPE_F32 && out != PAGEIN_DTYPE_F16 && out != PAGEIN_DTYPE_BF16)
        return raise_msg(PyExc_ValueError, "dequantize: out must be 'F32', 'F16' or 'BF16'");
    uint64_t ne = 1;
    for (uint32_t d = 0; d < t->ndim; d++)
        if (__builtin_mul_overflow(ne, t->shape[d], &ne)) ne = UINT64_MAX;
    uint64_t size = ne == UINT64_MAX ? UINT64_MAX : ne * (out == PAGEIN_DTYPE_F32 ? 4u : 2u);
    if (ne > UINT64_MAX / 4 || size > (uint64_t)PY_SSIZE_T_MAX) {
        PyErr_Format(FormatError, "tensor '%U': %llu elements do not fit in memory as %s", name,
                     (unsigned long long)ne, outname);
        return NULL;
    }
    void *own = NULL; /* header-only remote model (lazy): the stored bytes, read now */
    const void *ptr;
    if (readable_bytes(s, t, &ptr, &own) < 0) return NULL;
    PyObject *ba = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!ba) {
        PyMem_RawFree(own);
        return NULL;
    }
    int rc;
    void *dst = PyByteArray_AS_STRING(ba);
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_tensor_dequantize(t, ptr, (size_t)t->nbytes, out, dst, (size_t)size);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(own);
    if (rc < 0) {
        Py_DECREF(ba);
        return raise_rc(rc, NULL);
    }
    return ba;
}

/* ---- model-only methods ---------------------------------------------------- */

int need_model(Source *s) {
    if (s->m) return 0;
    PyErr_SetString(PyExc_TypeError, "not a model (opened with open_file)");
    return -1;
}

static PyObject *Source_strategy(Source *s, PyObject *unused) {
    if (need_model(s) < 0) return NULL;
    const char *why = NULL;
    pagein_strategy st = pagein_model_strategy(s->m, &why);
    return Py_BuildValue("(ss)", pagein_strategy_name(st), why ? why : "");
}

static PyObject *Source_layer_count(Source *s, PyObject *unused) {
    if (need_model(s) < 0) return NULL;
    return PyLong_FromLong(pagein_model_layer_count(s->m));
}

/* layer_tensors(layer) -> tensor tuples of one layer (-1 leading globals,
 * 0..L-1 numbered layers, L trailing globals), in layer order. */
static PyObject *Source_layer_tensors(Source *s, PyObject *arg) {
    if (need_model(s) < 0) return NULL;
    int32_t l;
    if (layer_arg(arg, &l) < 0) return NULL;
    const pagein_tensor *const *ts = NULL;
    size_t n = pagein_model_layer_tensors(s->m, l, &ts);
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *v = tensor_tuple(ts[i]);
        if (!v) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

typedef int (*layer_fn)(pagein_model *, int32_t);

static PyObject *layer_call(Source *s, PyObject *arg, layer_fn fn) {
    if (need_model(s) < 0) return NULL;
    int32_t l;
    if (layer_arg(arg, &l) < 0) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fn(s->m, l);
    Py_END_ALLOW_THREADS
    if (rc < 0) return raise_rc(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *Source_layer_wait(Source *s, PyObject *arg) { return layer_call(s, arg, pagein_layer_wait); }
static PyObject *Source_layer_done(Source *s, PyObject *arg) { return layer_call(s, arg, pagein_layer_done); }

/* tensor_wait(name): returns once that tensor is resident (the prefetch
 * pager may still be reading the rest of its layer). */
static PyObject *Source_tensor_wait(Source *s, PyObject *name) {
    if (need_model(s) < 0) return NULL;
    if (!PyUnicode_Check(name)) return raise_msg(PyExc_TypeError, "tensor name must be str");
    const pagein_tensor *t = src_find(s, name);
    if (!t) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_tensor_wait(s->m, t);
    Py_END_ALLOW_THREADS
    if (rc < 0) return raise_rc(rc, NULL);
    Py_RETURN_NONE;
}

/* Resolves a sequence of names to tensor records into *out (PyMem; free
 * with PyMem_Free) and *n. names None gives *out NULL, *n 0 ("all"). */
int collect(Source *s, PyObject *names, const pagein_tensor ***out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (names == Py_None) return 0;
    PyObject *seq = PySequence_Fast(names, "names must be a sequence of str");
    if (!seq) return -1;
    size_t k = (size_t)PySequence_Fast_GET_SIZE(seq);
    const pagein_tensor **ts = PyMem_Calloc(k ? k : 1, sizeof *ts);
    if (!ts) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < k; i++) {
        PyObject *nm = PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i);
        if (!PyUnicode_Check(nm)) {
            PyErr_SetString(PyExc_TypeError, "tensor name must be str");
            ts[i] = NULL;
        } else {
            ts[i] = src_find(s, nm);
        }
        if (!ts[i]) {
            PyMem_Free(ts);
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    *out = ts;
    *n = k;
    return 0;
}

/* load(names=None) -> None: make the given tensors (or all) resident now. */
static PyObject *Source_load(Source *s, PyObject *args) {
    PyObject *names = Py_None;
    if (!PyArg_ParseTuple(args, "|O:load", &names)) return NULL;
    if (need_model(s) < 0) return NULL;
    const pagein_tensor **ts;
    size_t n;
    if (collect(s, names, &ts, &n) < 0) return NULL;
    if (names != Py_None && n == 0) {
        PyMem_Free(ts);
        Py_RETURN_NONE;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_model_load_tensors(s->m, (const pagein_tensor *const *)ts, n);
    Py_END_ALLOW_THREADS
    PyMem_Free(ts);
    if (rc < 0) return raise_rc(rc, NULL);
    Py_RETURN_NONE;
}


/* load_layers(first, last) -> None: make layers first..last resident now. */
static PyObject *Source_load_layers(Source *s, PyObject *args) {
    int first, last;
    if (!PyArg_ParseTuple(args, "ii:load_layers", &first, &last)) return NULL;
    if (need_model(s) < 0) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_model_load_layers(s->m, first, last);
    Py_END_ALLOW_THREADS
    if (rc < 0) return raise_rc(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *Source_get_path(Source *s, void *c) {
    Py_INCREF(s->path);
    return s->path;
}

static PyObject *Source_get_is_model(Source *s, void *c) { return PyBool_FromLong(s->m != NULL); }

static PyMethodDef Source_methods[] = {
    {"tensors", PYFN(Source_tensors), METH_VARARGS,
     "tensors(order='file') -> [(name, dtype, shape, offset, nbytes, layer, file, flags, index)]"},
    {"tensor", PYFN(Source_tensor), METH_O, "tensor(name) -> one tensor tuple"},
    {"count", PYFN(Source_count), METH_NOARGS, "number of tensors"},
    {"buffer", PYFN(Source_buffer), METH_O, "buffer(name or index) -> read-only View of the tensor's bytes"},
    {"read_slice", PYFN(Source_read_slice), METH_VARARGS,
     "read_slice(name, start, count) -> bytearray of the box (an assembled tensor: only the pieces it overlaps)"},
    {"strides", PYFN(Source_strides), METH_O, "strides(name) -> element strides (PyTorch checkpoints) or None"},
    {"metadata", PYFN(Source_metadata), METH_NOARGS, "metadata() -> [(key, value)], values of their native types"},
    {"dequantize", PYFN(Source_dequantize), METH_VARARGS,
     "dequantize(name, out) -> bytearray of the values as out ('F32', 'F16', 'BF16')"},
    {"files", PYFN(Source_files), METH_NOARGS, "files() -> [info dict]"},
    {"strategy", PYFN(Source_strategy), METH_NOARGS, "model: (strategy name, why)"},
    {"layer_count", PYFN(Source_layer_count), METH_NOARGS, "model: number of numbered layers"},
    {"layer_tensors", PYFN(Source_layer_tensors), METH_O, "model: tensor tuples of one layer"},
    {"layer_wait", PYFN(Source_layer_wait), METH_O, "model: wait until a layer is resident"},
    {"layer_done", PYFN(Source_layer_done), METH_O, "model: mark a layer consumed"},
    {"tensor_wait", PYFN(Source_tensor_wait), METH_O, "model: wait until one tensor is resident"},
    {"load_layers", PYFN(Source_load_layers), METH_VARARGS, "model: load_layers(first, last)"},
    {"residency", PYFN(Source_residency), METH_VARARGS | METH_KEYWORDS,
     "residency(names=None, layer=None) -> (bytes, resident_bytes, pages, resident_pages)"},
    {"evict", PYFN(Source_evict), METH_VARARGS, "evict(names=None): drop from the page cache"},
    {"lock", PYFN(Source_lock), METH_VARARGS, "model: lock(names=None): mlock"},
    {"unlock", PYFN(Source_unlock), METH_VARARGS, "model: unlock(names=None): munlock"},
    {"load", PYFN(Source_load), METH_VARARGS, "model: load(names=None): make tensors resident now"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Source_getset[] = {
    {"path", (getter)Source_get_path, NULL, "path as given", NULL},
    {"is_model", (getter)Source_get_is_model, NULL, "opened with open_model", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject SourceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pagein._pagein.Source",
    .tp_basicsize = sizeof(Source),
    .tp_dealloc = (destructor)Source_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An open pagein file or model. Closed when the last reference (including views) goes.",
    .tp_methods = Source_methods,
    .tp_getset = Source_getset,
    .tp_weaklistoffset = offsetof(Source, weakreflist),
};

PyMethodDef pyp_model_functions[] = {
    {"open_file", PYFN(py_open_file), METH_VARARGS | METH_KEYWORDS,
     "open_file(path, lenient=False) -> Source"},
    {"open_memory", PYFN(py_open_memory), METH_VARARGS | METH_KEYWORDS,
     "open_memory(data, name='<memory>', writable=False) -> Source over a file image in memory"},
    {"open_model", PYFN(py_open_model), METH_VARARGS | METH_KEYWORDS,
     "open_model(path, strategy='auto', threads=0, prefetch=0, budget=0, hints=0, lenient=False) -> Source"},
    {NULL, NULL, 0, NULL},
};

int pyp_model_ready(void) {
    return PyType_Ready(&SourceType) < 0 || PyType_Ready(&ViewType) < 0 ? -1 : 0;
}

int pyp_model_add_types(PyObject *m) {
    Py_INCREF(&SourceType);
    if (PyModule_AddObject(m, "Source", (PyObject *)&SourceType) < 0) return -1;
    Py_INCREF(&ViewType);
    if (PyModule_AddObject(m, "View", (PyObject *)&ViewType) < 0) return -1;
    return 0;
}
