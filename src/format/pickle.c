/* pickle.c - a restricted unpickler: exactly the opcodes and globals that
 * torch.load(weights_only=True) accepts in torch 1.13
 * (torch/_weights_only_unpickler.py), plus BINFLOAT, which later torch
 * versions accept too. Nothing is ever called: allowlisted globals are
 * names in a table, and the few "calls" torch performs on them (rebuilding
 * a tensor from a storage, OrderedDict(), torch.Size(...), Parameter(...))
 * are interpreted here as building plain records. Any other global is
 * refused by name the moment its GLOBAL opcode is read, before anything
 * after it is looked at. Buffer in, no I/O. */
#include "torch_internal.h"
#include "../core/endian.h"

/* ---- the allowlist ------------------------------------------------------- */

#define ST(n, d) {"torch." n "Storage", PKG_STORAGE, PAGEIN_DTYPE_##d, PK_SCOPE_TORCH, 0}, {"torch.cuda." n "Storage", PKG_STORAGE, PAGEIN_DTYPE_##d, PK_SCOPE_TORCH, 0}
#define TT(n) {"torch." n "Tensor", PKG_TENSOR_CLASS, 0, PK_SCOPE_TORCH, 0}, {"torch.cuda." n "Tensor", PKG_TENSOR_CLASS, 0, PK_SCOPE_TORCH, 0}
#define SP(n) {"torch.sparse." n "Tensor", PKG_TENSOR_CLASS, 0, PK_SCOPE_TORCH, 0}, {"torch.cuda.sparse." n "Tensor", PKG_TENSOR_CLASS, 0, PK_SCOPE_TORCH, 0}

/* torch 1.13's _get_allowed_globals(), entry for entry (printed from
 * Debian's python3-torch; tests/torch_gen.py re-checks the list). */
const struct pk_global pk_globals[] = {
    {"collections.OrderedDict", PKG_ORDEREDDICT, 0, PK_SCOPE_TORCH, 0},
    {"torch.nn.parameter.Parameter", PKG_PARAMETER, 0, PK_SCOPE_TORCH, 0},
    {"torch.serialization._get_layout", PKG_GET_LAYOUT, 0, PK_SCOPE_TORCH, 0},
    {"torch.Size", PKG_SIZE, 0, PK_SCOPE_TORCH, 0},
    {"torch.Tensor", PKG_TENSOR_CLASS, 0, PK_SCOPE_TORCH, 0},
    {"torch.complex32", PKG_DTYPE, 0, PK_SCOPE_TORCH, 0},
    {"torch.complex64", PKG_DTYPE, PAGEIN_DTYPE_C64, PK_SCOPE_TORCH, 0},
    {"torch.complex128", PKG_DTYPE, 0, PK_SCOPE_TORCH, 0},
    {"torch.float16", PKG_DTYPE, PAGEIN_DTYPE_F16, PK_SCOPE_TORCH, 0},
    {"torch.float32", PKG_DTYPE, PAGEIN_DTYPE_F32, PK_SCOPE_TORCH, 0},
    {"torch.float64", PKG_DTYPE, PAGEIN_DTYPE_F64, PK_SCOPE_TORCH, 0},
    {"torch.int8", PKG_DTYPE, PAGEIN_DTYPE_I8, PK_SCOPE_TORCH, 0},
    {"torch.int16", PKG_DTYPE, PAGEIN_DTYPE_I16, PK_SCOPE_TORCH, 0},
    {"torch.int32", PKG_DTYPE, PAGEIN_DTYPE_I32, PK_SCOPE_TORCH, 0},
    {"torch.int64", PKG_DTYPE, PAGEIN_DTYPE_I64, PK_SCOPE_TORCH, 0},
    TT("Double"), TT("Float"), TT("BFloat16"), TT("Long"), TT("Int"), TT("Short"), TT("Char"),
    TT("Byte"), TT("Bool"), TT("Half"),
    SP("Double"), SP("Float"), SP("BFloat16"), SP("Long"), SP("Int"), SP("Short"), SP("Char"),
    SP("Byte"), SP("Half"),
    ST("Double", F64), ST("Float", F32), ST("Half", F16), ST("BFloat16", BF16), ST("Long", I64),
    ST("Int", I32), ST("Short", I16), ST("Char", I8), ST("Byte", U8), ST("Bool", BOOL),
    ST("ComplexFloat", C64),
    /* allowed by torch, but pagein has no element type for them */
    ST("ComplexDouble", INVALID),
    {"torch.QUInt8Storage", PKG_STORAGE, 0, PK_SCOPE_TORCH, 0},
    {"torch.QInt8Storage", PKG_STORAGE, 0, PK_SCOPE_TORCH, 0},
    {"torch.QInt32Storage", PKG_STORAGE, 0, PK_SCOPE_TORCH, 0},
    {"torch.QUInt4x2Storage", PKG_STORAGE, 0, PK_SCOPE_TORCH, 0},
    {"torch.QUInt2x4Storage", PKG_STORAGE, 0, PK_SCOPE_TORCH, 0},
    {"torch.storage.TypedStorage", PKG_TYPED_STORAGE, 0, PK_SCOPE_TORCH, 0},
    {"torch.storage.UntypedStorage", PKG_UNTYPED_STORAGE, PAGEIN_DTYPE_U8, PK_SCOPE_TORCH, 0},
    {"torch._utils._rebuild_parameter", PKG_REBUILD_PARAMETER, 0, PK_SCOPE_TORCH, 0},
    {"torch._utils._rebuild_tensor", PKG_REBUILD_TENSOR, 0, PK_SCOPE_TORCH, 0},
    {"torch._utils._rebuild_tensor_v2", PKG_REBUILD_TENSOR_V2, 0, PK_SCOPE_TORCH, 0},
    {"torch._utils._rebuild_sparse_tensor", PKG_REBUILD_OTHER, 0, PK_SCOPE_TORCH, 0},
    {"torch._utils._rebuild_meta_tensor_no_storage", PKG_REBUILD_OTHER, 0, PK_SCOPE_TORCH, 0},
    {"torch._utils._rebuild_sparse_csr_tensor", PKG_REBUILD_OTHER, 0, PK_SCOPE_TORCH, 0},

    /* A DCP checkpoint's .metadata (pk_state.dcp; docs/FORMAT-DCP.md): the
     * dataclasses of torch 1.13 (torch.distributed._shard.checkpoint) and
     * torch 2.x (torch.distributed.checkpoint), the memory-format enums,
     * the dtypes torch's weights_only list above lacks, getattr only as an
     * enum member lookup, and pathlib paths (kept as strings). */
#define DC(m, n, c) {m "." n, PKG_DCP_CLASS, 0, PK_SCOPE_DCP, c}
#define DCP_CLASSES(m)                                                                                   \
    DC(m ".metadata", "Metadata", PKC_METADATA), DC(m ".metadata", "TensorStorageMetadata", PKC_TENSOR_SM), \
        DC(m ".metadata", "BytesStorageMetadata", PKC_BYTES_SM),                                         \
        DC(m ".metadata", "ChunkStorageMetadata", PKC_CHUNK_SM), DC(m ".metadata", "MetadataIndex", PKC_INDEX), \
        DC(m ".filesystem", "_StorageInfo", PKC_STORAGE_INFO)
    DCP_CLASSES("torch.distributed._shard.checkpoint"),
    DCP_CLASSES("torch.distributed.checkpoint"),
    DC("torch.distributed.checkpoint.metadata", "TensorProperties", PKC_PROPERTIES),
    DC("torch.distributed.checkpoint.metadata", "StorageMeta", PKC_STORAGE_META),
    DC("torch.distributed._shard.sharded_tensor.metadata", "TensorProperties", PKC_PROPERTIES),
    {"torch.distributed._shard.sharded_tensor.metadata.MEM_FORMAT_ENCODING", PKG_DCP_ENUM, 0, PK_SCOPE_DCP, 0},
    {"torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING", PKG_DCP_ENUM, 0, PK_SCOPE_DCP, 0},
    {"builtins.getattr", PKG_GETATTR, 0, PK_SCOPE_DCP, 0},
    {"pathlib.PosixPath", PKG_PATH, 0, PK_SCOPE_DCP, 0},
    {"pathlib.PurePosixPath", PKG_PATH, 0, PK_SCOPE_DCP, 0},
    {"pathlib.WindowsPath", PKG_PATH, 0, PK_SCOPE_DCP, 0},
    {"pathlib.PureWindowsPath", PKG_PATH, 0, PK_SCOPE_DCP, 0},
    {"torch.bfloat16", PKG_DTYPE, PAGEIN_DTYPE_BF16, PK_SCOPE_DCP, 0},
    {"torch.bool", PKG_DTYPE, PAGEIN_DTYPE_BOOL, PK_SCOPE_DCP, 0},
    {"torch.uint8", PKG_DTYPE, PAGEIN_DTYPE_U8, PK_SCOPE_DCP, 0},
    {"torch.half", PKG_DTYPE, PAGEIN_DTYPE_F16, PK_SCOPE_DCP, 0},
    {"torch.float", PKG_DTYPE, PAGEIN_DTYPE_F32, PK_SCOPE_DCP, 0},
    {"torch.double", PKG_DTYPE, PAGEIN_DTYPE_F64, PK_SCOPE_DCP, 0},
    {"torch.long", PKG_DTYPE, PAGEIN_DTYPE_I64, PK_SCOPE_DCP, 0},
    {"torch.int", PKG_DTYPE, PAGEIN_DTYPE_I32, PK_SCOPE_DCP, 0},
#undef DCP_CLASSES
#undef DC
};
const size_t pk_nglobals = PI_ARRAY_LEN(pk_globals);

/* ---- objects -------------------------------------------------------------- */

struct pk_parser {
    struct pk_state *st;
    const uint8_t *buf;
    size_t len, pos;
    uint32_t *stack;
    size_t sn, sc;
    size_t *marks;
    size_t mn, mc;
    /* memo: open addressing, key + 1 (0 = empty) -> object */
    uint32_t *mkeys, *mvals;
    size_t mcap, mused;
};

static int new_obj(struct pk_state *st, enum pk_kind k, uint32_t *id) {
    RETURN_IF(st->no >= PK_MAX_OBJECTS, PAGEIN_E_LIMIT, "pickle: more than %u objects", PK_MAX_OBJECTS);
    FORWARD_IF(pi_grow((void **)&st->o, &st->co, st->no + 1, sizeof *st->o));
    memset(&st->o[st->no], 0, sizeof *st->o);
    st->o[st->no].kind = (uint8_t)k;
    *id = (uint32_t)st->no++;
    return 0;
}

static bool has_items(uint8_t k) {
    return k == PK_TUPLE || k == PK_LIST || k == PK_DICT || k == PK_SET || k == PK_INSTANCE;
}

static int add_item(struct pk_state *st, uint32_t obj, uint32_t item) {
    struct pk_obj *o = &st->o[obj];
    if (o->n + 1 > o->cap) {
        size_t cap = o->cap;
        FORWARD_IF(pi_grow((void **)&o->u.items, &cap, (size_t)o->n + 1, sizeof(uint32_t)));
        RETURN_IF(cap > UINT32_MAX, PAGEIN_E_LIMIT, "pickle: container too large");
        o->cap = (uint32_t)cap;
    }
    o->u.items[o->n++] = item;
    return 0;
}

void pk_free(struct pk_state *st) {
    if (!st) return;
    for (size_t i = 0; i < st->no; i++)
        if (has_items(st->o[i].kind)) pi_free(st->o[i].u.items);
    pi_free(st->o);
    pi_free(st->s);
    pi_free(st->t);
    pi_arena_free(&st->arena);
    memset(st, 0, sizeof *st);
}

/* ---- stack and memo ------------------------------------------------------- */

static const char *op_name(uint8_t op);

static int push(struct pk_parser *p, uint32_t id) {
    FORWARD_IF(pi_grow((void **)&p->stack, &p->sc, p->sn + 1, sizeof *p->stack));
    p->stack[p->sn++] = id;
    return 0;
}

static int push_new(struct pk_parser *p, enum pk_kind k, uint32_t *id) {
    uint32_t x;
    FORWARD_IF(new_obj(p->st, k, &x));
    if (id) *id = x;
    return push(p, x);
}

/* Items above the innermost mark (Python: the stack since MARK). */
static size_t mark_base(const struct pk_parser *p) { return p->mn ? p->marks[p->mn - 1] : 0; }

static int pop(struct pk_parser *p, uint8_t op, uint32_t *id) {
    RETURN_IF(p->sn <= mark_base(p), PAGEIN_E_BAD_PICKLE, "pickle: %s at offset %zu on an empty stack", op_name(op), p->pos - 1);
    *id = p->stack[--p->sn];
    return 0;
}

static int top(struct pk_parser *p, uint8_t op, uint32_t *id) {
    RETURN_IF(p->sn <= mark_base(p), PAGEIN_E_BAD_PICKLE, "pickle: %s at offset %zu on an empty stack", op_name(op), p->pos - 1);
    *id = p->stack[p->sn - 1];
    return 0;
}

/* pop_mark: returns the start index of the items (still on the stack). */
static int pop_mark(struct pk_parser *p, uint8_t op, size_t *start) {
    RETURN_IF(!p->mn, PAGEIN_E_BAD_PICKLE, "pickle: %s at offset %zu without a MARK", op_name(op), p->pos - 1);
    *start = p->marks[--p->mn];
    return 0;
}

static int memo_put(struct pk_parser *p, uint32_t key, uint32_t val) {
    if ((p->mused + 1) * 2 > p->mcap) {
        size_t nc = p->mcap ? p->mcap * 2 : 256;
        uint32_t *nk = pi_calloc(nc, sizeof *nk), *nv = pi_calloc(nc, sizeof *nv);
        if (!nk || !nv) {
            pi_free(nk), pi_free(nv);
            return pi_err(-ENOMEM, "pickle: out of memory for the memo");
        }
        for (size_t i = 0; i < p->mcap; i++) {
            if (!p->mkeys[i]) continue;
            size_t s = (p->mkeys[i] * 2654435761u) & (nc - 1);
            while (nk[s]) s = (s + 1) & (nc - 1);
            nk[s] = p->mkeys[i], nv[s] = p->mvals[i];
        }
        pi_free(p->mkeys), pi_free(p->mvals);
        p->mkeys = nk, p->mvals = nv, p->mcap = nc;
    }
    uint32_t k1 = key + 1; /* key 0xFFFFFFFF wraps to 0: mapped below */
    if (k1 == 0) return pi_err(PAGEIN_E_LIMIT, "pickle: memo index 4294967295");
    size_t s = (k1 * 2654435761u) & (p->mcap - 1);
    while (p->mkeys[s] && p->mkeys[s] != k1) s = (s + 1) & (p->mcap - 1);
    if (!p->mkeys[s]) p->mused++;
    p->mkeys[s] = k1, p->mvals[s] = val;
    return 0;
}

static int memo_get(struct pk_parser *p, uint32_t key, uint32_t *val) {
    uint32_t k1 = key + 1;
    if (p->mcap && k1) {
        size_t s = (k1 * 2654435761u) & (p->mcap - 1);
        while (p->mkeys[s]) {
            if (p->mkeys[s] == k1) {
                *val = p->mvals[s];
                return 0;
            }
            s = (s + 1) & (p->mcap - 1);
        }
    }
    return pi_err(PAGEIN_E_BAD_PICKLE, "pickle: memo entry %u read before it was written (offset %zu)", key, p->pos);
}

/* ---- reading ---------------------------------------------------------------- */

static int need(struct pk_parser *p, size_t n, uint8_t op) {
    RETURN_IF(p->len - p->pos < n, PAGEIN_E_TRUNCATED, "pickle: %s at offset %zu needs %zu bytes, %zu left (truncated pickle)",
              op_name(op), p->pos - 1, n, p->len - p->pos);
    return 0;
}

static bool utf8_valid(const uint8_t *s, size_t n, bool surrogatepass) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) k = 1, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) k = 2, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0) k = 3, cp = c & 0x07;
        else return false;
        if (n - i <= k) return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF))) return false;
        if (!surrogatepass && cp >= 0xD800 && cp <= 0xDFFF) return false;
        i += k + 1;
    }
    return true;
}

static int read_line(struct pk_parser *p, uint8_t op, const uint8_t **s, size_t *n) {
    const uint8_t *start = p->buf + p->pos;
    const uint8_t *nl = memchr(start, '\n', p->len - p->pos);
    RETURN_IF(!nl, PAGEIN_E_TRUNCATED, "pickle: %s at offset %zu: unterminated line (truncated pickle)", op_name(op), p->pos - 1);
    *s = start;
    *n = (size_t)(nl - start);
    p->pos += *n + 1;
    return 0;
}

static int push_int(struct pk_parser *p, int64_t v) {
    uint32_t id;
    FORWARD_IF(push_new(p, PK_INT, &id));
    p->st->o[id].u.i = v;
    return 0;
}

static int push_str(struct pk_parser *p, enum pk_kind k, const uint8_t *s, size_t n) {
    uint32_t id;
    RETURN_IF(n > UINT32_MAX, PAGEIN_E_LIMIT, "pickle: string of %zu bytes", n);
    FORWARD_IF(push_new(p, k, &id));
    p->st->o[id].u.s.p = s;
    p->st->o[id].u.s.len = (uint32_t)n;
    return 0;
}

/* A tuple/list object from stack[start..sn) (which is then popped). */
static int make_seq(struct pk_parser *p, enum pk_kind k, size_t start, uint32_t *out) {
    uint32_t id;
    size_t n = p->sn - start;
    FORWARD_IF(new_obj(p->st, k, &id));
    if (n) {
        RETURN_IF(n > UINT32_MAX, PAGEIN_E_LIMIT, "pickle: tuple of %zu items", n);
        uint32_t *it = pi_malloc(n * sizeof *it);
        if (!it) return pi_err(-ENOMEM, "pickle: out of memory");
        memcpy(it, p->stack + start, n * sizeof *it);
        p->st->o[id].u.items = it;
        p->st->o[id].n = p->st->o[id].cap = (uint32_t)n;
    }
    p->sn = start;
    *out = id;
    return 0;
}

/* ---- interpreting the allowlisted calls --------------------------------- */

static const char *kind_name(uint8_t k) {
    static const char *const n[] = {"None", "bool", "int", "int", "float", "str", "bytes", "tuple",
                                    "list", "dict", "set", "global", "storage", "tensor", "instance"};
    return k < PI_ARRAY_LEN(n) ? n[k] : "?";
}

static int get_u64(const struct pk_state *st, uint32_t id, const char *what, uint64_t *v) {
    const struct pk_obj *o = &st->o[id];
    RETURN_IF(o->kind != PK_INT, PAGEIN_E_BAD_PICKLE, "pickle: %s is a %s, expected an int", what, kind_name(o->kind));
    RETURN_IF(o->u.i < 0, PAGEIN_E_BAD_PICKLE, "pickle: %s is negative (%lld)", what, (long long)o->u.i);
    *v = (uint64_t)o->u.i;
    return 0;
}

static bool is_str(const struct pk_obj *o, const char *s) {
    size_t n = strlen(s);
    return (o->kind == PK_STR || o->kind == PK_BYTES) && o->u.s.len == n && memcmp(o->u.s.p, s, n) == 0;
}

/* torch._utils._rebuild_tensor(_v2)(storage, storage_offset, size, stride, ...) */
static int rebuild_tensor(struct pk_parser *p, const struct pk_obj *args, uint32_t *out) {
    struct pk_state *st = p->st;
    const uint32_t *a = args->u.items;
    RETURN_IF(st->o[a[0]].kind != PK_STORAGE, PAGEIN_E_BAD_PICKLE, "pickle: tensor rebuilt from a %s, expected a storage",
              kind_name(st->o[a[0]].kind));
    uint64_t off;
    FORWARD_IF(get_u64(st, a[1], "tensor storage_offset", &off));
    const struct pk_obj *sz = &st->o[a[2]], *sd = &st->o[a[3]];
    RETURN_IF(sz->kind != PK_TUPLE || sd->kind != PK_TUPLE, PAGEIN_E_BAD_PICKLE,
              "pickle: tensor size and stride must be tuples, got %s and %s", kind_name(sz->kind), kind_name(sd->kind));
    RETURN_IF(sz->n != sd->n, PAGEIN_E_BAD_PICKLE, "pickle: tensor has %u sizes but %u strides", sz->n, sd->n);
    RETURN_IF(sz->n > PK_MAX_NDIM, PAGEIN_E_LIMIT, "pickle: tensor with %u dimensions (limit %d)", sz->n, PK_MAX_NDIM);
    FORWARD_IF(pi_grow((void **)&st->t, &st->ct, st->nt + 1, sizeof *st->t));
    struct pk_tensor *t = &st->t[st->nt];
    memset(t, 0, sizeof *t);
    t->storage = st->o[a[0]].u.ref;
    t->offset = off;
    t->ndim = sz->n;
    if (t->ndim) {
        t->sizes = pi_arena_alloc(&st->arena, t->ndim * sizeof *t->sizes);
        t->strides = pi_arena_alloc(&st->arena, t->ndim * sizeof *t->strides);
        if (!t->sizes || !t->strides) return pi_err(-ENOMEM, "pickle: out of memory");
    }
    for (uint32_t i = 0; i < t->ndim; i++) {
        uint64_t v;
        FORWARD_IF(get_u64(st, sz->u.items[i], "tensor size", &t->sizes[i]));
        FORWARD_IF(get_u64(st, sd->u.items[i], "tensor stride", &v));
        RETURN_IF(v > INT64_MAX, PAGEIN_E_OVERFLOW, "pickle: tensor stride %llu", (unsigned long long)v);
        t->strides[i] = (int64_t)v;
    }
    if (args->n >= 5) {
        const struct pk_obj *rg = &st->o[a[4]];
        RETURN_IF(rg->kind != PK_BOOL, PAGEIN_E_BAD_PICKLE, "pickle: requires_grad is a %s", kind_name(rg->kind));
        t->requires_grad = rg->u.i != 0;
    }
    uint32_t id;
    FORWARD_IF(new_obj(st, PK_TENSOR, &id));
    st->o[id].u.ref = (uint32_t)st->nt++;
    *out = id;
    return 0;
}

/* Parameter(data, requires_grad) / _rebuild_parameter(data, requires_grad, hooks) */
static int make_parameter(struct pk_parser *p, const struct pk_obj *args, uint32_t *out) {
    struct pk_state *st = p->st;
    RETURN_IF(args->n < 1 || args->n > 3, PAGEIN_E_BAD_PICKLE, "pickle: Parameter with %u arguments", args->n);
    const struct pk_obj *d = &st->o[args->u.items[0]];
    RETURN_IF(d->kind != PK_TENSOR, PAGEIN_E_BAD_PICKLE, "pickle: Parameter of a %s, expected a tensor", kind_name(d->kind));
    FORWARD_IF(pi_grow((void **)&st->t, &st->ct, st->nt + 1, sizeof *st->t));
    st->t[st->nt] = st->t[d->u.ref];
    st->t[st->nt].param = 1;
    st->t[st->nt].requires_grad = 1;
    if (args->n >= 2 && st->o[args->u.items[1]].kind == PK_BOOL)
        st->t[st->nt].requires_grad = st->o[args->u.items[1]].u.i != 0;
    uint32_t id;
    FORWARD_IF(new_obj(st, PK_TENSOR, &id));
    st->o[id].u.ref = (uint32_t)st->nt++;
    *out = id;
    return 0;
}

/* ---- the DCP metadata mode ------------------------------------------------- */

static int push_global(struct pk_parser *p, const uint8_t *mod, size_t ml, const uint8_t *name, size_t nl);

/* An instance record: items[0] the class global, items[1] (optional) the
 * state or the enum member's value/name. */
static int make_instance(struct pk_state *st, uint32_t cls, uint32_t state, bool with_state, uint32_t *out) {
    FORWARD_IF(new_obj(st, PK_INSTANCE, out));
    FORWARD_IF(add_item(st, *out, cls));
    if (with_state) FORWARD_IF(add_item(st, *out, state));
    return 0;
}

/* The calls a DCP .metadata makes, interpreted (nothing is called):
 * _get_layout('torch.strided') is the string, MEM_FORMAT_ENCODING(0) and
 * getattr(MEM_FORMAT_ENCODING, 'TORCH_CONTIGUOUS_FORMAT') are enum members,
 * PosixPath(*parts) keeps its parts. Anything else is refused. */
static int reduce_dcp(struct pk_parser *p, uint32_t fn_id, uint32_t args_id, uint32_t *res) {
    struct pk_state *st = p->st;
    const struct pk_global *g = &pk_globals[st->o[fn_id].u.gid];
    const struct pk_obj *args = &st->o[args_id];
    uint32_t a0 = args->n ? args->u.items[0] : 0;
    switch (g->kind) {
    case PKG_GET_LAYOUT:
        RETURN_IF(args->n != 1 || st->o[a0].kind != PK_STR, PAGEIN_E_BAD_PICKLE,
                  "pickle: _get_layout called without a layout name");
        *res = a0;
        return 0;
    case PKG_DCP_ENUM:
        RETURN_IF(args->n != 1 || st->o[a0].kind != PK_INT, PAGEIN_E_BAD_PICKLE, "pickle: %s called without an int",
                  g->name);
        return make_instance(st, fn_id, a0, true, res);
    case PKG_GETATTR: {
        RETURN_IF(args->n != 2, PAGEIN_E_UNSAFE, "pickle: getattr with %u arguments", args->n);
        const struct pk_obj *on = &st->o[a0], *nm = &st->o[args->u.items[1]];
        RETURN_IF(on->kind != PK_GLOBAL || pk_globals[on->u.gid].kind != PKG_DCP_ENUM || nm->kind != PK_STR ||
                      nm->u.s.len > 64,
                  PAGEIN_E_UNSAFE, "pickle: getattr at offset %zu on a %s; only a memory-format enum member may be looked up",
                  p->pos - 1, on->kind == PK_GLOBAL ? pk_globals[on->u.gid].name : kind_name(on->kind));
        return make_instance(st, a0, args->u.items[1], true, res);
    }
    case PKG_PATH:
        for (uint32_t i = 0; i < args->n; i++)
            RETURN_IF(st->o[args->u.items[i]].kind != PK_STR, PAGEIN_E_BAD_PICKLE, "pickle: %s of a %s", g->name,
                      kind_name(st->o[args->u.items[i]].kind));
        return make_instance(st, fn_id, args_id, true, res);
    default:
        return pi_err(PAGEIN_E_UNSAFE, "pickle: REDUCE at offset %zu calls %s, which a DCP .metadata never calls",
                      p->pos - 1, g->name);
    }
}

/* NEWOBJ (cls, args): only the DCP dataclasses, which pickle.dump writes as
 * cls.__new__(cls) followed by BUILD with their fields. */
static int newobj_dcp(struct pk_parser *p, uint32_t cls, uint32_t args, uint32_t *out) {
    struct pk_state *st = p->st;
    RETURN_IF(st->o[cls].kind != PK_GLOBAL || pk_globals[st->o[cls].u.gid].kind != PKG_DCP_CLASS, PAGEIN_E_UNSAFE,
              "pickle: NEWOBJ at offset %zu instantiates %s; only the DCP metadata classes are allowed", p->pos - 1,
              st->o[cls].kind == PK_GLOBAL ? pk_globals[st->o[cls].u.gid].name : kind_name(st->o[cls].kind));
    RETURN_IF(st->o[args].kind != PK_TUPLE || st->o[args].n != 0, PAGEIN_E_BAD_PICKLE,
              "pickle: NEWOBJ of %s with arguments", pk_globals[st->o[cls].u.gid].name);
    return make_instance(st, cls, 0, false, out);
}

/* BUILD on an instance: its state (a dict of fields, or the tuple that
 * TensorProperties.__getstate__ returns), once. */
static int build_dcp(struct pk_parser *p, uint32_t obj, uint32_t state) {
    struct pk_state *st = p->st;
    RETURN_IF(st->o[obj].kind != PK_INSTANCE, PAGEIN_E_UNSAFE,
              "pickle: BUILD at offset %zu on a %s; only DCP metadata objects may be built", p->pos - 1,
              kind_name(st->o[obj].kind));
    RETURN_IF(st->o[obj].n != 1, PAGEIN_E_BAD_PICKLE, "pickle: BUILD at offset %zu on an object that has its state",
              p->pos - 1);
    uint8_t k = st->o[state].kind;
    RETURN_IF(k != PK_DICT && k != PK_TUPLE, PAGEIN_E_BAD_PICKLE, "pickle: BUILD at offset %zu with a %s state",
              p->pos - 1, kind_name(k));
    return add_item(st, obj, state);
}

static int read_le(struct pk_parser *p, uint8_t op, size_t n, uint64_t *v) {
    FORWARD_IF(need(p, n, op));
    *v = 0;
    for (size_t i = 0; i < n; i++) *v |= (uint64_t)p->buf[p->pos + i] << (8 * i);
    p->pos += n;
    return 0;
}

/* The opcodes of pickle protocols 3 and 4 that a DCP .metadata uses and
 * torch's data.pkl never does. *handled = 0: not one of them. */
static int op_dcp(struct pk_parser *p, uint8_t op, bool *handled) {
    struct pk_state *st = p->st;
    uint64_t n = 0;
    uint32_t a, b;
    size_t start = 0;
    *handled = true;
    switch (op) {
    case 0x95: /* FRAME: an 8-byte frame length; the frame's opcodes follow inline */
        return read_le(p, op, 8, &n);
    case 0x94: /* MEMOIZE: memo[len(memo)] = top */
        FORWARD_IF(top(p, op, &a));
        RETURN_IF(p->mused >= UINT32_MAX, PAGEIN_E_LIMIT, "pickle: memo full");
        return memo_put(p, (uint32_t)p->mused, a);
    case 0x93: { /* STACK_GLOBAL */
        FORWARD_IF(pop(p, op, &b));
        FORWARD_IF(pop(p, op, &a));
        const struct pk_obj *m = &st->o[a], *nm = &st->o[b];
        RETURN_IF(m->kind != PK_STR || nm->kind != PK_STR, PAGEIN_E_BAD_PICKLE,
                  "pickle: STACK_GLOBAL at offset %zu on a %s and a %s", p->pos - 1, kind_name(m->kind),
                  kind_name(nm->kind));
        return push_global(p, m->u.s.p, m->u.s.len, nm->u.s.p, nm->u.s.len);
    }
    case 0x8c: case 0x8d: case 'C': case 'B': case 0x8e: { /* SHORT_BINUNICODE, BINUNICODE8, *BINBYTES* */
        size_t w = op == 0x8c || op == 'C' ? 1 : op == 'B' ? 4 : 8;
        FORWARD_IF(read_le(p, op, w, &n));
        RETURN_IF(n > p->len - p->pos, PAGEIN_E_TRUNCATED,
                  "pickle: %s at offset %zu needs %llu bytes, %zu left (truncated pickle)", op == 0x8c ? "SHORT_BINUNICODE" : "string",
                  p->pos - 1 - w, (unsigned long long)n, p->len - p->pos);
        bool text = op == 0x8c || op == 0x8d;
        RETURN_IF(text && !utf8_valid(p->buf + p->pos, (size_t)n, true), PAGEIN_E_BAD_UTF8,
                  "pickle: string at offset %zu is not UTF-8", p->pos - 1 - w);
        FORWARD_IF(push_str(p, text ? PK_STR : PK_BYTES, p->buf + p->pos, (size_t)n));
        p->pos += (size_t)n;
        return 0;
    }
    case 0x90: /* ADDITEMS */
        FORWARD_IF(pop_mark(p, op, &start));
        RETURN_IF(start == 0 || start == mark_base(p) || st->o[p->stack[start - 1]].kind != PK_SET, PAGEIN_E_BAD_PICKLE,
                  "pickle: ADDITEMS at offset %zu without a set", p->pos - 1);
        for (size_t i = start; i < p->sn; i++) FORWARD_IF(add_item(st, p->stack[start - 1], p->stack[i]));
        p->sn = start;
        return 0;
    case '0': /* POP */
        return pop(p, op, &a);
    case '1': /* POP_MARK */
        FORWARD_IF(pop_mark(p, op, &start));
        p->sn = start;
        return 0;
    default:
        *handled = false;
        return 0;
    }
}

static int op_reduce(struct pk_parser *p, uint8_t op) {
    struct pk_state *st = p->st;
    uint32_t args_id, fn_id;
    FORWARD_IF(pop(p, op, &args_id));
    FORWARD_IF(top(p, op, &fn_id));
    const struct pk_obj *fn = &st->o[fn_id];
    /* torch: `if func not in _get_allowed_globals().values()` */
    RETURN_IF(fn->kind != PK_GLOBAL, PAGEIN_E_UNSAFE, "pickle: REDUCE at offset %zu calls a %s, not an allowlisted global",
              p->pos - 1, kind_name(fn->kind));
    const struct pk_global *g = &pk_globals[fn->u.gid];
    const struct pk_obj *args = &st->o[args_id];
    RETURN_IF(args->kind != PK_TUPLE, PAGEIN_E_BAD_PICKLE, "pickle: %s called with a %s, expected an argument tuple", g->name,
              kind_name(args->kind));
    uint32_t res;
    if (st->dcp && g->kind != PKG_ORDEREDDICT && g->kind != PKG_SIZE) {
        FORWARD_IF(reduce_dcp(p, fn_id, args_id, &res));
        p->stack[p->sn - 1] = res;
        return 0;
    }
    switch (g->kind) {
    case PKG_ORDEREDDICT: {
        uint32_t nargs = args->n, src_id = nargs ? args->u.items[0] : 0;
        FORWARD_IF(new_obj(st, PK_DICT, &res)); /* may move st->o: no pointers held across */
        st->o[res].odict = 1;
        if (nargs == 0) break;
        /* OrderedDict(iterable of pairs) */
        RETURN_IF(nargs != 1, PAGEIN_E_BAD_PICKLE, "pickle: OrderedDict called with %u arguments", nargs);
        RETURN_IF(st->o[src_id].kind != PK_LIST && st->o[src_id].kind != PK_TUPLE, PAGEIN_E_UNSUPPORTED,
                  "pickle: OrderedDict built from a %s", kind_name(st->o[src_id].kind));
        for (uint32_t i = 0; i < st->o[src_id].n; i++) {
            const struct pk_obj *pr = &st->o[st->o[src_id].u.items[i]];
            RETURN_IF((pr->kind != PK_TUPLE && pr->kind != PK_LIST) || pr->n != 2, PAGEIN_E_BAD_PICKLE,
                      "pickle: OrderedDict item %u is not a pair", i);
            uint32_t k = pr->u.items[0], v = pr->u.items[1];
            FORWARD_IF(add_item(st, res, k));
            FORWARD_IF(add_item(st, res, v));
        }
        break;
    }
    case PKG_SIZE:
        /* torch.Size(tuple) is a tuple */
        RETURN_IF(args->n != 1 || (st->o[args->u.items[0]].kind != PK_TUPLE && st->o[args->u.items[0]].kind != PK_LIST),
                  PAGEIN_E_BAD_PICKLE, "pickle: torch.Size called without a sequence");
        res = args->u.items[0];
        break;
    case PKG_REBUILD_TENSOR:
        RETURN_IF(args->n != 4, PAGEIN_E_BAD_PICKLE, "pickle: _rebuild_tensor with %u arguments, expected 4", args->n);
        FORWARD_IF(rebuild_tensor(p, args, &res));
        break;
    case PKG_REBUILD_TENSOR_V2:
        RETURN_IF(args->n != 6 && args->n != 7, PAGEIN_E_BAD_PICKLE,
                  "pickle: _rebuild_tensor_v2 with %u arguments, expected 6 or 7", args->n);
        FORWARD_IF(rebuild_tensor(p, args, &res));
        break;
    case PKG_REBUILD_PARAMETER:
        FORWARD_IF(make_parameter(p, args, &res));
        break;
    case PKG_REBUILD_OTHER:
        return pi_err(PAGEIN_E_UNSUPPORTED,
                      "pickle: %s: sparse and meta tensors are allowed by torch.load(weights_only=True) "
                      "but have no dense bytes pagein could point at; save t.to_dense() instead",
                      g->name);
    default:
        return pi_err(PAGEIN_E_UNSUPPORTED,
                      "pickle: calling %s is allowed by torch.load(weights_only=True) but is not what "
                      "torch.save writes; pagein does not support it",
                      g->name);
    }
    p->stack[p->sn - 1] = res;
    return 0;
}

/* In the DCP mode, the torch entries a .metadata also names. */
static bool dcp_takes(const struct pk_global *g) {
    return g->scope == PK_SCOPE_DCP ||
           (g->scope == PK_SCOPE_TORCH && (g->kind == PKG_ORDEREDDICT || g->kind == PKG_SIZE || g->kind == PKG_DTYPE ||
                                           g->kind == PKG_GET_LAYOUT));
}

/* Pushes the allowlisted global module.name, or refuses it by name. */
static int push_global(struct pk_parser *p, const uint8_t *mod, size_t ml, const uint8_t *name, size_t nl) {
    for (size_t i = 0; i < pk_nglobals; i++) {
        const char *g = pk_globals[i].name;
        if (p->st->dcp ? !dcp_takes(&pk_globals[i]) : pk_globals[i].scope != PK_SCOPE_TORCH) continue;
        size_t gl = strlen(g);
        if (gl != ml + 1 + nl || memcmp(g, mod, ml) != 0 || g[ml] != '.' || memcmp(g + ml + 1, name, nl) != 0) continue;
        uint32_t id;
        FORWARD_IF(push_new(p, PK_GLOBAL, &id));
        p->st->o[id].u.gid = (uint32_t)i;
        return 0;
    }
    if (p->st->dcp)
        return pi_err(PAGEIN_E_UNSAFE,
                      "pickle: refusing global '%.*s.%.*s' (offset %zu): not one of the DCP metadata classes "
                      "pagein allows (docs/FORMAT-DCP.md); loading it with pickle could run arbitrary code",
                      (int)PI_MIN(ml, 200), (const char *)mod, (int)PI_MIN(nl, 200), (const char *)name, p->pos);
    return pi_err(PAGEIN_E_UNSAFE,
                  "pickle: refusing global '%.*s.%.*s' (offset %zu): not in torch.load(weights_only=True)'s "
                  "allowlist; a checkpoint that needs it can run arbitrary code when loaded with pickle",
                  (int)PI_MIN(ml, 200), (const char *)mod, (int)PI_MIN(nl, 200), (const char *)name, p->pos);
}

static int op_global(struct pk_parser *p, uint8_t op) {
    const uint8_t *mod, *name;
    size_t ml, nl;
    FORWARD_IF(read_line(p, op, &mod, &ml));
    FORWARD_IF(read_line(p, op, &name, &nl));
    /* torch: readline()[:-1].decode("utf-8"), then f"{module}.{name}" looked
     * up in the allowlist. */
    RETURN_IF(!utf8_valid(mod, ml, false) || !utf8_valid(name, nl, false), PAGEIN_E_BAD_PICKLE,
              "pickle: GLOBAL at offset %zu is not UTF-8", p->pos);
    return push_global(p, mod, ml, name, nl);
}

static int op_persid(struct pk_parser *p, uint8_t op) {
    struct pk_state *st = p->st;
    uint32_t pid;
    RETURN_IF(st->dcp, PAGEIN_E_UNSAFE, "pickle: persistent id at offset %zu in a DCP .metadata", p->pos - 1);
    FORWARD_IF(pop(p, op, &pid));
    const struct pk_obj *t = &st->o[pid];
    RETURN_IF(t->kind != PK_TUPLE, PAGEIN_E_BAD_PICKLE, "pickle: persistent id is a %s, expected a tuple", kind_name(t->kind));
    RETURN_IF(t->n < 1 || !is_str(&st->o[t->u.items[0]], "storage"), PAGEIN_E_BAD_PICKLE,
              "pickle: only persistent_load of 'storage' is allowed");
    RETURN_IF(t->n != 5, PAGEIN_E_BAD_PICKLE, "pickle: storage persistent id has %u fields, expected 5", t->n);
    const struct pk_obj *cls = &st->o[t->u.items[1]], *key = &st->o[t->u.items[2]];
    RETURN_IF(cls->kind != PK_GLOBAL, PAGEIN_E_BAD_PICKLE, "pickle: storage type is a %s", kind_name(cls->kind));
    const struct pk_global *g = &pk_globals[cls->u.gid];
    RETURN_IF(g->kind != PKG_STORAGE && g->kind != PKG_UNTYPED_STORAGE, PAGEIN_E_BAD_PICKLE,
              "pickle: storage type %s is not a storage class", g->name);
    RETURN_IF(g->dtype == PAGEIN_DTYPE_INVALID, PAGEIN_E_BAD_DTYPE,
              "pickle: %s has no pagein element type (complex128 and quantized storages are not supported)", g->name);
    RETURN_IF(key->kind != PK_STR && key->kind != PK_BYTES, PAGEIN_E_BAD_PICKLE, "pickle: storage key is a %s",
              kind_name(key->kind));
    uint64_t numel;
    FORWARD_IF(get_u64(st, t->u.items[4], "storage numel", &numel));
    FORWARD_IF(pi_grow((void **)&st->s, &st->cs, st->ns + 1, sizeof *st->s));
    struct pk_storage *s = &st->s[st->ns];
    s->key = key->u.s.p;
    s->key_len = key->u.s.len;
    s->gid = cls->u.gid;
    s->dtype = g->dtype;
    s->numel = numel;
    uint32_t id;
    FORWARD_IF(push_new(p, PK_STORAGE, &id));
    st->o[id].u.ref = (uint32_t)st->ns++;
    return 0;
}

static const char *op_name(uint8_t op) {
    switch (op) {
    case 'c': return "GLOBAL";
    case 0x81: return "NEWOBJ";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'a': return "APPEND";
    case 'e': return "APPENDS";
    case 's': return "SETITEM";
    case 'u': return "SETITEMS";
    case '(': return "MARK";
    case 't': return "TUPLE";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'M': return "BININT2";
    case 'X': return "BINUNICODE";
    case 'U': return "SHORT_BINSTRING";
    case 'Q': return "BINPERSID";
    case 'h': return "BINGET";
    case 'j': return "LONG_BINGET";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 0x8a: return "LONG1";
    case 0x80: return "PROTO";
    case 'G': return "BINFLOAT";
    case '.': return "STOP";
    default: return "opcode";
    }
}

/* Names of opcodes that exist in pickle but that torch's weights_only
 * unpickler refuses, for the error message. */
static const char *refused_name(uint8_t op) {
    switch (op) {
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 'P': return "PERSID";
    case 0x95: return "FRAME";
    case 0x94: return "MEMOIZE";
    case 0x8c: return "SHORT_BINUNICODE";
    case 'C': return "SHORT_BINBYTES";
    case 'B': return "BINBYTES";
    case 0x8b: return "LONG4";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'T': return "BINSTRING";
    case 'l': return "LIST";
    case 'd': return "DICT";
    case 'p': return "PUT";
    case 'g': return "GET";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    default: return NULL;
    }
}

int pk_load(const uint8_t *buf, size_t len, struct pk_state *st) {
    struct pk_parser p = {.st = st, .buf = buf, .len = len};
    int rc = 0;
    for (;;) {
        if (p.pos >= len) {
            rc = pi_err(PAGEIN_E_TRUNCATED, "pickle: ended at offset %zu without STOP (truncated pickle)", p.pos);
            break;
        }
        uint8_t op = buf[p.pos++];
        uint32_t a = 0, b = 0, c = 0;
        size_t start = 0;
        switch (op) {
        case 0x80: /* PROTO: read and ignored, like torch */
            if ((rc = need(&p, 1, op)) < 0) goto out;
            st->proto = buf[p.pos++];
            break;
        case '.': /* STOP */
            if ((rc = pop(&p, op, &st->root)) < 0) goto out;
            goto out;
        case 'c': rc = op_global(&p, op); break;
        case 0x81: /* NEWOBJ: only torch.nn.Parameter */
            if ((rc = pop(&p, op, &a)) < 0 || (rc = pop(&p, op, &b)) < 0) goto out;
            if (st->dcp) {
                if ((rc = newobj_dcp(&p, b, a, &c)) == 0) rc = push(&p, c);
                break;
            }
            if (st->o[b].kind != PK_GLOBAL || pk_globals[st->o[b].u.gid].kind != PKG_PARAMETER) {
                rc = pi_err(PAGEIN_E_UNSAFE, "pickle: NEWOBJ at offset %zu instantiates %s; only torch.nn.Parameter is allowed",
                            p.pos - 1, st->o[b].kind == PK_GLOBAL ? pk_globals[st->o[b].u.gid].name : kind_name(st->o[b].kind));
                goto out;
            }
            if (st->o[a].kind != PK_TUPLE) {
                rc = pi_err(PAGEIN_E_BAD_PICKLE, "pickle: NEWOBJ arguments are a %s", kind_name(st->o[a].kind));
                goto out;
            }
            if ((rc = make_parameter(&p, &st->o[a], &c)) < 0) goto out;
            rc = push(&p, c);
            break;
        case 'R': rc = op_reduce(&p, op); break;
        case 'b': /* BUILD: state on Tensor / Parameter / OrderedDict only */
            if ((rc = pop(&p, op, &a)) < 0 || (rc = top(&p, op, &b)) < 0) goto out;
            if (st->dcp) {
                rc = build_dcp(&p, b, a);
                break;
            }
            if (st->o[b].kind == PK_DICT && st->o[b].odict) break; /* __dict__ update, e.g. _metadata */
            if (st->o[b].kind == PK_TENSOR && st->t[st->o[b].u.ref].param) break; /* Parameter.__setstate__ */
            if (st->o[b].kind == PK_TENSOR) {
                rc = pi_err(PAGEIN_E_UNSUPPORTED, "pickle: BUILD on a tensor (legacy Tensor.set_) is not supported");
                goto out;
            }
            rc = pi_err(PAGEIN_E_UNSAFE, "pickle: BUILD at offset %zu on a %s; only Tensor, Parameter and OrderedDict may be built",
                        p.pos - 1, kind_name(st->o[b].kind));
            goto out;
        case 'a': /* APPEND */
            if ((rc = pop(&p, op, &a)) < 0 || (rc = top(&p, op, &b)) < 0) goto out;
            if (st->o[b].kind != PK_LIST) {
                rc = pi_err(PAGEIN_E_BAD_PICKLE, "pickle: APPEND to a %s, only lists", kind_name(st->o[b].kind));
                goto out;
            }
            rc = add_item(st, b, a);
            break;
        case 'e': /* APPENDS */
            if ((rc = pop_mark(&p, op, &start)) < 0) goto out;
            if (start == mark_base(&p) || start == 0) {
                rc = pi_err(PAGEIN_E_BAD_PICKLE, "pickle: APPENDS at offset %zu without a list", p.pos - 1);
                goto out;
            }
            b = p.stack[start - 1];
            if (st->o[b].kind != PK_LIST) {
                rc = pi_err(PAGEIN_E_BAD_PICKLE, "pickle: APPENDS to a %s, only lists", kind_name(st->o[b].kind));
                goto out;
            }
            for (size_t i = start; i < p.sn && rc == 0; i++) rc = add_item(st, b, p.stack[i]);
            p.sn = start;
            break;
        case 's': /* SETITEM */
            if ((rc = pop(&p, op, &a)) < 0 || (rc = pop(&p, op, &b)) < 0 || (rc = top(&p, op, &c)) < 0) goto out;
            if (st->o[c].kind != PK_DICT) {
                rc = pi_err(PAGEIN_E_BAD_PICKLE, "pickle: SETITEM on a %s, only dicts", kind_name(st->o[c].kind));
                goto out;
            }
            if ((rc = add_item(st, c, b)) < 0) goto out;
            rc = add_item(st, c, a);
            break;
        case 'u': /* SETITEMS */
            if ((rc = pop_mark(&p, op, &start)) < 0) goto out;
            if (start == mark_base(&p) || start == 0) {
                rc = pi_err(PAGEIN_E_BAD_PICKLE, "pickle: SETITEMS at offset %zu without a dict", p.pos - 1);
                goto out;
            }
            c = p.stack[start - 1];
            if (st->o[c].kind != PK_DICT) {
                rc = pi_err(PAGEIN_E_BAD_PICKLE, "pickle: SETITEMS on a %s, only dicts", kind_name(st->o[c].kind));
                goto out;
            }
            if ((p.sn - start) % 2) {
                rc = pi_err(PAGEIN_E_BAD_PICKLE, "pickle: SETITEMS at offset %zu with an odd number of items", p.pos - 1);
                goto out;
            }
            for (size_t i = start; i < p.sn && rc == 0; i++) rc = add_item(st, c, p.stack[i]);
            p.sn = start;
            break;
        case '(': /* MARK */
            rc = pi_grow((void **)&p.marks, &p.mc, p.mn + 1, sizeof *p.marks);
            if (rc == 0) p.marks[p.mn++] = p.sn;
            break;
        case 't': /* TUPLE */
            if ((rc = pop_mark(&p, op, &start)) < 0 || (rc = make_seq(&p, PK_TUPLE, start, &a)) < 0) goto out;
            rc = push(&p, a);
            break;
        case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
            size_t k = (size_t)(op - 0x84);
            if (p.sn < mark_base(&p) + k) {
                rc = pi_err(PAGEIN_E_BAD_PICKLE, "pickle: %s at offset %zu with too few items", op_name(op), p.pos - 1);
                goto out;
            }
            if ((rc = make_seq(&p, PK_TUPLE, p.sn - k, &a)) < 0) goto out;
            rc = push(&p, a);
            break;
        }
        case 'N': rc = push_new(&p, PK_NONE, NULL); break;
        case 0x89: case 0x88: /* NEWFALSE, NEWTRUE */
            if ((rc = push_new(&p, PK_BOOL, &a)) == 0) st->o[a].u.i = op == 0x88;
            break;
        case ')': rc = push_new(&p, PK_TUPLE, NULL); break;
        case ']': rc = push_new(&p, PK_LIST, NULL); break;
        case '}': rc = push_new(&p, PK_DICT, NULL); break;
        case 0x8f: rc = push_new(&p, PK_SET, NULL); break;
        case 'J':
            if ((rc = need(&p, 4, op)) < 0) goto out;
            {
                uint32_t v = pi_le32(buf + p.pos);
                p.pos += 4;
                rc = push_int(&p, (int32_t)v);
            }
            break;
        case 'K':
            if ((rc = need(&p, 1, op)) < 0) goto out;
            rc = push_int(&p, buf[p.pos++]);
            break;
        case 'M':
            if ((rc = need(&p, 2, op)) < 0) goto out;
            rc = push_int(&p, buf[p.pos] | buf[p.pos + 1] << 8);
            p.pos += 2;
            break;
        case 0x8a: { /* LONG1: little-endian two's complement of n bytes */
            if ((rc = need(&p, 1, op)) < 0) goto out;
            size_t n = buf[p.pos++];
            if ((rc = need(&p, n, op)) < 0) goto out;
            const uint8_t *d = buf + p.pos;
            p.pos += n;
            if (n > 8) {
                /* fits in int64 only if the top bytes are pure sign extension */
                bool neg = d[n - 1] & 0x80, fits = true;
                for (size_t i = 8; i < n; i++)
                    if (d[i] != (neg ? 0xFF : 0)) fits = false;
                if (fits && (bool)(d[7] & 0x80) != neg) fits = false;
                if (!fits) {
                    rc = push_str(&p, PK_BIGINT, d, n);
                    break;
                }
                n = 8;
            }
            uint64_t v = 0;
            for (size_t i = 0; i < n; i++) v |= (uint64_t)d[i] << (8 * i);
            if (n && n < 8 && (d[n - 1] & 0x80)) v |= ~0ull << (8 * n);
            rc = push_int(&p, (int64_t)v);
            break;
        }
        case 'G': { /* BINFLOAT: big-endian IEEE double */
            if ((rc = need(&p, 8, op)) < 0) goto out;
            uint64_t v = 0;
            for (int i = 0; i < 8; i++) v = v << 8 | buf[p.pos + (size_t)i];
            p.pos += 8;
            if ((rc = push_new(&p, PK_FLOAT, &a)) == 0) memcpy(&st->o[a].u.f, &v, 8);
            break;
        }
        case 'X': { /* BINUNICODE: utf-8, surrogatepass */
            if ((rc = need(&p, 4, op)) < 0) goto out;
            size_t n = pi_le32(buf + p.pos);
            p.pos += 4;
            if ((rc = need(&p, n, op)) < 0) goto out;
            if (!utf8_valid(buf + p.pos, n, true)) {
                rc = pi_err(PAGEIN_E_BAD_UTF8, "pickle: BINUNICODE at offset %zu is not UTF-8", p.pos - 5);
                goto out;
            }
            rc = push_str(&p, PK_STR, buf + p.pos, n);
            p.pos += n;
            break;
        }
        case 'U': { /* SHORT_BINSTRING: torch.load decodes it as UTF-8 */
            if ((rc = need(&p, 1, op)) < 0) goto out;
            size_t n = buf[p.pos++];
            if ((rc = need(&p, n, op)) < 0) goto out;
            if (!utf8_valid(buf + p.pos, n, false)) {
                rc = pi_err(PAGEIN_E_BAD_UTF8, "pickle: SHORT_BINSTRING at offset %zu is not UTF-8", p.pos - 2);
                goto out;
            }
            rc = push_str(&p, PK_STR, buf + p.pos, n);
            p.pos += n;
            break;
        }
        case 'Q': rc = op_persid(&p, op); break;
        case 'h': case 'j': { /* BINGET, LONG_BINGET */
            size_t n = op == 'h' ? 1 : 4;
            if ((rc = need(&p, n, op)) < 0) goto out;
            uint32_t k = n == 4 ? pi_le32(buf + p.pos) : buf[p.pos];
            p.pos += n;
            if ((rc = memo_get(&p, k, &a)) < 0) goto out;
            rc = push(&p, a);
            break;
        }
        case 'q': case 'r': { /* BINPUT, LONG_BINPUT */
            size_t n = op == 'q' ? 1 : 4;
            if ((rc = need(&p, n, op)) < 0) goto out;
            uint32_t k = n == 4 ? pi_le32(buf + p.pos) : buf[p.pos];
            p.pos += n;
            if ((rc = top(&p, op, &a)) < 0) goto out;
            rc = memo_put(&p, k, a);
            break;
        }
        default: {
            bool handled = false;
            if (st->dcp && ((rc = op_dcp(&p, op, &handled)) < 0 || handled)) break;
            const char *n = refused_name(op);
            if (n)
                rc = pi_err(PAGEIN_E_UNSUPPORTED,
                            "pickle: opcode %s (0x%02x) at offset %zu is refused by torch.load(weights_only=True); "
                            "re-save with torch.save's default pickle protocol 2",
                            n, op, p.pos - 1);
            else
                rc = pi_err(PAGEIN_E_BAD_PICKLE, "pickle: unknown opcode 0x%02x at offset %zu", op, p.pos - 1);
            goto out;
        }
        }
        if (rc < 0) goto out;
    }
out:
    pi_free(p.stack);
    pi_free(p.marks);
    pi_free(p.mkeys);
    pi_free(p.mvals);
    return rc;
}
