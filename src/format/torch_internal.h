/*
 * torch_internal.h - private pieces of the PyTorch checkpoint reader:
 * the zip container (zip.c), the restricted unpickler (pickle.c) and the
 * per-tensor extension kept next to the tensor table (torch.c).
 * Everything here is buffer-in, no I/O (docs/FORMAT-TORCH.md).
 */
#ifndef PAGEIN_TORCH_INTERNAL_H
#define PAGEIN_TORCH_INTERNAL_H

#include "format.h"

/* ---- zip (zip.c) -------------------------------------------------------- */

struct pi_zip_entry {
    const char *name; /* points into the central directory (not NUL-terminated) */
    uint32_t name_len;
    uint16_t method;  /* 0 = stored */
    uint16_t flags;   /* general purpose bit flags */
    uint64_t offset;  /* absolute offset of the record's data */
    uint64_t size;    /* uncompressed size */
    uint64_t csize;   /* compressed size */
    uint32_t crc;
};

struct pi_zip {
    struct pi_zip_entry *e; /* sorted by name */
    size_t n;
    int zip64;              /* a zip64 end-of-central-directory record was used */
    uint64_t cd_offset;
};

/* Parses the central directory of the zip image buf[0..len). Every entry's
 * local header is checked (signature, name) and its data range bounded by
 * the file. Compression is NOT refused here (the caller decides). Returns 0,
 * PAGEIN_E_BAD_ZIP, PAGEIN_E_TRUNCATED, PAGEIN_E_LIMIT or -ENOMEM. */
int pi_zip_parse(const uint8_t *buf, size_t len, struct pi_zip *z);
void pi_zip_free(struct pi_zip *z);
/* Binary search by exact name; NULL if absent. */
const struct pi_zip_entry *pi_zip_find(const struct pi_zip *z, const char *name, size_t len);

/* ---- restricted unpickler (pickle.c) ------------------------------------ */

enum pk_kind {
    PK_NONE,
    PK_BOOL,
    PK_INT,
    PK_BIGINT, /* LONG1 wider than 64 bits: raw bytes kept */
    PK_FLOAT,
    PK_STR,
    PK_BYTES,
    PK_TUPLE,
    PK_LIST,
    PK_DICT,   /* dict or collections.OrderedDict (odict = 1) */
    PK_SET,
    PK_GLOBAL, /* an allowlisted global: u.gid indexes pk_globals[] */
    PK_STORAGE,/* u.ref indexes st->storages */
    PK_TENSOR, /* u.ref indexes st->tensors */
    /* DCP metadata mode only: an instance of an allowlisted class (NEWOBJ
     * of a DCP dataclass, an enum member, a path): items[0] is the class
     * (a PK_GLOBAL), items[1] its state once BUILD gave one, or the enum
     * member's value / name */
    PK_INSTANCE
};

struct pk_obj {
    uint8_t kind;
    uint8_t odict;
    uint32_t n, cap; /* items (dict: 2 per pair, key then value) */
    union {
        int64_t i;
        double f;
        struct {
            const uint8_t *p;
            uint32_t len;
        } s;
        uint32_t *items;
        uint32_t gid;
        uint32_t ref;
    } u;
};

/* What an allowlisted global is. */
enum pk_gkind {
    PKG_ORDEREDDICT,
    PKG_PARAMETER,
    PKG_GET_LAYOUT,
    PKG_SIZE,
    PKG_TENSOR_CLASS, /* torch.Tensor, torch.FloatTensor, torch.sparse.*, ... */
    PKG_DTYPE,
    PKG_STORAGE,      /* typed storage class; dtype in pk_global.dtype (INVALID = unsupported) */
    PKG_UNTYPED_STORAGE,
    PKG_TYPED_STORAGE,
    PKG_REBUILD_TENSOR,
    PKG_REBUILD_TENSOR_V2,
    PKG_REBUILD_PARAMETER,
    PKG_REBUILD_OTHER, /* sparse, sparse CSR, meta: allowed by torch, not by pagein */
    /* DCP metadata mode only (scope PK_SCOPE_DCP): */
    PKG_DCP_CLASS,  /* a DCP dataclass, instantiated by NEWOBJ, state by BUILD; pk_global.cls says which */
    PKG_DCP_ENUM,   /* the memory-format enum: Enum(value) or getattr(Enum, name) */
    PKG_GETATTR,    /* builtins.getattr, only as getattr(<allowlisted enum>, <str>) */
    PKG_PATH        /* pathlib paths (StorageMeta.checkpoint_id): kept as the argument tuple */
};

/* Which DCP dataclass a PKG_DCP_CLASS global is (torch 1.13 and 2.x). */
enum pk_dcp_cls {
    PKC_NONE = 0,
    PKC_METADATA,
    PKC_TENSOR_SM,     /* TensorStorageMetadata */
    PKC_BYTES_SM,      /* BytesStorageMetadata */
    PKC_CHUNK_SM,      /* ChunkStorageMetadata */
    PKC_PROPERTIES,    /* TensorProperties */
    PKC_INDEX,         /* MetadataIndex */
    PKC_STORAGE_INFO,  /* filesystem._StorageInfo */
    PKC_STORAGE_META   /* StorageMeta (2.x) */
};

/* pk_global.scope: which unpickler accepts the global. */
#define PK_SCOPE_TORCH 0 /* torch.load(weights_only=True)'s allowlist (data.pkl) */
#define PK_SCOPE_DCP 1   /* a DCP checkpoint's .metadata only */

struct pk_global {
    const char *name;      /* "module.name" exactly as torch 1.13's allowlist spells it */
    enum pk_gkind kind;
    pagein_dtype dtype;    /* for storages; DCP: dtypes */
    uint8_t scope;         /* PK_SCOPE_*; the DCP mode also takes the torch entries of
                            * collections.OrderedDict, torch.Size, dtypes and _get_layout */
    uint8_t cls;           /* enum pk_dcp_cls for PKG_DCP_CLASS */
};
extern const struct pk_global pk_globals[];
extern const size_t pk_nglobals;

struct pk_storage {
    const uint8_t *key;
    uint32_t key_len;
    uint32_t gid;      /* the storage class global */
    pagein_dtype dtype;
    uint64_t numel;
};

struct pk_tensor {
    uint32_t storage;  /* index in storages */
    uint64_t offset;   /* storage_offset in elements */
    uint32_t ndim;
    uint64_t *sizes;
    int64_t *strides;
    uint8_t requires_grad;
    uint8_t param;
};

struct pk_state {
    struct pk_obj *o;
    size_t no, co;
    struct pk_storage *s;
    size_t ns, cs;
    struct pk_tensor *t;
    size_t nt, ct;
    struct pi_arena arena; /* sizes and strides */
    uint32_t root;
    int proto;
    /* Set by the caller before pk_load: 1 runs the DCP metadata mode
     * (pickle protocol 2-4 as Python's pickle.dump writes a DCP .metadata:
     * FRAME, MEMOIZE, STACK_GLOBAL, SHORT_BINUNICODE, BINBYTES, NEWOBJ and
     * BUILD of the DCP dataclasses; the allowlist is the PK_SCOPE_DCP
     * entries plus OrderedDict, torch.Size, dtypes and layouts; no
     * persistent ids, no tensors). 0: torch.load(weights_only=True). */
    int dcp;
};

/* Limits (documented in docs/FORMAT-TORCH.md). */
#define PK_MAX_NDIM 64
#define PK_MAX_OBJECTS (1u << 25)

/* Runs the restricted unpickler over buf[0..len) (a data.pkl record).
 * Returns 0 with st->root set, PAGEIN_E_UNSAFE (a global outside the
 * allowlist, or calling something that is not allowlisted: detail names it),
 * PAGEIN_E_UNSUPPORTED (an opcode or allowlisted construct pagein does not
 * handle), PAGEIN_E_BAD_PICKLE, PAGEIN_E_TRUNCATED, PAGEIN_E_LIMIT, -ENOMEM.
 * st must be zeroed by the caller and is freed by pk_free in every case. */
int pk_load(const uint8_t *buf, size_t len, struct pk_state *st);
void pk_free(struct pk_state *st);

/* ---- per-tensor extension of the table (torch.c) ------------------------ */

struct pi_torch_rec {
    uint32_t storage;       /* index of the storage record (dense, in key order) */
    uint64_t elem_offset;   /* torch storage_offset, elements */
    int64_t *strides;       /* ndim, elements (arena) */
    uint64_t storage_off;   /* absolute offset of the storage record's data */
    uint64_t storage_bytes; /* numel * element size of the storage */
    const char *storage_key;/* NUL-terminated (arena) */
    uint32_t n_sharing;     /* tensors that use this storage record */
    uint8_t requires_grad, param;
    size_t seq;             /* position in the pickle (state-dict order) */
};

struct pi_torch_ext {
    struct pi_torch_rec *r; /* parallel to the table's tensors (same index) */
    size_t n;
    uint32_t n_storages;
};

void pi_torch_ext_free(struct pi_torch_ext *x);

/* Row-major, native-order bytes [off, off+len) of a strided or byte-swapped
 * tensor (gathered through its strides, swapped), under the truncation
 * guard: pagein_tensor_copy's path for such tensors. */
int pi_tensor_gather(const pagein_file *f, const pagein_tensor *t, void *dst, uint64_t off, size_t len);

#endif
