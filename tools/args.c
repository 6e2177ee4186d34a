#include "args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

char **tool_expand_aliases(int argc, char **argv, const struct tool_alias *aliases, int n_aliases)
{
    char **out = calloc((size_t)argc + 1, sizeof *out);
    if (!out)
        return NULL;
    for (int i = 0; i < argc; i++) {
        out[i] = argv[i];
        for (int j = 0; j < n_aliases; j++)
            if (i > 0 && strcmp(argv[i], aliases[j].from) == 0)
                out[i] = (char *)aliases[j].to;
        /* --n_predict → --n-predict: rewrite in place (argv strings are writable) */
        if (i > 0 && strncmp(out[i], "--", 2) == 0 && out[i] == argv[i])
            for (char *p = argv[i] + 2; *p && *p != '='; p++)
                if (*p == '_')
                    *p = '-';
    }
    return out;
}

int tool_parse(int argc, char **argv, void **table, struct arg_end *end)
{
    if (arg_nullcheck(table) != 0) {
        tool_error("out of memory");
        return 1;
    }
    if (arg_parse(argc, argv, table) == 0)
        return 0;
    /* argtable2 prints several lines; keep the first error only */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (mem) {
        arg_print_errors(mem, end, "");
        fclose(mem);
    }
    const char *msg = buf ? buf : "invalid arguments";
    while (*msg == ':' || *msg == ' ')
        msg++;
    int n = (int)strcspn(msg, "\n");
    tool_error("%.*s (try '%s -h')", n, msg, argv[0]);
    free(buf);
    return 1;
}

void tool_usage(const char *prog, void **table, const char *what)
{
    printf("usage: %s", prog);
    arg_print_syntax(stdout, table, "\n");
    printf("%s\n\noptions:\n", what);
    arg_print_glossary(stdout, table, "  %-28s %s\n");
}
