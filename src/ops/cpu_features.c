#include "cpu_features.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../log.h"

enum isa { ISA_SCALAR, ISA_AVX2, ISA_AVX512 };

/* The cap LLM_CPU_ISA asks for (native: no cap). */
static enum isa isa_cap(void)
{
    const char *v = getenv("LLM_CPU_ISA");
    if (!v || !strcmp(v, "native") || !strcmp(v, "avx512"))
        return ISA_AVX512;
    if (!strcmp(v, "avx2"))
        return ISA_AVX2;
    if (!strcmp(v, "scalar"))
        return ISA_SCALAR;
    llm_log(LLM_LOG_WARN, "LLM_CPU_ISA=%s is not scalar, avx2, avx512 or native: using native", v);
    return ISA_AVX512;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static enum isa detect(void)
{
    __builtin_cpu_init();
    /* F16C is CPUID.1:ECX bit 29 (not every compiler's __builtin_cpu_supports knows "f16c");
     * the rest via the builtin, which also checks that the OS saves the YMM/ZMM state. */
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29)) || !__builtin_cpu_supports("avx2") ||
        !__builtin_cpu_supports("fma"))
        return ISA_SCALAR;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        return ISA_AVX512;
    return ISA_AVX2;
}
#else
static enum isa detect(void)
{
    return ISA_SCALAR;
}
#endif

static enum isa isa;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* cpuid traps to the hypervisor in a VM, and the warning is said once: ask once */
static void init(void)
{
    enum isa cap = isa_cap(), have = detect();
    isa = cap < have ? cap : have;
}

bool llm_cpu_has_avx2(void)
{
    pthread_once(&once, init);
    return isa >= ISA_AVX2;
}

bool llm_cpu_has_avx512(void)
{
    pthread_once(&once, init);
    return isa >= ISA_AVX512;
}
