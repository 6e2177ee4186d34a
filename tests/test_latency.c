/* tools/latency.c: nearest-rank percentiles on fixed lists (exact values: one and two samples, ties,
 * 100 samples, unsorted input to the summary) and the TTFT / inter-token summaries of llm-bench's
 * and llm-run's row layouts. */
#include <math.h>
#include <stdint.h>

#include "../tools/latency.h"
#include "harness.h"

#define P(v, p) latency_percentile_ns((v), sizeof(v) / sizeof((v)[0]), (p))

static void test_percentiles(void)
{
    const uint64_t one[] = { 42 };
    CHECK_EQ_INT(P(one, 0), 42);
    CHECK_EQ_INT(P(one, 50), 42);
    CHECK_EQ_INT(P(one, 99), 42);
    CHECK_EQ_INT(P(one, 100), 42);

    /* two: rank ceil(0.5 * 2) = 1 for p50, ceil(0.9 * 2) = 2 for p90 */
    const uint64_t two[] = { 10, 20 };
    CHECK_EQ_INT(P(two, 50), 10);
    CHECK_EQ_INT(P(two, 51), 20);
    CHECK_EQ_INT(P(two, 90), 20);
    CHECK_EQ_INT(P(two, 0), 10);

    /* ties: ranks 1..7 of 1,2,2,2,2,3,9 */
    const uint64_t ties[] = { 1, 2, 2, 2, 2, 3, 9 };
    CHECK_EQ_INT(P(ties, 14), 1);  /* ceil(0.98) = 1 */
    CHECK_EQ_INT(P(ties, 15), 2);  /* ceil(1.05) = 2 */
    CHECK_EQ_INT(P(ties, 50), 2);  /* ceil(3.5) = 4 */
    CHECK_EQ_INT(P(ties, 72), 3);  /* ceil(5.04) = 6 */
    CHECK_EQ_INT(P(ties, 90), 9);  /* ceil(6.3) = 7 */
    const uint64_t same[] = { 5, 5, 5, 5 };
    CHECK_EQ_INT(P(same, 50), 5);
    CHECK_EQ_INT(P(same, 99), 5);

    /* 100 samples 1..100: the p-th percentile is exactly p (integral ranks stay exact) */
    uint64_t hundred[100];
    for (int i = 0; i < 100; i++)
        hundred[i] = (uint64_t)(i + 1) * 1000;
    for (int p = 1; p <= 100; p++)
        CHECK_EQ_INT(P(hundred, p), p * 1000);
    CHECK_EQ_INT(P(hundred, 99.5), 100000);
    CHECK_EQ_INT(P(hundred, 0.5), 1000);
    CHECK_EQ_INT(latency_percentile_ns(hundred, 0, 50), 0);
}

static void test_sort(void)
{
    uint64_t v[] = { 9, 1, UINT64_MAX, 3, 3, 0 };
    latency_sort_ns(v, 6);
    const uint64_t want[] = { 0, 1, 3, 3, 9, UINT64_MAX };
    for (int i = 0; i < 6; i++)
        CHECK(v[i] == want[i], "sorted[%d] = %llu", i, (unsigned long long)v[i]);
}

static bool near(double a, double b)
{
    return fabs(a - b) < 1e-9;
}

static void test_summary(void)
{
    struct latency_summary s;
    /* llm-bench pg: two repetitions of [prompt, decode x 4]; TTFT = prompt + first decode (mean),
     * inter-token over the 8 decode steps (unsorted): 1 1 2 2 3 4 5 20 ms */
    const uint64_t pg[] = { 100000000, 2000000, 1000000, 5000000, 3000000,
                            110000000, 4000000, 20000000, 1000000, 2000000 };
    CHECK(latency_summarize(pg, 2, 5, 2, 1, &s) == 0);
    CHECK(s.has_ttft && near(s.ttft_ms, 108.0), "ttft %f", s.ttft_ms);
    CHECK_EQ_INT(s.n_itl, 8);
    CHECK(near(s.itl_p50_ms, 2.0), "p50 %f", s.itl_p50_ms); /* rank 4 */
    CHECK(near(s.itl_p90_ms, 20.0), "p90 %f", s.itl_p90_ms); /* rank ceil(7.2) = 8 */
    CHECK(near(s.itl_p99_ms, 20.0) && near(s.itl_max_ms, 20.0));
    CHECK(pg[1] == 2000000 && pg[7] == 20000000, "the input is not modified");

    /* tg: every entry is a decode step, no TTFT */
    const uint64_t tg[] = { 3000, 1000, 2000 };
    CHECK(latency_summarize(tg, 1, 3, 0, 0, &s) == 0);
    CHECK(!s.has_ttft && s.ttft_ms == 0 && s.n_itl == 3);
    CHECK(near(s.itl_p50_ms, 0.002) && near(s.itl_p90_ms, 0.003) && near(s.itl_max_ms, 0.003));

    /* pp: the prompt entry alone, no inter-token latency */
    const uint64_t pp[] = { 7000000, 9000000 };
    CHECK(latency_summarize(pp, 2, 1, 0, 1, &s) == 0);
    CHECK(!s.has_ttft && s.n_itl == 0 && s.itl_p50_ms == 0 && s.itl_max_ms == 0);

    /* llm-run: [prompt, first token, intervals...]; TTFT = the first two */
    const uint64_t run[] = { 4000000, 500000, 1000000, 3000000 };
    CHECK(latency_summarize(run, 1, 4, 2, 2, &s) == 0);
    CHECK(near(s.ttft_ms, 4.5) && s.n_itl == 2 && near(s.itl_p50_ms, 1.0) && near(s.itl_max_ms, 3.0));

    CHECK(latency_summarize(NULL, 0, 5, 2, 1, &s) == 0);
    CHECK(!s.has_ttft && s.n_itl == 0);
}

int main(void)
{
    test_percentiles();
    test_sort();
    test_summary();
    return test_done("test_latency");
}
