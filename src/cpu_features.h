/* Run-time CPU feature detection for choosing SIMD kernels. */
#ifndef LLM_CPU_FEATURES_H
#define LLM_CPU_FEATURES_H

#include <stdbool.h>

/* True when the CPU and OS support AVX2, FMA and F16C (all our fast x86 kernels need the three)
 * and LLM_CPU_ISA does not cap the kernels below them. LLM_CPU_ISA caps the kernels so tests can
 * force each path on any machine: scalar (the plain C kernels everywhere) < avx2 < avxvnni <
 * avx512 <= native (the default: the best the CPU has); any other value gets one warning line
 * and counts as native. Read once. */
bool llm_cpu_has_avx2(void);

/* True when, on top of llm_cpu_has_avx2(), the CPU supports AVX-VNNI (the VEX-encoded 256-bit
 * vpdpbusd) and LLM_CPU_ISA is avxvnni or above. Not implied by llm_cpu_has_avx512(): AVX-512
 * VNNI CPUs such as Ice Lake and Zen 4 lack it. */
bool llm_cpu_has_avxvnni(void);

/* True when, on top of llm_cpu_has_avx2(), the CPU and OS support AVX-512 F/BW/VL and
 * AVX512_VNNI and LLM_CPU_ISA is avx512 or native. */
bool llm_cpu_has_avx512(void);

#endif
