/* Backend interface: a vtable so that the emulated npu plugs in beside cpu. A backend computes
 * whole graphs whose tensors already have data (see alloc.h) in buffers of its memory. Backend
 * memory may not be host memory: callers move data in and out only through llm_tensor_set /
 * llm_tensor_get / llm_tensor_memset / llm_tensor_copy_async, which go through the backend of the
 * tensor's buffer, never through ->data. */
#ifndef LLM_BACKEND_H
#define LLM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "graph.h"

struct llm_backend;
struct llm_profile;
struct llm_trace;

/* One figure a backend keeps about its own work (a count, or a time in µs), under a name of its
 * own: the npu's graph cache counters, say. A backend with nothing to report has none. */
struct llm_backend_stat {
    const char *name; /* static */
    double value;
    bool per_token;   /* a total that reads best divided by the tokens evaluated (times, kernels) */
};
#define LLM_BACKEND_MAX_STATS 32 /* the most figures any backend keeps */

/* Memory of one backend, or plain host memory (backend NULL: a mapped file, the host's inputs, a
 * test's arena). A tensor placed in it points back at it (llm_tensor.buffer), so its bytes move
 * through the backend that owns them. */
struct llm_buffer {
    struct llm_backend *backend;
    void *base;
};

struct llm_backend_iface {
    const char *name;
    /* Can this backend run node (op, types, shapes)? */
    bool (*supports_op)(struct llm_backend *b, const struct llm_tensor *node);
    /* Can weights of this type live in this backend's memory and be used by its kernels? */
    bool (*supports_type)(struct llm_backend *b, enum llm_type type);
    /* Optional (NULL: nothing to do): rewrite nodes [first, end) of g, a split this backend runs,
     * before they get memory: the npu's operator fusion (src/npu/fusion.h) and layout pass
     * (src/npu/layout.h), which may add nodes in the split (new tensors on g->pass_ctx, on this
     * backend). Returns how many it added (the split then ends at end + that), or -1 when out of
     * memory. */
    int (*graph_optimize)(struct llm_backend *b, struct llm_graph *g, int first, int end);
    /* Size every internal buffer (scratch, workspaces, rope tables) for graphs up to g's sizes, so
     * that nothing is reallocated while graphs run. Call once per largest graph before computing. */
    int (*graph_reserve)(struct llm_backend *b, const struct llm_graph *g, struct llm_error *err);
    /* Compute every node of g in order. May return before completion (see synchronize). */
    int (*graph_compute)(struct llm_backend *b, struct llm_graph *g, struct llm_error *err);
    /* Wait until all submitted work is done. */
    void (*synchronize)(struct llm_backend *b);
    /* The bytes of a buffer of this backend (see llm_buffer_new): NULL when out of memory. */
    void *(*mem_alloc)(struct llm_backend *b, size_t size);
    void (*mem_free)(struct llm_backend *b, void *ptr);
    /* True when ->data of this backend's tensors is host memory the host may read in place (then
     * weights in a mapped file are used where they are, not uploaded). */
    bool host_memory;
    /* Data movement between host memory and t's bytes [offset, offset + size) (t contiguous in that
     * range); memset fills them with value; copy moves all of src into dst (same byte size). Each
     * returns after the data has moved (ordered after work already submitted). */
    int (*tensor_set)(struct llm_backend *b, struct llm_tensor *t, const void *data, size_t offset,
                      size_t size, struct llm_error *err);
    int (*tensor_get)(struct llm_backend *b, const struct llm_tensor *t, void *data, size_t offset,
                      size_t size, struct llm_error *err);
    int (*tensor_memset)(struct llm_backend *b, struct llm_tensor *t, int value, size_t offset,
                         size_t size, struct llm_error *err);
    int (*tensor_copy)(struct llm_backend *b, const struct llm_tensor *src, struct llm_tensor *dst,
                       struct llm_error *err);
    /* As tensor_set / tensor_get of all of t, but queued on the backend: ordered after the work
     * submitted before and before the work submitted after, and they may return at once, so data
     * must stay unchanged (set) or unread (get) until the backend is synchronized. */
    int (*tensor_set_async)(struct llm_backend *b, struct llm_tensor *t, const void *data, size_t size,
                            struct llm_error *err);
    int (*tensor_get_async)(struct llm_backend *b, const struct llm_tensor *t, void *data, size_t size,
                            struct llm_error *err);
    /* Rows of weight or KV cache t, when placed in this backend's memory, padded to a multiple of
     * this many elements (its kernels' layout: the npu's ALIGN rows, src/npu/layout.h); 1 or NULL:
     * dense rows. */
    int64_t (*weight_row_align)(struct llm_backend *b, const struct llm_tensor *t);
    /* Up to cap of the backend's figures so far into out; returns how many it has. */
    int (*get_stats)(struct llm_backend *b, struct llm_backend_stat *out, int cap);
    /* From now on record every executed node in prof and trace every node and host step in trace
     * (either may be NULL; both must outlive the backend or the next observe call). */
    void (*observe)(struct llm_backend *b, struct llm_profile *prof, struct llm_trace *trace);
    void (*free)(struct llm_backend *b);
    /* Free and total bytes of the backend's own memory; NULL for host memory (no size of its own). */
    void (*memory)(struct llm_backend *b, size_t *free_bytes, size_t *total_bytes);
};

struct llm_backend {
    const struct llm_backend_iface *iface;
    void *ctx; /* backend-private state */
};

enum llm_device { LLM_DEVICE_CPU, LLM_DEVICE_NPU };

/* A setting of one device's backends, by a name the backend defines (its options table): the npu's
 * graph mode, say. Settings a backend is not given keep its defaults (or its environment). */
struct llm_backend_option {
    enum llm_device device;
    const char *name;
    double value;
};
/* The error of an allocation of bytes for what that failed on b: one line naming the bytes needed
 * and, for a backend with a memory size, those available ("cannot place 19646720 bytes of weights
 * in npu memory: 10485760 of 10485760 bytes available"). Returns LLM_ERR_NOMEM. */
int llm_backend_alloc_failed(struct llm_backend *b, const char *what, size_t bytes, struct llm_error *err);

/* How to create a backend. */
struct llm_backend_params {
    enum llm_device device;
    int n_threads;        /* cpu: pool threads; npu: device worker threads                */
    const struct llm_backend_option *options; /* those of other devices are skipped; a name the */
    int n_options;        /* device does not define, or a value out of its range, is an error   */
};

/* One option a backend defines: its name, range and meaning (for messages and --help). */
struct llm_backend_option_info {
    const char *name;
    double min, max;
    const char *help;
};

/* Check the options p gives p->device against that device's table: 0, or an error naming an option
 * the table lacks or a value out of its range. */
int llm_backend_options_check(const struct llm_backend_params *p, const struct llm_backend_option_info *table,
                              int n, struct llm_error *err);
/* The value p gives option name of p->device (the last one given), else def. */
double llm_backend_option(const struct llm_backend_params *p, const char *name, double def);

const char *llm_device_name(enum llm_device d);
/* "cpu" / "npu" -> device; -1 when unknown. */
int llm_device_from_name(const char *name);

/* A backend of p->device; NULL with err filled on failure. */
struct llm_backend *llm_backend_new(const struct llm_backend_params *p, struct llm_error *err);

/* The cpu backend with n_threads persistent threads; NULL on failure. Its option: idle_spin_us, how
 * long idle pool threads busy-wait before they sleep (0: the pool's default); short beside a
 * device, whose threads need the cores. */
struct llm_backend *llm_backend_cpu_new(const struct llm_backend_params *p, struct llm_error *err);

/* ---- buffers and the data of the tensors in them -------------------------------------------- */

/* size bytes of b's memory (b NULL: host memory, 64-byte aligned); NULL when out of memory. */
struct llm_buffer *llm_buffer_new(struct llm_backend *b, size_t size);
void llm_buffer_free(struct llm_buffer *buf);
/* Place t at offset bytes into buf: t->data and t->buffer. */
void llm_buffer_place(struct llm_buffer *buf, struct llm_tensor *t, size_t offset);
/* Is t's memory host memory the host may read in place (no buffer, a host buffer, a host-memory
 * backend's)? */
bool llm_tensor_in_host_memory(const struct llm_tensor *t);
/* The backend owning t's memory; NULL for plain host memory. */
struct llm_backend *llm_tensor_backend(const struct llm_tensor *t);

/* Data movement between host memory and t's bytes [offset, offset + size) (t contiguous in that
 * range), through the backend owning them (memcpy / memset for plain host memory). Each returns
 * after the data has moved, ordered after work already submitted. */
int llm_tensor_set(struct llm_tensor *t, const void *data, size_t offset, size_t size, struct llm_error *err);
int llm_tensor_get(const struct llm_tensor *t, void *data, size_t offset, size_t size, struct llm_error *err);
int llm_tensor_memset(struct llm_tensor *t, int value, size_t offset, size_t size, struct llm_error *err);
/* Copy all of src into dst (same byte size, each spanning its strides' range), wherever each lives:
 * host to device and device to host are queued on the device (ordered after the work submitted
 * to it, before the work submitted after), device to device of one backend on that backend, and
 * other pairs go through host memory. *pending gets the device whose queue still holds the copy
 * (synchronize it before src changes or the host reads dst), or NULL when the copy is done. */
int llm_tensor_copy_async(const struct llm_tensor *src, struct llm_tensor *dst, struct llm_backend **pending,
                          struct llm_error *err);

/* Submit g and wait for it. */
static inline int llm_backend_compute(struct llm_backend *b, struct llm_graph *g, struct llm_error *err)
{
    int rc = b->iface->graph_compute(b, g, err);
    if (rc == 0)
        b->iface->synchronize(b);
    return rc;
}

static inline void llm_backend_free(struct llm_backend *b)
{
    if (b)
        b->iface->free(b);
}

#endif
