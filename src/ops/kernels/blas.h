/* OpenBLAS's cblas_sgemm, for the batched matmul path.
 *
 * The library is loaded on first use with OPENBLAS_NUM_THREADS=1: sgemm is called from every pool
 * thread on its own slice of rows, so OpenBLAS must not start threads of its own (its idle threads
 * spin after each call and take the cores from the pool), and the threaded build is the one that
 * is safe to call from several threads at once (Debian's serial build is not). Loading it at run
 * time is what lets us set the variable before OpenBLAS's start-up code reads it. */
#ifndef LLM_BLAS_H
#define LLM_BLAS_H

#include <stdbool.h>

/* True when OpenBLAS could be loaded; callers fall back to their own kernels otherwise. */
bool llm_blas_available(void);

/* C[N×M] = A[N×K] · B[M×K]ᵀ, row-major with leading dimensions lda, ldb, ldc (in floats). Only
 * call after llm_blas_available() returned true. */
void llm_blas_sgemm_nt(int n, int m, int k, const float *a, int lda, const float *b, int ldb, float *c,
                       int ldc);

#endif
