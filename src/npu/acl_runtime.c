/* The emulated runtime's process-wide state: initialisation, the device, error messages, device
 * memory (host memory tracked in a sorted table, so copies can check which side a pointer is on)
 * and the capture restrictions that memory calls obey. Streams and graphs are in acl_stream.c. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl_internal.h"
#include "log.h"

#define DEVICE_ALIGN 64
#define DEFAULT_MEMORY_MIB 65536 /* an Ascend 910B's HBM */

struct allocation {
    char *base;
    size_t size;
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct allocation *allocs; /* sorted by base */
static size_t n_allocs, cap_allocs, bytes_in_use;
static size_t memory_total; /* LLM_NPU_MEMORY_MIB, read once */
static pthread_once_t memory_once = PTHREAD_ONCE_INIT;
static atomic_int init_count;
static atomic_int global_captures;
static _Thread_local int local_captures;
static _Thread_local char last_msg[512];

aclError acl_set_error(aclError code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *aclGetRecentErrMsg(void)
{
    return last_msg;
}

aclError acl_check_init(void)
{
    if (atomic_load(&init_count) > 0)
        return ACL_SUCCESS;
    return acl_set_error(ACL_ERROR_UNINITIALIZE, "the runtime is not initialised (call aclInit first)");
}

aclError aclInit(const char *config_path)
{
    (void)config_path; /* the emulator has no configuration file */
    atomic_fetch_add(&init_count, 1);
    return ACL_SUCCESS;
}

aclError aclFinalize(void)
{
    if (atomic_load(&init_count) <= 0)
        return acl_set_error(ACL_ERROR_UNINITIALIZE, "aclFinalize without aclInit");
    atomic_fetch_sub(&init_count, 1);
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t device_id)
{
    aclError rc = acl_check_init();
    if (rc)
        return rc;
    if (device_id != 0)
        return acl_set_error(ACL_ERROR_RT_INVALID_DEVICEID, "invalid device id %d (the emulator has device 0)",
                             (int)device_id);
    return ACL_SUCCESS;
}

/* ---- capture restrictions ---------------------------------------------------------------------- */

void acl_capture_opened(aclmdlRICaptureMode mode)
{
    if (mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL)
        atomic_fetch_add(&global_captures, 1);
    else if (mode == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL)
        local_captures++;
}

void acl_capture_closed(aclmdlRICaptureMode mode)
{
    if (mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL)
        atomic_fetch_sub(&global_captures, 1);
    else if (mode == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL)
        local_captures--;
}

bool acl_capture_forbids(void)
{
    return atomic_load(&global_captures) > 0 || local_captures > 0;
}

static aclError capture_refuses(const char *what)
{
    return acl_set_error(ACL_ERROR_RT_STREAM_CAPTURE_UNSUPPORTED,
                         "%s: current capture mode does not support this operation", what);
}

/* ---- device memory ------------------------------------------------------------------------------ */

static void read_memory_size(void)
{
    const char *v = getenv("LLM_NPU_MEMORY_MIB");
    char *end = NULL;
    unsigned long long mib = v ? strtoull(v, &end, 10) : DEFAULT_MEMORY_MIB;
    if (v && (end == v || *end || *v == '-' || mib < 1 || mib > SIZE_MAX / 2 / (1u << 20))) {
        llm_log(LLM_LOG_WARN, "LLM_NPU_MEMORY_MIB='%s' is not a size in MiB (an integer >= 1): using %d", v,
                DEFAULT_MEMORY_MIB);
        mib = DEFAULT_MEMORY_MIB;
    }
    memory_total = (size_t)mib << 20;
}

static size_t device_memory_total(void)
{
    pthread_once(&memory_once, read_memory_size);
    return memory_total;
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free_bytes, size_t *total_bytes)
{
    (void)attr;
    if (!free_bytes || !total_bytes)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: null pointer");
    const size_t total = device_memory_total();
    pthread_mutex_lock(&mem_lock);
    *free_bytes = total - bytes_in_use;
    pthread_mutex_unlock(&mem_lock);
    *total_bytes = total;
    return ACL_SUCCESS;
}

/* Index of the first allocation whose base is > p. */
static size_t upper_bound(const void *p)
{
    size_t lo = 0, hi = n_allocs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((const char *)p < allocs[mid].base)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

bool acl_is_device_range(const void *p, size_t n)
{
    pthread_mutex_lock(&mem_lock);
    size_t i = upper_bound(p);
    bool ok = false;
    if (i > 0) {
        const size_t off = (size_t)((const char *)p - allocs[i - 1].base);
        ok = off < allocs[i - 1].size && n <= allocs[i - 1].size - off;
    }
    pthread_mutex_unlock(&mem_lock);
    return ok;
}

aclError aclrtMalloc(void **dev_ptr, size_t size, aclrtMemMallocPolicy policy)
{
    (void)policy;
    aclError rc = acl_check_init();
    if (rc)
        return rc;
    if (!dev_ptr || size == 0)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: null pointer or zero size");
    if (acl_capture_forbids())
        return capture_refuses("aclrtMalloc");
    if (size > SIZE_MAX - DEVICE_ALIGN)
        return acl_set_error(ACL_ERROR_BAD_ALLOC, "aclrtMalloc: %zu bytes is too large", size);
    const size_t total = device_memory_total();
    pthread_mutex_lock(&mem_lock);
    const size_t avail = total - bytes_in_use;
    pthread_mutex_unlock(&mem_lock);
    if (size > avail)
        return acl_set_error(ACL_ERROR_RT_MEMORY_ALLOCATION,
                             "out of npu memory: %zu bytes needed, %zu of %zu available (LLM_NPU_MEMORY_MIB=%zu)",
                             size, avail, total, total >> 20);
    char *p = aligned_alloc(DEVICE_ALIGN, (size + DEVICE_ALIGN - 1) & ~(size_t)(DEVICE_ALIGN - 1));
    if (!p)
        return acl_set_error(ACL_ERROR_BAD_ALLOC, "aclrtMalloc: out of device memory (%zu bytes)", size);
    pthread_mutex_lock(&mem_lock);
    if (n_allocs == cap_allocs) {
        size_t cap = cap_allocs ? 2 * cap_allocs : 64;
        struct allocation *na = realloc(allocs, cap * sizeof *na);
        if (!na) {
            pthread_mutex_unlock(&mem_lock);
            free(p);
            return acl_set_error(ACL_ERROR_BAD_ALLOC, "aclrtMalloc: out of memory for the allocation table");
        }
        allocs = na;
        cap_allocs = cap;
    }
    size_t i = upper_bound(p);
    memmove(allocs + i + 1, allocs + i, (n_allocs - i) * sizeof *allocs);
    allocs[i] = (struct allocation){ p, size };
    n_allocs++;
    bytes_in_use += size;
    pthread_mutex_unlock(&mem_lock);
    *dev_ptr = p;
    return ACL_SUCCESS;
}

aclError aclrtFree(void *dev_ptr)
{
    if (acl_capture_forbids())
        return capture_refuses("aclrtFree");
    pthread_mutex_lock(&mem_lock);
    size_t i = upper_bound(dev_ptr);
    if (i == 0 || allocs[i - 1].base != dev_ptr) {
        pthread_mutex_unlock(&mem_lock);
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclrtFree: %p is not a device allocation", dev_ptr);
    }
    bytes_in_use -= allocs[i - 1].size;
    memmove(allocs + i - 1, allocs + i, (n_allocs - i) * sizeof *allocs);
    n_allocs--;
    if (n_allocs == 0) { /* last one gone: give the table back too */
        free(allocs);
        allocs = NULL;
        cap_allocs = 0;
    }
    pthread_mutex_unlock(&mem_lock);
    free(dev_ptr);
    return ACL_SUCCESS;
}

size_t aclrtDeviceMemoryInUse(void)
{
    pthread_mutex_lock(&mem_lock);
    size_t n = bytes_in_use;
    pthread_mutex_unlock(&mem_lock);
    return n;
}

aclError acl_check_copy(void *dst, size_t dest_max, const void *src, size_t count, aclrtMemcpyKind kind,
                        const char *what)
{
    if (!dst || !src || count > dest_max || (unsigned)kind > ACL_MEMCPY_DEVICE_TO_DEVICE)
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "%s: bad arguments (count %zu, room %zu, kind %d)", what,
                             count, dest_max, (int)kind);
    bool dst_dev = kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    bool src_dev = kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
    if ((dst_dev && !acl_is_device_range(dst, count)) || (src_dev && !acl_is_device_range(src, count)))
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "%s: a %s pointer is outside device memory", what,
                             dst_dev && !acl_is_device_range(dst, count) ? "destination" : "source");
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void *dst, size_t dest_max, const void *src, size_t count, aclrtMemcpyKind kind)
{
    if (acl_capture_forbids())
        return capture_refuses("aclrtMemcpy");
    aclError rc = acl_check_copy(dst, dest_max, src, count, kind, "aclrtMemcpy");
    if (rc)
        return rc;
    memcpy(dst, src, count);
    return ACL_SUCCESS;
}

aclError aclrtMemset(void *dev_ptr, size_t max_count, int32_t value, size_t count)
{
    if (acl_capture_forbids())
        return capture_refuses("aclrtMemset");
    if (!dev_ptr || count > max_count || !acl_is_device_range(dev_ptr, count))
        return acl_set_error(ACL_ERROR_INVALID_PARAM, "aclrtMemset: %zu bytes at %p are not device memory", count,
                             dev_ptr);
    memset(dev_ptr, value, count);
    return ACL_SUCCESS;
}
