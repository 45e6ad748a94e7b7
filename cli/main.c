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
