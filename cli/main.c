/* main.c - `pagein COMMAND ...`: dispatch to the registered commands. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#define MAX_COMMANDS 64
static const struct cli_command *commands[MAX_COMMANDS];
static int ncommands;

void cli_register(const struct cli_command *c) {
    if (ncommands < MAX_COMMANDS) commands[ncommands++] = c;
}

int cli_print_subcommands(FILE *out, const char *prefix) {
    size_t lp = strlen(prefix);
    int n = 0;
    for (int i = 0; i < ncommands; i++) {
        const char *name = commands[i]->name, *sum = commands[i]->summary;
        if (strncmp(name, prefix, lp) != 0 || name[lp] != '-') continue;
        const char *cut = strstr(sum, " (also `pagein");
        if (!cut) cut = strstr(sum, " (pagein ");
        int len = cut ? (int)(cut - sum) : (int)strlen(sum);
        fprintf(out, "  %-9s %.*s\n", name + lp + 1, len, sum);
        n++;
    }
    return n;
}

static int cmp(const void *a, const void *b) {
    return strcmp((*(const struct cli_command *const *)a)->name, (*(const struct cli_command *const *)b)->name);
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: pagein COMMAND [ARGS...]\n"
            "\n"
            "Get model weights and training data from files into memory, fast and safely.\n"
            "\n"
            "commands:\n");
    for (int i = 0; i < ncommands; i++) fprintf(out, "  %-14s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out,
            "\n"
            "`pagein COMMAND --help` documents each command. `pagein --version` prints the version.\n"
            "Exit status: 0 success, 1 invalid input or a per-file failure, 2 usage or I/O error.\n");
}

/* Options whose value is optional: `--NAME=VALUE` is the only way to give
 * them one, so the command reads that spelling itself. */
static int optional_value(const char *a, size_t n) {
    static const char *const v[] = {"--tensors", "--full"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (strlen(v[i]) == n && !strncmp(a, v[i], n)) return 1;
    return 0;
}

/* Every option that takes a value accepts `--opt VALUE` and `--opt=VALUE`,
 * as getopt_long does (docs/CLI.md): each `--opt=VALUE` word before `--`
 * becomes the two words `--opt` `VALUE` before the command parses them.
 * Returns the new argv (argc in *pargc), or argv itself when none is split
 * or memory runs out. */
static char **split_equals(int *pargc, char **argv) {
    int argc = *pargc, extra = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *eq = argv[i][0] == '-' && argv[i][1] == '-' ? strchr(argv[i], '=') : NULL;
        if (eq && eq > argv[i] + 2 && !optional_value(argv[i], (size_t)(eq - argv[i]))) extra++;
    }
    if (!extra) return argv;
    char **av = calloc((size_t)argc + (size_t)extra + 1, sizeof *av);
    if (!av) return argv;
    int k = 0, done = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = !done && i > 0 && a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
        if (i > 0 && !strcmp(a, "--")) done = 1;
        if (eq && eq > a + 2 && !optional_value(a, (size_t)(eq - a))) {
            av[k] = strndup(a, (size_t)(eq - a));
            if (!av[k]) return argv; /* out of memory: parsed as given */
            av[k + 1] = (char *)eq + 1;
            k += 2;
        } else {
            av[k++] = argv[i];
        }
    }
    av[k] = NULL;
    *pargc = k;
    return av;
}

int main(int argc, char **argv) {
    qsort(commands, (size_t)ncommands, sizeof commands[0], cmp);
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("pagein %s\n", pagein_version_string());
        return EXIT_OK;
    }
    /* `pagein bench share` runs the command registered as "bench-share",
     * before any one-word command "bench"; it gets argv starting at the
     * second word. */
    argv = split_equals(&argc, argv);
    if (argc >= 3) {
        size_t l1 = strlen(argv[1]);
        for (int i = 0; i < ncommands; i++) {
            const char *n = commands[i]->name;
            if (strncmp(n, argv[1], l1) == 0 && n[l1] == '-' && strcmp(n + l1 + 1, argv[2]) == 0)
                return commands[i]->main(argc - 2, argv + 2);
        }
    }
    for (int i = 0; i < ncommands; i++)
        if (strcmp(commands[i]->name, argv[1]) == 0) return commands[i]->main(argc - 1, argv + 1);
    fprintf(stderr, "pagein: unknown command '%s' (see pagein --help)\n", argv[1]);
    return EXIT_USAGE;
}
