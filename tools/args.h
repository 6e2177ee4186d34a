/* llama.cpp-style multi-letter short options (-ub, -ctk, -ngl, -dev, -fa) mapped onto argtable2's
 * long options. (tool_parse_args in commands.h does the parsing.) */
#ifndef LLM_TOOLS_ARGS_H
#define LLM_TOOLS_ARGS_H

#include <argtable2.h>

struct tool_alias {
    const char *from; /* "-ub"           */
    const char *to;   /* "--ubatch-size" */
};

/* A copy of argv (the strings are shared) with every aliased word replaced and "--a_b" spelled
 * "--a-b" as llama.cpp accepts. Terminated by NULL; free() the array. NULL on allocation failure. */
char **tool_expand_aliases(int argc, char **argv, const struct tool_alias *aliases, int n_aliases);

#endif
