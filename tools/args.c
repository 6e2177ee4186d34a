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

/* The table entry a command-line word names ("--name", "--name=v", "-x", "-xV"), -1 for a value,
 * an operand or a cluster of flags ("-vq"). *separate: its value is the next word. */
static int entry_of(void **table, const char *word, bool *separate)
{
    *separate = false;
    if (word[0] != '-' || !word[1] || !strcmp(word, "--"))
        return -1;
    for (int i = 0;; i++) {
        const struct arg_hdr *h = table[i];
        if (h->flag & ARG_TERMINATOR)
            return -1;
        const bool value = h->flag & ARG_HASVALUE;
        if (word[1] != '-') {
            if (!h->shortopts || !strchr(h->shortopts, word[1]) || (!value && word[2]))
                continue;
            *separate = value && !word[2];
            return i;
        }
        size_t n = strcspn(word + 2, "=");
        for (const char *l = h->longopts; l && *l;) { /* "a,b": comma-separated names */
            size_t len = strcspn(l, ",");
            if (len == n && !strncmp(l, word + 2, n)) {
                *separate = value && !word[2 + n];
                return i;
            }
            l += len + (l[len] == ',');
        }
    }
}

/* argv without the earlier occurrences of each option that takes one value (maxcount 1): as in
 * llama.cpp the last one wins ("--temp 0 --temp 0.8" is --temp 0.8), so a base command line can be
 * followed by overrides. NULL-terminated; free() the array (the strings are argv's). */
static char **last_wins(void **table, int argc, char **argv, int *out_argc)
{
    char **out = calloc((size_t)argc + 1, sizeof *out);
    int *entry = calloc((size_t)argc + 1, sizeof *entry), n_entries = 0;
    while (!(((struct arg_hdr *)table[n_entries])->flag & ARG_TERMINATOR))
        n_entries++;
    int *last = calloc((size_t)n_entries + 1, sizeof *last);
    if (!out || !entry || !last) {
        free(out);
        free(entry);
        free(last);
        return NULL;
    }
    enum { OTHER = -1, VALUE = -2 }; /* an operand, or the value word of the option before it */
    bool operands = false;             /* after "--" every word is an operand */
    for (int i = 1; i < argc; i++) {
        bool separate = false;
        entry[i] = operands ? OTHER : entry_of(table, argv[i], &separate);
        operands = operands || !strcmp(argv[i], "--");
        if (entry[i] >= 0)
            last[entry[i]] = i;
        if (separate && i + 1 < argc)
            entry[++i] = VALUE;
    }
    int n = 0;
    out[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const int e = entry[i];
        if (e >= 0 && last[e] != i && ((struct arg_hdr *)table[e])->maxcount == 1) {
            while (i + 1 < argc && entry[i + 1] == VALUE)
                i++; /* overridden later: drop it with its value */
            continue;
        }
        out[n++] = argv[i];
    }
    free(entry);
    free(last);
    *out_argc = n;
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
    int n_args = 0;
    char **args = last_wins(table, argc, argv, &n_args);
    if (!args) {
        tool_error("out of memory");
        return -1;
    }
    int n_err = arg_parse(n_args, args, table);
    free(args);
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
