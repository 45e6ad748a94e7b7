/*
 * remote.c - remote sources: pull (pagein_pull), the URL helpers, and byte
 * sources by path or URL for pagein.fsspec (pagein_source_*).
 */
#include "pagein_py.h"

#include <string.h>

/* ---- pull (docs/REMOTE.md) ------------------------------------------------ */

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

/* is_url(path) -> True when path is a URL one of this build's remote
 * sources reads (pagein_is_url): the one "is this remote" rule, for pagein
 * and pagein.fsspec. Anything but a str -> False. */
static PyObject *py_is_url(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) Py_RETURN_FALSE;
    PyObject *b = PyUnicode_EncodeFSDefault(arg); /* paths that are not UTF-8 (surrogateescape) too */
    if (!b) return NULL;
    int r = pagein_is_url(PyBytes_AS_STRING(b));
    Py_DECREF(b);
    return PyBool_FromLong(r);
}

/* ---- byte sources by path or URL (pagein.fsspec) ------------------------- */
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

static int entry_append(void *arg, const pagein_list_entry *e) {
    PyObject *size = e->size == PAGEIN_SIZE_UNKNOWN ? (Py_INCREF(Py_None), Py_None) : PyLong_FromUnsignedLongLong(e->size);
    PyObject *mtime = e->mtime ? PyLong_FromLongLong(e->mtime) : (Py_INCREF(Py_None), Py_None);
    PyObject *u = str_from(e->uri, strlen(e->uri)), *id = str_from(e->identity, strlen(e->identity));
    PyObject *t = size && mtime && u && id ? PyTuple_Pack(4, u, size, id, mtime) : NULL;
    Py_XDECREF(size);
    Py_XDECREF(mtime);
    Py_XDECREF(u);
    Py_XDECREF(id);
    int rc = t ? PyList_Append((PyObject *)arg, t) : -1;
    Py_XDECREF(t);
    return rc < 0 ? -1 : 0;
}

/* _pagein.source_list_entries(uri, direct=False) -> [(uri, size or None,
 * identity, mtime or None)]: one listing with what it states of each
 * object (pagein.fsspec's ls(detail=True) and find(detail=True) open
 * nothing). With the GIL held: the callback builds the list. */
static PyObject *py_source_list_entries(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"uri", "direct", NULL};
    PyObject *uri;
    int direct = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|p", kwl, &uri, &direct)) return NULL;
    PyObject *pb = fs_bytes(uri);
    if (!pb) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) {
        Py_DECREF(pb);
        return NULL;
    }
    int rc = pagein_source_list_entries(PyBytes_AS_STRING(pb), direct ? PAGEIN_LIST_DIRECT : 0, entry_append, out);
    Py_DECREF(pb);
    if (rc != 0) {
        Py_DECREF(out);
        if (PyErr_Occurred()) return NULL;
        return raise_rc(rc, uri);
    }
    return out;
}

PyMethodDef pyp_remote_functions[] = {
    {"pull", PYFN(py_pull), METH_VARARGS | METH_KEYWORDS,
     "pull(src, dest=None, connections=0, chunk=0, stage=None, cache_dir=None, sync=True) -> stats dict"},
    {"remote_available", PYFN(py_remote_available), METH_NOARGS, "remote_available() -> bool (built with libcurl)"},
    {"url_redact", py_url_redact, METH_O, "url_redact(text) -> text with URL userinfo and signatures redacted"},
    {"is_url", py_is_url, METH_O, "is_url(path) -> True for a URL this build's remote sources read"},
    {"source_open", py_source_open, METH_O, "source_open(uri) -> byte source (a local file or remote object)"},
    {"source_info", py_source_info, METH_O, "source_info(source) -> (size, identity, is_local)"},
    {"source_read_ranges", PYFN(py_source_read_ranges), METH_VARARGS | METH_KEYWORDS,
     "source_read_ranges(sources, files, offsets, lengths, queue_depth=0, max_gap=0, max_block=0, no_merge=False, "
     "writable=False) -> ([bytes or bytearray], stats)"},
    {"source_list", py_source_list, METH_O, "source_list(uri) -> [uri] under an s3://, gs:// or hf:// prefix"},
    {"source_list_entries", PYFN(py_source_list_entries), METH_VARARGS | METH_KEYWORDS,
     "source_list_entries(uri, direct=False) -> [(uri, size or None, identity, mtime or None)] under a remote prefix"},
    {NULL, NULL, 0, NULL},
};
