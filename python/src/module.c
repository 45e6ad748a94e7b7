/*
 * module.c - the CPython extension behind `import pagein`: module init,
 * the exception classes, the error mapping and the shared argument helpers
 * (the other areas are in the units listed in pagein_py.h).
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
#include "pagein_py.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Exceptions                                                               */
/* ------------------------------------------------------------------------ */

PyObject *Error;         /* pagein.Error(Exception): base of all */
PyObject *FormatError;   /* (Error, ValueError): invalid or unsupported input */
PyObject *FileError;     /* (Error, OSError): -errno from the OS */
PyObject *NotFoundError; /* (Error, KeyError): no such tensor / key / layer */
PyObject *FileNotFound;  /* (FileError, FileNotFoundError): -ENOENT, what safetensors callers catch */

/* Raises the exception for library return code rc; returns NULL. path (a
 * str, or NULL) is attached to OS errors as filename. */
PyObject *raise_rc(int rc, PyObject *path) {
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
PyObject *fs_bytes(PyObject *path) {
    PyObject *b = PyUnicode_EncodeFSDefault(path);
    if (b && strlen(PyBytes_AS_STRING(b)) != (size_t)PyBytes_GET_SIZE(b)) {
        Py_DECREF(b);
        PyErr_SetString(PyExc_ValueError, "embedded NUL in path");
        return NULL;
    }
    return b;
}

PyObject *raise_msg(PyObject *cls, const char *msg) {
    PyErr_SetString(cls, msg);
    return NULL;
}

/* ---- integer arguments ---------------------------------------------------- */

int int_arg_conv(PyObject *o, void *p) {
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
int layer_arg(PyObject *o, int32_t *out) {
    int_arg a = SINT_ARG("layer", INT32_MIN, INT32_MAX);
    if (!int_arg_conv(o, &a)) return -1;
    *out = (int32_t)a.v;
    return 0;
}

/* ---- values ---------------------------------------------------------------- */

PyObject *str_from(const char *p, size_t len) {
    return PyUnicode_DecodeUTF8(p, (Py_ssize_t)len, "surrogateescape");
}

PyObject *ranges_stats_tuple(const pagein_ranges_stats *st) {
    return Py_BuildValue("(KKKKK)", (unsigned long long)st->requests, (unsigned long long)st->reads,
                         (unsigned long long)st->bytes_requested, (unsigned long long)st->bytes_read,
                         (unsigned long long)st->bytes_wasted);
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

/* The module's own functions; every area adds its table in PyInit__pagein. */
static PyMethodDef module_methods[] = {
    {"strategies", PYFN(py_strategies), METH_NOARGS, "strategies() -> the strategy names, from the library's table"},
    {"dtype_info", py_dtype_info, METH_O, "dtype_info(name) -> (name, bits, block_elems, block_bytes, flags)"},
    {"strerror", py_strerror, METH_O, "strerror(code) -> name of a pagein return code"},
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
    if (pyp_model_ready() < 0) return NULL;
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
    if (pyp_model_add_types(m) < 0) goto fail;
    if (PyModule_AddFunctions(m, pyp_model_functions) < 0 || PyModule_AddFunctions(m, pyp_writer_functions) < 0 ||
        PyModule_AddFunctions(m, pyp_remote_functions) < 0 || PyModule_AddFunctions(m, pyp_data_functions) < 0 ||
        PyModule_AddFunctions(m, pyp_dist_functions) < 0 || PyModule_AddFunctions(m, pyp_dcp_functions) < 0)
        goto fail;
#ifdef PAGEIN_PY_GPU
    if (pyp_gpu_add(m) < 0) goto fail;
#endif
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
        PyModule_AddIntConstant(m, "TENSOR_ASSEMBLED", PAGEIN_TENSOR_ASSEMBLED) < 0 ||
        PyModule_AddIntConstant(m, "TENSOR_BYTES", PAGEIN_TENSOR_BYTES) < 0 ||
        PyModule_AddIntConstant(m, "DTYPE_F_QUANT", PAGEIN_DTYPE_F_QUANT) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
