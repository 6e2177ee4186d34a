/* The project's one clock: CLOCK_MONOTONIC, for every timing (benchmarks, profiles, traces, the
 * emulated device's statistics and waits). */
#ifndef LLM_CLOCK_H
#define LLM_CLOCK_H

#include <stdint.h>

/* Nanoseconds since an arbitrary fixed point. */
uint64_t llm_now_ns(void);

/* The same clock in µs. */
static inline double llm_now_us(void)
{
    return (double)llm_now_ns() / 1e3;
}

#endif
