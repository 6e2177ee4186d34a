/* Backend registry: a table of the devices, their names and constructors. */
#include "backend.h"

#include <string.h>

#include "npu/npu_backend.h"

static struct llm_backend *cpu_new(const struct llm_backend_params *p, struct llm_error *err)
{
    struct llm_backend *b = llm_backend_cpu_new(p->n_threads, p->idle_spin_us);
    if (!b)
        llm_fail(err, LLM_ERR_NOMEM, "cannot start %d threads", p->n_threads);
    return b;
}

/* The devices: name and constructor, indexed by enum llm_device. */
static const struct {
    const char *name;
    struct llm_backend *(*create)(const struct llm_backend_params *p, struct llm_error *err);
} devices[] = {
    [LLM_DEVICE_CPU] = { "cpu", cpu_new },
    [LLM_DEVICE_NPU] = { "npu", llm_backend_npu_new },
};
#define N_DEVICES (sizeof devices / sizeof devices[0])

const char *llm_device_name(enum llm_device d)
{
    return (unsigned)d < N_DEVICES ? devices[d].name : "?";
}

int llm_device_from_name(const char *name)
{
    for (size_t i = 0; i < N_DEVICES; i++)
        if (name && !strcmp(name, devices[i].name))
            return (int)i;
    return -1;
}

struct llm_backend *llm_backend_new(const struct llm_backend_params *p, struct llm_error *err)
{
    if (p->n_threads < 1) {
        llm_fail(err, LLM_ERR_ARG, "backend: thread count must be positive");
        return NULL;
    }
    if ((unsigned)p->device >= N_DEVICES) {
        llm_fail(err, LLM_ERR_ARG, "backend: no device %d", (int)p->device);
        return NULL;
    }
    return devices[p->device].create(p, err);
}

int llm_backend_alloc_failed(struct llm_backend *b, const char *what, size_t bytes, struct llm_error *err)
{
    size_t free_bytes = 0, total = 0;
    if (!b->iface->memory)
        return llm_fail(err, LLM_ERR_NOMEM, "cannot place %zu bytes of %s in %s memory: out of memory", bytes, what,
                        b->iface->name);
    b->iface->memory(b, &free_bytes, &total);
    return llm_fail(err, LLM_ERR_NOMEM, "cannot place %zu bytes of %s in %s memory: %zu of %zu bytes available", bytes,
                    what, b->iface->name, free_bytes, total);
}
