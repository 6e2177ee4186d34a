/* argtable2 glue shared by the subcommands: llama.cpp-style option aliases, -h output and
 * one-line errors. */
#include "args.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <argtable2.h>

#include "commands.h"
#include "model/model.h"

void tool_error(const char *fmt, ...)
{
    char msg[1024], shown[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* the message may quote a path or a file's text: never let it break the line or drive the
     * terminal (library messages are already escaped; escaping again only touches controls) */
    llm_escape(shown, sizeof shown, msg, strlen(msg), sizeof msg, 0);
    fprintf(stderr, "llm: error: %s\n", shown);
}

const char *tool_prog_name(const char *argv0, char *buf, size_t cap)
{
    const char *base = strrchr(argv0, '/');
    base = base ? base + 1 : argv0;
    if (strncmp(base, "llm-", 4) == 0)
        snprintf(buf, cap, "%s", base);
    else
        snprintf(buf, cap, "llm %s", base);
    return buf;
}

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
    char prog[128];
    tool_prog_name(argv[0], prog, sizeof prog);
    int n_err = arg_parse(argc, argv, table);
    struct arg_lit *help = table[0];
    if (help->count > 0) {
        printf("usage: %s", prog);
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
        arg_print_errors(mem, end, prog);
        fclose(mem);
    }
    char *nl = text ? strchr(text, '\n') : NULL;
    if (nl)
        *nl = '\0';
    tool_error("%s (try '%s -h')", text && *text ? text : "bad arguments", prog);
    free(text);
    return -1;
}

/* Does word name an option of the table that takes a separate value ("-p", "--prompt")? */
static bool takes_value(void **table, const char *word)
{
    for (int i = 0;; i++) {
        const struct arg_hdr *h = table[i];
        if (h->flag & ARG_TERMINATOR)
            return false;
        if (!(h->flag & ARG_HASVALUE))
            continue;
        if (word[0] == '-' && word[1] && !word[2] && h->shortopts && strchr(h->shortopts, word[1]))
            return true;
        if (!strncmp(word, "--", 2) && h->longopts) {
            size_t n = strlen(word + 2);
            for (const char *l = h->longopts; *l;) { /* "a,b": comma-separated names */
                size_t len = strcspn(l, ",");
                if (len == n && !strncmp(l, word + 2, n))
                    return true;
                l += len + (l[len] == ',');
            }
        }
    }
}

const char *tool_find_option(void **table, int argc, char **argv, const char *const *names, size_t n_names)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            return NULL;
        for (size_t k = 0; k < n_names; k++) {
            size_t n = strlen(names[k]);
            if (!strncmp(argv[i], names[k], n) && (argv[i][n] == '\0' || argv[i][n] == '='))
                return names[k];
        }
        if (takes_value(table, argv[i]))
            i++; /* its value may look like an option: "-p -i" */
    }
    return NULL;
}

int tool_check_output(const char *opt, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        tool_error("cannot write %s '%s': it is a directory", opt, path);
        return -1;
    }
    /* the file is written beside itself and renamed: its folder must take new files */
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (access(dir, W_OK | X_OK) != 0) {
        tool_error("cannot write %s '%s': %s", opt, path, strerror(errno));
        return -1;
    }
    return 0;
}
