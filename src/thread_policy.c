#include "thread_policy.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>

#include "log.h"

static struct llm_thread_policy current = { .poll = 50 };
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int next_slot;
static atomic_flag class_warned = ATOMIC_FLAG_INIT;
/* The process's affinity before any policy placed a thread: what "no mask" restores, and what a
 * mask is intersected with (a thread of an earlier, masked test may run on fewer cpus). */
static cpu_set_t original;
static pthread_once_t original_once = PTHREAD_ONCE_INIT;
static atomic_bool ever_masked;

static void read_original(void)
{
    if (sched_getaffinity(0, sizeof original, &original) != 0)
        CPU_ZERO(&original);
}

struct llm_thread_policy llm_thread_policy_default(void)
{
    return (struct llm_thread_policy){ .poll = 50, .prio = LLM_PRIO_NORMAL };
}

int llm_cpu_mask_parse(const char *s, uint64_t mask[LLM_MAX_CPUS / 64])
{
    memset(mask, 0, LLM_MAX_CPUS / 8);
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    size_t n = strlen(s);
    if (n == 0 || n > LLM_MAX_CPUS / 4)
        return -1;
    for (size_t i = 0; i < n; i++) { /* the last digit holds cpus 0-3 */
        const char ch = s[n - 1 - i];
        if (!isxdigit((unsigned char)ch))
            return -1;
        const uint64_t v = (uint64_t)(isdigit((unsigned char)ch) ? ch - '0' : tolower((unsigned char)ch) - 'a' + 10);
        mask[i / 16] |= v << (4 * (i % 16));
    }
    return 0;
}

static bool mask_empty(const uint64_t *mask)
{
    for (int w = 0; w < LLM_MAX_CPUS / 64; w++)
        if (mask[w])
            return false;
    return true;
}

static bool has_cpu(const uint64_t *mask, int cpu)
{
    return (mask[cpu / 64] >> (cpu % 64)) & 1;
}

int llm_cpu_mask_usable(const uint64_t mask[LLM_MAX_CPUS / 64])
{
    pthread_once(&original_once, read_original);
    int n = 0;
    for (int cpu = 0; cpu < LLM_MAX_CPUS && cpu < CPU_SETSIZE; cpu++)
        n += has_cpu(mask, cpu) && CPU_ISSET(cpu, &original);
    return n;
}

void llm_thread_policy_set(const struct llm_thread_policy *p)
{
    pthread_once(&original_once, read_original);
    if (!mask_empty(p->mask))
        atomic_store(&ever_masked, true);
    pthread_mutex_lock(&lock);
    current = *p;
    atomic_store(&next_slot, 0);
    pthread_mutex_unlock(&lock);
}

const struct llm_thread_policy *llm_thread_policy_get(void)
{
    return &current;
}

int llm_thread_policy_reserve(int n)
{
    return atomic_fetch_add(&next_slot, n);
}

/* The set of cpus slot runs on under p: the whole mask, or (strict) its slot-th usable cpu, in turn. */
static void placement(const struct llm_thread_policy *p, int slot, cpu_set_t *set)
{
    pthread_once(&original_once, read_original);
    CPU_ZERO(set);
    int usable[CPU_SETSIZE], n = 0;
    for (int cpu = 0; cpu < LLM_MAX_CPUS && cpu < CPU_SETSIZE; cpu++)
        if (has_cpu(p->mask, cpu) && CPU_ISSET(cpu, &original))
            usable[n++] = cpu;
    for (int i = 0; i < n; i++)
        if (!p->strict || i == slot % n)
            CPU_SET(usable[i], set);
}

/* llama.cpp's scheduling class per level: batch, other, then FIFO at rising real-time priorities. */
static void sched_class(int prio, int *policy, int *rt)
{
    static const struct { int policy, rt; } classes[] = {
        [0] = { SCHED_BATCH, 0 }, [1] = { SCHED_OTHER, 0 }, [2] = { SCHED_FIFO, 40 }, [3] = { SCHED_FIFO, 80 },
        [4] = { SCHED_FIFO, 90 },
    };
    const int i = prio < LLM_PRIO_LOW ? 0 : prio > LLM_PRIO_REALTIME ? 4 : prio + 1;
    *policy = classes[i].policy;
    *rt = classes[i].rt;
}

void llm_thread_place(const struct llm_thread_policy *p, int slot, pthread_t thread)
{
    if (!mask_empty(p->mask)) {
        cpu_set_t set;
        placement(p, slot, &set);
        if (CPU_COUNT(&set) > 0)
            pthread_setaffinity_np(thread, sizeof set, &set);
    } else if (atomic_load(&ever_masked) && CPU_COUNT(&original) > 0) { /* undo an earlier test's mask */
        pthread_setaffinity_np(thread, sizeof original, &original);
    }
    if (p->prio == LLM_PRIO_NORMAL)
        return;
    int policy, rt;
    sched_class(p->prio, &policy, &rt);
    struct sched_param sp = { .sched_priority = rt };
    const int e = pthread_setschedparam(thread, policy, &sp);
    if (e != 0 && !atomic_flag_test_and_set(&class_warned))
        llm_log(LLM_LOG_WARN, "--prio %d: threads keep their scheduling class (%s; real-time classes need root or "
                "CAP_SYS_NICE)", p->prio, strerror(e));
}

uint64_t llm_thread_poll_ns(const struct llm_thread_policy *p, uint64_t default_ns)
{
    return default_ns * (uint64_t)p->poll / 50u;
}

int llm_process_priority(int prio, struct llm_error *err)
{
    static const int nice_of[] = { 5, 0, -5, -10, -20 };
    if (prio < LLM_PRIO_LOW || prio > LLM_PRIO_REALTIME)
        return llm_fail(err, LLM_ERR_ARG, "invalid value %d for --prio: must be between -1 and 3", prio);
    const int nice = nice_of[prio + 1];
    if (setpriority(PRIO_PROCESS, 0, nice) != 0)
        return llm_fail(err, LLM_ERR_ARG, "--prio %d: cannot set the process's nice value to %d: %s (a raise needs "
                        "root or CAP_SYS_NICE)", prio, nice, strerror(errno));
    return LLM_OK;
}
