#include "blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint,
                         blasint, float, const float *, blasint, const float *, blasint, float, float *,
                         blasint);
typedef void (*set_threads_fn)(int);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static sgemm_fn sgemm;

static void load(void)
{
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    /* in case the process had loaded OpenBLAS before us, with threads */
    set_threads_fn set_threads = (set_threads_fn)dlsym(h, "openblas_set_num_threads");
    if (set_threads)
        set_threads(1);
    sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
}

bool llm_blas_available(void)
{
    pthread_once(&once, load);
    return sgemm != NULL;
}

void llm_blas_sgemm_nt(int n, int m, int k, const float *a, int lda, const float *b, int ldb, float *c,
                       int ldc)
{
    sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
