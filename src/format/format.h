/* format.h - the format table: one row per file format (name, detection,
 * parser, file-name suffixes, directory rank, how its header is read).
 * Adding a format = its file under src/format/ (the parser, its detector and
 * its const struct pi_format row) and one line in pi_formats[] (format.c), plus its PAGEIN_FORMAT_* id in pagein.h; every
 * other layer (file/ header reads, load/ directory and prefix scans, the
 * CLI's cache commands and plan) asks the table. tests/test_seams_format.c
 * is such a row, compiled into the unit-test runner only. */
#ifndef PAGEIN_FORMAT_H
#define PAGEIN_FORMAT_H

#include "../internal.h"
#include "../core/json.h"

/* A parser: buf holds the first avail bytes of a file of size bytes
 * (avail == size for mapped and in-memory files). It does no I/O, fills *t
 * (initialised by the caller, freed by the caller on error too), and
 * returns PAGEIN_E_TRUNCATED when it needed more than avail bytes (the
 * caller then grows the prefix and calls again). flags: PAGEIN_OPEN_*. */
struct pi_pieces;

typedef int (*pi_parse_fn)(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t);

/* How a mapped file's header is read (file/file.c) without dragging
 * tensor data in through the kernel's read-around. */
enum pi_header_read {
    /* header_size() tells the extent from the first bytes: fault the first
     * page only, then read exactly the header ahead (safetensors) */
    PI_HEADER_EXTENT = 0,
    /* no length field: parse growing prefixes, each read ahead, and give
     * back the pages past the header the last prefix pulled in (GGUF) */
    PI_HEADER_GROW,
    /* the kernel's read-around, which a directory walk benefits from (zip) */
    PI_HEADER_AROUND,
};

struct pi_format {
    pagein_format id;
    const char *name;         /* "safetensors", "gguf", "torch" */
    /* 1 if the first len bytes (of a file of size bytes) are this format. */
    int (*detect)(const uint8_t *buf, size_t len, uint64_t size);
    pi_parse_fn parse;
    /* Bytes of header the parser reads, when the first avail bytes tell
     * (safetensors: 8 + N); 0 when unknown (GGUF: only by parsing). May be
     * NULL. */
    uint64_t (*header_size)(const uint8_t *buf, size_t avail, uint64_t size);
    const char *const *suffixes; /* file-name suffixes a directory scan picks up; NULL-terminated */
    size_t first_read;           /* unmapped sources: bytes to read first */
    int whole_file;              /* the parser needs the whole file (zip: directory at the end) */
    enum pi_header_read header_read; /* mapped files */
    /* Which format wins when a folder holds several (lower first):
     * safetensors 10, GGUF 20, PyTorch 30, as transformers and llama.cpp
     * choose. */
    int dir_rank;
    /* Sets of files named PREFIX-%05d-of-%05d<suffix> that form one model
     * (GGUF split sets); NULL for formats without them. split_paths: the
     * set's paths from any member's, or 0 for a single file (as
     * pi_gguf_split_paths); split_check: the open set is consistent. A
     * folder of only such shards opens at its first. */
    int (*split_paths)(const char *path, char ***paths, size_t *n);
    int (*split_check)(const pagein_file *const *files, size_t n);
    const char *plural; /* "safetensors files", for "holds 3 safetensors files; name one" */
    /* The name "not a ... file" lists ("GGUF"); NULL leaves the row out
     * (a format whose model is a directory, a test row). */
    const char *title;
    /* 1: a file no detector claims is parsed as this format when its name
     * ends in one of its suffixes, or when it has no name (an in-memory
     * image), so that its parser reports the precise defect (safetensors:
     * its first bytes are a length, nothing a detector can prove). */
    int fallback;
    /* Formats whose model is a directory: one metadata file (dir_marker,
     * e.g. DCP's ".metadata") names the data files the tensors are stored
     * in (NULL for the formats above). A local directory holding the
     * marker is this format's model (load/model.c): dir_open parses the
     * marker's bytes (where: its path, for messages) and gives the data
     * files' names (plain names in the directory, valid until dir_free);
     * the data files are then opened as this format (its parse leaves
     * their tables empty); dir_file is given each data file's bytes
     * (mapped, under the truncation guard and the allocation journal: an
     * abandoned call's allocations are freed, so it keeps only what it
     * writes into memory dir_open made) and checks and parses what it
     * stores; dir_table fills the model's table (tensor.file: the data
     * file's index; pi_table_finish done by the caller) and, for tensors
     * flagged PAGEIN_TENSOR_ASSEMBLED, their pieces. No I/O in any. */
    const char *dir_marker;
    int (*dir_open)(const uint8_t *buf, size_t len, const char *where, void **state, const char *const **files,
                    size_t *nfiles);
    int (*dir_file)(void *state, uint32_t file, const uint8_t *base, uint64_t size);
    int (*dir_table)(void *state, struct pi_table *t, struct pi_pieces *p);
    void (*dir_free)(void *state);
};

/* An assembled tensor's bytes (PAGEIN_TENSOR_ASSEMBLED): each piece is a
 * box of the tensor stored at (file, off) with its own element strides
 * (a DCP chunk: row-major, or a strided view); the loader copies every
 * piece's elements into place in the tensor's row-major buffer. */
struct pi_piece {
    uint32_t file;
    uint64_t off;             /* file offset of the box's first element */
    uint64_t span;            /* bytes from off that its strides reach */
    const uint64_t *at, *len; /* ndim each: where the box lies in the tensor */
    const int64_t *strides;   /* ndim: element strides of the stored box */
};
struct pi_pieces {
    uint32_t *first;          /* tensors + 1 entries: tensor i's pieces are p[first[i] .. first[i + 1]) */
    struct pi_piece *p;
    size_t np;
    struct pi_arena arena;    /* first, p and the arrays they point at */
};

/* The rows, each defined beside its parser (with its detector). */
extern const struct pi_format pi_format_safetensors, pi_format_gguf, pi_format_torch, pi_format_dcp;
/* The table, in detection order: pi_formats_n rows, a row may be NULL (an
 * absent weak test row): skip it. */
extern const struct pi_format *const pi_formats[];
extern const size_t pi_formats_n;
const struct pi_format *pi_format_get(pagein_format id); /* NULL if unknown */
/* Detects the format from the first bytes; name (may be NULL) is used
 * only when no content signature matches: the first fallback row whose
 * suffix name carries (or, name NULL, an in-memory image) is parsed as
 * that format so that its parser reports the precise defect.
 * PAGEIN_FORMAT_UNKNOWN otherwise. */
pagein_format pi_detect_format_named(const uint8_t *buf, size_t len, uint64_t size, const char *name);
/* Detects the format from the first bytes (content only). */
pagein_format pi_detect_format(const uint8_t *buf, size_t len);
/* 1 if the file name matches a suffix of some format (directory scans). */
const struct pi_format *pi_format_by_suffix(const char *name);
/* Which file of a folder is the model: the one rule for local directories
 * (load/model.c), remote prefixes (load/resolve.c) and the cache commands
 * (pagein_is_model_name), read off the table. names: n file names (direct
 * children, no '/'; hidden names are skipped). A sharded index
 * (*.safetensors.index.json) first; else the format of lowest dir_rank
 * that has files: its one file, or the first shard of its one split set.
 * Where the folder holds several, a local directory (listed 0) is an error
 * ("holds 3 safetensors files and no index; name one"); a remote listing
 * (listed 1, a folder one did not write, docs/REMOTE.md) takes the
 * conventional name (model.safetensors.index.json, model<suffix>), else
 * the first in listing order. Sets *pick (index into names) and *index (1
 * if it is a sharded index) and returns 0; PAGEIN_E_NOT_FOUND when no name
 * is a model file; PAGEIN_E_INVALID when ambiguous; where names the folder
 * in the message. */
int pi_model_pick(const char *where, const char *const *names, size_t n, int listed, size_t *pick, int *index);
/* 1 if a folder scan considers name (a format suffix or a sharded index). */
int pi_is_model_name(const char *name);

/* Error for a file no format claims: "not a safetensors, GGUF or PyTorch
 * file: starts with '...'" (the rows' titles; index files get advice). */
int pi_format_not_model(const char *name, const uint8_t *buf, size_t len);

int pi_safetensors_parse(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t);
int pi_gguf_parse(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t);
int pi_torch_parse(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t);

/* Test and tool hook (gguf_write.c): write the older layouts (version 1:
 * 32-bit counts, lengths and dims; 2) and/or GGUF's big-endian variant
 * (every header field big-endian; tensor bytes are written as given).
 * Call right after pagein_gguf_writer_new. Not part of the stable API. */
int pi_gguf_writer_layout(pagein_gguf_writer *w, uint32_t version, int big_endian);

/* ---- integrity manifests (format/manifest.c, ops/hash.c) ---------------- */
/*
 * A manifest lists, for every file of a model, its size and a hash of its
 * header bytes, and for every tensor its place and the XXH3-128 hash of its
 * bytes. Text, one record a line (docs/FORMAT-MANIFEST.md). The parser
 * treats the buffer as untrusted input and does no I/O.
 */
#define PI_MANIFEST_MAX_NAME 65536u      /* bytes of a decoded name */
#define PI_MANIFEST_MAX_FILES 65536u
#define PI_MANIFEST_MAX_TENSORS (1u << 24)

struct pi_manifest_file {
    const char *name; /* decoded, NUL-terminated (arena) */
    size_t name_len;
    uint64_t size;         /* file size */
    uint64_t header_bytes; /* bytes [0, header_bytes) hashed as the header */
    uint8_t header_hash[16];
};

struct pi_manifest_tensor {
    uint32_t file;
    const char *name; /* decoded, NUL-terminated (arena); may contain NUL */
    size_t name_len;
    uint64_t offset, nbytes;
    uint8_t hash[16]; /* canonical (big-endian) XXH3-128 */
};

struct pi_manifest {
    struct pi_manifest_file *files;
    size_t nfiles, fcap;
    struct pi_manifest_tensor *t;
    size_t n, cap;
    uint32_t *index; /* icap slots: tensor index + 1, keyed by (file, name) */
    size_t icap;
    struct pi_arena arena;
};

void pi_manifest_init(struct pi_manifest *m);
void pi_manifest_free(struct pi_manifest *m);
/* Parses buf. Returns 0 or PAGEIN_E_BAD_MANIFEST, _BAD_MAGIC, _BAD_VERSION,
 * _UNSUPPORTED (another hash), _TRUNCATED (no final "end" line), _OVERFLOW,
 * _BAD_OFFSET, _DUPLICATE, _LIMIT, -ENOMEM; the detail names the line.
 * m is initialised by the caller and freed by the caller on error too. */
int pi_manifest_parse(const uint8_t *buf, size_t len, struct pi_manifest *m);
/* Entry for (file, name) or NULL. */
const struct pi_manifest_tensor *pi_manifest_find(const struct pi_manifest *m, uint32_t file,
                                                  const char *name, size_t len);
/* Appends records to m (building a manifest to write). Return 0 or -ENOMEM. */
int pi_manifest_add_file(struct pi_manifest *m, const char *name, size_t name_len, uint64_t size,
                         uint64_t header_bytes, const uint8_t hash[16]);
int pi_manifest_add_tensor(struct pi_manifest *m, uint32_t file, const char *name, size_t name_len,
                           uint64_t offset, uint64_t nbytes, const uint8_t hash[16]);
/* Serialises m into a pi_malloc'd buffer (*out, *len). 0 or -ENOMEM. */
int pi_manifest_format(const struct pi_manifest *m, char **out, size_t *len);

/* JSON: the reader lives in the core (core/json.h), included above. */

/* ---- GGUF (format/gguf*.c) --------------------------------------------- */
/* Limits, as in ggml's gguf.cpp (specs/GGUF.md 1.2-1.6). */
#define PI_GGUF_MAX_STRING (1ull << 30)   /* GGUF_MAX_STRING_LENGTH */
#define PI_GGUF_MAX_ARRAY (1ull << 30)    /* GGUF_MAX_ARRAY_ELEMENTS */
#define PI_GGUF_MAX_NAME 64               /* GGML_MAX_NAME: names < 64 bytes */
#define PI_GGUF_MAX_DIMS 4                /* GGML_MAX_DIMS */
#define PI_GGUF_MAX_DEPTH 8               /* nested arrays: pagein's own limit */
#define PI_GGUF_DEFAULT_ALIGNMENT 32

/* A GGUF file's own table data (pi_table.ext, arena-owned, no ext_free):
 * per metadata entry (same index as meta[]), the byte offsets of the
 * elements of a string or nested array relative to pagein_meta.raw, for
 * O(1) element access; NULL for other entries. */
struct pi_gguf_ext {
    const uint64_t **elem_off;
    size_t n;
};

/* Byte size of one element of a scalar GGUF value type (0 for STRING and
 * ARRAY, which are variable-sized; 0 for invalid ids). */
uint32_t pi_gguf_type_size(uint32_t type);
/* Name of a GGUF value type ("u32", "string", ...); "?" if invalid. */
const char *pi_gguf_type_name(uint32_t type);

/* ---- GGUF split ----------------------------------------------------------- */
/*
 * Split (sharded) GGUF sets: files named PREFIX-%05d-of-%05d.gguf numbered
 * from 00001, each a complete GGUF with split.no (0-based), split.count and
 * split.tensors.count (any integer width accepted).
 *
 * pi_gguf_split_paths: if path's file name matches the split pattern,
 * sets *paths to a pi_malloc'd array of *n pi_malloc'd shard paths in shard
 * order (same directory, same prefix, 00001..count) and returns 1; if it
 * does not match, sets *paths = NULL, *n = 0 and returns 0 (a single file).
 * Does no I/O (shards are not checked to exist). Free with
 * pi_gguf_split_free_paths. Errors: -ENOMEM, PAGEIN_E_BAD_INDEX (the name
 * says shard i of n with i == 0, i > n or n > 99999).
 *
 * pi_gguf_split_check: given the n open files of a set in shard order,
 * checks that each has split.no == its position, split.count == n (both
 * present in every shard when n > 1), that split.tensors.count is the same
 * everywhere and equals the sum of the shards' tensor counts, and that no
 * tensor name appears in two shards. A set of one file without split keys
 * passes. Returns 0 or PAGEIN_E_BAD_INDEX / PAGEIN_E_DUPLICATE with a
 * detail naming the shard and the key.
 */
int pi_gguf_split_paths(const char *path, char ***paths, size_t *n);
void pi_gguf_split_free_paths(char **paths, size_t n);
int pi_gguf_split_check(const pagein_file *const *files, size_t n);


#endif
