/* Entry points of the subcommands of bin/llm. Each takes the argv of its own command line
 * (argv[0] = the command's name) and returns the process exit status. */
#ifndef LLM_COMMANDS_H
#define LLM_COMMANDS_H

/* cmd_<name>(argc, argv) for each entry of the table in llm.c */
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* Print "llm: error: <msg>" on stderr (one line). */
void tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
