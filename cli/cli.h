/* cli.h - shared pieces of the pagein tool. The tool uses only <pagein.h>.
 * Each command lives in its own cli/cmd_*.c and registers itself with
 * CLI_COMMAND, so adding a command edits no other file. */
#ifndef PAGEIN_CLI_H
#define PAGEIN_CLI_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>

#include "pagein.h"

/* Exit codes shared by every command. */
#define EXIT_OK 0
#define EXIT_INVALID 1 /* a checked input is invalid / a per-file failure */
#define EXIT_USAGE 2   /* usage or I/O errors */

typedef int (*cli_main_fn)(int argc, char **argv);

struct cli_command {
    const char *name;
    const char *summary; /* one line for `pagein --help` */
    cli_main_fn main;    /* argv[0] is the command name */
};

void cli_register(const struct cli_command *c);
/* Prints "  WORD  SUMMARY" for every registered command named PREFIX-WORD
 * (`pagein bench --help` lists its suites so; a summary is cut before a
 * parenthesis that points back at `pagein ...`). Returns how many. */
int cli_print_subcommands(FILE *out, const char *prefix);
/* The thin front of a benchmark suite (`pagein bench SUITE`): runs the
 * program PROG (bench/PROG.c) with argv, its argv[0] replaced by the path
 * found: BUILD/bench/PROG in the build tree, PROG next to the tool, or
 * PREFIX/libexec/pagein/PROG after `make install`. Returns only when it
 * could not: EXIT_USAGE, with "pagein CMD: ..." naming the paths tried.
 * Defined in cmd_bench.c. */
int cli_bench_exec(const char *cmd, const char *prog, char **argv);

#define CLI_COMMAND(id, name_, summary_, fn_)                                    \
    static const struct cli_command cli_cmd_##id = {name_, summary_, fn_};       \
    __attribute__((constructor)) static void cli_reg_##id(void) {               \
        cli_register(&cli_cmd_##id);                                            \
    }

/* Prints "pagein CMD: message" (+ pagein's detail when rc < 0) to stderr. */
void cli_error(const char *cmd, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Refuses what no command should open: a path that does not exist, or a
 * FIFO, socket or device (opening or reading one can block forever).
 * Returns 0 for a regular file or directory, else prints why as
 * "pagein CMD: PATH: ..." and returns EXIT_USAGE. */
int cli_check_path(const char *cmd, const char *path);
/* "a FIFO", "a socket", "a character device", ... for a stat mode. */
const char *cli_file_kind(unsigned mode);

/* pagein_last_error_detail() without a leading "PATH: " (the caller
 * prints the path already). Never NULL. */
const char *cli_detail(const char *path);

/* Refuses what no command should open: a path that does not exist, or a
 * FIFO, socket or device (opening or reading one can block forever).
 * Returns 0 for a regular file or directory, else prints why as
 * "pagein CMD: PATH: ..." and returns EXIT_USAGE. */
int cli_check_path(const char *cmd, const char *path);
/* "a FIFO", "a socket", "a character device", ... for a stat mode. */
const char *cli_file_kind(unsigned mode);

/* pagein_last_error_detail() without a leading "PATH: " (the caller
 * prints the path already). Never NULL. */
const char *cli_detail(const char *path);

/* JSON output helpers: a string with escapes (len bytes, may hold NUL). */
void cli_json_str(FILE *out, const char *s, size_t len);
/* A tensor's shape as "[d0,d1,...]" into buf (cap bytes, at least 32): the
 * dimensions that fit, then "]". */
void cli_shape_str(char *buf, size_t cap, const uint64_t *shape, uint32_t ndim);

/* "1.3G", "512M", "4096", "5GB", "1.5GiB" -> bytes: K/M/G/T and
 * KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000 (SI, as
 * transformers reads max_shard_size), any case; plain digits are bytes.
 * The one rule for every size the tool reads. -1 on error. */
int cli_parse_size(const char *s, uint64_t *out);
/* The record files paths[0..n) of record_bytes each (megatron NULL), or the
 * Megatron pair PREFIX.bin/.idx (megatron: PREFIX), opened through
 * pagein_dataset_open with groups of group_bytes: the blocks the reader's
 * block order shuffles (`--block-size`; 0: 16 MiB, as
 * pagein_dataset_open_records). pagein's return code. */
int cli_open_records(pagein_dataset **d, const char *const *paths, size_t n, uint64_t record_bytes,
                     const char *megatron, uint64_t group_bytes);
/* Benchmarks that measure in a forked child (util.c):
 * cli_reset_peak_rss resets VmHWM to the current RSS (older kernels: the
 * peak since fork); cli_status_bytes reads a "Key:" kB line of
 * /proc/self/status as bytes (-1 if absent); cli_child_result reads the
 * child's len-byte result from fd, closes fd, reaps pid and returns 0, or
 * the wait status when the child died before writing all of it. */
void cli_reset_peak_rss(void);
double cli_status_bytes(const char *key);
int cli_child_result(int fd, int pid, void *buf, size_t len);
/* Forks the measuring child with a result pipe: in the child (0 returned)
 * fds[1] is the write end and the peak RSS is reset; in the parent the
 * child's pid (read fds[0] with cli_child_result after closing fds[1]);
 * -1 with "pipe: ..."/"fork: ..." in err when either fails. */
int cli_child_start(int fds[2], char *err, size_t errlen);
/* fio's sequential O_DIRECT read of path's first size bytes (1 MiB blocks
 * at QD32, ioengine, job name job): bytes per second from its JSON report
 * (0 when it states none), or -1 when fio fails or path holds a quote. */
double cli_fio_read_bps(const char *path, uint64_t size, const char *ioengine, const char *job);
/* What the benchmarks measure fio on: 0 when fio is installed and the
 * largest of the n files (*big; the first of equals) holds at least 1 MiB
 * with no quote in its name, *size its size rounded down to whole MiB;
 * else -1. */
int cli_fio_target(char *const *files, const uint64_t *sizes, size_t n, size_t *big, uint64_t *size);
/* Drops each of the n files from the page cache (POSIX_FADV_DONTNEED), or
 * reads each once into it; a file that does not open is passed over. */
void cli_files_evict(char *const *files, size_t n);
void cli_files_warm(char *const *files, size_t n);
/* 1 if a is an alignment the writers take: a power of two from 8 to 2^30. */
static inline int cli_valid_align(uint64_t a) { return a >= 8 && a <= (1ull << 30) && (a & (a - 1)) == 0; }
/* Formats bytes as "1.21 GiB" into buf. */
const char *cli_human_bytes(uint64_t n, char *buf, size_t len);

/* Monotonic seconds. */
double cli_now(void);

/* A progress bar on stderr, drawn only when stderr is a terminal. */
struct cli_progress {
    const char *label;
    uint64_t total;
    double start, last;
    int enabled;
};
void cli_progress_start(struct cli_progress *p, const char *label, uint64_t total);
void cli_progress_update(struct cli_progress *p, uint64_t done);
void cli_progress_end(struct cli_progress *p);

/* True if argv[i] is -h or --help. */
int cli_is_help(const char *arg);

/* Warns on out (one line each, "pagein CMD: warning: ...") about tensors of
 * f whose materialised size is at least CLI_EXPANSION_MIN_BYTES and
 * CLI_EXPANSION_FACTOR times their storage (expansion bombs: stride-0
 * views). Returns how many. Defined in expansion.c. */
#define CLI_EXPANSION_MIN_BYTES ((uint64_t)1 << 30)
#define CLI_EXPANSION_FACTOR 1024u
size_t cli_warn_expansion(FILE *out, const char *cmd, const char *path, const pagein_file *f);

/* Checks MODEL against an integrity manifest, printing mismatches (text or
 * JSON on stdout) and errors as "pagein CMD: ...". Prints the OK line
 * unless quiet. Returns the exit status. Defined in cmd_hash.c; the hook
 * behind `pagein verify --manifest M`. */
int cli_manifest_check(const char *cmd, const char *model, const char *manifest, unsigned threads, int json,
                       int quiet);

/* Where `pagein hash MODEL` puts its manifest when no -o is given, however
 * MODEL is spelled: a directory's is DIR/.pagein-manifest (`dir` and
 * `dir/` alike), a file's FILE.pagein-manifest. malloc'd; NULL when out of
 * memory. */
char *cli_default_manifest(const char *model);

/* Layers: the numbered layers that hold at least one tensor (a LoRA
 * adapter of layers 30 and 31 has 2, from 30 to 31, not 32). Returns the
 * count; *lo and *hi are the smallest and largest present (-1 when none). */
int32_t cli_model_layers(const pagein_model *m, int32_t *lo, int32_t *hi);
/* "2 layers (30-31)", "1 layer (5)", "3 layers (0-9, with gaps)",
 * "no numbered layers" into buf. */
const char *cli_layers_text(int32_t count, int32_t lo, int32_t hi, char *buf, size_t n);
/* cli_layers_text for a model, plus ", embed" / ", head" when it has
 * leading / trailing globals (what --layers can select). */
const char *cli_model_layers_text(const pagein_model *m, char *buf, size_t n);

#endif
