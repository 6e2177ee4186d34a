/* bin/llm-mpi-hop: the per-hop latency of the pipeline's transport (src/mpi/link.h), run as
 * `mpirun -np 2 bin/llm-mpi-hop`: ranks 0 and 1 bounce a message of one micro-batch of activation
 * rows (n_embd floats per token) back and forth, and rank 0 prints half the median round trip per
 * size, in microseconds. Sizes: the n_embd of stories260K (64), the 0.5B shape (896) and the 7B
 * shape (4096), for 1 token (decode) and 512 tokens (a prefill micro-batch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi/link.h"

#define ROUNDS 400

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    struct llm_error err = { 0 };
    struct llm_link *l = llm_link_open(0, NULL, &err); /* a benchmark: mpirun handles a failed start */
    if (!l || llm_link_size(l) != 2) {
        fprintf(stderr, "llm: error: run as mpirun -np 2 %s%s%s\n", "bin/llm-mpi-hop", err.code ? ": " : "",
                err.code ? err.msg : "");
        llm_link_close(l);
        return 1;
    }
    const int rank = llm_link_rank(l), peer = 1 - rank;
    static const int n_embd[] = { 64, 896, 4096 }, n_tokens[] = { 1, 512 };
    static double rtt[ROUNDS];
    float *buf = calloc((size_t)4096 * 512, sizeof *buf);
    int rc = buf ? 0 : 1;
    if (rank == 0 && !rc)
        printf("| n_embd | tokens | bytes | one-way us (median of %d round trips / 2) | min us |\n"
               "|---:|---:|---:|---:|---:|\n", ROUNDS);
    for (size_t e = 0; !rc && e < sizeof n_embd / sizeof n_embd[0]; e++)
        for (size_t t = 0; !rc && t < sizeof n_tokens / sizeof n_tokens[0]; t++) {
            const size_t bytes = (size_t)n_embd[e] * (size_t)n_tokens[t] * sizeof(float);
            for (int i = -20; !rc && i < ROUNDS; i++) { /* 20 unrecorded rounds warm the path up */
                const double t0 = now_us();
                if (rank == 0)
                    rc = llm_link_send(l, peer, 1, buf, bytes, 10, &err) || llm_link_recv(l, peer, 1, buf, bytes, 10, &err);
                else
                    rc = llm_link_recv(l, peer, 1, buf, bytes, 10, &err) || llm_link_send(l, peer, 1, buf, bytes, 10, &err);
                if (i >= 0)
                    rtt[i] = now_us() - t0;
            }
            qsort(rtt, ROUNDS, sizeof rtt[0], cmp_double);
            if (rank == 0 && !rc)
                printf("| %d | %d | %zu | %.1f | %.1f |\n", n_embd[e], n_tokens[t], bytes, rtt[ROUNDS / 2] / 2,
                       rtt[0] / 2);
        }
    if (rc)
        fprintf(stderr, "llm: error: %s\n", err.msg);
    free(buf);
    llm_link_close(l);
    return rc;
}
