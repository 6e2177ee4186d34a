/* Shared by the emulated runtime's files (not part of the ACL API). */
#ifndef LLM_NPU_ACL_INTERNAL_H
#define LLM_NPU_ACL_INTERNAL_H

#include <stdbool.h>

#include "acl.h"

/* Record code and message as the calling thread's last error; returns code. */
aclError acl_set_error(aclError code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Does [p, p + n) lie inside one live device allocation? */
bool acl_is_device_range(const void *p, size_t n);

/* Checks a copy's arguments against its kind (each side in host or device memory as named). */
aclError acl_check_copy(void *dst, size_t dest_max, const void *src, size_t count, aclrtMemcpyKind kind,
                        const char *what);

/* Open captures that restrict the calling thread (GLOBAL ones anywhere, THREAD_LOCAL ones begun by
 * this thread): when non-zero, sync, malloc/free and host-to-device copies are refused. */
bool acl_capture_forbids(void);
void acl_capture_opened(aclmdlRICaptureMode mode);
void acl_capture_closed(aclmdlRICaptureMode mode);

/* Fails with ACL_ERROR_UNINITIALIZE unless aclInit has run. */
aclError acl_check_init(void);

#endif
