/*
 * dist.c - distributed load plans (pagein_dist_plan_*) for
 * pagein.distributed: which rank reads which bytes of a model.
 */
#include "pagein_py.h"

#include <string.h>

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

PyMethodDef pyp_dist_functions[] = {
    {"dist_default_rules", py_dist_default_rules, METH_NOARGS, "dist_default_rules() -> [(pattern, split)]"},
    {"dist_plan", PYFN(py_dist_plan), METH_VARARGS | METH_KEYWORDS,
     "dist_plan(source, rank, world, mode='replicated', rules=None, align=0, cols_direct=False) -> (reads, pieces, read_bytes)"},
    {NULL, NULL, 0, NULL},
};
