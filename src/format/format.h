/* format.h - the format table: one row per file format (name, detection,
 * parser, directory patterns). Adding a format = its parser file under
 * src/format/ and one row in pi_formats[] (format.c), plus its
 * PAGEIN_FORMAT_* id in pagein.h. */
#ifndef PAGEIN_FORMAT_H
#define PAGEIN_FORMAT_H

#include "../internal.h"

/* A parser: buf holds the first avail bytes of a file of size bytes
 * (avail == size for mapped and in-memory files). It does no I/O, fills *t
 * (initialised by the caller, freed by the caller on error too), and
 * returns PAGEIN_E_TRUNCATED when it needed more than avail bytes (the
 * caller then grows the prefix and calls again). flags: PAGEIN_OPEN_*. */
typedef int (*pi_parse_fn)(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t);

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
};

/* The table, NULL-terminated, in detection order. */
extern const struct pi_format *const pi_formats[];
const struct pi_format *pi_format_get(pagein_format id); /* NULL if unknown */
/* Detects the format from the first bytes; name (may be NULL) is used
 * only when no content signature matches: a name ending in ".safetensors"
 * (or an in-memory image, name NULL) is parsed as safetensors so that its
 * parser reports the precise defect. PAGEIN_FORMAT_UNKNOWN otherwise. */
pagein_format pi_detect_format_named(const uint8_t *buf, size_t len, uint64_t size, const char *name);
/* 1 if the file name matches a suffix of some format (directory scans). */
const struct pi_format *pi_format_by_suffix(const char *name);
/* Error for a file no format claims: "not a safetensors, GGUF or PyTorch
 * file: starts with '...'" (index files and directories get advice). */
int pi_format_not_model(const char *name, const uint8_t *buf, size_t len);

int pi_safetensors_parse(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t);
int pi_gguf_parse(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t);
int pi_torch_parse(const uint8_t *buf, size_t avail, uint64_t size, uint32_t flags, struct pi_table *t);

#endif
