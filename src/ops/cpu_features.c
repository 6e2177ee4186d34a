#include "cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <stdatomic.h>

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

bool llm_cpu_has_avx2(void)
{
    /* cpuid traps to the hypervisor in a VM: ask once (0 unknown, 1 no, 2 yes) */
    static atomic_int cached;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (!v) {
        v = detect() ? 2 : 1;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v == 2;
}
#else
bool llm_cpu_has_avx2(void)
{
    return false;
}
#endif
