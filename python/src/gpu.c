/*
 * gpu.c - GPU staging for the extension (pagein_gpu_*), its own unit,
 * built with the GPU part (mk/gpu.mk). pagein/_gpu.py builds the user API
 * on these.
 *
 *   gpu_probe(device) -> {"name": str, "total_bytes": int, "free_bytes": int}; raises
 *       pagein.Error (code PAGEIN_E_NO_CUDA) with the reason when the device
 *       cannot be used.
 *   gpu_start(source, names, device, dst, keep, buffer_bytes=0, nbuffers=0,
 *             threads=0) -> GpuLoad
 *       Starts loading the tensors `names` (a sequence of str) of `source`
 *       (a Source) into the device addresses `dst` (a sequence of int, one
 *       per name, each with room for the tensor's bytes) on device `device`
 *       (an ordinal, or DEVICE_HOST for host memory) and returns at once.
 *       `keep` (any object, e.g. the destination tensors) is referenced
 *       until the load is closed, so the memory behind `dst` outlives every
 *       copy into it.
 *   GpuLoad.wait(name), .query(name) -> bool, .wait_all() -> stats dict,
 *       .stats() -> dict, .close() (waits for copies in flight, frees the
 *       pinned ring; also on garbage collection). Waits release the GIL.
 *   gpu_load(source, names, device, dst, ...) -> stats dict: start + wait
 *       for all + close, in one call.
 *   gpu_trim(): frees the pinned buffers the library keeps for reuse.
 */
#include "pagein_py.h"

typedef struct {
    PyObject_HEAD
    pagein_gpu_load *l;
    PyObject *src;  /* the Source: its tensors and files stay open */
    PyObject *keep; /* the destinations' owners */
} GpuLoad;

static PyTypeObject GpuLoadType;

static PyObject *gpu_stats_dict(pagein_gpu_load *l) {
    pagein_gpu_stats st;
    pagein_gpu_load_stats(l, &st);
    return Py_BuildValue("{s:K,s:n,s:n,s:n,s:d,s:d,s:K,s:K,s:I,s:K,s:s,s:K,s:I,s:s}", "bytes",
                         (unsigned long long)st.bytes,
                         "tensors", (Py_ssize_t)st.tensors, "ready", (Py_ssize_t)st.ready, "copies",
                         (Py_ssize_t)st.copies, "seconds", st.seconds, "first_layer_seconds", st.first_layer_seconds,
                         "ring_bytes", (unsigned long long)st.ring_bytes, "pinned_peak",
                         (unsigned long long)st.pinned_peak, "buffers_peak", st.buffers_peak, "device_bytes",
                         (unsigned long long)st.device_bytes, "device_name", st.device_name, "request_bytes",
                         (unsigned long long)st.request_bytes, "depth", st.depth, "io_why", st.io_why);
}

static void gpuload_close(GpuLoad *g) {
    if (g->l) {
        pagein_gpu_load *l = g->l;
        g->l = NULL;
        Py_BEGIN_ALLOW_THREADS
        pagein_gpu_load_free(l);
        Py_END_ALLOW_THREADS
    }
    Py_CLEAR(g->keep);
    Py_CLEAR(g->src);
}

static void GpuLoad_dealloc(GpuLoad *g) {
    gpuload_close(g);
    Py_TYPE(g)->tp_free((PyObject *)g);
}

static const pagein_tensor *gpuload_tensor(GpuLoad *g, PyObject *name) {
    if (!g->l) {
        PyErr_SetString(PyExc_ValueError, "the GPU load is closed");
        return NULL;
    }
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "tensor name must be str");
        return NULL;
    }
    return src_find((Source *)g->src, name);
}

static PyObject *GpuLoad_wait(GpuLoad *g, PyObject *name) {
    const pagein_tensor *t = gpuload_tensor(g, name);
    if (!t) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_gpu_tensor_wait(g->l, t);
    Py_END_ALLOW_THREADS
    if (rc < 0) return raise_rc(rc, ((Source *)g->src)->path);
    Py_RETURN_NONE;
}

static PyObject *GpuLoad_query(GpuLoad *g, PyObject *name) {
    const pagein_tensor *t = gpuload_tensor(g, name);
    if (!t) return NULL;
    int rc = pagein_gpu_tensor_query(g->l, t);
    if (rc < 0) return raise_rc(rc, ((Source *)g->src)->path);
    return PyBool_FromLong(rc);
}

static PyObject *GpuLoad_wait_all(GpuLoad *g, PyObject *unused) {
    if (!g->l) return raise_msg(PyExc_ValueError, "the GPU load is closed");
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_gpu_load_wait(g->l);
    Py_END_ALLOW_THREADS
    if (rc < 0) return raise_rc(rc, ((Source *)g->src)->path);
    return gpu_stats_dict(g->l);
}

static PyObject *GpuLoad_stats(GpuLoad *g, PyObject *unused) {
    if (!g->l) return raise_msg(PyExc_ValueError, "the GPU load is closed");
    return gpu_stats_dict(g->l);
}

static PyObject *GpuLoad_close(GpuLoad *g, PyObject *unused) {
    gpuload_close(g);
    Py_RETURN_NONE;
}

static PyMethodDef GpuLoad_methods[] = {
    {"wait", PYFN(GpuLoad_wait), METH_O, "wait(name): returns once the tensor is on the device; raises the load's error"},
    {"query", PYFN(GpuLoad_query), METH_O, "query(name) -> True when the tensor is on the device"},
    {"wait_all", PYFN(GpuLoad_wait_all), METH_NOARGS, "wait_all() -> stats once every tensor is there"},
    {"stats", PYFN(GpuLoad_stats), METH_NOARGS, "stats() -> progress so far"},
    {"close", PYFN(GpuLoad_close), METH_NOARGS, "close(): stop (waiting for copies in flight) and free the ring"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GpuLoadType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pagein._pagein.GpuLoad",
    .tp_basicsize = sizeof(GpuLoad),
    .tp_dealloc = (destructor)GpuLoad_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A GPU load in progress (pinned staging); see pagein/_gpu.py.",
    .tp_methods = GpuLoad_methods,
};

static PyObject *py_gpu_probe(PyObject *self, PyObject *arg) {
    long dev = PyLong_AsLong(arg);
    if (dev == -1 && PyErr_Occurred()) return NULL;
    pagein_gpu_info info;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_gpu_probe((int)dev, &info);
    Py_END_ALLOW_THREADS
    if (rc < 0) return raise_rc(rc, NULL);
    return Py_BuildValue("{s:s,s:K,s:K}", "name", info.name, "total_bytes", (unsigned long long)info.total_bytes,
                         "free_bytes", (unsigned long long)info.free_bytes);
}

/* Parses the arguments shared by gpu_start and gpu_load and starts the
 * load into a new GpuLoad (NULL with an exception set). */
static GpuLoad *gpu_start_impl(PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"source", "names", "device", "dst", "keep", "buffer_bytes", "nbuffers", "threads", NULL};
    PyObject *src, *names, *dsts, *keep = Py_None;
    int device;
    unsigned long long buffer_bytes = 0;
    unsigned nbuffers = 0, threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OiO|OKII", kwlist, &SourceType, &src, &names, &device, &dsts,
                                     &keep, &buffer_bytes, &nbuffers, &threads))
        return NULL;
    if (!(GpuLoadType.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&GpuLoadType) < 0) return NULL;
    Source *s = (Source *)src;
    if (!s->f && !s->m) return (GpuLoad *)raise_msg(PyExc_ValueError, "gpu_load: the file or model is closed");
    PyObject *ns = PySequence_Fast(names, "gpu_load: names must be a sequence of str");
    if (!ns) return NULL;
    PyObject *ds = PySequence_Fast(dsts, "gpu_load: dst must be a sequence of int");
    if (!ds) {
        Py_DECREF(ns);
        return NULL;
    }
    GpuLoad *g = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ns);
    const pagein_tensor **ts = PyMem_Calloc((size_t)n + 1, sizeof *ts);
    uint64_t *dst = PyMem_Calloc((size_t)n + 1, sizeof *dst);
    if (!ts || !dst) {
        PyErr_NoMemory();
        goto out;
    }
    if (PySequence_Fast_GET_SIZE(ds) != n) {
        PyErr_Format(PyExc_ValueError, "gpu_load: %zd names but %zd destinations", n, PySequence_Fast_GET_SIZE(ds));
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *nm = PySequence_Fast_GET_ITEM(ns, i);
        if (!PyUnicode_Check(nm)) {
            PyErr_SetString(PyExc_TypeError, "tensor names must be str");
            goto out;
        }
        ts[i] = src_find(s, nm); /* raises NotFoundError */
        if (!ts[i]) goto out;
        dst[i] = (uint64_t)PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(ds, i));
        if (PyErr_Occurred()) goto out;
    }
    g = PyObject_New(GpuLoad, &GpuLoadType);
    if (!g) goto out;
    g->l = NULL;
    Py_INCREF(src);
    g->src = src;
    Py_INCREF(keep);
    g->keep = keep;
    pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
    o.device = device;
    o.buffer_bytes = buffer_bytes;
    o.nbuffers = nbuffers;
    o.threads = threads;
    o.tensors = ts;
    o.ntensors = (size_t)n;
    o.dst = dst;
    int rc;
    pagein_gpu_load *l = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = s->f ? pagein_gpu_load_file(&l, s->f, &o) : pagein_gpu_load_model(&l, s->m, &o);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_rc(rc, s->path);
        Py_CLEAR(g);
        goto out;
    }
    g->l = l;
out:
    PyMem_Free(ts);
    PyMem_Free(dst);
    Py_DECREF(ns);
    Py_DECREF(ds);
    return g;
}

static PyObject *py_gpu_start(PyObject *self, PyObject *args, PyObject *kw) {
    return (PyObject *)gpu_start_impl(args, kw);
}

static PyObject *py_gpu_load(PyObject *self, PyObject *args, PyObject *kw) {
    GpuLoad *g = gpu_start_impl(args, kw);
    if (!g) return NULL;
    PyObject *st = GpuLoad_wait_all(g, NULL);
    gpuload_close(g);
    Py_DECREF(g);
    return st;
}

static PyObject *py_gpu_trim(PyObject *self, PyObject *unused) {
    Py_BEGIN_ALLOW_THREADS
    pagein_gpu_trim();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef gpu_functions[] = {
    {"gpu_trim", py_gpu_trim, METH_NOARGS, "gpu_trim(): free the pinned buffers kept for reuse"},
    {"gpu_probe", py_gpu_probe, METH_O, "gpu_probe(device) -> {name, total_bytes}; raises when unusable"},
    {"gpu_start", PYFN(py_gpu_start), METH_VARARGS | METH_KEYWORDS,
     "gpu_start(source, names, device, dst, keep=None, buffer_bytes=0, nbuffers=0, threads=0) -> GpuLoad"},
    {"gpu_load", PYFN(py_gpu_load), METH_VARARGS | METH_KEYWORDS,
     "gpu_load(source, names, device, dst, keep=None, buffer_bytes=0, nbuffers=0, threads=0) -> stats"},
    {NULL, NULL, 0, NULL},
};

int pyp_gpu_add(PyObject *m) {
    if (PyModule_AddFunctions(m, gpu_functions) < 0) return -1;
    return PyModule_AddIntConstant(m, "DEVICE_HOST", PAGEIN_DEVICE_HOST);
}
