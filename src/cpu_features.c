#include "cpu_features.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Levels in the order LLM_CPU_ISA caps them. They are not nested in hardware: an AVX-512 CPU may
 * lack AVX-VNNI (Ice Lake, Zen 4), so each level is detected on its own and the cap only lowers. */
enum isa { ISA_SCALAR, ISA_AVX2, ISA_AVXVNNI, ISA_AVX512 };

/* The cap LLM_CPU_ISA asks for (native: no cap). */
static enum isa isa_cap(void)
{
    const char *v = getenv("LLM_CPU_ISA");
    if (!v || !strcmp(v, "native") || !strcmp(v, "avx512"))
        return ISA_AVX512;
    if (!strcmp(v, "avxvnni"))
        return ISA_AVXVNNI;
    if (!strcmp(v, "avx2"))
        return ISA_AVX2;
    if (!strcmp(v, "scalar"))
        return ISA_SCALAR;
    llm_log(LLM_LOG_WARN, "LLM_CPU_ISA=%s is not scalar, avx2, avxvnni, avx512 or native: using native", v);
    return ISA_AVX512;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* Bit i set: the CPU and OS support level i (each level above scalar includes AVX2/FMA/F16C). */
static unsigned detect(void)
{
    __builtin_cpu_init();
    /* F16C is CPUID.1:ECX bit 29 and AVX-VNNI CPUID.(7,1):EAX bit 4 (not every compiler's
     * __builtin_cpu_supports knows them); the rest via the builtin, which also checks that the OS
     * saves the YMM/ZMM state, as AVX-VNNI needs no more than YMM. */
    unsigned a, b, c, d, have = 1u << ISA_SCALAR;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29)) || !__builtin_cpu_supports("avx2") ||
        !__builtin_cpu_supports("fma"))
        return have;
    have |= 1u << ISA_AVX2;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)))
        have |= 1u << ISA_AVXVNNI;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        have |= 1u << ISA_AVX512;
    return have;
}
#else
static unsigned detect(void)
{
    return 1u << ISA_SCALAR;
}
#endif

static unsigned usable; /* bit i: level i detected and not above the cap */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* cpuid traps to the hypervisor in a VM, and the warning is said once: ask once */
static void init(void)
{
    usable = detect() & ((2u << isa_cap()) - 1);
}

static bool has(enum isa level)
{
    pthread_once(&once, init);
    return usable & (1u << level);
}

bool llm_cpu_has_avx2(void)
{
    return has(ISA_AVX2);
}

bool llm_cpu_has_avxvnni(void)
{
    return has(ISA_AVXVNNI);
}

bool llm_cpu_has_avx512(void)
{
    return has(ISA_AVX512);
}
