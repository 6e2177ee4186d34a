/* Weight matrices repacked at load into the decode layout of src/ops/types/repack.h, tensor by tensor,
 * into one anonymous mapping the model owns. The file's pages of each matrix are dropped as soon
 * as they are copied (a few MiB at a time), so resident memory holds one copy of the weights, not
 * two, and never more than DROP_BYTES beyond it while loading.
 *
 * When any matrix is repacked, the other tensors (norms, biases, matrices of types without a
 * repacked layout) are copied into the same mapping and the file's whole data section is dropped:
 * a read of a tensor left in the file would map back the dropped pages around it (the kernel maps
 * the whole large folio of the page cache a fault lands in, several MiB of neighbouring matrices). */
#include "model.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "graph.h"
#include "log.h"
#include "ops/types/repack.h"

#define DROP_BYTES (4u << 20)
#define REPACK_ALIGN 64 /* each matrix starts on a cache line */

static size_t align_up(size_t n)
{
    return (n + REPACK_ALIGN - 1) & ~(size_t)(REPACK_ALIGN - 1);
}

/* A 2-D matrix of a type the cpu decodes repacked on this CPU. */
static bool repackable(const struct llm_tensor *t)
{
    return t->ne[2] == 1 && t->ne[3] == 1 && llm_repack_type_ok(t->type) && llm_repack_kernel(t->type);
}

/* Drops the whole pages of the mapping inside [from, to): they were read for the last time. */
static void drop_pages(const char *from, const char *to)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)from + page - 1) & ~(page - 1), b = (uintptr_t)to & ~(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED); /* advice: on failure the pages just stay */
}

/* Repack t into dst (or copy it, when its type has no repacked layout here), DROP_BYTES of the
 * file's rows at a time, dropping each run's pages after it. */
static void move_tensor(struct llm_tensor *t, char *dst)
{
    const bool repack = repackable(t);
    const int64_t K = t->ne[0], M = llm_nrows(t), groups = repack ? (M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS : M;
    const size_t gs = repack ? llm_repack_group_size(t->type, K) : t->nb[1];
    const int64_t step = gs && DROP_BYTES / gs > 0 ? DROP_BYTES / gs : 1, rows_per_group = repack ? LLM_REPACK_ROWS : 1;
    const char *src = t->data, *dropped = src;
    for (int64_t g = 0; g < groups; g += step) {
        const int64_t g1 = g + step < groups ? g + step : groups;
        if (repack)
            llm_repack_groups(t->type, K, M, src, t->nb[1], g, g1, dst);
        else
            memcpy(dst + (size_t)g * gs, src + (size_t)g * gs, (size_t)(g1 - g) * gs);
        const int64_t rows = g1 * rows_per_group < M ? g1 * rows_per_group : M;
        const char *done = src + (size_t)rows * t->nb[1];
        drop_pages(dropped, done);
        dropped = (const char *)((uintptr_t)done & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1));
    }
    t->data = dst;
    t->flags |= repack ? LLM_TENSOR_REPACKED : 0u;
}

/* Bytes t takes in the model's mapping. */
static size_t moved_size(const struct llm_tensor *t)
{
    return align_up(repackable(t) ? llm_repack_size(t->type, t->ne[0], t->ne[1]) : llm_nbytes(t));
}

int llm_model_repack(struct llm_model *m, struct llm_error *err)
{
    size_t total = 0;
    bool any = false;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        total += moved_size(&m->tensors[i]);
        any |= repackable(&m->tensors[i]);
    }
    if (!any)
        return 0;
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return llm_fail(err, LLM_ERR_NOMEM, "cannot map %zu bytes for the repacked weights", total);
    /* no MADV_HUGEPAGE: finding huge pages cost more system time than the copy itself, and a varying
     * amount (bench/results/repack.md) */
    m->repacked = mem;
    m->repacked_bytes = total;
    const char *data = (const char *)m->file->base + m->file->data_offset, *end = (const char *)m->file->base + m->file->size;
    /* a file locked in RAM (--mlock) hands its lock to the copy, since locked pages cannot be dropped;
     * the system calls themselves, as gguf_load.c locks (AddressSanitizer's are no-ops) */
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), from = (uintptr_t)data & ~(page - 1);
    if (m->file->locked)
        syscall(SYS_munlock, from, (uintptr_t)end - from);
    size_t offs = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        struct llm_tensor *t = &m->tensors[i];
        const size_t size = moved_size(t);
        move_tensor(t, (char *)mem + offs);
        offs += size;
    }
    /* the pages tensors share at their ends; caller memory (no mapping of the file's) stays */
    if (m->file->map_len)
        drop_pages(data, end);
    if (m->file->locked && syscall(SYS_mlock, mem, total) != 0)
        llm_log(LLM_LOG_WARN, "%s: cannot lock the %.1f MiB of repacked weights in RAM: they stay unlocked",
                m->file->path, (double)total / (1024.0 * 1024.0));
    return 0;
}

void llm_model_repack_free(struct llm_model *m)
{
    if (m->repacked)
        munmap(m->repacked, m->repacked_bytes);
    m->repacked = NULL;
}
