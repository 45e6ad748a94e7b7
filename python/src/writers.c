/*
 * writers.c - write(): a safetensors file from Python buffers, written
 * atomically (pagein_safetensors_write) with the GIL released.
 */
#include "pagein_py.h"

#include <string.h>

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

PyMethodDef pyp_writer_functions[] = {
    {"write", PYFN(py_write), METH_VARARGS | METH_KEYWORDS,
     "write(path, [(name, dtype, shape, buffer)], metadata=None, align=0): atomic safetensors write"},
    {NULL, NULL, 0, NULL},
};
