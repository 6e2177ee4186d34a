/* bin/llm: dispatch on the program name (llm-run, llm-bench) or on a first word. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

struct command {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    { "run", cmd_run, "generate text: llm run -m MODEL -p PROMPT" },
    { "bench", cmd_bench, "benchmark like llama-bench: llm bench -m MODEL [-p 512] [-n 128] [-o md]" },
    { "info", cmd_info, "show a GGUF file's header, metadata, tensors and model summary" },
    { "synth", cmd_synth, "write a synthetic llama/qwen2 model with random weights" },
    { "tokenize", cmd_tokenize, "tokenize text with a model's vocabulary" },
    { "help", NULL, "this list" },
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: llm COMMAND [options]   (also installed as llm-run, llm-bench)\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n'llm COMMAND -h' describes a command's options.\n");
}

static const struct command *find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    const char *prog = strrchr(argv[0], '/');
    prog = prog ? prog + 1 : argv[0];
    if (strncmp(prog, "llm-", 4) == 0) {
        const struct command *c = find(prog + 4);
        if (c && c->main)
            return tool_job_main(c->main, argc, argv);
    }
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    const struct command *c = find(argv[1]);
    if (!c || !c->main) {
        tool_error("unknown command '%s' (try 'llm --help')", argv[1]);
        return 1;
    }
    return tool_job_main(c->main, argc - 1, argv + 1);
}
