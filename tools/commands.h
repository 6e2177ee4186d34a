/* Entry points of the subcommands of bin/llm. Each takes the argv of its own command line
 * (argv[0] = the command's name) and returns the process exit status. */
#ifndef LLM_COMMANDS_H
#define LLM_COMMANDS_H

#include <stddef.h>

/* cmd_<name>(argc, argv) for each entry of the table in llm.c */
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);

struct llm_link;
/* Run cmd as this process's part of an mpirun job (rank 0 runs it, the others serve its pipeline
 * stages), or alone when mpirun did not start it. */
int tool_job_main(int (*cmd)(int argc, char **argv), int argc, char **argv);
/* The job's link for a context's parameters (NULL outside mpirun). */
struct llm_link *tool_job_link(void);
/* The n_threads to load a model with: n_threads alone, LLM_LOAD_NO_REPACK as rank 0 of a pipeline
 * over MPI, which must touch only its own layers' tensors (model.h). */
int tool_job_load_threads(int n_threads);

/* Print "llm: error: <msg>" on stderr: always one line, whatever the message holds (control
 * characters, e.g. from a file name or a file's text, are shown escaped). */
void tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* How a command names itself in usage lines and hints: "llm-run" when the program was called as
 * llm-run (argv0 "bin/llm-run"), "llm run" when called as "llm run" (argv0 "run"). */
const char *tool_prog_name(const char *argv0, char *buf, size_t cap);

/* Most threads a command accepts (-t): ggml's GGML_MAX_N_THREADS, llama.cpp's own limit. */
#define TOOL_MAX_THREADS 512

/* Parse argv with an argtable2 table whose first entry is the -h/--help arg_lit and whose last is
 * the arg_end (an allocation failure of any entry is reported). Returns 0 when parsed, 1 when
 * help was printed (exit 0), -1 after printing a one-line error (exit 1). purpose: one line shown under the usage. */
int tool_parse_args(void **table, int argc, char **argv, const char *purpose);

#endif
