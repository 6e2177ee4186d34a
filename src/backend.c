/* Backend registry (a table of the devices, their names and constructors), options, statistics,
 * buffers and the movement of tensor data between them. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#include "npu/npu_backend.h"

/* The devices: name and constructor, indexed by enum llm_device. */
static const struct {
    const char *name;
    struct llm_backend *(*create)(const struct llm_backend_params *p, struct llm_error *err);
} devices[] = {
    [LLM_DEVICE_CPU] = { "cpu", llm_backend_cpu_new },
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

/* ---- options ---------------------------------------------------------------------------------- */

int llm_backend_options_check(const struct llm_backend_params *p, const struct llm_backend_option_info *table,
                              int n, struct llm_error *err)
{
    for (int i = 0; i < p->n_options; i++) {
        const struct llm_backend_option *o = &p->options[i];
        if (o->device != p->device)
            continue;
        int k = 0;
        while (k < n && strcmp(table[k].name, o->name))
            k++;
        if (k == n)
            return llm_fail(err, LLM_ERR_ARG, "%s: no option '%s'", llm_device_name(p->device), o->name);
        if (!(o->value >= table[k].min && o->value <= table[k].max))
            return llm_fail(err, LLM_ERR_ARG, "%s: option %s = %g is out of range (%g .. %g: %s)",
                            llm_device_name(p->device), o->name, o->value, table[k].min, table[k].max, table[k].help);
    }
    return LLM_OK;
}

double llm_backend_option(const struct llm_backend_params *p, const char *name, double def)
{
    for (int i = 0; i < p->n_options; i++)
        if (p->options[i].device == p->device && !strcmp(p->options[i].name, name))
            def = p->options[i].value;
    return def;
}

/* ---- buffers ---------------------------------------------------------------------------------- */

struct llm_buffer *llm_buffer_new(struct llm_backend *b, size_t size)
{
    struct llm_buffer *buf = malloc(sizeof *buf);
    if (!buf)
        return NULL;
    *buf = (struct llm_buffer){ .backend = b };
    buf->base = b ? b->iface->mem_alloc(b, size) : aligned_alloc(64, (size + 64) & ~(size_t)63);
    if (!buf->base) {
        free(buf);
        return NULL;
    }
    return buf;
}

void llm_buffer_free(struct llm_buffer *buf)
{
    if (!buf)
        return;
    if (buf->backend)
        buf->backend->iface->mem_free(buf->backend, buf->base);
    else
        free(buf->base);
    free(buf);
}

void llm_buffer_place(struct llm_buffer *buf, struct llm_tensor *t, size_t offset)
{
    t->buffer = buf;
    t->data = (char *)buf->base + offset;
}

struct llm_backend *llm_tensor_backend(const struct llm_tensor *t)
{
    return t->buffer ? t->buffer->backend : NULL;
}

bool llm_tensor_in_host_memory(const struct llm_tensor *t)
{
    const struct llm_backend *b = llm_tensor_backend(t);
    return !b || b->iface->host_memory;
}

int llm_tensor_set(struct llm_tensor *t, const void *data, size_t offset, size_t size, struct llm_error *err)
{
    struct llm_backend *b = llm_tensor_backend(t);
    if (b)
        return b->iface->tensor_set(b, t, data, offset, size, err);
    memcpy((char *)t->data + offset, data, size);
    return LLM_OK;
}

int llm_tensor_get(const struct llm_tensor *t, void *data, size_t offset, size_t size, struct llm_error *err)
{
    struct llm_backend *b = llm_tensor_backend(t);
    if (b)
        return b->iface->tensor_get(b, t, data, offset, size, err);
    memcpy(data, (const char *)t->data + offset, size);
    return LLM_OK;
}

int llm_tensor_memset(struct llm_tensor *t, int value, size_t offset, size_t size, struct llm_error *err)
{
    struct llm_backend *b = llm_tensor_backend(t);
    if (b)
        return b->iface->tensor_memset(b, t, value, offset, size, err);
    memset((char *)t->data + offset, value, size);
    return LLM_OK;
}

/* Device to device across two backends: through host memory. */
static int copy_through_host(const struct llm_tensor *src, struct llm_tensor *dst, size_t n, struct llm_error *err)
{
    void *bounce = malloc(n ? n : 1);
    if (!bounce)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory for a copy of %zu bytes", n);
    int rc = llm_tensor_get(src, bounce, 0, n, err);
    if (!rc)
        rc = llm_tensor_set(dst, bounce, 0, n, err);
    free(bounce);
    return rc;
}

int llm_tensor_copy_async(const struct llm_tensor *src, struct llm_tensor *dst, struct llm_backend **pending,
                          struct llm_error *err)
{
    struct llm_backend *sb = llm_tensor_backend(src), *db = llm_tensor_backend(dst);
    const size_t n = llm_nbytes(src);
    *pending = NULL;
    if (n != llm_nbytes(dst))
        return llm_fail(err, LLM_ERR_ARG, "tensor copy: %zu bytes into %zu", n, llm_nbytes(dst));
    const bool src_host = llm_tensor_in_host_memory(src), dst_host = llm_tensor_in_host_memory(dst);
    if (src_host && dst_host) {
        memcpy(dst->data, src->data, n);
        return LLM_OK;
    }
    if (src_host || dst_host) {
        *pending = src_host ? db : sb;
        return src_host ? db->iface->tensor_set_async(db, dst, src->data, n, err)
                        : sb->iface->tensor_get_async(sb, src, dst->data, n, err);
    }
    if (sb == db)
        return sb->iface->tensor_copy(sb, src, dst, err);
    return copy_through_host(src, dst, n, err);
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
