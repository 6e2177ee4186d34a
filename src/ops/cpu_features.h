/* Run-time CPU feature detection for choosing SIMD kernels. */
#ifndef LLM_CPU_FEATURES_H
#define LLM_CPU_FEATURES_H

#include <stdbool.h>

/* True when the CPU and OS support AVX2, FMA and F16C (all our fast x86 kernels need the three)
 * and LLM_CPU_ISA does not cap the kernels below them. LLM_CPU_ISA=scalar runs the plain C
 * kernels everywhere (so tests can force that path on any machine), avx2 or native (the default)
 * the best the CPU has; any other value gets one warning line and counts as native. Read once. */
bool llm_cpu_has_avx2(void);

#endif
