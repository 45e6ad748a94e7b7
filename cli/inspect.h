/* inspect.h - format hooks for `pagein inspect` (cli/cmd_inspect.c).
 *
 * The inspect command prints what every format shares (summary, metadata,
 * tensor table; the stable JSON contract in docs/CLI.md). A format adds
 * its own output by registering a hook from its own file, e.g.
 * cli/inspect_gguf.c:
 *
 *     static void gguf_summary(const pagein_file *f, FILE *out) { ... }
 *     INSPECT_HOOK(gguf, PAGEIN_FORMAT_GGUF, "gguf", gguf_summary, gguf_json, NULL, NULL);
 *
 * Every callback is optional (NULL). JSON callbacks write complete
 * `,"key":value` pairs (leading comma included) so they can only add keys,
 * never break the document or the keys of the contract. */
#ifndef PAGEIN_CLI_INSPECT_H
#define PAGEIN_CLI_INSPECT_H

#include "cli.h"

struct inspect_hook {
    pagein_format format;
    const char *name; /* the "format" string in JSON and text, e.g. "gguf" */
    /* extra lines after the common text summary */
    void (*summary)(const pagein_file *f, FILE *out);
    /* extra top-level JSON keys: writes ,"key":value pairs */
    void (*json)(const pagein_file *f, FILE *out);
    /* extra keys inside one tensor's JSON object: ,"key":value pairs */
    void (*tensor_json)(const pagein_file *f, const pagein_tensor *t, FILE *out);
    /* one metadata value as JSON; returns 1 if written, 0 to use the
     * default rendering (strings, numbers, bools; arrays as
     * {"type":"array","elem_type":N,"count":N}) */
    int (*meta_json)(const pagein_file *f, const pagein_meta *m, FILE *out);
};

void inspect_register_hook(const struct inspect_hook *h);

/* Text output of a name or string value: control bytes as C escapes (\n,
 * \t, \r, \0, \xNN) and a backslash doubled. Returns the columns used; out NULL only counts. */
size_t inspect_escaped(FILE *out, const char *s, size_t n);

/* Set by cmd_inspect.c before any hook runs: 0, 1 for --full (hooks show
 * long values, e.g. GGUF arrays, to 1024 elements), 2 for --full=all (in
 * full), and whether the current output
 * is the text form (1) or JSON (0): meta_json is used for both. */
extern int inspect_full;
extern int inspect_text;

/* Parquet files (cli/inspect_parquet.c) are not model files: inspect hands
 * them to pagein_parquet_describe(). inspect_is_parquet: 1 when the
 * dataset-format table says Parquet, by name (content 0, no I/O) or by the
 * file's bytes (content 1: only for a file no model format claims). */
int inspect_is_parquet(const char *path, int content);
int inspect_parquet(const char *path, int json);
/* Training data (cli/inspect_dataset.c): a shard of any dataset format or a
 * folder of shards, through pagein_dataset_open and
 * pagein_dataset_describe. all: every shard listed. quiet_fail: return -1
 * without a message when it is no dataset either. Else the exit status. */
int inspect_dataset(const char *path, int json, int all, int quiet_fail);

#define INSPECT_HOOK(id, fmt_, name_, summary_, json_, tensor_json_, meta_json_)                \
    static const struct inspect_hook inspect_hook_##id = {fmt_, name_, summary_, json_,       \
                                                          tensor_json_, meta_json_};          \
    __attribute__((constructor)) static void inspect_reg_##id(void) {                        \
        inspect_register_hook(&inspect_hook_##id);                                            \
    }

/* inspect_dcp.c: a torch Distributed Checkpoint directory. */
int inspect_dcp(const char *path, int json);
/* inspect_dcp_hf.c: torch's safetensors flavour of DCP (DCP_SHARDING_INFO). */
int inspect_dcp_hf(const char *path, int json);

#endif
