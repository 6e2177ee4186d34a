/* Weight matrices repacked at load into the decode layout of src/ops/types/repack.h into one
 * anonymous mapping the model owns. The file's pages are dropped as soon as they are copied (a few
 * MiB at a time), so resident memory holds one copy of the weights, not two, and never more than
 * DROP_BYTES beyond it while loading.
 *
 * When any matrix is repacked, the other tensors (norms, biases, matrices of types without a
 * repacked layout) are copied into the same mapping and the file's whole data section is dropped:
 * a read of a tensor left in the file would map back the dropped pages around it (the kernel maps
 * the whole large folio of the page cache a fault lands in, several MiB of neighbouring matrices).
 *
 * The work is split across the load's threads by the file's bytes: thread i moves the rows whose
 * first byte lies in the i-th of n equal parts of the data section, front to back, so each thread
 * reads one ascending run of the file and drops the pages behind it.
 *
 * A mapped file's copy is first looked for in the repack cache (repack_cache.h): a hit maps it and
 * touches none of the file's data pages; a miss copies as above, then writes the copy there. */
#include "model.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "graph.h"
#include "hash.h"
#include "log.h"
#include "ops/types/repack.h"
#include "repack_cache.h"

#define DROP_BYTES (4u << 20)
#define REPACK_ALIGN 64 /* each matrix starts on a cache line */
#define MAX_THREADS 64   /* a load takes at most this many threads */

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

/* Faults in the pages of the model's mapping that [from, to) touches in one system call, which costs
 * less than the page faults of writing them one by one; where the kernel lacks MADV_POPULATE_WRITE
 * (before Linux 5.14) the writes fault them in as before. */
static void populate(char *from, char *to)
{
#ifdef MADV_POPULATE_WRITE
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)from & ~(page - 1);
    if ((uintptr_t)to > a)
        madvise((void *)a, (uintptr_t)to - a, MADV_POPULATE_WRITE);
#else
    (void)from, (void)to;
#endif
}

/* How a tensor moves: in units of `rows` file rows (a group when repacked, else one row), each unit
 * taking `src_size` bytes of the file and `dst_size` of the model's memory. */
struct unit {
    bool repack;
    int64_t rows, count;
    size_t src_size, dst_size;
};

static struct unit unit_of(const struct llm_tensor *t)
{
    const bool repack = repackable(t);
    const int64_t M = llm_nrows(t), rows = repack ? LLM_REPACK_ROWS : 1;
    return (struct unit){ repack, rows, (M + rows - 1) / rows, (size_t)rows * t->nb[1],
                          repack ? llm_repack_group_size(t->type, t->ne[0]) : t->nb[1] };
}

/* Bytes t takes in the model's mapping. */
static size_t moved_size(const struct llm_tensor *t)
{
    return align_up(repackable(t) ? llm_repack_size(t->type, t->ne[0], t->ne[1]) : llm_nbytes(t));
}

struct move_job {
    const struct llm_model *m;
    const char *data;     /* the file's data section (the tensors' data still point into it) */
    size_t span;          /* bytes from data to the end of the last tensor */
    char *mem;            /* the model's mapping */
    const size_t *offs;   /* each tensor's place in it */
    int n_parts;
    size_t drop_bytes;    /* a thread's file bytes between drops: DROP_BYTES in all */
};

/* The first unit of a tensor at file offset o whose first byte lies at or after file offset at. */
static int64_t first_unit_at(size_t o, const struct unit *u, size_t at)
{
    if (at <= o)
        return 0;
    const uint64_t n = (at - o + u->src_size - 1) / u->src_size;
    return n < (uint64_t)u->count ? (int64_t)n : u->count;
}

/* Moves units [u0, u1) of t into dst (the tensor's place in the model's mapping). */
static void move_units(const struct llm_tensor *t, const struct unit *u, int64_t u0, int64_t u1, char *dst)
{
    const char *src = t->data;
    if (u->repack)
        llm_repack_groups(t->type, t->ne[0], llm_nrows(t), src, t->nb[1], u0, u1, dst);
    else
        memcpy(dst + (size_t)u0 * u->dst_size, src + (size_t)u0 * u->src_size, (size_t)(u1 - u0) * u->src_size);
}

/* span * part / n_parts rounded down, without overflow. */
static size_t part_start(const struct move_job *j, int part)
{
    const size_t n = (size_t)j->n_parts, p = (size_t)part;
    return j->span / n * p + j->span % n * p / n;
}

/* Part `part` of the job: the units whose first byte is in [span * part / n, span * (part + 1) / n). */
static void move_part(const struct move_job *j, int part)
{
    const size_t lo = part_start(j, part), hi = part_start(j, part + 1);
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* from this part's first unit on: the pages before it may hold the previous part's last unit, which
     * read-into-memory modes (-lm none) would lose, not just read again; so the page this part's first
     * byte is in is never dropped here, nor by the part before (drop_pages drops whole pages) */
    const char *first = NULL, *dropped = NULL;
    for (int64_t i = 0; i < j->m->n_tensors; i++) {
        const struct llm_tensor *t = &j->m->tensors[i];
        const size_t o = (size_t)((const char *)t->data - j->data);
        if (o >= hi)
            break;
        const struct unit u = unit_of(t);
        const int64_t u_lo = first_unit_at(o, &u, lo), u_hi = first_unit_at(o, &u, hi);
        const int64_t step = j->drop_bytes / u.src_size > 0 ? (int64_t)(j->drop_bytes / u.src_size) : 1;
        for (int64_t u0 = u_lo; u0 < u_hi; u0 += step) {
            const int64_t u1 = u0 + step < u_hi ? u0 + step : u_hi;
            first = first ? first : (const char *)t->data + (size_t)u0 * u.src_size;
            dropped = dropped ? dropped : first;
            char *dst = j->mem + j->offs[i];
            populate(dst + (size_t)u0 * u.dst_size, dst + (size_t)u1 * u.dst_size);
            move_units(t, &u, u0, u1, dst);
            const int64_t rows = u1 * u.rows < llm_nrows(t) ? u1 * u.rows : llm_nrows(t);
            const char *done = (const char *)t->data + (size_t)rows * t->nb[1];
            drop_pages(dropped, done);
            dropped = (const char *)((uintptr_t)done & ~(page - 1));
            dropped = dropped > first ? dropped : first;
        }
    }
}

struct move_thread {
    const struct move_job *job;
    int part;
};

static void *move_thread(void *arg)
{
    const struct move_thread *w = arg;
    move_part(w->job, w->part);
    return NULL;
}

/* Runs the job's parts on n_parts threads (the caller's among them); a part whose thread cannot be
 * created runs on the caller's afterwards. */
static void run_parts(const struct move_job *j)
{
    pthread_t th[MAX_THREADS];
    struct move_thread w[MAX_THREADS];
    bool started[MAX_THREADS] = { false };
    for (int p = 1; p < j->n_parts; p++) {
        w[p] = (struct move_thread){ j, p };
        started[p] = pthread_create(&th[p], NULL, move_thread, &w[p]) == 0;
    }
    move_part(j, 0);
    for (int p = 1; p < j->n_parts; p++) {
        if (started[p])
            pthread_join(th[p], NULL);
        else
            move_part(j, p);
    }
}

/* Each tensor's place in the model's memory (offs may be NULL) and the bytes of it all; *any: is a
 * matrix repacked here? */
static size_t places(const struct llm_model *m, size_t *offs, bool *any)
{
    size_t total = 0;
    *any = false;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        if (offs)
            offs[i] = total;
        total += moved_size(&m->tensors[i]);
        *any |= repackable(&m->tensors[i]);
    }
    return total;
}

/* m->repacked: the model's own memory of `total` bytes (flags: mmap's, beyond the anonymous private
 * mapping). No MADV_HUGEPAGE: finding huge pages cost more system time than the copy itself, and a
 * varying amount (bench/results/repack.md). */
static int map_model_memory(struct llm_model *m, size_t total, int flags, struct llm_error *err)
{
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (mem == MAP_FAILED)
        return llm_fail(err, LLM_ERR_NOMEM, "cannot map %zu bytes for the repacked weights", total);
    m->repacked = mem;
    m->repacked_bytes = total;
    return 0;
}

/* A hash of where and how each tensor moves, the repack cache's layout (repack_cache.h). */
static uint64_t layout_hash(const struct llm_model *m, const char *data, const size_t *offs, size_t total)
{
    uint64_t h = llm_fnv_feed(LLM_FNV_SEED, &total, sizeof total);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct llm_tensor *t = &m->tensors[i];
        const uint64_t v[] = { (uint64_t)t->type,  (uint64_t)t->ne[0], (uint64_t)t->ne[1], (uint64_t)t->ne[2],
                               (uint64_t)t->ne[3], (uint64_t)t->nb[1], (uint64_t)((const char *)t->data - data),
                               (uint64_t)offs[i],  (uint64_t)repackable(t) };
        h = llm_fnv_feed(h, v, sizeof v);
    }
    return h;
}

int llm_model_repack(struct llm_model *m, int n_threads, struct llm_error *err)
{
    size_t *offs = malloc((size_t)m->n_tensors * sizeof *offs);
    if (!offs)
        return llm_fail(err, LLM_ERR_NOMEM, "out of memory");
    bool any;
    const size_t total = places(m, offs, &any);
    const char *data = (const char *)m->file->base + m->file->data_offset, *end = (const char *)m->file->base + m->file->size;
    /* the cache only stands in for a mapped file: the read-into-memory modes ask for the weights in
     * the process's own memory */
    const uint64_t layout = any && m->file->mapped ? layout_hash(m, data, offs, total) : 0;
    void *mem = layout ? repack_cache_map(m->file, layout, total) : NULL;
    const bool hit = mem != NULL;
    int rc = any && !hit ? map_model_memory(m, total, 0, err) : 0;
    if (rc || !any) {
        free(offs);
        return rc;
    }
    if (hit) {
        m->repacked = mem;
        m->repacked_bytes = total;
    }
    mem = m->repacked;
    /* a file locked in RAM (--mlock) hands its lock to the copy, since locked pages cannot be dropped;
     * the system calls themselves, as gguf_load.c locks (AddressSanitizer's are no-ops) */
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), from = (uintptr_t)data & ~(page - 1);
    if (m->file->locked)
        syscall(SYS_munlock, from, (uintptr_t)end - from);
    if (!hit) {
        const struct llm_tensor *last = &m->tensors[m->n_tensors - 1];
        const int n = n_threads < 1 ? 1 : n_threads > MAX_THREADS ? MAX_THREADS : n_threads;
        const struct move_job job = { m, data, (size_t)((const char *)last->data - data) + llm_nbytes(last),
                                      (char *)mem, offs, n, DROP_BYTES / (size_t)n };
        run_parts(&job);
    }
    for (int64_t i = 0; i < m->n_tensors; i++) {
        struct llm_tensor *t = &m->tensors[i];
        t->flags |= repackable(t) ? LLM_TENSOR_REPACKED : 0u;
        t->data = (char *)mem + offs[i];
    }
    free(offs);
    /* the pages tensors share at their ends and the parts share at theirs; caller memory (no mapping
     * of the file's) stays */
    if (m->file->map_len)
        drop_pages(data, end);
    if (m->file->locked && syscall(SYS_mlock, mem, total) != 0)
        llm_log(LLM_LOG_WARN, "%s: cannot lock the %.1f MiB of repacked weights in RAM: they stay unlocked",
                m->file->path, (double)total / (1024.0 * 1024.0));
    if (layout && !hit)
        repack_cache_save(m->file, layout, mem, total);
    return 0;
}

/* t's place in the model's mapping: the tensors before it, each at its moved size. */
static size_t place_of(const struct llm_model *m, const struct llm_tensor *t)
{
    size_t off = 0;
    for (const struct llm_tensor *u = m->tensors; u < t; u++)
        off += moved_size(u);
    return off;
}

int llm_model_repack_layers(struct llm_model *m, int32_t first, int32_t end, struct llm_error *err)
{
    /* the places llm_model_repack would give, reserved: only the pages written take memory */
    bool any;
    const size_t total = places(m, NULL, &any);
    int rc = m->repacked || !any ? 0 : map_model_memory(m, total, MAP_NORESERVE, err);
    if (rc || !m->repacked)
        return rc;
    for (int32_t il = first; il < end; il++) {
        struct llm_tensor *own[] = {
#define LLM_LAYER_FIELD(field, name, ne0, ne1, role, presence) m->layers[il].field,
            LLM_LAYER_TENSORS(LLM_LAYER_FIELD)
#undef LLM_LAYER_FIELD
        };
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++) {
            struct llm_tensor *t = own[k];
            if (!t || !repackable(t) || (t->flags & LLM_TENSOR_REPACKED))
                continue;
            char *dst = (char *)m->repacked + place_of(m, t);
            llm_repack_groups(t->type, t->ne[0], t->ne[1], t->data, t->nb[1], 0,
                              (t->ne[1] + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS, dst);
            drop_pages(t->data, (const char *)t->data + llm_nbytes(t));
            t->data = dst;
            t->flags |= LLM_TENSOR_REPACKED;
        }
    }
    return 0;
}

void llm_model_repack_free(struct llm_model *m)
{
    if (m->repacked)
        munmap(m->repacked, m->repacked_bytes);
    m->repacked = NULL;
}
