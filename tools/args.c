/* argtable2 glue shared by the subcommands: -h output and one-line errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <argtable2.h>

#include "commands.h"

int tool_parse_args(void **table, int argc, char **argv, const char *purpose)
{
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
