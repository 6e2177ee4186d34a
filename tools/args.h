/* llama.cpp-style multi-letter short options (-ub, -ctk, -ngl, -dev, -fa) mapped onto argtable2's
 * long options. (tool_parse_args in commands.h does the parsing.) */
#ifndef LLM_TOOLS_ARGS_H
#define LLM_TOOLS_ARGS_H

#include <stddef.h>

#include <argtable2.h>

struct tool_alias {
    const char *from; /* "-ub"           */
    const char *to;   /* "--ubatch-size" */
};

/* A copy of argv (the strings are shared) with every aliased word replaced and "--a_b" spelled
 * "--a-b" as llama.cpp accepts. Terminated by NULL; free() the array. NULL on allocation failure. */
char **tool_expand_aliases(int argc, char **argv, const struct tool_alias *aliases, int n_aliases);

/* The first of names (each matched as a word or as "name=value") given as an option in argv,
 * skipping the values of the table's options (in "-p -i" the -i is a prompt); NULL when none. */
const char *tool_find_option(void **table, int argc, char **argv, const char *const *names, size_t n_names);

/* An output path the command will write (through a temporary file renamed into place): not a
 * directory, in a folder that exists and is writable. Prints the error naming opt; -1 then. */
int tool_check_output(const char *opt, const char *path);

#endif
