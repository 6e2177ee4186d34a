/* argtable2 glue shared by the subcommands: llama.cpp-style option aliases, -h output and
 * one-line errors. */
#include "args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <argtable2.h>

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

int tool_parse_args(void **table, int argc, char **argv, const char *purpose)
{
    if (arg_nullcheck(table) != 0) {
        tool_error("out of memory");
        return -1;
    }
    int n_err = arg_parse(argc, argv, table);
    struct arg_lit *help = table[0];
    if (help->count > 0) {
        printf("usage: llm %s", argv[0]);
        arg_print_syntax(stdout, table, "\n\n");
        printf("%s\n\noptions:\n", purpose);
        arg_print_glossary(stdout, table, "  %-28s %s\n");
        return 1;
    }
    if (n_err == 0)
        return 0;
    /* argtable prints a multi-line report; keep its first line as our single error line. */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    struct arg_end *end = NULL;
    for (int i = 0; !end; i++)
        if ((((struct arg_hdr *)table[i])->flag & ARG_TERMINATOR))
            end = table[i];
    if (mem) {
        arg_print_errors(mem, end, argv[0]);
        fclose(mem);
    }
    char *nl = text ? strchr(text, '\n') : NULL;
    if (nl)
        *nl = '\0';
    tool_error("%s (try 'llm %s -h')", text && *text ? text : "bad arguments", argv[0]);
    free(text);
    return -1;
}
