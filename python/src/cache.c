/*
 * cache.c - the page-cache tools on an open file or model (Source methods):
 * residency (pagein_*_residency), evict, lock and unlock.
 */
#include "pagein_py.h"

/* residency(names=None, layer=None) -> (bytes, resident_bytes, pages,
 * resident_pages) of the named tensors, of one layer (models), or of all
 * tensor data. Byte counts are exact per range (pagein_residency). */
PyObject *Source_residency(Source *s, PyObject *args, PyObject *kw) {
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

PyObject *Source_evict(Source *s, PyObject *args) { return cache_op(s, args, OP_EVICT); }
PyObject *Source_lock(Source *s, PyObject *args) { return cache_op(s, args, OP_LOCK); }
PyObject *Source_unlock(Source *s, PyObject *args) { return cache_op(s, args, OP_UNLOCK); }
