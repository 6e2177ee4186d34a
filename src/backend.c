/* Backend registry: device names and the constructor that picks a backend by device. */
#include "backend.h"

#include <string.h>

#include "npu/npu_backend.h"

static const char *const device_names[] = { [LLM_DEVICE_CPU] = "cpu", [LLM_DEVICE_NPU] = "npu" };

const char *llm_device_name(enum llm_device d)
{
    return (unsigned)d < sizeof device_names / sizeof device_names[0] ? device_names[d] : "?";
}

int llm_device_from_name(const char *name)
{
    for (size_t i = 0; i < sizeof device_names / sizeof device_names[0]; i++)
        if (name && !strcmp(name, device_names[i]))
            return (int)i;
    return -1;
}

struct llm_backend *llm_backend_new(const struct llm_backend_params *p, struct llm_error *err)
{
    if (p->n_threads < 1) {
        llm_fail(err, LLM_ERR_ARG, "backend: thread count must be positive");
        return NULL;
    }
    if (p->device == LLM_DEVICE_NPU)
        return llm_backend_npu_new(p, err);
    struct llm_backend *b = llm_backend_cpu_new(p->n_threads, p->idle_spin_us);
    if (!b)
        llm_fail(err, LLM_ERR_NOMEM, "cannot start %d threads", p->n_threads);
    return b;
}
