/*
 * _pagein.c - the CPython extension behind `import pagein`.
 *
 * Uses only the library's public API (<pagein.h>); linked statically with
 * libpagein.a. This layer is deliberately thin: it owns the library objects,
 * hands out read-only buffers over tensor data, converts metadata into
 * Python values and turns error codes into exceptions. The framework logic
 * (numpy/torch dtypes, slicing, dict APIs) lives in pagein/__init__.py.
 *
 * Lifetime. A Source object owns one pagein_file or pagein_model. Every
 * View (a buffer exporter over one tensor's bytes) holds a strong reference
 * to its Source, and every numpy array or torch tensor built on a View holds
 * the View. The library object is therefore closed (unmapped) exactly when
 * the last of them goes, whatever order Python drops them in; closing the
 * Python-level file or model object only drops its own reference.
 *
 * The GIL is released around every call that may do I/O or wait (open,
 * load, layer waits, writes). Each library call is followed, on the same
 * thread, by pagein_last_error_detail(), which is thread-local.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pagein.h>

/* Method tables take one function pointer type; the cast through void(*)(void)
 * is the documented way to store the other signatures there. */
#define PYFN(f) ((PyCFunction)(void (*)(void))(f))

/* ------------------------------------------------------------------------ */
/* Exceptions                                                               */
/* ------------------------------------------------------------------------ */

static PyObject *Error;         /* pagein.Error(Exception): base of all */
static PyObject *FormatError;   /* (Error, ValueError): invalid or unsupported input */
static PyObject *FileError;     /* (Error, OSError): -errno from the OS */
static PyObject *NotFoundError; /* (Error, KeyError): no such tensor / key / layer */
static PyObject *FileNotFound;  /* (FileError, FileNotFoundError): -ENOENT, what safetensors callers catch */

/* Raises the exception for library return code rc; returns NULL. path (a
 * str, or NULL) is attached to OS errors as filename. */
static PyObject *raise_rc(int rc, PyObject *path) {
    const char *detail = pagein_last_error_detail();
    const char *name = pagein_strerror(rc);
    if (!detail) detail = "";
    /* Details may quote file names that are not UTF-8: decode losslessly. */
    PyObject *dt = PyUnicode_DecodeUTF8(detail, (Py_ssize_t)strlen(detail), "surrogateescape");
    PyObject *nm = PyUnicode_FromString(name);
    PyObject *code = PyLong_FromLong(rc);
    PyObject *exc = NULL;
    if (dt && nm && code) {
        PyObject *msg = PyUnicode_GET_LENGTH(dt) ? dt : nm;
        if (rc < 0 && rc > -4096) {
            exc = PyObject_CallFunction(rc == -ENOENT ? FileNotFound : FileError, "iOO", -rc, msg, path ? path : Py_None);
        } else {
            PyObject *cls = rc == PAGEIN_E_NOT_FOUND ? NotFoundError : FormatError;
            exc = PyObject_CallFunctionObjArgs(cls, msg, NULL);
        }
    }
    if (exc && (PyObject_SetAttrString(exc, "code", code) < 0 || PyObject_SetAttrString(exc, "error", nm) < 0 ||
                PyObject_SetAttrString(exc, "detail", dt) < 0))
        Py_CLEAR(exc);
    Py_XDECREF(code);
    Py_XDECREF(nm);
    Py_XDECREF(dt);
    if (!exc) return NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

/* The file-system encoding of a str path (bytes, new reference), so that
 * names that are not valid UTF-8 (surrogateescape) round-trip. */
static PyObject *fs_bytes(PyObject *path) {
    PyObject *b = PyUnicode_EncodeFSDefault(path);
    if (b && strlen(PyBytes_AS_STRING(b)) != (size_t)PyBytes_GET_SIZE(b)) {
        Py_DECREF(b);
        PyErr_SetString(PyExc_ValueError, "embedded NUL in path");
        return NULL;
    }
    return b;
}

static PyObject *raise_msg(PyObject *cls, const char *msg) {
    PyErr_SetString(cls, msg);
    return NULL;
}

/* ---- integer arguments ---------------------------------------------------- */

/* Integer arguments are range-checked, never wrapped: the "I" and "K"
 * formats of PyArg_Parse turn -1 into UINT_MAX and 2**32+1 into 1, which
 * once made open_model(prefetch=-1) hang. Used with "O&"; the argument's
 * name and bounds are set by the caller, the value is filled in. */
typedef struct {
    const char *name;
    long long min;          /* signed bounds (when !is_unsigned) */
    long long max;
    unsigned long long umax; /* unsigned bound (when is_unsigned; min is 0) */
    int is_unsigned;
    long long v;
    unsigned long long u;
} int_arg;

/* More I/O threads than this is a mistake, not a request (the library's
 * pools use at most 64). */
#define PY_MAX_THREADS 1024

#define UINT_ARG(nm, mx) {(nm), 0, 0, (mx), 1, 0, 0}
#define SINT_ARG(nm, lo, hi) {(nm), (lo), (hi), 0, 0, 0, 0}

static int int_arg_conv(PyObject *o, void *p) {
    int_arg *a = p;
    PyObject *i = PyNumber_Index(o);
    if (!i) {
        PyErr_Format(PyExc_TypeError, "%s must be an integer, not %.100s", a->name, Py_TYPE(o)->tp_name);
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    if (v == -1 && !overflow && PyErr_Occurred()) {
        Py_DECREF(i);
        return 0;
    }
    int ok;
    if (a->is_unsigned) {
        unsigned long long u = 0;
        if (overflow > 0) {
            u = PyLong_AsUnsignedLongLong(i);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) PyErr_Clear(), overflow = 2;
        } else {
            u = (unsigned long long)v;
        }
        ok = overflow >= 0 && overflow != 2 && (overflow > 0 || v >= 0) && u <= a->umax;
        a->u = u;
        if (!ok)
            PyErr_Format(PyExc_OverflowError, "%s must be an integer from 0 to %llu, not %S", a->name, a->umax, i);
    } else {
        ok = !overflow && v >= a->min && v <= a->max;
        a->v = v;
        if (!ok)
            PyErr_Format(PyExc_OverflowError, "%s must be an integer from %lld to %lld, not %S", a->name, a->min,
                         a->max, i);
    }
    Py_DECREF(i);
    return ok;
}

/* A layer number (-1 leading globals, 0..L-1, L trailing globals): int32. */
static int layer_arg(PyObject *o, int32_t *out) {
    int_arg a = SINT_ARG("layer", INT32_MIN, INT32_MAX);
    if (!int_arg_conv(o, &a)) return -1;
    *out = (int32_t)a.v;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Source: one open file or model                                           */
/* ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    pagein_file *f;  /* exactly one of f and m is set */
    pagein_model *m;
    PyObject *path;  /* str, as given */
    PyObject *weakreflist;
    int writable;    /* opened PAGEIN_OPEN_PRIVATE: buffers may be written (copy-on-write) */
    int has_mem;     /* opened with open_memory: mem is the image, released after close */
    Py_buffer mem;
} Source;

static PyTypeObject SourceType;

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
static const pagein_tensor *src_find(const Source *s, PyObject *name) {
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

static PyObject *str_from(const char *p, size_t len) {
    return PyUnicode_DecodeUTF8(p, (Py_ssize_t)len, "surrogateescape");
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

static int need_model(Source *s) {
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
static int collect(Source *s, PyObject *names, const pagein_tensor ***out, size_t *n) {
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

/* ---- page cache: residency, evict, lock ----------------------------------- */

/* residency(names=None, layer=None) -> (bytes, resident_bytes, pages,
 * resident_pages) of the named tensors, of one layer (models), or of all
 * tensor data. Byte counts are exact per range (pagein_residency). */
static PyObject *Source_residency(Source *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"names", "layer", NULL};
    PyObject *names = Py_None, *layer = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:residency", kwlist, &names, &layer)) return NULL;
    const pagein_tensor **ts;
    size_t n;
    if (collect(s, names, &ts, &n) < 0) return NULL;
    pagein_residency r = {0, 0, 0, 0};
    int rc = 0;
    int32_t l = 0;
    if (layer != Py_None) {
        if (layer_arg(layer, &l) < 0) {
            PyMem_Free(ts);
            return NULL;
        }
        if (!s->m || names != Py_None) {
            PyMem_Free(ts);
            return raise_msg(PyExc_TypeError, "layer= is for models, without names=");
        }
    }
    Py_BEGIN_ALLOW_THREADS
    if (ts) {
        for (size_t i = 0; i < n && rc >= 0; i++) {
            pagein_residency x;
            rc = s->f ? pagein_file_residency(s->f, ts[i]->offset, ts[i]->nbytes, &x)
                      : pagein_model_tensor_residency(s->m, ts[i], &x);
            if (rc >= 0 && ts[i]->nbytes) pagein_residency_add(&r, &x);
        }
    } else if (s->m) {
        rc = layer != Py_None ? pagein_model_layer_residency(s->m, l, &r) : pagein_model_residency(s->m, &r);
    } else {
        pagein_file_info info;
        pagein_file_get_info(s->f, &info);
        if (info.file_size > info.data_start)
            rc = pagein_file_residency(s->f, info.data_start, info.file_size - info.data_start, &r);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(ts);
    if (rc < 0) return raise_rc(rc, NULL);
    return Py_BuildValue("(KKKK)", (unsigned long long)r.bytes, (unsigned long long)r.resident_bytes,
                         (unsigned long long)r.pages, (unsigned long long)r.resident_pages);
}

enum cache_op { OP_EVICT, OP_LOCK, OP_UNLOCK };

static PyObject *cache_op(Source *s, PyObject *args, enum cache_op op) {
    PyObject *names = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &names)) return NULL;
    if (op != OP_EVICT && need_model(s) < 0) return NULL;
    const pagein_tensor **ts;
    size_t n;
    if (collect(s, names, &ts, &n) < 0) return NULL;
    if (names != Py_None && n == 0) {
        PyMem_Free(ts);
        Py_RETURN_NONE;
    }
    const pagein_tensor *const *cts = (const pagein_tensor *const *)ts;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    if (s->m) {
        rc = op == OP_EVICT ? pagein_model_evict_tensors(s->m, cts, n)
           : op == OP_LOCK  ? pagein_model_lock_tensors(s->m, cts, n)
                            : pagein_model_unlock_tensors(s->m, cts, n);
    } else if (ts) {
        for (size_t i = 0; i < n && rc >= 0; i++)
            if (ts[i]->nbytes) rc = pagein_file_evict(s->f, ts[i]->offset, ts[i]->nbytes);
    } else {
        pagein_file_info info;
        pagein_file_get_info(s->f, &info);
        if (info.file_size > info.data_start)
            rc = pagein_file_evict(s->f, info.data_start, info.file_size - info.data_start);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(ts);
    if (rc < 0) return raise_rc(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *Source_evict(Source *s, PyObject *args) { return cache_op(s, args, OP_EVICT); }
static PyObject *Source_lock(Source *s, PyObject *args) { return cache_op(s, args, OP_LOCK); }
static PyObject *Source_unlock(Source *s, PyObject *args) { return cache_op(s, args, OP_UNLOCK); }

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

static PyTypeObject SourceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pagein._pagein.Source",
    .tp_basicsize = sizeof(Source),
    .tp_dealloc = (destructor)Source_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An open pagein file or model. Closed when the last reference (including views) goes.",
    .tp_methods = Source_methods,
    .tp_getset = Source_getset,
    .tp_weaklistoffset = offsetof(Source, weakreflist),
};

/* ------------------------------------------------------------------------ */
/* Writing                                                                  */
/* ------------------------------------------------------------------------ */

/* write(path, items, metadata=None, align=0): items is a sequence of
 * (name: str, dtype: str, shape: tuple, data: C-contiguous buffer). */
static PyObject *py_write(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "items", "metadata", "align", NULL};
    PyObject *path, *items, *meta = Py_None;
    int_arg align = UINT_ARG("align", UINT64_MAX);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "UO|OO&:write", kwlist, &path, &items, &meta, int_arg_conv, &align))
        return NULL;
    /* A tuple of our own: the item tuples (immutable) and their strings stay
     * alive while the GIL is released, whatever other threads do to items. */
    PyObject *seq = PySequence_Tuple(items);
    if (!seq) return NULL;
    PyObject *pb = fs_bytes(path);
    if (!pb) {
        Py_DECREF(seq);
        return NULL;
    }
    const char *p = PyBytes_AS_STRING(pb);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    pagein_write_tensor *wt = PyMem_Calloc((size_t)(n ? n : 1), sizeof *wt);
    Py_buffer *bufs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *bufs);
    uint64_t *shapes = NULL;
    const char **mk = NULL, **mv = NULL;
    Py_ssize_t nbufs = 0, nmeta = 0, total_dims = 0;
    PyObject *metaitems = NULL, *result = NULL;
    if (!wt || !bufs) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 4 || !PyTuple_Check(PyTuple_GET_ITEM(it, 2))) {
            PyErr_SetString(PyExc_TypeError, "items must be (name, dtype, shape tuple, buffer)");
            goto done;
        }
        total_dims += PyTuple_GET_SIZE(PyTuple_GET_ITEM(it, 2));
    }
    shapes = PyMem_Calloc((size_t)(total_dims ? total_dims : 1), sizeof *shapes);
    if (!shapes) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t dim_at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *name = PyTuple_GET_ITEM(it, 0), *dt = PyTuple_GET_ITEM(it, 1);
        PyObject *shape = PyTuple_GET_ITEM(it, 2), *data = PyTuple_GET_ITEM(it, 3);
        if (!PyUnicode_Check(name) || !PyUnicode_Check(dt)) {
            PyErr_SetString(PyExc_TypeError, "tensor name and dtype must be str");
            goto done;
        }
        Py_ssize_t nl, dl;
        const char *nm = PyUnicode_AsUTF8AndSize(name, &nl);
        const char *dn = PyUnicode_AsUTF8AndSize(dt, &dl);
        if (!nm || !dn) goto done;
        if (strlen(nm) != (size_t)nl) {
            PyErr_SetString(FormatError, "tensor names may not contain NUL");
            goto done;
        }
        pagein_dtype d = pagein_dtype_from_name(dn, (size_t)dl);
        const pagein_dtype_info *di = pagein_dtype_get(d);
        if (!di || !(di->flags & PAGEIN_DTYPE_F_SAFETENSORS)) {
            PyErr_Format(FormatError, "tensor '%s': dtype '%s' cannot be stored in safetensors", nm, dn);
            goto done;
        }
        uint64_t ne = 1;
        Py_ssize_t nd = PyTuple_GET_SIZE(shape);
        for (Py_ssize_t k = 0; k < nd; k++) {
            unsigned long long v = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(shape, k));
            if (v == (unsigned long long)-1 && PyErr_Occurred()) goto done;
            shapes[dim_at + k] = v;
            if (__builtin_mul_overflow(ne, (uint64_t)v, &ne)) {
                PyErr_Format(FormatError, "tensor '%s': element count overflows", nm);
                goto done;
            }
        }
        uint64_t want;
        int rc = pagein_dtype_nbytes(d, ne, &want);
        if (rc < 0) {
            raise_rc(rc, NULL);
            goto done;
        }
        if (PyObject_GetBuffer(data, &bufs[i], PyBUF_SIMPLE) < 0) goto done;
        nbufs = i + 1;
        if ((uint64_t)bufs[i].len != want) {
            PyErr_Format(FormatError, "tensor '%s': %zd bytes of data, %s %llu elements need %llu", nm,
                         bufs[i].len, dn, (unsigned long long)ne, (unsigned long long)want);
            goto done;
        }
        wt[i].name = nm;
        wt[i].dtype = d;
        wt[i].ndim = (uint32_t)nd;
        wt[i].shape = nd ? &shapes[dim_at] : NULL;
        wt[i].data = bufs[i].buf;
        dim_at += nd;
    }
    if (meta != Py_None) {
        if (!PyDict_Check(meta)) {
            PyErr_SetString(PyExc_TypeError, "metadata must be a dict of str to str");
            goto done;
        }
        metaitems = PyDict_Items(meta);
        if (!metaitems) goto done;
        nmeta = PyList_GET_SIZE(metaitems);
        mk = PyMem_Calloc((size_t)(nmeta ? nmeta : 1), sizeof *mk);
        mv = PyMem_Calloc((size_t)(nmeta ? nmeta : 1), sizeof *mv);
        if (!mk || !mv) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < nmeta; i++) {
            PyObject *kv = PyList_GET_ITEM(metaitems, i);
            PyObject *k = PyTuple_GET_ITEM(kv, 0), *v = PyTuple_GET_ITEM(kv, 1);
            if (!PyUnicode_Check(k) || !PyUnicode_Check(v)) {
                PyErr_SetString(PyExc_TypeError, "metadata must be a dict of str to str");
                goto done;
            }
            Py_ssize_t kl, vl;
            mk[i] = PyUnicode_AsUTF8AndSize(k, &kl);
            mv[i] = PyUnicode_AsUTF8AndSize(v, &vl);
            if (!mk[i] || !mv[i]) goto done;
            if (strlen(mk[i]) != (size_t)kl || strlen(mv[i]) != (size_t)vl) {
                PyErr_SetString(FormatError, "metadata may not contain NUL");
                goto done;
            }
        }
    }
    {
        pagein_write_opts o = PAGEIN_WRITE_OPTS_INIT;
        o.meta_keys = mk;
        o.meta_values = mv;
        o.n_meta = (size_t)nmeta;
        o.align = align.u;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = pagein_safetensors_write(p, wt, (size_t)n, &o);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            raise_rc(rc, path);
            goto done;
        }
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (Py_ssize_t i = 0; i < nbufs; i++)
        if (bufs[i].obj) PyBuffer_Release(&bufs[i]);
    PyMem_Free(wt);
    PyMem_Free(bufs);
    PyMem_Free(shapes);
    PyMem_Free(mk);
    PyMem_Free(mv);
    Py_XDECREF(metaitems);
    Py_DECREF(seq);
    Py_DECREF(pb);
    return result;
}

/* ------------------------------------------------------------------------ */
/* Module                                                                   */
/* ------------------------------------------------------------------------ */

/* dtype_info(name) -> (name, bits, block_elems, block_bytes, flags) or None */
static PyObject *py_dtype_info(PyObject *self, PyObject *arg) {
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &len);
    if (!s) return NULL;
    const pagein_dtype_info *di = pagein_dtype_get(pagein_dtype_from_name(s, (size_t)len));
    if (!di) Py_RETURN_NONE;
    return Py_BuildValue("(sIIII)", di->name, di->bits, di->block_elems, di->block_bytes, di->flags);
}

static PyObject *py_strerror(PyObject *self, PyObject *arg) {
    int_arg c = SINT_ARG("code", INT_MIN, INT_MAX);
    if (!int_arg_conv(arg, &c)) return NULL;
    return PyUnicode_FromString(pagein_strerror((int)c.v));
}

/* strategies() -> names in the library's strategy table, "auto" first */
static PyObject *py_strategies(PyObject *self, PyObject *noargs) {
    (void)self, (void)noargs;
    size_t n = pagein_strategy_count();
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    if (!t) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *s = PyUnicode_FromString(pagein_strategy_name((pagein_strategy)i));
        if (!s) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
    }
    return t;
}

/* ---- remote pull (docs/REMOTE.md) -------------------------------------- */
/* opts->note without the GIL: kept, warned about (UserWarning) after. */
static void pull_note(void *ctx, const char *file, const char *msg) {
    char *buf = ctx; /* 1024 bytes; the first note wins */
    if (!buf[0]) snprintf(buf, 1024, "%s: %s", file, msg);
}

/* pull(src, dest=None, connections=0, chunk=0, stage=None, cache_dir=None,
 * sync=True) -> dict of pagein_pull_stats. Runs without the GIL. */
static PyObject *py_pull(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"src", "dest", "connections", "chunk", "stage", "cache_dir", "sync", NULL};
    const char *src, *dest = NULL, *stage = NULL, *cache = NULL;
    unsigned connections = 0;
    unsigned long long chunk = 0;
    int sync = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|zIKzzp", kwl, &src, &dest, &connections, &chunk, &stage, &cache,
                                     &sync))
        return NULL;
    pagein_pull_opts o = PAGEIN_PULL_OPTS_INIT;
    o.connections = connections;
    o.chunk_bytes = chunk;
    o.stage_dir = stage;
    o.cache_dir = cache;
    if (!sync) o.flags |= PAGEIN_PULL_NO_SYNC;
    char note[1024] = "";
    o.note = pull_note;
    o.ctx = note;
    pagein_pull_stats st;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_pull(src, dest, &o, &st);
    Py_END_ALLOW_THREADS
    if (note[0] && PyErr_WarnEx(PyExc_UserWarning, note, 1) < 0) return NULL;
    if (rc < 0) return raise_rc(rc, NULL);
    return Py_BuildValue("{s:s,s:n,s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:s}", "path", st.path, "files", (Py_ssize_t)st.files,
                         "bytes", (unsigned long long)st.bytes, "fetched", (unsigned long long)st.fetched, "resumed",
                         (unsigned long long)st.resumed, "cached", (unsigned long long)st.cached, "requests",
                         (unsigned long long)st.requests, "retries", (unsigned long long)st.retries, "seconds",
                         st.seconds, "verified", st.verified);
}


static PyObject *py_remote_available(PyObject *self, PyObject *unused) { return PyBool_FromLong(pagein_remote_available()); }
/* url_redact(text) -> text with each URL's userinfo and secret query
 * values replaced (pagein_url_redact): for the messages Python code builds
 * around URLs itself (pagein.fsspec's FileNotFoundError). */
static PyObject *py_url_redact(PyObject *self, PyObject *arg) {
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(arg, &n);
    if (!text) return NULL;
    /* "a@" -> "***@" and "sig=" -> "sig=REDACTED" grow the text at most
     * eightfold */
    size_t cap = (size_t)n * 8 + 64;
    char *out = PyMem_Malloc(cap);
    if (!out) return PyErr_NoMemory();
    pagein_url_redact(text, out, cap);
    PyObject *r = PyUnicode_FromString(out);
    PyMem_Free(out);
    return r;
}
/* Training data and distributed plans: defined in the last section. */
static PyObject *py_dataset_open_records(PyObject *self, PyObject *args);
static PyObject *py_dataset_open_megatron(PyObject *self, PyObject *args);
static PyObject *py_dataset_info(PyObject *self, PyObject *cap);
static PyObject *py_dataset_read(PyObject *self, PyObject *args, PyObject *kw);
static PyObject *py_read_ranges(PyObject *self, PyObject *args, PyObject *kw);
static PyObject *py_permutation(PyObject *self, PyObject *args);
static PyObject *py_epoch_seed(PyObject *self, PyObject *args);
static PyObject *py_shuffle_quality(PyObject *self, PyObject *arg);
static PyObject *py_dist_default_rules(PyObject *self, PyObject *unused);
static PyObject *py_dist_plan(PyObject *self, PyObject *args, PyObject *kw);
/* byte sources by path or URL (pagein.fsspec; last section) */
static PyObject *py_source_open(PyObject *self, PyObject *arg);
static PyObject *py_source_info(PyObject *self, PyObject *cap);
static PyObject *py_source_read_ranges(PyObject *self, PyObject *args, PyObject *kw);
static PyObject *py_source_list(PyObject *self, PyObject *arg);

/* GPU staging (python/src/gpu.c). */
#include "gpu.c"
/* The dataset-format table and the one pipeline (python/src/dspipe.c). */
#include "dspipe.c"

static PyMethodDef module_methods[] = {
    {"strategies", PYFN(py_strategies), METH_NOARGS, "strategies() -> the strategy names, from the library's table"},
    {"open_file", PYFN(py_open_file), METH_VARARGS | METH_KEYWORDS,
     "open_file(path, lenient=False) -> Source"},
    {"open_memory", PYFN(py_open_memory), METH_VARARGS | METH_KEYWORDS,
     "open_memory(data, name='<memory>', writable=False) -> Source over a file image in memory"},
    {"open_model", PYFN(py_open_model), METH_VARARGS | METH_KEYWORDS,
     "open_model(path, strategy='auto', threads=0, prefetch=0, budget=0, hints=0, lenient=False) -> Source"},
    {"write", PYFN(py_write), METH_VARARGS | METH_KEYWORDS,
     "write(path, [(name, dtype, shape, buffer)], metadata=None, align=0): atomic safetensors write"},
    {"dtype_info", py_dtype_info, METH_O, "dtype_info(name) -> (name, bits, block_elems, block_bytes, flags)"},
    {"strerror", py_strerror, METH_O, "strerror(code) -> name of a pagein return code"},
    {"pull", PYFN(py_pull), METH_VARARGS | METH_KEYWORDS,
     "pull(src, dest=None, connections=0, chunk=0, stage=None, cache_dir=None, sync=True) -> stats dict"},
    {"remote_available", PYFN(py_remote_available), METH_NOARGS, "remote_available() -> bool (built with libcurl)"},
    {"url_redact", py_url_redact, METH_O, "url_redact(text) -> text with URL userinfo and signatures redacted"},
    /* training data and distributed plans (last section) */
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
    {"dist_default_rules", py_dist_default_rules, METH_NOARGS, "dist_default_rules() -> [(pattern, split)]"},
    {"dist_plan", PYFN(py_dist_plan), METH_VARARGS | METH_KEYWORDS,
     "dist_plan(source, rank, world, mode='replicated', rules=None, align=0, cols_direct=False) -> (reads, pieces, read_bytes)"},
    {"source_open", py_source_open, METH_O, "source_open(uri) -> byte source (a local file or remote object)"},
    {"source_info", py_source_info, METH_O, "source_info(source) -> (size, identity, is_local)"},
    {"source_read_ranges", PYFN(py_source_read_ranges), METH_VARARGS | METH_KEYWORDS,
     "source_read_ranges(sources, files, offsets, lengths, queue_depth=0, max_gap=0, max_block=0, no_merge=False, "
     "writable=False) -> ([bytes or bytearray], stats)"},
    {"source_list", py_source_list, METH_O, "source_list(uri) -> [uri] under an s3://, gs:// or hf:// prefix"},
    PAGEIN_GPU_METHODS
    PAGEIN_DSPIPE_METHODS
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_pagein", "Low-level binding of libpagein; use the pagein package.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

static PyObject *new_exc(PyObject *mod, const char *name, const char *attr, PyObject *bases, const char *doc) {
    PyObject *e = PyErr_NewExceptionWithDoc(name, doc, bases, NULL);
    if (!e) return NULL;
    Py_INCREF(e);
    if (PyModule_AddObject(mod, attr, e) < 0) {
        Py_DECREF(e);
        Py_DECREF(e);
        return NULL;
    }
    return e;
}

PyMODINIT_FUNC PyInit__pagein(void) {
    if (PyType_Ready(&SourceType) < 0 || PyType_Ready(&ViewType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    PyObject *b;
    Error = new_exc(m, "pagein.Error", "Error", PyExc_Exception,
                    "Base of every pagein exception. Attributes: code (int), error (name of the code), "
                    "detail (the library's message).");
    if (!Error) goto fail;
    b = PyTuple_Pack(2, Error, PyExc_ValueError);
    FormatError = b ? new_exc(m, "pagein.FormatError", "FormatError", b,
                              "Invalid, malformed or unsupported input (pagein.Error, ValueError).")
                    : NULL;
    Py_XDECREF(b);
    if (!FormatError) goto fail;
    b = PyTuple_Pack(2, Error, PyExc_OSError);
    FileError = b ? new_exc(m, "pagein.FileError", "FileError", b,
                            "An operating-system failure (pagein.Error, OSError); errno is set.")
                  : NULL;
    Py_XDECREF(b);
    if (!FileError) goto fail;
    b = PyTuple_Pack(2, Error, PyExc_KeyError);
    NotFoundError = b ? new_exc(m, "pagein.NotFoundError", "NotFoundError", b,
                                "No such tensor, key or layer (pagein.Error, KeyError).")
                      : NULL;
    Py_XDECREF(b);
    if (!NotFoundError) goto fail;
    b = PyTuple_Pack(2, FileError, PyExc_FileNotFoundError);
    FileNotFound = b ? new_exc(m, "pagein.FileNotFoundError", "FileNotFoundError", b,
                               "No such file or directory (pagein.FileError, FileNotFoundError).")
                     : NULL;
    Py_XDECREF(b);
    if (!FileNotFound) goto fail;
    Py_INCREF(&SourceType);
    if (PyModule_AddObject(m, "Source", (PyObject *)&SourceType) < 0) goto fail;
    Py_INCREF(&ViewType);
    if (PyModule_AddObject(m, "View", (PyObject *)&ViewType) < 0) goto fail;
    if (PyModule_AddStringConstant(m, "version", pagein_version_string()) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "HINT_SEQUENTIAL", PAGEIN_HINT_SEQUENTIAL) < 0 ||
        PyModule_AddIntConstant(m, "HINT_RANDOM", PAGEIN_HINT_RANDOM) < 0 ||
        PyModule_AddIntConstant(m, "HINT_HUGEPAGE", PAGEIN_HINT_HUGEPAGE) < 0 ||
        PyModule_AddIntConstant(m, "HINT_WILLNEED", PAGEIN_HINT_WILLNEED) < 0 ||
        PyModule_AddIntConstant(m, "HINT_DIRECT", PAGEIN_HINT_DIRECT) < 0 ||
        PyModule_AddIntConstant(m, "HINT_PRELOAD", PAGEIN_HINT_PRELOAD) < 0 ||
        PyModule_AddIntConstant(m, "TENSOR_SWAPPED", PAGEIN_TENSOR_SWAPPED) < 0 ||
        PyModule_AddIntConstant(m, "TENSOR_UNALIGNED", PAGEIN_TENSOR_UNALIGNED) < 0 ||
        PyModule_AddIntConstant(m, "TENSOR_NONCONTIGUOUS", PAGEIN_TENSOR_NONCONTIGUOUS) < 0 ||
        PyModule_AddIntConstant(m, "DTYPE_F_QUANT", PAGEIN_DTYPE_F_QUANT) < 0)
        goto fail;
    if (PyModule_AddIntConstant(m, "DEVICE_HOST", PAGEIN_DEVICE_HOST) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}

/* ======================================================================== */
/* Training data and distributed plans (pagein.data, pagein.distributed)    */
/* ======================================================================== */
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

static PyObject *ranges_stats_tuple(const pagein_ranges_stats *st) {
    return Py_BuildValue("(KKKKK)", (unsigned long long)st->requests, (unsigned long long)st->reads,
                         (unsigned long long)st->bytes_requested, (unsigned long long)st->bytes_read,
                         (unsigned long long)st->bytes_wasted);
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

static const char *split_name(pagein_split s) {
    return s == PAGEIN_SPLIT_ROWS ? "rows" : s == PAGEIN_SPLIT_COLS ? "cols" : "none";
}

static int split_from(PyObject *o, pagein_split *out) {
    const char *s = PyUnicode_AsUTF8(o);
    if (!s) return -1;
    if (!strcmp(s, "rows")) *out = PAGEIN_SPLIT_ROWS;
    else if (!strcmp(s, "cols")) *out = PAGEIN_SPLIT_COLS;
    else if (!strcmp(s, "none") || !strcmp(s, "replicated")) *out = PAGEIN_SPLIT_NONE;
    else {
        PyErr_Format(PyExc_ValueError, "unknown split '%s' (rows, cols, none)", s);
        return -1;
    }
    return 0;
}

/* _pagein.dist_default_rules() -> [(pattern, split)] */
static PyObject *py_dist_default_rules(PyObject *self, PyObject *unused) {
    size_t n;
    const pagein_dist_rule *r = pagein_dist_default_rules(&n);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *t = Py_BuildValue("(ss)", r[i].pattern, split_name(r[i].split));
        if (!t) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, t);
    }
    return l;
}

/* _pagein.dist_plan(source, rank, world, mode="replicated", rules=None, align=0,
 *                   cols_direct=False) -> (reads, pieces, read_bytes)
 * reads: [(owner, shared, tensor, file, offset, length, stride, count, dst_offset,
 *          row_start, row_stop)]
 * pieces: [(tensor, split, dim, start, stop, nbytes)] */
static PyObject *py_dist_plan(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"source", "rank", "world", "mode", "rules", "align", "cols_direct", NULL};
    PyObject *so, *rules_o = Py_None;
    unsigned rank, world;
    const char *mode = "replicated";
    unsigned long long align = 0;
    int cols_direct = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OII|sOKp:dist_plan", kwlist, &so, &rank, &world, &mode, &rules_o,
                                     &align, &cols_direct))
        return NULL;
    if (!PyObject_TypeCheck(so, &SourceType) || !((Source *)so)->m) {
        PyErr_SetString(PyExc_TypeError, "dist_plan: source must be a Source opened with open_model");
        return NULL;
    }
    pagein_dist_opts o = PAGEIN_DIST_OPTS_INIT;
    if (!strcmp(mode, "replicated")) o.mode = PAGEIN_DIST_REPLICATED;
    else if (!strcmp(mode, "tp")) o.mode = PAGEIN_DIST_TP;
    else {
        PyErr_Format(PyExc_ValueError, "unknown mode '%s' (replicated, tp)", mode);
        return NULL;
    }
    o.align = align;
    if (cols_direct) o.flags |= PAGEIN_DIST_COLS_DIRECT;
    PyObject *fast = NULL, *res = NULL, *reads = NULL, *pieces = NULL;
    pagein_dist_rule *rules = NULL;
    pagein_dist_plan *p = NULL;
    if (rules_o != Py_None) {
        if (!(fast = PySequence_Fast(rules_o, "rules must be a sequence of (pattern, split)"))) return NULL;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
        rules = PyMem_Calloc((size_t)n + 1, sizeof *rules);
        if (!rules) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *it = PySequence_Fast_GET_ITEM(fast, i), *pat, *sp;
            if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
                PyErr_SetString(PyExc_TypeError, "rules must be a sequence of (pattern, split) tuples");
                goto done;
            }
            pat = PyTuple_GET_ITEM(it, 0);
            sp = PyTuple_GET_ITEM(it, 1);
            if (!(rules[i].pattern = PyUnicode_AsUTF8(pat)) || split_from(sp, &rules[i].split) < 0) goto done;
        }
        o.rules = rules;
        o.nrules = (size_t)n;
    }
    int rc = pagein_dist_plan_new(&p, ((Source *)so)->m, rank, world, &o);
    if (rc < 0) {
        raise_rc(rc, NULL);
        goto done;
    }
    size_t nr = pagein_dist_plan_read_count(p), np = pagein_dist_plan_piece_count(p);
    if (!(reads = PyList_New((Py_ssize_t)nr)) || !(pieces = PyList_New((Py_ssize_t)np))) goto done;
    for (size_t i = 0; i < nr; i++) {
        const pagein_dist_read *r = pagein_dist_plan_read_at(p, i);
        PyObject *t = Py_BuildValue("(IIIIKKKKKKK)", r->owner, r->shared, r->tensor, r->file,
                                    (unsigned long long)r->offset, (unsigned long long)r->length,
                                    (unsigned long long)r->stride, (unsigned long long)r->count,
                                    (unsigned long long)r->dst_offset, (unsigned long long)r->row_start,
                                    (unsigned long long)r->row_stop);
        if (!t) goto done;
        PyList_SET_ITEM(reads, (Py_ssize_t)i, t);
    }
    for (size_t i = 0; i < np; i++) {
        const pagein_dist_piece *c = pagein_dist_plan_piece_at(p, i);
        PyObject *t = Py_BuildValue("(IsIKKK)", c->tensor, split_name(c->split), c->dim,
                                    (unsigned long long)c->start, (unsigned long long)c->stop,
                                    (unsigned long long)c->nbytes);
        if (!t) goto done;
        PyList_SET_ITEM(pieces, (Py_ssize_t)i, t);
    }
    res = Py_BuildValue("(OOK)", reads, pieces, (unsigned long long)pagein_dist_plan_read_bytes(p));
done:
    Py_XDECREF(reads);
    Py_XDECREF(pieces);
    pagein_dist_plan_free(p);
    PyMem_Free(rules);
    Py_XDECREF(fast);
    return res;
}

/* ======================================================================== */
/* Byte sources by path or URL (pagein.fsspec)                              */
/* ======================================================================== */
/*
 * A byte source is a PyCapsule owning one pagein_source (closed by the
 * capsule's destructor): a local file or a remote object, opened for range
 * reads without parsing any format. source_read_ranges reads many ranges
 * of many sources in one pagein_source_read_ranges call (one engine run,
 * the GIL released) straight into fresh bytes objects, one per range.
 */
#define BYTESRC_CAPSULE "pagein.source"

static void bytesrc_capsule_free(PyObject *cap) {
    pagein_source_close(PyCapsule_GetPointer(cap, BYTESRC_CAPSULE));
}

/* _pagein.source_open(uri: str) -> capsule */
static PyObject *py_source_open(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) return raise_msg(PyExc_TypeError, "source_open: uri must be str");
    PyObject *pb = fs_bytes(arg);
    if (!pb) return NULL;
    pagein_source *s = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_source_open(&s, PyBytes_AS_STRING(pb));
    Py_END_ALLOW_THREADS
    Py_DECREF(pb);
    if (rc < 0) return raise_rc(rc, arg);
    PyObject *cap = PyCapsule_New(s, BYTESRC_CAPSULE, bytesrc_capsule_free);
    if (!cap) pagein_source_close(s);
    return cap;
}

/* _pagein.source_info(capsule) -> (size, identity, is_local) */
static PyObject *py_source_info(PyObject *self, PyObject *cap) {
    pagein_source *s = PyCapsule_GetPointer(cap, BYTESRC_CAPSULE);
    if (!s) return NULL;
    const char *id = pagein_source_identity(s);
    return Py_BuildValue("(KNN)", (unsigned long long)pagein_source_size(s), str_from(id, strlen(id)),
                         PyBool_FromLong(pagein_source_is_local(s)));
}

/* _pagein.source_read_ranges(sources, files, offsets, lengths, queue_depth=0,
 *     max_gap=0, max_block=0, no_merge=False, writable=False)
 *   -> (list of bytes, or of bytearray when writable, stats tuple)
 * files/offsets/lengths: sequences of int of one length; range i is
 * lengths[i] bytes at offsets[i] of sources[files[i]]. A zero length gives
 * b"" without a read. */
static PyObject *py_source_read_ranges(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"sources", "files", "offsets", "lengths", "queue_depth", "max_gap", "max_block",
                             "no_merge", "writable", NULL};
    PyObject *so, *fo, *oo, *lo;
    unsigned qd = 0;
    unsigned long long gap = 0, block = 0;
    int no_merge = 0, writable = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|IKKpp:source_read_ranges", kwlist, &so, &fo, &oo, &lo, &qd, &gap,
                                     &block, &no_merge, &writable))
        return NULL;
    PyObject *sf = NULL, *ff = NULL, *of = NULL, *lf = NULL, *out = NULL, *res = NULL;
    pagein_source **srcs = NULL;
    pagein_range *reqs = NULL;
    if (!(sf = PySequence_Fast(so, "sources must be a sequence of source capsules")) ||
        !(ff = PySequence_Fast(fo, "files must be a sequence of int")) ||
        !(of = PySequence_Fast(oo, "offsets must be a sequence of int")) ||
        !(lf = PySequence_Fast(lo, "lengths must be a sequence of int")))
        goto done;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(sf), n = PySequence_Fast_GET_SIZE(ff);
    if (PySequence_Fast_GET_SIZE(of) != n || PySequence_Fast_GET_SIZE(lf) != n) {
        PyErr_SetString(PyExc_ValueError, "source_read_ranges: files, offsets and lengths differ in length");
        goto done;
    }
    srcs = PyMem_Calloc((size_t)ns + 1, sizeof *srcs);
    reqs = PyMem_Calloc((size_t)n + 1, sizeof *reqs);
    if (!srcs || !reqs || !(out = PyList_New(n))) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < ns; i++)
        if (!(srcs[i] = PyCapsule_GetPointer(PySequence_Fast_GET_ITEM(sf, i), BYTESRC_CAPSULE))) goto done;
    size_t nreq = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long f = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(ff, i));
        unsigned long long off = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(of, i));
        unsigned long long len = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(lf, i));
        if (PyErr_Occurred()) goto done;
        if (f >= (unsigned long long)ns) {
            PyErr_Format(PyExc_IndexError, "source_read_ranges: range %zd names source %llu of %zd", i, f, ns);
            goto done;
        }
        if (len > (unsigned long long)PY_SSIZE_T_MAX) {
            PyErr_NoMemory();
            goto done;
        }
        PyObject *b = writable ? PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)len)
                               : PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
        if (!b) goto done;
        PyList_SET_ITEM(out, i, b);
        if (len)
            reqs[nreq++] = (pagein_range){(uint32_t)f, off, len, writable ? PyByteArray_AS_STRING(b) : PyBytes_AS_STRING(b)};
    }
    pagein_ranges_opts o = PAGEIN_RANGES_OPTS_INIT;
    o.queue_depth = qd;
    o.max_gap = gap;
    o.max_block = block;
    if (no_merge) o.flags |= PAGEIN_RANGES_NO_MERGE;
    pagein_ranges_stats st = {0};
    int rc = 0;
    if (nreq) {
        Py_BEGIN_ALLOW_THREADS
        rc = pagein_source_read_ranges(srcs, (size_t)ns, reqs, nreq, &o, &st);
        Py_END_ALLOW_THREADS
    }
    if (rc < 0) {
        raise_rc(rc, NULL);
        goto done;
    }
    res = Py_BuildValue("(ON)", out, ranges_stats_tuple(&st));
done:
    Py_XDECREF(out);
    Py_XDECREF(sf);
    Py_XDECREF(ff);
    Py_XDECREF(of);
    Py_XDECREF(lf);
    PyMem_Free(srcs);
    PyMem_Free(reqs);
    return res;
}

static int list_append(void *arg, const char *uri) {
    PyObject *s = str_from(uri, strlen(uri));
    int rc = s ? PyList_Append((PyObject *)arg, s) : -1;
    Py_XDECREF(s);
    return rc < 0 ? -1 : 0;
}

/* _pagein.source_list(uri) -> list of object URIs under a remote prefix.
 * Runs with the GIL held: the callback builds the list. */
static PyObject *py_source_list(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) return raise_msg(PyExc_TypeError, "source_list: uri must be str");
    PyObject *pb = fs_bytes(arg);
    if (!pb) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) {
        Py_DECREF(pb);
        return NULL;
    }
    int rc = pagein_source_list(PyBytes_AS_STRING(pb), list_append, out);
    Py_DECREF(pb);
    if (rc != 0) {
        Py_DECREF(out);
        if (PyErr_Occurred()) return NULL;
        return raise_rc(rc, arg);
    }
    return out;
}
