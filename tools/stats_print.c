#include "stats_print.h"

void print_backend_stats(FILE *out, const struct llm_backend_stat *st, int n, double n_tokens)
{
    const char *sep = ": ";
    for (int i = 0; i < n; i++)
        if (!st[i].per_token) {
            fprintf(out, "%s%s %.0f", sep, st[i].name, st[i].value);
            sep = ", ";
        }
    sep = "; per token: ";
    for (int i = 0; i < n; i++)
        if (st[i].per_token) {
            fprintf(out, "%s%s %.2f", sep, st[i].name, st[i].value / (n_tokens > 0 ? n_tokens : 1));
            sep = ", ";
        }
    fputc('\n', out);
}
