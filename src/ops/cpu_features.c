#include "cpu_features.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../log.h"

/* The cap LLM_CPU_ISA asks for: false for scalar. */
static bool simd_allowed(void)
{
    const char *v = getenv("LLM_CPU_ISA");
    if (!v || !strcmp(v, "native") || !strcmp(v, "avx2"))
        return true;
    if (!strcmp(v, "scalar"))
        return false;
    llm_log(LLM_LOG_WARN, "LLM_CPU_ISA=%s is not scalar, avx2 or native: using native", v);
    return true;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static bool detect(void)
{
    __builtin_cpu_init();
    /* F16C is CPUID.1:ECX bit 29 (not every compiler's __builtin_cpu_supports knows "f16c");
     * avx2/fma via the builtin, which also checks that the OS saves the YMM state. */
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29)))
        return false;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
static bool detect(void)
{
    return false;
}
#endif

static bool has_avx2;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* cpuid traps to the hypervisor in a VM, and the warning is said once: ask once */
static void init(void)
{
    has_avx2 = simd_allowed() && detect();
}

bool llm_cpu_has_avx2(void)
{
    pthread_once(&once, init);
    return has_avx2;
}
