/*
 * gpu.c - GPU staging for the extension (included by _pagein.c, which owns
 * Source and raise_rc). pagein/_gpu.py builds the user API on these two.
 *
 *   gpu_probe(device) -> {"name": str, "total_bytes": int}; raises
 *       pagein.Error (code PAGEIN_E_NO_CUDA) with the reason when the device
 *       cannot be used.
 *   gpu_load(source, names, device, dst, buffer_bytes=0, nbuffers=0,
 *            threads=0) -> stats dict
 *       Loads the tensors `names` (a sequence of str) of `source` (a Source)
 *       into the device addresses `dst` (a sequence of int, one per name,
 *       each with room for the tensor's bytes) on device `device` (an
 *       ordinal, or DEVICE_HOST for host memory), and returns when every
 *       one is there. The GIL is released meanwhile.
 */

static PyObject *py_gpu_probe(PyObject *self, PyObject *arg) {
    long dev = PyLong_AsLong(arg);
    if (dev == -1 && PyErr_Occurred()) return NULL;
    pagein_gpu_info info;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pagein_gpu_probe((int)dev, &info);
    Py_END_ALLOW_THREADS
    if (rc < 0) return raise_rc(rc, NULL);
    return Py_BuildValue("{s:s,s:K}", "name", info.name, "total_bytes", (unsigned long long)info.total_bytes);
}

static PyObject *py_gpu_load(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"source", "names", "device", "dst", "buffer_bytes", "nbuffers", "threads", NULL};
    PyObject *src, *names, *dsts;
    int device;
    unsigned long long buffer_bytes = 0;
    unsigned nbuffers = 0, threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OiO|KII", kwlist, &SourceType, &src, &names, &device, &dsts,
                                     &buffer_bytes, &nbuffers, &threads))
        return NULL;
    Source *s = (Source *)src;
    if (!s->f && !s->m) return raise_msg(PyExc_ValueError, "gpu_load: the file or model is closed");
    PyObject *ns = PySequence_Fast(names, "gpu_load: names must be a sequence of str");
    if (!ns) return NULL;
    PyObject *ds = PySequence_Fast(dsts, "gpu_load: dst must be a sequence of int");
    if (!ds) {
        Py_DECREF(ns);
        return NULL;
    }
    PyObject *result = NULL;
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
        ts[i] = src_find(s, PySequence_Fast_GET_ITEM(ns, i)); /* raises NotFoundError */
        if (!ts[i]) goto out;
        dst[i] = (uint64_t)PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(ds, i));
        if (PyErr_Occurred()) goto out;
    }
    pagein_gpu_opts o = PAGEIN_GPU_OPTS_INIT;
    o.device = device;
    o.buffer_bytes = buffer_bytes;
    o.nbuffers = nbuffers;
    o.threads = threads;
    o.tensors = ts;
    o.ntensors = (size_t)n;
    o.dst = dst;
    pagein_gpu_stats st;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    pagein_gpu_load *l = NULL;
    rc = s->f ? pagein_gpu_load_file(&l, s->f, &o) : pagein_gpu_load_model(&l, s->m, &o);
    if (rc == 0) rc = pagein_gpu_load_wait(l);
    pagein_gpu_load_stats(l, &st);
    /* free after the error detail was read: it is thread-local and free
     * makes no pagein call that sets it */
    pagein_gpu_load_free(l);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_rc(rc, s->path);
        goto out;
    }
    result = Py_BuildValue("{s:K,s:n,s:n,s:d,s:d,s:K,s:K,s:I,s:K,s:s}", "bytes", (unsigned long long)st.bytes,
                           "tensors", (Py_ssize_t)st.tensors, "copies", (Py_ssize_t)st.copies, "seconds", st.seconds,
                           "first_layer_seconds", st.first_layer_seconds, "ring_bytes",
                           (unsigned long long)st.ring_bytes, "pinned_peak", (unsigned long long)st.pinned_peak,
                           "buffers_peak", st.buffers_peak, "device_bytes", (unsigned long long)st.device_bytes,
                           "device_name", st.device_name);
out:
    PyMem_Free(ts);
    PyMem_Free(dst);
    Py_DECREF(ns);
    Py_DECREF(ds);
    return result;
}

#define PAGEIN_GPU_METHODS                                                                                   \
    {"gpu_probe", py_gpu_probe, METH_O, "gpu_probe(device) -> {name, total_bytes}; raises when unusable"},   \
    {"gpu_load", PYFN(py_gpu_load), METH_VARARGS | METH_KEYWORDS,                                             \
     "gpu_load(source, names, device, dst, buffer_bytes=0, nbuffers=0, threads=0) -> stats"},
