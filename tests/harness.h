/* Minimal test harness: CHECK* macros count passes and failures, SKIP counts a check that could
 * not run (a fixture that legitimately does not exist) and says why; test_done() prints
 * "<name>: N passed, N failed" (", N skipped" when there are skips) and returns the exit status.
 * tests/run.sh sums the lines and shows the SKIP lines. A missing input that should exist is a
 * failure (CHECK), never a SKIP. */
#ifndef LLM_TEST_HARNESS_H
#define LLM_TEST_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_passed, t_failed, t_skipped;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (cond) {                                                             \
            t_passed++;                                                         \
        } else {                                                                \
            t_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, " " __VA_ARGS__);                                   \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

/* One check that could not run: counted and shown, never passed. Printf-style reason. */
#define SKIP(...)                                                               \
    do {                                                                        \
        t_skipped++;                                                            \
        fprintf(stderr, "SKIP %s:%d: ", __FILE__, __LINE__);                    \
        fprintf(stderr, __VA_ARGS__);                                           \
        fputc('\n', stderr);                                                    \
    } while (0)

#define CHECK_EQ_INT(a, b) CHECK((long long)(a) == (long long)(b), "%lld != %lld", \
                                 (long long)(a), (long long)(b))
#define CHECK_STR(a, b) CHECK(strcmp((a), (b)) == 0, "\"%s\" != \"%s\"", (a), (b))

/* Directory of the shared fixtures (models, references); $SHARED or ../shared. */
static inline const char *test_shared(void)
{
    const char *s = getenv("SHARED");
    return s && *s ? s : "../shared";
}

/* Build "<shared>/<rel>" into a static buffer (one at a time). */
static inline const char *test_path(const char *rel)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", test_shared(), rel);
    return buf;
}

/* Deterministic pseudo-random 32-bit numbers (xorshift64), the same sequence in every run. */
static inline uint32_t test_rand(void)
{
    static uint64_t state = 0x9e3779b97f4a7c15ull;
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 16);
}

/* The whole file in a malloc'd buffer with a NUL after it; its length in *len (when len is not
 * NULL). NULL when it cannot be read. */
static inline char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

/* Squared error of x against ref over n floats, relative to ref's squares (absolute when ref is all zero). */
static inline double test_nmse(const float *x, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

static inline int test_done(const char *name)
{
    fflush(stderr);
    if (t_skipped > 0)
        printf("%s: %d passed, %d failed, %d skipped\n", name, t_passed, t_failed, t_skipped);
    else
        printf("%s: %d passed, %d failed\n", name, t_passed, t_failed);
    return t_failed ? 1 : 0;
}

#endif
