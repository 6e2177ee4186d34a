/* The emulated ACL runtime (src/npu/acl.h): initialisation and device ids, device memory and copy
 * checks, streams as ordered asynchronous FIFOs run by their workers, split kernels and barriers,
 * capture (nothing runs while recording; replays run the recording), the capture-mode rules (each
 * forbidden call fails with Ascend's code and message in GLOBAL, THREAD_LOCAL and RELAXED modes),
 * wake-ups of a device thread that shares the host's cpu, the stream's cache-line layout, and
 * ACL_CHECK's report. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "error.h"
#include "harness.h"
#include "npu/acl.h"
#include "npu/acl_stream_impl.h"

static atomic_int counter;

static void count_kernel(const struct acl_kernel_ctx *k, void *args)
{
    (void)k;
    (void)args;
    atomic_fetch_add(&counter, 1);
}

/* Appends its argument to a log, to check FIFO order. */
struct order_log {
    int v[2048];
    atomic_int n;
};
static struct order_log order;

static void order_kernel(const struct acl_kernel_ctx *k, void *args)
{
    (void)k;
    order.v[atomic_fetch_add(&order.n, 1)] = *(int *)args;
}

/* Every worker adds its index + 1 before a barrier; after it, worker 0 checks everyone arrived. */
struct split_args {
    atomic_int *sum;
    int *seen_nth;
    int *after_barrier;
};

static void split_kernel(const struct acl_kernel_ctx *k, void *args)
{
    struct split_args *a = args;
    atomic_fetch_add(a->sum, k->ith + 1);
    k->barrier(k->pool);
    if (k->ith == 0) {
        *a->seen_nth = k->nth;
        *a->after_barrier = atomic_load(a->sum);
    }
}

static void test_init_and_memory(void)
{
    void *p = NULL;
    CHECK_EQ_INT(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_UNINITIALIZE);
    CHECK_EQ_INT(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtSetDevice(0), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtSetDevice(1), ACL_ERROR_RT_INVALID_DEVICEID);
    const size_t before = aclrtDeviceMemoryInUse();
    CHECK_EQ_INT(aclrtMalloc(&p, 1000, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    CHECK(p != NULL && ((uintptr_t)p & 63) == 0, "device memory is 64-byte aligned");
    CHECK_EQ_INT(aclrtDeviceMemoryInUse(), before + 1000);
    CHECK_EQ_INT(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);

    char host[1000], back[1000];
    for (int i = 0; i < 1000; i++)
        host[i] = (char)i;
    CHECK_EQ_INT(aclrtMemcpy(p, 1000, host, 1000, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtMemcpy(back, 1000, p, 1000, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    CHECK(memcmp(host, back, 1000) == 0);
    /* each side must be where the kind says; the copy must fit */
    CHECK_EQ_INT(aclrtMemcpy(back, 1000, host, 1000, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    CHECK(strstr(aclGetRecentErrMsg(), "outside device memory") != NULL, "%s", aclGetRecentErrMsg());
    CHECK_EQ_INT(aclrtMemcpy(back, 1000, host, 1000, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ_INT(aclrtMemcpy(p, 1000, host, 1001, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ_INT(aclrtMemcpy((char *)p + 1, 1000, host, 1000, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ_INT(aclrtMemset(p, 1000, 7, 1000), ACL_SUCCESS);
    CHECK(((unsigned char *)p)[999] == 7);
    CHECK_EQ_INT(aclrtMemset(host, 1000, 0, 10), ACL_ERROR_INVALID_PARAM);

    CHECK_EQ_INT(aclrtFree(host), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ_INT(aclrtFree((char *)p + 64), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ_INT(aclrtFree(p), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtFree(p), ACL_ERROR_INVALID_PARAM); /* double free is caught */
    CHECK_EQ_INT(aclrtDeviceMemoryInUse(), before);
}

static void test_stream_order(void)
{
    aclrtStream s;
    CHECK_EQ_INT(aclrtCreateStream(&s), ACL_SUCCESS);
    atomic_store(&order.n, 0);
    /* more tasks than the ring holds: the host waits for room, order is kept */
    for (int i = 0; i < 1500; i++)
        CHECK(aclrtLaunchKernel(order_kernel, 1, &i, sizeof i, s) == ACL_SUCCESS);
    CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
    CHECK_EQ_INT(atomic_load(&order.n), 1500);
    int in_order = 0;
    for (int i = 0; i < 1500; i++)
        in_order += order.v[i] == i;
    CHECK_EQ_INT(in_order, 1500);
    char big[ACL_KERNEL_ARGS_MAX + 1] = { 0 };
    CHECK_EQ_INT(aclrtLaunchKernel(order_kernel, 1, big, sizeof big, s), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ_INT(aclrtDestroyStream(s), ACL_SUCCESS);
}

static void test_split_kernel(void)
{
    for (int workers = 1; workers <= 3; workers++) {
        aclrtStream s;
        CHECK_EQ_INT(aclrtCreateStreamWithWorkers(&s, workers), ACL_SUCCESS);
        atomic_int sum = 0;
        int nth = 0, after = 0;
        struct split_args a = { &sum, &nth, &after };
        CHECK_EQ_INT(aclrtLaunchKernel(split_kernel, 0, &a, sizeof a, s), ACL_SUCCESS);
        CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
        CHECK_EQ_INT(nth, workers);
        CHECK_EQ_INT(after, workers * (workers + 1) / 2); /* the barrier waited for every worker */
        /* block_dim 1: worker 0 alone */
        atomic_store(&sum, 0);
        CHECK_EQ_INT(aclrtLaunchKernel(split_kernel, 1, &a, sizeof a, s), ACL_SUCCESS);
        CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
        CHECK_EQ_INT(nth, 1);
        CHECK_EQ_INT(after, 1);
        CHECK_EQ_INT(aclrtDestroyStream(s), ACL_SUCCESS);
    }
    aclrtStream s;
    CHECK_EQ_INT(aclrtCreateStreamWithWorkers(&s, 0), ACL_ERROR_INVALID_PARAM);
}

static void test_capture_replay(void)
{
    aclrtStream s;
    CHECK_EQ_INT(aclrtCreateStreamWithWorkers(&s, 2), ACL_SUCCESS);
    void *a = NULL, *b = NULL;
    CHECK_EQ_INT(aclrtMalloc(&a, 256, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtMalloc(&b, 256, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtMemset(a, 256, 1, 256), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtMemset(b, 256, 0, 256), ACL_SUCCESS);

    aclmdlRI ri = NULL;
    CHECK_EQ_INT(aclmdlRICaptureEnd(s, &ri), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    atomic_store(&counter, 0);
    CHECK_EQ_INT(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
    CHECK_EQ_INT(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_ERROR_RT_PARAM_INVALID);
    for (int i = 0; i < 3; i++)
        CHECK(aclrtLaunchKernel(count_kernel, 1, NULL, 0, s) == ACL_SUCCESS);
    CHECK_EQ_INT(aclrtMemcpyAsync(b, 256, a, 256, ACL_MEMCPY_DEVICE_TO_DEVICE, s), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtLaunchKernel(count_kernel, 0, NULL, 0, s), ACL_SUCCESS);
    CHECK_EQ_INT(aclmdlRICaptureEnd(s, &ri), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
    /* capture records, it does not run */
    CHECK_EQ_INT(atomic_load(&counter), 0);
    CHECK(((unsigned char *)b)[0] == 0, "the recorded copy ran during capture");
    CHECK_EQ_INT(aclmdlRITaskCount(ri), 5);
    CHECK_EQ_INT(aclmdlRIExecuteAsync(ri, s), ACL_SUCCESS);
    CHECK_EQ_INT(aclmdlRIExecuteAsync(ri, s), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
    /* 3 single-worker kernels + one split kernel on 2 workers, twice */
    CHECK_EQ_INT(atomic_load(&counter), 2 * (3 + 2));
    struct aclrtStreamStats st;
    aclrtStreamGetStats(s, &st); /* the device counts replayed kernels as eager ones, copies not */
    CHECK(st.kernels == 2 * 4 && st.kernels_split == 2, "%llu kernels, %llu split", (unsigned long long)st.kernels,
          (unsigned long long)st.kernels_split);
    CHECK(((unsigned char *)b)[255] == 1, "the replay ran the recorded copy");
    CHECK_EQ_INT(aclmdlRIDestroy(ri), ACL_SUCCESS);
    CHECK_EQ_INT(aclmdlRIExecuteAsync(NULL, s), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ_INT(aclrtFree(a), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtFree(b), ACL_SUCCESS);
    /* a stream destroyed in the middle of a capture drops what it recorded */
    CHECK_EQ_INT(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtLaunchKernel(count_kernel, 1, NULL, 0, s), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtDestroyStream(s), ACL_SUCCESS);
    void *p = NULL;
    CHECK_EQ_INT(aclrtMalloc(&p, 8, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS); /* capture closed */
    CHECK_EQ_INT(aclrtFree(p), ACL_SUCCESS);
}

static void sleep_ms(int ms)
{
    struct timespec ts = { .tv_sec = 0, .tv_nsec = ms * 1000000L };
    nanosleep(&ts, NULL);
}

/* Host and device thread on one cpu: launches to the sleeping device thread do not wake it; a
 * synchronize runs them on the host's thread (no wake-up at all) except every 64th such wait, which
 * wakes it to let the scheduler place it anew; a launch cost's sleep and destroying an instance
 * still queued wake it once; everything launched runs. */
static void test_one_cpu_wakeups(void)
{
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0) {
        SKIP("sched_getaffinity failed");
        return;
    }
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        SKIP("cannot confine the test to one cpu");
        return;
    }
    aclrtStream s;
    CHECK_EQ_INT(aclrtCreateStream(&s), ACL_SUCCESS); /* its device thread inherits the one cpu */
    atomic_store(&counter, 0);
    CHECK_EQ_INT(aclrtLaunchKernel(count_kernel, 1, NULL, 0, s), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
    sleep_ms(5); /* the device thread, seen on the host's cpu, goes to sleep */

    struct aclrtStreamStats st0, st1;
    aclrtStreamGetStats(s, &st0);
    for (int i = 0; i < 200; i++)
        CHECK(aclrtLaunchKernel(count_kernel, 1, NULL, 0, s) == ACL_SUCCESS);
    CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
    CHECK_EQ_INT(atomic_load(&counter), 201);
    aclrtStreamGetStats(s, &st1);
    CHECK_EQ_INT(st1.device_wakeups - st0.device_wakeups, 0);
    CHECK_EQ_INT(st1.host_ran_tasks - st0.host_ran_tasks, 200);
    CHECK(st1.host_waits > st0.host_waits && st1.host_waits_shared_cpu - st0.host_waits_shared_cpu ==
          st1.host_waits - st0.host_waits, "one cpu: every wait shares it (%llu of %llu)",
          (unsigned long long)(st1.host_waits_shared_cpu - st0.host_waits_shared_cpu),
          (unsigned long long)(st1.host_waits - st0.host_waits));

    /* the placement is probed again: of the waits that find the device thread asleep on the host's
     * cpu, every 64th wakes it (here it can only wake on this cpu, and runs the queue there). So
     * the host never runs a probe's task, and nothing but a probe wakes the device thread. How many
     * tasks the host runs depends on the scheduler: a woken device thread preempted between its
     * task and its sleep finds the next launches itself, needing no wake-up, and a probe that finds
     * it so needs none either (seen: 3 probes, 3 wake-ups, 196 tasks on the host under ASan; 1
     * wake-up and 62 tasks with a build running beside) */
    aclrtStreamGetStats(s, &st0);
    for (int i = 0; i < 200; i++) {
        CHECK(aclrtLaunchKernel(count_kernel, 1, NULL, 0, s) == ACL_SUCCESS);
        CHECK(aclrtSynchronizeStream(s) == ACL_SUCCESS);
    }
    CHECK_EQ_INT(atomic_load(&counter), 401);
    aclrtStreamGetStats(s, &st1);
    const uint64_t probes = st1.host_waits_shared_cpu / 64 - st0.host_waits_shared_cpu / 64;
    const uint64_t wakeups = st1.device_wakeups - st0.device_wakeups;
    CHECK(probes >= 3 && wakeups <= probes && st1.host_ran_tasks - st0.host_ran_tasks <= 200 - probes,
          "probes: %llu waits on one cpu, %llu wake-ups, %llu tasks the host ran",
          (unsigned long long)(st1.host_waits_shared_cpu - st0.host_waits_shared_cpu),
          (unsigned long long)(st1.device_wakeups - st0.device_wakeups),
          (unsigned long long)(st1.host_ran_tasks - st0.host_ran_tasks));

    /* an emulated launch cost's sleep lets the device thread run what was launched */
    sleep_ms(5);
    for (int i = 0; i < 10; i++)
        CHECK(aclrtLaunchKernel(count_kernel, 1, NULL, 0, s) == ACL_SUCCESS);
    aclrtStreamSetHostAway(s, 1);
    for (int ms = 0; ms < 2000 && atomic_load(&counter) < 411; ms++)
        sleep_ms(1);
    aclrtStreamSetHostAway(s, 0);
    CHECK_EQ_INT(atomic_load(&counter), 411);
    aclrtStreamGetStats(s, &st0);
    CHECK_EQ_INT(st0.device_wakeups - st1.device_wakeups, 1);
    CHECK_EQ_INT(st0.host_ran_tasks, st1.host_ran_tasks);

    /* destroying an instance whose replay is still queued runs it first */
    CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
    aclmdlRI ri = NULL;
    CHECK_EQ_INT(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtLaunchKernel(count_kernel, 1, NULL, 0, s), ACL_SUCCESS);
    CHECK_EQ_INT(aclmdlRICaptureEnd(s, &ri), ACL_SUCCESS);
    sleep_ms(5);
    CHECK_EQ_INT(aclmdlRIExecuteAsync(ri, s), ACL_SUCCESS);
    CHECK_EQ_INT(aclmdlRIDestroy(ri), ACL_SUCCESS);
    CHECK_EQ_INT(atomic_load(&counter), 412);
    CHECK_EQ_INT(aclrtDestroyStream(s), ACL_SUCCESS);
    sched_setaffinity(0, sizeof all, &all);
}

/* Checks that the tasks of a stream run one at a time in order: each finds the count it expects. */
static atomic_int seq_next, seq_bad;

static void seq_kernel(const struct acl_kernel_ctx *k, void *args)
{
    (void)k;
    int v = atomic_load(&seq_next);
    if (v != *(int *)args)
        atomic_fetch_add(&seq_bad, 1);
    atomic_store(&seq_next, v + 1);
}

/* The host runs the queue of a device thread asleep on its cpu, and the device thread runs it
 * elsewhere: never both, never out of order, whatever cpu the host moves to and however long the
 * device thread has slept. */
static void test_host_runs_queue_exclusively(bool tuned)
{
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) {
        SKIP("needs two cpus");
        return;
    }
    int cpus[2], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &all))
            cpus[n++] = c;
    aclrtStream s;
    CHECK_EQ_INT(aclrtCreateStream(&s), ACL_SUCCESS);
    atomic_store(&seq_next, 0);
    atomic_store(&seq_bad, 0);
    struct aclrtStreamStats st0, st1;
    aclrtStreamGetStats(s, &st0);
    int issued = 0;
    unsigned rng = 12345;
    for (int round = 0; round < 400; round++) {
        rng = rng * 1103515245u + 12345u;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[rng >> 16 & 1], &one);
        if (rng >> 17 & 1)
            sched_setaffinity(0, sizeof one, &one);
        else
            sched_setaffinity(0, sizeof all, &all);
        for (int i = 0, k = 1 + (int)(rng >> 20 & 15); i < k; i++, issued++)
            CHECK(aclrtLaunchKernel(seq_kernel, 1, &issued, sizeof issued, s) == ACL_SUCCESS);
        if (rng >> 24 & 1)
            sleep_ms(rng >> 25 & 1); /* 0 or 1 ms: the device thread spins or falls asleep */
        if (rng >> 26 & 1)
            CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
    }
    CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
    sched_setaffinity(0, sizeof all, &all);
    CHECK_EQ_INT(atomic_load(&seq_next), issued);
    CHECK_EQ_INT(atomic_load(&seq_bad), 0);
    aclrtStreamGetStats(s, &st1);
    if (tuned)
        CHECK(st1.host_ran_tasks > st0.host_ran_tasks && st1.host_ran_tasks - st0.host_ran_tasks < (uint64_t)issued,
              "both the host and the device thread ran tasks (host: %llu of %d)",
              (unsigned long long)(st1.host_ran_tasks - st0.host_ran_tasks), issued);
    else
        CHECK(st1.host_ran_tasks == st0.host_ran_tasks, "simple policy: the host ran %llu tasks",
              (unsigned long long)(st1.host_ran_tasks - st0.host_ran_tasks));
    CHECK_EQ_INT(aclrtDestroyStream(s), ACL_SUCCESS);
}

/* What a thread gets for each restricted call. */
struct restricted {
    aclError malloc_rc, free_rc, memcpy_rc, memset_rc, async_h2d_rc;
    void *victim;       /* device memory to free / copy into */
    aclrtStream other;  /* a stream that is not capturing */
};

static void try_restricted(struct restricted *r)
{
    void *p = NULL;
    char host[16] = { 0 };
    r->malloc_rc = aclrtMalloc(&p, 16, ACL_MEM_MALLOC_HUGE_FIRST);
    if (r->malloc_rc == ACL_SUCCESS)
        aclrtFree(p);
    r->memcpy_rc = aclrtMemcpy(r->victim, 16, host, 16, ACL_MEMCPY_HOST_TO_DEVICE);
    r->memset_rc = aclrtMemset(r->victim, 16, 0, 16);
    r->async_h2d_rc = aclrtMemcpyAsync(r->victim, 16, host, 16, ACL_MEMCPY_HOST_TO_DEVICE, r->other);
    if (r->async_h2d_rc == ACL_SUCCESS)
        aclrtSynchronizeStream(r->other);
    r->free_rc = aclrtFree(host); /* a foreign pointer: the capture rule is checked first */
}

static void *restricted_thread(void *arg)
{
    try_restricted(arg);
    return NULL;
}

static void check_restricted(const struct restricted *r, bool forbidden, const char *who)
{
    aclError want = forbidden ? ACL_ERROR_RT_STREAM_CAPTURE_UNSUPPORTED : ACL_SUCCESS;
    CHECK(r->malloc_rc == want, "%s: aclrtMalloc %d", who, r->malloc_rc);
    CHECK(r->memcpy_rc == want, "%s: aclrtMemcpy %d", who, r->memcpy_rc);
    CHECK(r->memset_rc == want, "%s: aclrtMemset %d", who, r->memset_rc);
    CHECK(r->async_h2d_rc == want, "%s: aclrtMemcpyAsync H2D %d", who, r->async_h2d_rc);
    CHECK(r->free_rc == (forbidden ? want : ACL_ERROR_INVALID_PARAM), "%s: aclrtFree %d", who, r->free_rc);
}

static void test_capture_modes(void)
{
    static const struct { aclmdlRICaptureMode mode; bool self, other; const char *name; } modes[] = {
        { ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, true, true, "GLOBAL" },
        { ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL, true, false, "THREAD_LOCAL" },
        { ACL_MODEL_RI_CAPTURE_MODE_RELAXED, false, false, "RELAXED" },
    };
    aclrtStream s, other;
    CHECK_EQ_INT(aclrtCreateStream(&s), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtCreateStream(&other), ACL_SUCCESS);
    void *victim = NULL;
    CHECK_EQ_INT(aclrtMalloc(&victim, 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        atomic_store(&counter, 0);
        CHECK_EQ_INT(aclmdlRICaptureBegin(s, modes[i].mode), ACL_SUCCESS);
        CHECK_EQ_INT(aclrtLaunchKernel(count_kernel, 1, NULL, 0, s), ACL_SUCCESS);
        /* synchronizing the captured stream is refused in every mode */
        CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_ERROR_RT_STREAM_CAPTURE_SYNC);
        CHECK(strcmp(aclGetRecentErrMsg(), "Not allow to synchronize captured stream") == 0, "%s",
              aclGetRecentErrMsg());
        /* a host-to-device or device-to-host copy is never recorded */
        char host[16] = { 0 };
        CHECK_EQ_INT(aclrtMemcpyAsync(host, 16, victim, 16, ACL_MEMCPY_DEVICE_TO_HOST, s),
                     ACL_ERROR_RT_STREAM_CAPTURE_UNSUPPORTED);
        CHECK_EQ_INT(aclmdlRIExecuteAsync((aclmdlRI)victim, s), ACL_ERROR_RT_STREAM_CAPTURE_UNSUPPORTED);
        struct restricted mine = { .victim = victim, .other = other }, theirs = mine;
        try_restricted(&mine);
        if (mine.malloc_rc != ACL_SUCCESS)
            CHECK(strstr(aclGetRecentErrMsg(), "current capture mode does not support this operation") != NULL,
                  "%s", aclGetRecentErrMsg());
        pthread_t th;
        pthread_create(&th, NULL, restricted_thread, &theirs);
        pthread_join(th, NULL);
        check_restricted(&mine, modes[i].self, modes[i].name);
        check_restricted(&theirs, modes[i].other, modes[i].name);
        aclmdlRI ri = NULL;
        CHECK_EQ_INT(aclmdlRICaptureEnd(s, &ri), ACL_SUCCESS);
        CHECK_EQ_INT(atomic_load(&counter), 0); /* nothing ran during capture */
        CHECK_EQ_INT(aclmdlRIExecuteAsync(ri, s), ACL_SUCCESS);
        CHECK_EQ_INT(aclrtSynchronizeStream(s), ACL_SUCCESS);
        CHECK_EQ_INT(atomic_load(&counter), 1);
        CHECK_EQ_INT(aclmdlRIDestroy(ri), ACL_SUCCESS);
        /* after the capture everything is allowed again */
        struct restricted after = { .victim = victim, .other = other };
        try_restricted(&after);
        check_restricted(&after, false, "after capture");
    }
    CHECK_EQ_INT(aclrtFree(victim), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtDestroyStream(s), ACL_SUCCESS);
    CHECK_EQ_INT(aclrtDestroyStream(other), ACL_SUCCESS);
}

static int failing_call(struct llm_error *err)
{
    ACL_CHECK(aclrtSetDevice(5));
    return LLM_OK;
}

static void *error_thread(void *arg)
{
    (void)arg;
    aclrtSetDevice(9);
    return NULL;
}

static void test_errors(void)
{
    struct llm_error err = { 0 };
    CHECK(failing_call(&err) != LLM_OK);
    CHECK(strstr(err.msg, "test_acl.c:") && strstr(err.msg, "aclrtSetDevice(5)") &&
              strstr(err.msg, "107001") && strstr(err.msg, "invalid device id 5"),
          "ACL_CHECK message: %s", err.msg);
    /* the recent message is per thread */
    pthread_t th;
    pthread_create(&th, NULL, error_thread, NULL);
    pthread_join(th, NULL);
    CHECK(strstr(aclGetRecentErrMsg(), "invalid device id 5") != NULL, "%s", aclGetRecentErrMsg());
    CHECK_EQ_INT(aclFinalize(), ACL_SUCCESS);
    CHECK_EQ_INT(aclFinalize(), ACL_ERROR_UNINITIALIZE);
}

/* LLM_NPU_WAIT names the wait policy; another name is refused when a stream is created. */
static void test_unknown_wait_policy(void)
{
    aclrtStream s = NULL;
    setenv("LLM_NPU_WAIT", "fastest", 1);
    CHECK_EQ_INT(aclrtCreateStream(&s), ACL_ERROR_INVALID_PARAM);
    CHECK(strstr(aclGetRecentErrMsg(), "LLM_NPU_WAIT=fastest") != NULL, "%s", aclGetRecentErrMsg());
}

/* The counters the task runner bumps per task sit on no cache line the host reads while it waits
 * or launches: beside head, each kernel of a replay took head's line away from the host spinning on
 * it; beside device_state, each eager task would take the line the host reads at every launch. */
static void test_counters_apart_from_polled_words(void)
{
    const size_t polled[] = { offsetof(struct acl_stream, head), offsetof(struct acl_stream, done_seq),
                              offsetof(struct acl_stream, device_cpu), offsetof(struct acl_stream, tail),
                              offsetof(struct acl_stream, device_state) };
    const size_t counters[] = { offsetof(struct acl_stream, device_ns), offsetof(struct acl_stream, kernels),
                                offsetof(struct acl_stream, kernels_split) };
    CHECK(_Alignof(struct acl_stream) >= 64, "stream aligned to %zu", _Alignof(struct acl_stream));
    for (size_t i = 0; i < sizeof polled / sizeof polled[0]; i++)
        for (size_t j = 0; j < sizeof counters / sizeof counters[0]; j++)
            CHECK(polled[i] / 64 != counters[j] / 64, "polled word at %zu shares a line with counter at %zu",
                  polled[i], counters[j]);
}

int main(void)
{
    test_counters_apart_from_polled_words();
    test_init_and_memory();
    /* the stream's semantics under each wait policy; the tuned one's own rules after */
    static const char *const policies[] = { "simple", "tuned" };
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
        setenv("LLM_NPU_WAIT", policies[i], 1);
        test_stream_order();
        test_split_kernel();
        test_capture_replay();
        test_capture_modes();
        test_host_runs_queue_exclusively(i == 1);
    }
    test_one_cpu_wakeups();
    test_unknown_wait_policy();
    unsetenv("LLM_NPU_WAIT");
    test_errors();
    return test_done("test_acl");
}
