/*
 * pagein_py.h - the private header of the CPython extension behind
 * `import pagein` (the .c files of python/src, linked into one _pagein module).
 *
 * One unit per area, each using only the library's public API (<pagein.h>):
 *
 *   module.c   module init, the exception classes and the error mapping
 *              (raise_rc), the shared argument helpers, dtype/strategy tables
 *   model.c    files and models (Source), tensor views (View), metadata
 *   cache.c    page-cache tools on a Source: residency, evict, lock, unlock
 *   writers.c  write(): atomic safetensors writes
 *   remote.c   pull, URL helpers, byte sources by path or URL (pagein.fsspec)
 *   data.c     training data: datasets, range reads, shuffles, the dataset
 *              table and the pipeline (pagein.data)
 *   dist.c     distributed load plans (pagein.distributed)
 *   gpu.c      GPU staging (pagein._gpu); built with the GPU part
 *              (mk/gpu.mk defines PAGEIN_PY_GPU and adds the unit)
 *
 * Each area hands the module a NULL-terminated table of its functions
 * (pyp_*_functions), added by PyInit__pagein in module.c. Everything here
 * has hidden visibility: the module's only exported symbol is its init.
 */
#ifndef PAGEIN_PY_H
#define PAGEIN_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include <pagein.h>

/* Method tables take one function pointer type; the cast through void(*)(void)
 * is the documented way to store the other signatures there. */
#define PYFN(f) ((PyCFunction)(void (*)(void))(f))

#pragma GCC visibility push(hidden)

/* ---- module.c: exceptions and error mapping ------------------------------ */

extern PyObject *Error;         /* pagein.Error(Exception): base of all */
extern PyObject *FormatError;   /* (Error, ValueError): invalid or unsupported input */
extern PyObject *FileError;     /* (Error, OSError): -errno from the OS */
extern PyObject *NotFoundError; /* (Error, KeyError): no such tensor / key / layer */
extern PyObject *FileNotFound;  /* (FileError, FileNotFoundError): -ENOENT, what safetensors callers catch */

/* Raises the exception for library return code rc; returns NULL. path (a
 * str, or NULL) is attached to OS errors as filename. */
PyObject *raise_rc(int rc, PyObject *path);
/* Sets cls(msg); returns NULL. */
PyObject *raise_msg(PyObject *cls, const char *msg);
/* The file-system encoding of a str path (bytes, new reference), so that
 * names that are not valid UTF-8 (surrogateescape) round-trip. */
PyObject *fs_bytes(PyObject *path);
/* A str from UTF-8 bytes that may not be valid UTF-8 (surrogateescape). */
PyObject *str_from(const char *p, size_t len);
/* (requests, reads, bytes_requested, bytes_read, bytes_wasted) */
PyObject *ranges_stats_tuple(const pagein_ranges_stats *st);

/* ---- module.c: integer arguments ----------------------------------------- */

/* Integer arguments are range-checked, never wrapped: the "I" and "K"
 * formats of PyArg_Parse turn -1 into UINT_MAX and 2**32+1 into 1, which
 * once made open_model(prefetch=-1) hang. Used with "O&" and int_arg_conv;
 * the argument's name and bounds are set by the caller, the value is filled
 * in. */
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

int int_arg_conv(PyObject *o, void *p);
/* A layer number (-1 leading globals, 0..L-1, L trailing globals): int32. */
int layer_arg(PyObject *o, int32_t *out);

/* ---- model.c: Source, one open file or model ----------------------------- */

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

extern PyTypeObject SourceType;

/* Looks a tensor up by Python str name; sets NotFoundError if absent. */
const pagein_tensor *src_find(const Source *s, PyObject *name);
/* 0 for a model; -1 with TypeError for a single file. */
int need_model(Source *s);
/* Resolves a sequence of names to tensor records into *out (PyMem; free
 * with PyMem_Free) and *n. names None gives *out NULL, *n 0 ("all"). */
int collect(Source *s, PyObject *names, const pagein_tensor ***out, size_t *n);
/* A read-only View of len bytes at ptr that owner keeps alive. */
PyObject *pyp_view_over(PyObject *owner, const void *ptr, Py_ssize_t len);
/* Readies Source and View and adds them to the module. */
int pyp_model_ready(void);
int pyp_model_add_types(PyObject *m);

/* ---- cache.c: Source methods for the page cache -------------------------- */

PyObject *Source_residency(Source *s, PyObject *args, PyObject *kw);
PyObject *Source_evict(Source *s, PyObject *args);
PyObject *Source_lock(Source *s, PyObject *args);
PyObject *Source_unlock(Source *s, PyObject *args);

/* ---- module functions of each area (NULL-terminated) --------------------- */

extern PyMethodDef pyp_model_functions[];  /* model.c */
extern PyMethodDef pyp_writer_functions[]; /* writers.c */
extern PyMethodDef pyp_remote_functions[]; /* remote.c */
extern PyMethodDef pyp_data_functions[];   /* data.c */
extern PyMethodDef pyp_dist_functions[];   /* dist.c */
extern PyMethodDef pyp_dcp_functions[];    /* dcp.c */
#ifdef PAGEIN_PY_GPU
/* gpu.c: adds the GPU functions, GpuLoad's type and DEVICE_HOST. */
int pyp_gpu_add(PyObject *m);
#endif

#pragma GCC visibility pop

#endif
