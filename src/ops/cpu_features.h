/* Run-time CPU feature detection for choosing SIMD kernels. */
#ifndef LLM_CPU_FEATURES_H
#define LLM_CPU_FEATURES_H

#include <stdbool.h>

/* True when the CPU and OS support AVX2, FMA and F16C (all our fast x86 kernels need the three). */
bool llm_cpu_has_avx2(void);

#endif
