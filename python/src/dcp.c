/*
 * dcp.c - torch Distributed Checkpoints (pagein_dcp_*) for pagein.dcp:
 * the items of a checkpoint directory, tensors assembled from their chunks
 * and boxes of them read into caller buffers (numpy / torch memory), and
 * non-tensor items as bytes.
 */
#include "pagein_py.h"

#include <string.h>

#define CAPSULE "pagein.dcp"

static void dcp_capsule_free(PyObject *cap) {
    pagein_dcp *d = PyCapsule_GetPointer(cap, CAPSULE);
    if (d) pagein_dcp_close(d);
}

static pagein_dcp *dcp_of(PyObject *cap) { return PyCapsule_GetPointer(cap, CAPSULE); }

/* _pagein.dcp_open(path) -> capsule */
static PyObject *py_dcp_open(PyObject *self, PyObject *path) {
    PyObject *b = fs_bytes(path);
    if (!b) return NULL;
    pagein_dcp *d = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_dcp_open(&d, PyBytes_AS_STRING(b));
    Py_END_ALLOW_THREADS
    Py_DECREF(b);
    if (rc < 0) return raise_rc(rc, path);
    PyObject *cap = PyCapsule_New(d, CAPSULE, dcp_capsule_free);
    if (!cap) pagein_dcp_close(d);
    return cap;
}

/* _pagein.dcp_items(cap) -> [(name, is_bytes, dtype, shape, nbytes, nchunks)] */
static PyObject *py_dcp_items(PyObject *self, PyObject *cap) {
    pagein_dcp *d = dcp_of(cap);
    if (!d) return NULL;
    size_t n = pagein_dcp_item_count(d);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        pagein_dcp_item_info in;
        int rc = pagein_dcp_item(d, i, &in);
        if (rc < 0) {
            Py_CLEAR(l);
            return raise_rc(rc, NULL);
        }
        PyObject *shape = PyTuple_New(in.ndim);
        for (uint32_t k = 0; shape && k < in.ndim; k++)
            PyTuple_SET_ITEM(shape, k, PyLong_FromUnsignedLongLong(in.shape[k]));
        PyObject *name = str_from(in.name, strlen(in.name));
        PyObject *t = shape && name ? Py_BuildValue("(OisOKI)", name, in.is_bytes, pagein_dtype_get(in.dtype)->name, shape,
                                                    (unsigned long long)in.nbytes, in.nchunks)
                                    : NULL;
        Py_XDECREF(shape);
        Py_XDECREF(name);
        if (!t) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, t);
    }
    return l;
}

static int dims_from(PyObject *o, uint64_t *out, Py_ssize_t max, Py_ssize_t *n) {
    PyObject *s = PySequence_Fast(o, "dcp_read_into: start and count must be sequences");
    if (!s) return -1;
    *n = PySequence_Fast_GET_SIZE(s);
    if (*n > max) {
        Py_DECREF(s);
        PyErr_SetString(PyExc_ValueError, "dcp_read_into: too many dimensions");
        return -1;
    }
    for (Py_ssize_t k = 0; k < *n; k++) {
        out[k] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(s, k));
        if (PyErr_Occurred()) {
            Py_DECREF(s);
            return -1;
        }
    }
    Py_DECREF(s);
    return 0;
}

/* _pagein.dcp_read_into(cap, index, buffer, start=None, count=None): the
 * whole item (or the box) into a writable buffer. */
static PyObject *py_dcp_read_into(PyObject *self, PyObject *args) {
    PyObject *cap, *so = Py_None, *co = Py_None;
    Py_ssize_t i;
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "Onw*|OO:dcp_read_into", &cap, &i, &buf, &so, &co)) return NULL;
    pagein_dcp *d = dcp_of(cap);
    if (!d || i < 0) {
        PyBuffer_Release(&buf);
        return d ? raise_rc(PAGEIN_E_INVALID, NULL) : NULL;
    }
    uint64_t start[64], count[64];
    Py_ssize_t ns = 0, nc = 0;
    int box = so != Py_None;
    if (box && (dims_from(so, start, 64, &ns) < 0 || dims_from(co, count, 64, &nc) < 0)) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = box ? pagein_dcp_read_slice(d, (size_t)i, start, count, buf.buf, (size_t)buf.len)
             : pagein_dcp_read(d, (size_t)i, buf.buf, (size_t)buf.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    if (rc < 0) return raise_rc(rc, NULL);
    Py_RETURN_NONE;
}

/* _pagein.dcp_read_many(h, [(index, buffer, start or None, count or None
 * [, dst_strides or None])]) -> (runs, spans, requests, bytes_read,
 * bytes_needed): every request in one run of the range engine
 * (pagein_dcp_read_many_strided; strides in elements, one per dimension). */
static PyObject *py_dcp_read_many(PyObject *self, PyObject *args) {
    PyObject *cap, *lo;
    if (!PyArg_ParseTuple(args, "OO:dcp_read_many", &cap, &lo)) return NULL;
    pagein_dcp *d = dcp_of(cap);
    if (!d) return NULL;
    PyObject *seq = PySequence_Fast(lo, "dcp_read_many: a sequence of (index, buffer, start, count)");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), got = 0;
    pagein_dcp_request *rq = PyMem_Calloc(n ? (size_t)n : 1, sizeof *rq);
    Py_buffer *bufs = PyMem_Calloc(n ? (size_t)n : 1, sizeof *bufs);
    uint64_t *dims = PyMem_Calloc(n ? (size_t)n * 3 * 64 : 1, sizeof *dims);
    const uint64_t **ds = PyMem_Calloc(n ? (size_t)n : 1, sizeof *ds);
    int ok = rq && bufs && dims && ds, strided = 0;
    if (!ok) PyErr_NoMemory();
    for (Py_ssize_t k = 0; ok && k < n; k++) {
        PyObject *so, *co, *dso = Py_None;
        Py_ssize_t i;
        PyObject *t = PySequence_Fast_GET_ITEM(seq, k);
        if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "nw*OO|O:dcp_read_many", &i, &bufs[k], &so, &co, &dso)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "dcp_read_many: (index, buffer, start, count)");
            ok = 0;
            break;
        }
        got = k + 1;
        pagein_dcp_item_info in;
        if (i < 0 || pagein_dcp_item(d, (size_t)i, &in) < 0) {
            raise_rc(PAGEIN_E_INVALID, NULL);
            ok = 0;
            break;
        }
        rq[k].item = (size_t)i, rq[k].dst = bufs[k].buf, rq[k].len = (size_t)bufs[k].len;
        if (so == Py_None || in.is_bytes) continue;
        uint64_t *st = dims + (size_t)k * 192, *ct = st + 64, *sd = st + 128;
        Py_ssize_t ns = 0, nc = 0;
        if (dims_from(so, st, 64, &ns) < 0 || dims_from(co, ct, 64, &nc) < 0) {
            ok = 0;
            break;
        }
        if (ns != (Py_ssize_t)in.ndim || nc != (Py_ssize_t)in.ndim) {
            PyErr_Format(PyExc_ValueError, "dcp_read_many: '%s' has %u dimensions", in.name, in.ndim);
            ok = 0;
            break;
        }
        rq[k].start = st, rq[k].count = ct;
        if (dso != Py_None) {
            Py_ssize_t nd = 0;
            if (dims_from(dso, sd, 64, &nd) < 0) {
                ok = 0;
                break;
            }
            if (nd != (Py_ssize_t)in.ndim) {
                PyErr_Format(PyExc_ValueError, "dcp_read_many: '%s' has %u dimensions", in.name, in.ndim);
                ok = 0;
                break;
            }
            ds[k] = sd, strided = 1;
        }
    }
    pagein_dcp_read_stats st = {0};
    int rc = 0;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        rc = pagein_dcp_read_many_strided(d, rq, (size_t)n, strided ? ds : NULL, &st);
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t k = 0; k < got; k++) PyBuffer_Release(&bufs[k]);
    PyMem_Free(rq), PyMem_Free(bufs), PyMem_Free(dims), PyMem_Free((void *)ds);
    Py_DECREF(seq);
    if (!ok) return NULL;
    if (rc < 0) return raise_rc(rc, NULL);
    return Py_BuildValue("(KKKKK)", (unsigned long long)st.runs, (unsigned long long)st.spans,
                         (unsigned long long)st.requests, (unsigned long long)st.bytes_read,
                         (unsigned long long)st.bytes_needed);
}

/* _pagein.dcp_view(h, i) -> a read-only View of a single-chunk tensor's
 * bytes inside its mapped blob (the handle kept alive), or None when it
 * must be assembled (several chunks, a strided view, a remote file). */
static PyObject *py_dcp_view(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "On:dcp_view", &cap, &i)) return NULL;
    pagein_dcp *d = dcp_of(cap);
    if (!d) return NULL;
    pagein_dcp_item_info in;
    if (i < 0 || pagein_dcp_item(d, (size_t)i, &in) < 0) return raise_rc(PAGEIN_E_INVALID, NULL);
    const void *p = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_dcp_view(d, (size_t)i, &p);
    Py_END_ALLOW_THREADS
    if (rc == PAGEIN_E_UNSUPPORTED) Py_RETURN_NONE;
    if (rc < 0) return raise_rc(rc, NULL);
    if (in.nbytes > (uint64_t)PY_SSIZE_T_MAX) return raise_rc(PAGEIN_E_LIMIT, NULL);
    return pyp_view_over(cap, p, (Py_ssize_t)in.nbytes);
}

/* _pagein.dcp_convert(dir, out, max_shard_bytes=0) -> (tensors, bytes, skipped, shards, bytes_read, requests) */
static PyObject *py_dcp_convert(PyObject *self, PyObject *args) {
    PyObject *dir, *out;
    unsigned long long shard = 0;
    if (!PyArg_ParseTuple(args, "OO|K:dcp_convert", &dir, &out, &shard)) return NULL;
    pagein_convert_opts co = PAGEIN_CONVERT_OPTS_INIT;
    co.max_shard_bytes = shard;
    PyObject *a = fs_bytes(dir), *b = a ? fs_bytes(out) : NULL;
    if (!a || !b) {
        Py_XDECREF(a);
        return NULL;
    }
    pagein_dcp_convert_stats st;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_dcp_convert(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), &co, &st);
    Py_END_ALLOW_THREADS
    Py_DECREF(a);
    Py_DECREF(b);
    if (rc < 0) return raise_rc(rc, dir);
    return Py_BuildValue("(KKKIKK)", (unsigned long long)st.tensors, (unsigned long long)st.tensor_bytes,
                         (unsigned long long)st.skipped_items, (unsigned)st.shards, (unsigned long long)st.bytes_read,
                         (unsigned long long)st.requests);
}

/* _pagein.dcp_chunks(cap, index) -> [(offsets, sizes)] of a tensor item */
static PyObject *py_dcp_chunks(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "On:dcp_chunks", &cap, &i)) return NULL;
    pagein_dcp *d = dcp_of(cap);
    if (!d) return NULL;
    uint32_t nc = 0;
    int rc = i < 0 ? PAGEIN_E_INVALID : pagein_dcp_chunk_count(d, (size_t)i, &nc);
    if (rc < 0) return raise_rc(rc, NULL);
    PyObject *l = PyList_New(nc);
    for (uint32_t j = 0; l && j < nc; j++) {
        const uint64_t *off, *len;
        uint32_t nd;
        pagein_dcp_chunk(d, (size_t)i, j, &nd, &off, &len);
        PyObject *a = PyTuple_New(nd), *b = PyTuple_New(nd);
        for (uint32_t k = 0; a && b && k < nd; k++) {
            PyTuple_SET_ITEM(a, k, PyLong_FromUnsignedLongLong(off[k]));
            PyTuple_SET_ITEM(b, k, PyLong_FromUnsignedLongLong(len[k]));
        }
        PyObject *t = a && b ? PyTuple_Pack(2, a, b) : NULL;
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (!t) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, j, t);
    }
    return l;
}

static PyObject *py_is_dcp_dir(PyObject *self, PyObject *path) {
    PyObject *b = fs_bytes(path);
    if (!b) return NULL;
    int r = pagein_is_dcp_dir(PyBytes_AS_STRING(b));
    Py_DECREF(b);
    return PyBool_FromLong(r);
}

PyMethodDef pyp_dcp_functions[] = {
    {"dcp_open", py_dcp_open, METH_O, "dcp_open(path) -> handle of a torch Distributed Checkpoint directory"},
    {"dcp_items", py_dcp_items, METH_O, "dcp_items(h) -> [(name, is_bytes, dtype, shape, nbytes, nchunks)]"},
    {"dcp_read_into", py_dcp_read_into, METH_VARARGS, "dcp_read_into(h, i, buffer, start=None, count=None)"},
    {"dcp_read_many", py_dcp_read_many, METH_VARARGS,
     "dcp_read_many(h, [(i, buffer, start, count)]) -> (runs, spans, requests, bytes_read, bytes_needed)"},
    {"dcp_convert", py_dcp_convert, METH_VARARGS,
     "dcp_convert(dir, out, max_shard_bytes=0) -> (tensors, bytes, skipped, shards, bytes_read, requests)"},
    {"dcp_view", py_dcp_view, METH_VARARGS, "dcp_view(h, i) -> View of a single-chunk tensor's bytes, or None"},
    {"dcp_chunks", py_dcp_chunks, METH_VARARGS, "dcp_chunks(h, i) -> [(offsets, sizes)]"},
    {"is_dcp_dir", py_is_dcp_dir, METH_O, "is_dcp_dir(path) -> bool"},
    {NULL, NULL, 0, NULL},
};
