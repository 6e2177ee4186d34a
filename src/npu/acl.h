/* An emulated Ascend runtime with the names of CANN's ACL API (src/npu/README.md: the runtime).
 *
 * The device is this machine: device memory is host memory handed out and tracked by aclrtMalloc,
 * and a stream is a FIFO of tasks run asynchronously, in order, by the stream's own device worker
 * threads (the host thread only enqueues). Kernels are plain functions of (worker index, args).
 *
 * Graph capture: between aclmdlRICaptureBegin and aclmdlRICaptureEnd on a stream, kernel launches
 * and device-to-device copies on it are recorded into a model run instance (aclmdlRI) instead of
 * running. aclmdlRIExecuteAsync enqueues the recorded list as one task. In GLOBAL capture mode no
 * thread may synchronize the capturing stream, allocate or free device memory, or copy from the
 * host to the device until the capture ends; THREAD_LOCAL restricts only the capturing thread,
 * RELAXED nothing. Each violation fails with an error code and message like Ascend's.
 *
 * Every function returns ACL_SUCCESS or an error code; aclGetRecentErrMsg() gives the calling
 * thread's last error message. ACL_CHECK reports file, line and that message. */
#ifndef LLM_NPU_ACL_H
#define LLM_NPU_ACL_H

#include <stddef.h>
#include <stdint.h>

typedef int aclError;

#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_UNINITIALIZE 100001
#define ACL_ERROR_BAD_ALLOC 200000
#define ACL_ERROR_RT_PARAM_INVALID 107000
#define ACL_ERROR_RT_INVALID_DEVICEID 107001
#define ACL_ERROR_RT_STREAM_CAPTURE_SYNC 107027   /* "Not allow to synchronize captured stream" */
#define ACL_ERROR_RT_STREAM_NOT_CAPTURED 107028   /* CaptureEnd on a stream that is not capturing */
#define ACL_ERROR_RT_STREAM_CAPTURE_UNSUPPORTED 107030 /* forbidden while a capture is open      */
#define ACL_ERROR_RT_INTERNAL 507000
#define ACL_ERROR_RT_MEMORY_ALLOCATION 207001     /* device memory exhausted                  */

typedef struct acl_stream *aclrtStream;
typedef struct acl_model_ri *aclmdlRI;

typedef enum {
    ACL_MEMCPY_HOST_TO_HOST = 0,
    ACL_MEMCPY_HOST_TO_DEVICE = 1,
    ACL_MEMCPY_DEVICE_TO_HOST = 2,
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
} aclrtMemcpyKind;

typedef enum {
    ACL_MEM_MALLOC_HUGE_FIRST = 0,
} aclrtMemMallocPolicy;

typedef enum {
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0,
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL = 1,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED = 2,
} aclmdlRICaptureMode;

/* What a kernel sees when it runs: its worker index among nth workers and a barrier over them. */
struct acl_kernel_ctx {
    int ith, nth;
    void (*barrier)(void *pool);
    void *pool;
};

/* A device kernel: runs worker ith's share of the work described by args. */
typedef void (*aclrtKernel)(const struct acl_kernel_ctx *k, void *args);

/* Largest argument block a launch may pass (copied into the task). */
#define ACL_KERNEL_ARGS_MAX 2048

/* Process-wide set-up and tear-down (reference counted: each aclInit needs its aclFinalize). */
aclError aclInit(const char *config_path);
aclError aclFinalize(void);
/* The emulator has one device, id 0. */
aclError aclrtSetDevice(int32_t device_id);

aclError aclrtMalloc(void **dev_ptr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtFree(void *dev_ptr);
/* Synchronous copy of count bytes (destMax: room at dst). The pointers must lie in host or device
 * memory as kind says. */
aclError aclrtMemcpy(void *dst, size_t dest_max, const void *src, size_t count, aclrtMemcpyKind kind);
/* The same copy as a task on stream (recorded during capture when device to device). */
aclError aclrtMemcpyAsync(void *dst, size_t dest_max, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream);
aclError aclrtMemset(void *dev_ptr, size_t max_count, int32_t value, size_t count);

aclError aclrtCreateStream(aclrtStream *stream);
/* Emulator extension: a stream served by n_workers device worker threads (aclrtCreateStream: 1). */
aclError aclrtCreateStreamWithWorkers(aclrtStream *stream, int n_workers);
aclError aclrtDestroyStream(aclrtStream stream);
/* Returns when everything enqueued on stream has run. Emulation: if the stream's device thread
 * sleeps on the caller's cpu, where the two could only take turns, the caller runs the queue itself
 * in that thread's place (so a kernel may run on the host's thread; never on two at once). */
aclError aclrtSynchronizeStream(aclrtStream stream);

/* Enqueue kernel(args) on stream, run by block_dim workers (1: worker 0 alone; 0: all workers of
 * the stream). args_size bytes are copied (≤ ACL_KERNEL_ARGS_MAX); the kernel gets its own copy. */
aclError aclrtLaunchKernel(aclrtKernel kernel, uint32_t block_dim, const void *args, size_t args_size,
                           aclrtStream stream);

aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode);
aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *model_ri);
aclError aclmdlRIExecuteAsync(aclmdlRI model_ri, aclrtStream stream);
/* Frees the instance (after any enqueued execution of it has finished). */
aclError aclmdlRIDestroy(aclmdlRI model_ri);
/* Emulator extension: tasks recorded in the instance. */
size_t aclmdlRITaskCount(aclmdlRI model_ri);

const char *aclGetRecentErrMsg(void);

/* Emulator extension: bytes of device memory in use now. */
size_t aclrtDeviceMemoryInUse(void);

/* Free and total device memory. The emulated device has LLM_NPU_MEMORY_MIB MiB (default 65536, an
 * Ascend 910B's HBM; a value that is not an integer >= 1 gives one warning and the default): an
 * aclrtMalloc beyond what is free fails with ACL_ERROR_RT_MEMORY_ALLOCATION and a message naming
 * the bytes asked for and those free. attr is accepted for CANN's signature (one kind of memory). */
typedef enum { ACL_HBM_MEM = 6 } aclrtMemAttr;
aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free_bytes, size_t *total_bytes);

/* Emulator extension: what a stream did since it was created. */
struct aclrtStreamStats {
    uint64_t device_ns;       /* device busy time: running tasks, and taking the next one when it
                                 was already queued */
    uint64_t host_blocked_ns; /* host time blocked in launches waiting for room in the queue */
    uint64_t host_waits;      /* times the host had to wait for the stream (synchronize, full queue) */
    uint64_t host_waits_shared_cpu; /* of those, waits that found the device thread last seen on the
                                 host's own cpu: the two take turns on one core there */
    uint64_t device_wakeups;  /* times the host woke the sleeping device thread; one last seen on
                                 the host's cpu is woken only when the host sleeps through a launch
                                 cost (aclrtStreamSetHostAway), not at each launch */
    uint64_t host_ran_tasks;  /* tasks the host ran itself while it waited for a device thread
                                 asleep on its cpu (the two could only take turns there) */
    uint64_t kernels;         /* kernels the device ran, eagerly launched or inside replays */
    uint64_t kernels_split;   /* of those, kernels split over the stream's workers */
};
/* All zero for a null stream. */
void aclrtStreamGetStats(aclrtStream stream, struct aclrtStreamStats *stats);
/* Emulator extension: the host thread driving stream is away from the machine's cores (non-zero
 * while it sleeps off an emulated driver's launch cost), so the stream's waiting device threads
 * need not leave it a core. */
void aclrtStreamSetHostAway(aclrtStream stream, int away);

/* Evaluates an ACL call; on failure returns the caller's llm_fail with file, line, call text and
 * the runtime's message (use inside functions taking struct llm_error *err and returning int). */
#define ACL_CHECK(call)                                                                            \
    do {                                                                                           \
        aclError acl_check_rc_ = (call);                                                           \
        if (acl_check_rc_ != ACL_SUCCESS)                                                          \
            return llm_fail(err, LLM_ERR_UNSUPPORTED, "%s:%d: %s failed (ACL error %d): %s",      \
                            __FILE__, __LINE__, #call, acl_check_rc_, aclGetRecentErrMsg());       \
    } while (0)

#endif
