/* The backends' own figures (backend.h llm_backend_stat) on one line of -v output, for llm-run and
 * llm-bench alike. */
#ifndef LLM_TOOLS_STATS_PRINT_H
#define LLM_TOOLS_STATS_PRINT_H

#include <stdio.h>

#include "backend.h"

/* ": name value, ...; per token: name value, ...\n": the totals first, then the figures marked
 * per_token (times, kernels run), each divided by n_tokens. */
void print_backend_stats(FILE *out, const struct llm_backend_stat *st, int n, double n_tokens);

#endif
