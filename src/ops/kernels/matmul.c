/* MUL_MAT: dst[m, n] = dot(src0 row m, src1 row n), src0 broadcast over dims 2/3.
 *
 * Four paths, chosen per node by choose_path():
 *  - dot path (decode, small batches): src1 rows are converted once to the weights' vec_dot_type
 *    (in parallel, into wdata), then threads take chunks of weight rows from a shared counter and
 *    dot each row with every src1 row, so each weight row is read from memory once per call.
 *  - BLAS path (large batches): each pool thread takes a slice of the weight rows, dequantizes it
 *    to F32 in its part of wdata (F32 weights are read in place) and runs a single-threaded
 *    cblas_sgemm of the slice against all of src1 (OpenBLAS without threads of its own, blas.h):
 *    every thread works, where thread 0 calling a threaded sgemm left the pool waiting
 *    (bench/results/kernel_choices.md).
 *  - GEMM path (batches of Q8_0 / Q4_0 / Q5_0 weights, gemm_batch()): src1 converted as for the
 *    dot path, then each thread runs the type's integer GEMM kernel (types.h) over chunks of weight
 *    rows against every src1 row, its own share's first, then the others' (gemm_share); the
 *    results do not depend on the number of threads.
 *  - float GEMM path (batches of F16 / BF16 weights, fgemm_min_batch()): the same split, the
 *    type's gemm_f32 kernel reading the F32 src1 rows in place. */
#include <stdint.h>
#include <string.h>

#include "blas.h"
#include "cpu_features.h"
#include "kernels.h"
#include "ops/isa/gemm.h"
#include "ops/isa/prefetch.h"
#include "ops/types/repack.h"
#include "ops/types/types.h"

#define DOT_CHUNK 16            /* fewest weight rows per task on the dot path */
#define PREFETCH_MAX_N 4        /* src1 rows up to which the dot path streams (decode): prefetch_ahead */
/* Dequantized weights per sgemm tile, all threads: 4 MiB. Resident memory, not speed, sets it: a
 * larger tile broke the peak RSS budget of file + KV cache + 64 MiB, a smaller one costs prefill
 * speed (bench/results/kernel_choices.md). */
#define BLAS_TILE_FLOATS (1u << 20)
#define WDATA_HEADER 64         /* task counter, on its own cache line */
#define STEAL_CHUNK_BYTES (16u << 10) /* decode shares' chunk: mul_mat_dot */
#define SHARE_STRIDE 8          /* uint64_t per decode share word: one cache line each */

/* A node's weights w and activations x, and what follows from their types and shapes alone (s,
 * which a plan keeps). */
struct mm_geom {
    const struct llm_tensor *w, *x;
    struct llm_mm_shape s;
};

/* The dot path reads src1 in place when it already is contiguous F32 rows of the right type. */
static bool needs_convert(const struct mm_geom *g)
{
    return g->s.wt->vec_dot_type != LLM_TYPE_F32 || g->x->nb[1] != (size_t)g->s.K * sizeof(float) ||
           g->x->nb[2] != g->x->nb[1] * (size_t)g->s.N || g->x->nb[3] != g->x->nb[2] * (size_t)g->x->ne[2];
}

static struct mm_geom geom(const struct llm_tensor *dst)
{
    const struct llm_tensor *w = dst->src[0], *x = dst->src[1];
    const struct llm_type_traits *wt = llm_type_traits(w->type);
    struct mm_geom g = {
        .w = w, .x = x,
        .s = { .K = w->ne[0], .M = w->ne[1], .N = x->ne[1], .r2 = x->ne[2] / w->ne[2], .r3 = x->ne[3] / w->ne[3],
               .wt = wt, .vt = wt->vec_dot ? llm_type_traits(wt->vec_dot_type) : NULL },
    };
    g.s.convert = needs_convert(&g);
    return g;
}

static bool dot_path_ok(const struct mm_geom *g)
{
    return g->s.wt->vec_dot && g->s.vt && g->s.K % llm_type_info(g->s.wt->vec_dot_type)->blck_size == 0 &&
           (g->s.wt->vec_dot_type == LLM_TYPE_F32 || g->s.vt->from_float_fast);
}

static bool blas_path_ok(const struct mm_geom *g, const struct llm_tensor *dst)
{
    if (!llm_blas_available())
        return false;
    bool w_ok = g->w->type == LLM_TYPE_F32 ? g->w->nb[1] % sizeof(float) == 0 : g->s.wt->to_float != NULL;
    return w_ok && dst->nb[1] % sizeof(float) == 0 && g->x->nb[1] % sizeof(float) == 0;
}

/* The path choice. Dequantize + sgemm costs one dequantization of the weights per call, which
 * pays off only when enough src1 rows share it; the dot path streams each weight row once and is
 * the only sensible choice for decode (N = 1, memory-bound). Float weights reach the crossover
 * sooner than quantized ones, since their dot path is float FMAs anyway (F16 and BF16 take sgemm
 * only without a float GEMM kernel, use_blas); the crossovers were measured
 * (bench/results/kernel_choices.md). */
static int64_t blas_min_batch(enum llm_type t)
{
    return t == LLM_TYPE_F32 || t == LLM_TYPE_F16 || t == LLM_TYPE_BF16 ? 8 : 24;
}

static bool use_blas(const struct mm_geom *g, const struct llm_tensor *dst)
{
    if (dot_path_ok(g)) {
        /* F16 / BF16: the dot path below the float GEMM's batches (fgemm_min_batch); decode never
         * asks blas_path_ok, which looks up OpenBLAS */
        if (g->s.wt->gemm_f32 || g->s.N < blas_min_batch(g->w->type))
            return false;
    }
    return blas_path_ok(g, dst);
}

/* When the integer GEMM (Q8_0 / Q4_0 / Q5_0 weights, gemm_avx512.c / gemm_avxvnni.c / gemm_q8_0_avx2.c /
 * gemm_q4_0_avx2.c) beats the dot and BLAS paths (bench/results/gemm_int8.md, kernel_choices.md):
 * the VNNI kernels from N = 8 on, since a CPU with AVX-VNNI but no AVX-512 has a slower sgemm; the
 * AVX2 kernels (8 rows a register) measured faster than dequantize + an AVX2 sgemm at every batch
 * (Q4_0 1.4-2x at N = 512, Q8_0 1.3-1.5x): Q4_0 from N = 16, Q8_0 from N = 8 (1.2x the dot path on
 * repacked rows in qwen2-0.5B's pp8; 0.87x at N = 4). Q5_0 has only the AVX2 kernel
 * (gemm_q4_0_avx2.c), measured faster than the dot path (2.2-3.3x at N = 8), the float GEMM
 * (2.0-3.4x) and dequantize + sgemm at every batch from 8 to 512 where AVX2 is the widest ISA; on
 * AVX-512 and AVX-VNNI CPUs it keeps their wider dot and float GEMM kernels (not measured against
 * them). */
static bool gemm_batch(enum llm_type t, int64_t N)
{
    if (t == LLM_TYPE_Q5_0)
        return N >= 8 && !llm_cpu_has_avx512() && !llm_cpu_has_avxvnni();
    if (llm_cpu_has_avx512() || llm_cpu_has_avxvnni())
        return N >= 8;
    return N >= (t == LLM_TYPE_Q8_0 ? 8 : 16);
}

static bool use_int_gemm(const struct mm_geom *g, const struct llm_tensor *dst)
{
    return g->s.wt->gemm && dot_path_ok(g) && dst->nb[1] % sizeof(float) == 0 && gemm_batch(g->w->type, g->s.N);
}

/* The float GEMM (F16 / BF16 weights, and the quantized ones without an integer GEMM dequantized
 * into its panels; gemm_f16_avx512.c / gemm_f16_avx2.c) beats sgemm at every batch it takes, so
 * BLAS no longer serves F16 or BF16 (bench/results/gemm_f16.md, kernel_choices.md). Its packing
 * (weights transposed into float panels, once per call) loses to the four-row F16 dot kernels at
 * small N, hence a minimum batch per ISA; BF16 has no AVX-512 dot4, so its GEMM starts at N = 8. */
static int64_t fgemm_min_batch(enum llm_type t)
{
    if (t == LLM_TYPE_BF16)
        return 8;
    return llm_cpu_has_avx512() ? 16 : 32;
}

static bool use_float_gemm(const struct mm_geom *g, const struct llm_tensor *dst)
{
    return g->s.wt->gemm_f32 && dst->nb[1] % sizeof(float) == 0 && g->x->nb[1] % sizeof(float) == 0 &&
           g->s.N >= fgemm_min_batch(g->w->type);
}

enum mm_path { PATH_DOT, PATH_BLAS, PATH_GEMM, PATH_FLOAT_GEMM };

/* The one place the path is chosen: kernel, scratch size and the tests' questions all ask here. */
static enum mm_path choose_path(const struct mm_geom *g, const struct llm_tensor *dst)
{
    if (use_int_gemm(g, dst)) /* a type with both (Q5_0) takes the integer one where gemm_batch says */
        return PATH_GEMM;
    if (use_float_gemm(g, dst))
        return PATH_FLOAT_GEMM;
    return use_blas(g, dst) ? PATH_BLAS : PATH_DOT;
}

bool llm_cpu_mul_mat_uses_blas(const struct llm_tensor *node)
{
    struct mm_geom g = geom(node);
    return choose_path(&g, node) == PATH_BLAS;
}

bool llm_cpu_mul_mat_uses_gemm(const struct llm_tensor *node)
{
    struct mm_geom g = geom(node);
    enum mm_path path = choose_path(&g, node);
    return path == PATH_GEMM || path == PATH_FLOAT_GEMM;
}

bool llm_cpu_mul_mat_uses_int_gemm(const struct llm_tensor *node)
{
    struct mm_geom g = geom(node);
    return choose_path(&g, node) == PATH_GEMM;
}

bool cpu_mul_mat_supports(const struct llm_tensor *dst)
{
    const struct llm_tensor *w = dst->src[0], *x = dst->src[1];
    if (!w || !x || !llm_type_traits(w->type) || x->type != LLM_TYPE_F32 || dst->type != LLM_TYPE_F32)
        return false;
    struct mm_geom g = geom(dst);
    const struct llm_type_info *wi = llm_type_info(w->type);
    if (x->nb[0] != sizeof(float) || dst->nb[0] != sizeof(float) || w->nb[0] != wi->type_size ||
        g.s.K % wi->blck_size || x->ne[0] != g.s.K || w->ne[2] == 0 || w->ne[3] == 0 ||
        x->ne[2] % w->ne[2] || x->ne[3] % w->ne[3] || dst->ne[0] != g.s.M || dst->ne[1] != g.s.N ||
        dst->ne[2] != x->ne[2] || dst->ne[3] != x->ne[3])
        return false;
    return dot_path_ok(&g) || use_blas(&g, dst);
}

/* Weight rows per sgemm tile (whole matrix when it fits). */
static int64_t blas_tile_rows(const struct mm_geom *g)
{
    int64_t rows = (int64_t)BLAS_TILE_FLOATS / g->s.K;
    rows = rows < 16 ? 16 : rows;
    return rows < g->s.M ? rows : g->s.M;
}

/* Rows of dequantized weights each thread's own scratch region holds: its share of any tile. */
static int64_t blas_thread_rows(const struct mm_geom *g, int nth)
{
    return (blas_tile_rows(g) + nth - 1) / nth;
}

static bool repacked(const struct mm_geom *g)
{
    return (g->w->flags & LLM_TENSOR_REPACKED) != 0;
}

/* The kernel of a GEMM path that reads a repacked matrix's groups in place (the integer GEMM's
 * gemm_packed twin), or NULL: then the matrix is unpacked for the kernel. */
static llm_gemm_fn packed_kernel(const struct mm_geom *g, enum mm_path path)
{
    return repacked(g) && path == PATH_GEMM ? g->s.wt->gemm_packed : NULL;
}

/* The GEMMs without a packed twin read the file's rows: a repacked matrix is unpacked for them one
 * block of gemm_block_rows rows at a time (the blocks they walk anyway) into each thread's scratch. */
static size_t unpack_bytes(const struct mm_geom *g, enum mm_path path)
{
    return repacked(g) && !packed_kernel(g, path) ? (size_t)gemm_block_rows(g->s.K) * llm_row_size(g->w->type, g->s.K)
                                                  : 0;
}

/* Scratch of a GEMM thread: the kernel's own, then its unpacked rows. */
static size_t kernel_scratch_size(const struct mm_geom *g, enum mm_path path)
{
    return path == PATH_GEMM ? llm_gemm_scratch_size(g->s.K, g->s.N) : llm_gemm_f32_scratch_size(g->s.K);
}

static size_t gemm_thread_size(const struct mm_geom *g, enum mm_path path)
{
    return kernel_scratch_size(g, path) +
           unpack_bytes(g, path);
}

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* Bytes of src1's rows converted to vec_dot_type (convert_src1), rounded up to a line: the start of
 * the scratch of the dot and GEMM paths. */
static size_t converted_bytes(const struct mm_geom *g)
{
    return g->s.vt ? align64((size_t)llm_nrows(g->x) * llm_row_size(g->s.wt->vec_dot_type, g->s.K)) : 0;
}

/* Bytes after the converted src1 rows that hold the decode shares' words (mul_mat_dot), a line
 * each. */
static size_t shares_bytes(int nth)
{
    return nth > 1 ? (size_t)nth * SHARE_STRIDE * sizeof(uint64_t) : 0;
}

/* The dot path's src1 rows in the form a repacked matrix's kernel reads them (repack.h,
 * llm_repack_x, each row's form a whole number of lines): their bytes (0: the kernel reads the
 * converted rows), and where they start in the scratch, after the converted rows and the shares'
 * words (mul_mat_dot). */
static size_t dot_form_bytes(const struct mm_geom *g)
{
    return repacked(g) ? (size_t)llm_nrows(g->x) * llm_repack_x_size(g->w->type, g->s.K) : 0;
}

static size_t dot_form_offset(const struct mm_geom *g, int nth)
{
    return g->s.convert ? converted_bytes(g) + shares_bytes(nth) : 0;
}

/* Scratch of one path at this shape (converted src1 rows, per-thread panels or tiles). */
static size_t path_work_size(const struct mm_geom *g, enum mm_path path, int nth)
{
    size_t size = 2 * WDATA_HEADER; /* header + room to align wdata to a cache line */
    switch (path) {
    case PATH_FLOAT_GEMM: /* the shares' words, then each thread's scratch (mul_mat_float_gemm) */
        return size + shares_bytes(nth) + (size_t)nth * gemm_thread_size(g, path);
    case PATH_GEMM: /* converted src1, the shares' words, then each thread's scratch (mul_mat_gemm) */
        return size + converted_bytes(g) + shares_bytes(nth) + (size_t)nth * gemm_thread_size(g, path);
    case PATH_BLAS:
        if (g->w->type != LLM_TYPE_F32)
            size += (size_t)nth * (size_t)blas_thread_rows(g, nth) * (size_t)g->s.K * sizeof(float);
        return size;
    case PATH_DOT: /* converted src1, the decode shares' words, then src1 in a repacked kernel's form */
        break;
    }
    return size + dot_form_offset(g, nth) + dot_form_bytes(g);
}

size_t cpu_mul_mat_work_size(const struct llm_tensor *dst, int nth)
{
    struct mm_geom g = geom(dst);
    return path_work_size(&g, choose_path(&g, dst), nth);
}

/* Whether this node could take path at some batch (on this CPU); the dot path it always can. */
static bool path_possible(const struct mm_geom *g, const struct llm_tensor *dst, enum mm_path path)
{
    switch (path) {
    case PATH_DOT: return true;
    case PATH_BLAS: return blas_path_ok(g, dst);
    case PATH_GEMM: return g->s.wt->gemm && dot_path_ok(g);
    case PATH_FLOAT_GEMM: return g->s.wt->gemm_f32 != NULL;
    }
    return false;
}

/* Which path runs depends on N (and the CPU), and a path taken only at small N may need more than
 * the one at this N (the rules of gemm_batch, fgemm_min_batch and blas_min_batch change per CPU and
 * type): the largest scratch of every path this node could take. Each path's own size grows with N. */
size_t cpu_mul_mat_work_size_bound(const struct llm_tensor *dst, int nth)
{
    struct mm_geom g = geom(dst);
    size_t most = 0;
    for (int path = PATH_DOT; path <= PATH_FLOAT_GEMM; path++) {
        const enum mm_path pa = (enum mm_path)path;
        const size_t w = path_possible(&g, dst, pa) ? path_work_size(&g, pa, nth) : 0;
        most = w > most ? w : most;
    }
    return most;
}

/* ---- dot path ----------------------------------------------------------------------------- */

/* Decode asks for the rows ahead (ops/isa/prefetch.h); pointless once a row is reused by many
 * src1 rows. Matrices repacked at load (repack.h) are prefetched by their kernels. Smaller matrices
 * come from cache (a tiny model's weights fit in L2/L3), where the prefetch instructions only take
 * issue slots (bench/results/kernel_choices.md). */
#define PREFETCH_MIN_BYTES (256u << 10)
/* Streamed quantized rows at least this long are read one at a time (dot_rows4); float rows are,
 * whatever their length: their four-row kernel shares only a conversion of the activations, which
 * a one-row kernel repeats at no cost that shows, while four streams side by side read slower
 * (bench/results/kernel_choices.md). */
#define STREAM_ROW_MIN_BYTES 2048

static bool streams_one_row(enum llm_type t, size_t row_bytes)
{
    return !llm_type_info(t)->is_quantized || row_bytes >= STREAM_ROW_MIN_BYTES;
}

static size_t prefetch_distance(enum llm_type t)
{
    return llm_type_info(t)->is_quantized ? PREFETCH_AHEAD_QUANT : PREFETCH_AHEAD_FLOAT;
}

/* Weight rows [m0, m1) of matrix (i2, i3) dotted with its N src1 rows at xb, four rows per call
 * (the last group repeats its final row where fewer than four remain: dst rows are contiguous,
 * and only the real ones are stored). */
static void dot_rows4(const struct mm_geom *g, struct llm_tensor *dst, int64_t m0, int64_t m1, int64_t i2,
                      int64_t i3, const char *xb, size_t xrow)
{
    const char *w = tensor_at(g->w, 0, 0, i2 / g->s.r2, i3 / g->s.r3);
    const size_t stride = g->w->nb[1], row_bytes = llm_row_size(g->w->type, g->s.K);
    llm_vec_dot4_fn dot4 = g->s.wt->vec_dot4;
    const bool prefetch = g->s.N <= PREFETCH_MAX_N && (size_t)g->s.M * row_bytes >= PREFETCH_MIN_BYTES;
    const size_t ahead = prefetch_distance(g->w->type);
    int64_t m = m0;
    /* decode from cache: whole groups of four rows, the kernel writing the sums in place, with
     * nothing else per group (the checks below cost as much as a 64-float row's kernel) */
    if (g->s.N == 1 && dst->nb[0] == sizeof(float) && !prefetch) {
        float *out = tensor_at(dst, m0, 0, i2, i3);
        const char *r = w + (size_t)m0 * stride;
        if (g->s.wt->vec_dot_rows) {
            const int64_t whole = (m1 - m0) / 4 * 4;
            g->s.wt->vec_dot_rows(g->s.K, whole, out, r, stride, xb);
            m += whole;
        } else {
            for (; m + 4 <= m1; m += 4, r += 4 * stride, out += 4) {
                const void *rows[4] = { r, r + stride, r + 2 * stride, r + 3 * stride };
                dot4(g->s.K, out, rows, xb);
            }
        }
    }
    /* decode of rows streamed from memory: row after row with the one-row kernel, one sequential
     * stream that the hardware prefetcher follows better than four rows side by side with software
     * prefetching; short quantized rows gain nothing or lose (streams_one_row) */
    if (prefetch && g->s.N == 1 && g->s.wt->vec_dot1 && streams_one_row(g->w->type, row_bytes)) {
        for (; m < m1; m++)
            g->s.wt->vec_dot1(g->s.K, tensor_at(dst, m, 0, i2, i3), w + (size_t)m * stride, xb);
        return;
    }
    for (; m < m1; m += 4) {
        const void *rows[4];
        for (int r = 0; r < 4; r++)
            rows[r] = w + (size_t)(m + r < m1 ? m + r : m1 - 1) * stride;
        /* contiguous rows: the four rows' bytes ahead as one run, the same lines as row by row,
         * yet measured faster (bench/results/decode.md) */
        if (prefetch && stride == row_bytes) {
            prefetch_ahead(rows[0], 4 * row_bytes, ahead);
        } else if (prefetch) {
            for (int r = 0; r < 4; r++)
                prefetch_ahead(rows[r], row_bytes, ahead);
        }
        const size_t live = (size_t)(m1 - m < 4 ? m1 - m : 4);
        /* decode: the kernel writes the four sums in place */
        if (live == 4 && g->s.N == 1 && dst->nb[0] == sizeof(float)) {
            dot4(g->s.K, tensor_at(dst, m, 0, i2, i3), rows, xb);
            continue;
        }
        for (int64_t n = 0; n < g->s.N; n++) {
            float out[4];
            dot4(g->s.K, out, rows, xb + (size_t)n * xrow);
            memcpy(tensor_at(dst, m, n, i2, i3), out, live * sizeof(float));
        }
    }
}

/* Weight rows [m0, m1) (m0 a multiple of LLM_REPACK_ROWS) of a repacked matrix (2-D) dotted with
 * its N src1 rows at xb. Decode streams the share's groups in one call, the sums straight into
 * dst; a batch takes PACKED_BATCH_ROWS rows at a time against each src1 row (rows up to 1 KiB stay
 * in L1, longer ones in L2, on every CPU the project runs on: bench/results/kernel_choices.md). The
 * last group of the matrix may hold fewer real rows: its sums go through out. */
#define PACKED_BATCH_ROWS 16
static void dot_packed_rows(const struct mm_geom *g, struct llm_tensor *dst, int64_t m0, int64_t m1, int64_t i2,
                            int64_t i3, const char *xb, size_t xrow)
{
    llm_vec_dot_packed_fn kern = g->s.wt->vec_dot_packed;
    const size_t gs = llm_repack_group_size(g->w->type, g->s.K);
    const int64_t step = g->s.N == 1 ? m1 - m0 : PACKED_BATCH_ROWS;
    for (int64_t a = m0; a < m1; a += step) {
        const int64_t b = a + step < m1 ? a + step : m1, whole = (b - a) / LLM_REPACK_ROWS;
        const char *w = (const char *)g->w->data + (size_t)(a / LLM_REPACK_ROWS) * gs;
        for (int64_t n = 0; n < g->s.N; n++) {
            const char *x = xb + (size_t)n * xrow;
            kern(g->s.K, whole, tensor_at(dst, a, n, i2, i3), w, x);
            if (a + whole * LLM_REPACK_ROWS < b) {
                float out[LLM_REPACK_ROWS];
                kern(g->s.K, 1, out, w + (size_t)whole * gs, x);
                memcpy(tensor_at(dst, a + whole * LLM_REPACK_ROWS, n, i2, i3), out,
                       (size_t)(b - a - whole * LLM_REPACK_ROWS) * sizeof(float));
            }
        }
    }
}

/* src1 as rows of vec_dot_type: converted by the threads in parallel into work (each its share of
 * rows; the caller waits at a barrier before reading), or src1's own data when it already is. */
static const char *convert_src1(const struct llm_cpu_params *p, const struct mm_geom *g, char *work)
{
    const struct llm_tensor *x = g->x;
    if (!g->s.convert)
        return x->data;
    size_t xrow = llm_row_size(g->s.wt->vec_dot_type, g->s.K);
    llm_from_float_fn conv = g->s.vt->from_float_fast;
    int64_t r0, r1;
    thread_rows(llm_nrows(x), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(x, r, &i1, &i2, &i3);
        const float *src = tensor_at(x, 0, i1, i2, i3);
        if (conv)
            conv(src, work + r * xrow, g->s.K);
        else
            memcpy(work + r * xrow, src, xrow);
    }
    return work;
}

/* src1's rows, converted at xs (xrow bytes apart), in the form the repacked matrix's kernel reads
 * (repack.h) at out, frow bytes apart: each thread its rows of convert_src1 (the caller's barrier
 * then publishes them). */
static const char *form_src1(const struct llm_cpu_params *p, const struct mm_geom *g, const char *xs, size_t xrow,
                             char *out, size_t frow)
{
    int64_t r0, r1;
    thread_rows(llm_nrows(g->x), p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        llm_repack_x(g->w->type, g->s.K, xs + (size_t)r * xrow, out + (size_t)r * frow);
    return out;
}

/* Weight rows [m0, m1) of matrix (i2, i3) dotted with its N src1 rows at xb, by the fastest kernel
 * the weights have. */
static void dot_chunk(const struct mm_geom *g, struct llm_tensor *dst, int64_t m0, int64_t m1, int64_t i2, int64_t i3,
                      const char *xb, size_t xrow)
{
    if (repacked(g)) {
        dot_packed_rows(g, dst, m0, m1, i2, i3, xb, xrow);
        return;
    }
    if (g->s.wt->vec_dot4) {
        dot_rows4(g, dst, m0, m1, i2, i3, xb, xrow);
        return;
    }
    const size_t row_bytes = llm_row_size(g->w->type, g->s.K), ahead = prefetch_distance(g->w->type);
    for (int64_t m = m0; m < m1; m++) {
        const void *wr = tensor_at(g->w, 0, m, i2 / g->s.r2, i3 / g->s.r3);
        if (g->s.N <= PREFETCH_MAX_N)
            prefetch_ahead(wr, row_bytes, ahead);
        for (int64_t n = 0; n < g->s.N; n++)
            g->s.wt->vec_dot(g->s.K, tensor_at(dst, m, n, i2, i3), wr, xb + (size_t)n * xrow);
    }
}

/* ---- decode shares with stolen tails ------------------------------------------------------- */

/* Decode is bandwidth-bound, and each thread streams one contiguous share of the rows (a counter
 * dealing interleaved chunks defeats the hardware prefetcher: bench/results/kernel_choices.md). Yet
 * two cores do not read at the same rate from moment to moment, so with fixed shares the first
 * thread done waited at the barrier while the other read alone. Each share is walked in chunks
 * from the front; a thread whose share is done takes chunks from the back of the share with the
 * most left. A chunk spans a few pages, so the streams stay sequential and the atomic per chunk
 * costs nothing next to reading it (bench/results/decode.md). */

static int64_t steal_chunk_rows(const struct mm_geom *g)
{
    int64_t rows = (int64_t)(STEAL_CHUNK_BYTES / llm_row_size(g->w->type, g->s.K));
    rows = rows < DOT_CHUNK ? DOT_CHUNK : rows;
    return (rows + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS * LLM_REPACK_ROWS; /* whole groups of four */
}

static int64_t stolen_rows;

int64_t llm_cpu_mul_mat_stolen_rows(void)
{
    return __atomic_load_n(&stolen_rows, __ATOMIC_RELAXED);
}

/* A share word: chunks [next, end) as the low and high 32 bits. */
static uint64_t share_word(uint64_t next, uint64_t end)
{
    return end << 32 | next;
}

/* Takes the front chunk of a share (front) or its back chunk (a thief); false when it is empty. */
static bool take_chunk(uint64_t *share, bool front, int64_t *chunk)
{
    uint64_t w = __atomic_load_n(share, __ATOMIC_RELAXED);
    for (;;) {
        const uint64_t next = w & 0xffffffffu, end = w >> 32;
        if (next >= end)
            return false;
        const uint64_t nw = front ? share_word(next + 1, end) : share_word(next, end - 1);
        if (__atomic_compare_exchange_n(share, &w, nw, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            *chunk = (int64_t)(front ? next : end - 1);
            return true;
        }
    }
}

/* The share with the most chunks left, or NULL when every share is done. */
static uint64_t *fullest_share(uint64_t *shares, int nth)
{
    uint64_t *best = NULL, most = 0;
    for (int i = 0; i < nth; i++) {
        uint64_t *s = shares + (size_t)i * SHARE_STRIDE, w = __atomic_load_n(s, __ATOMIC_RELAXED);
        const uint64_t left = (w >> 32) > (w & 0xffffffffu) ? (w >> 32) - (w & 0xffffffffu) : 0;
        if (left > most) {
            most = left;
            best = s;
        }
    }
    return best;
}

/* The rows [*m0, *m1) of the next chunk (`rows` rows each, of M) for a thread walking *share: its
 * own from the front, then, once that is done, the back of the fullest share (*front turns false;
 * those rows count as stolen). False when every share is done. */
static bool next_rows(uint64_t *shares, int nth, int64_t rows, int64_t M, uint64_t **share, bool *front,
                      int64_t *m0, int64_t *m1)
{
    int64_t c;
    while (!take_chunk(*share, *front, &c)) {
        *front = false;
        if (!(*share = fullest_share(shares, nth)))
            return false;
    }
    *m0 = c * rows;
    *m1 = *m0 + rows < M ? *m0 + rows : M;
    if (!*front)
        __atomic_fetch_add(&stolen_rows, *m1 - *m0, __ATOMIC_RELAXED);
    return true;
}

/* Publishes the thread's share of the chunks of `rows` rows of a matrix of M; a barrier after it
 * makes every share visible before anyone steals. */
static void post_share(const struct llm_cpu_params *p, int64_t rows, int64_t M, uint64_t *shares)
{
    int64_t c0, c1;
    thread_rows((M + rows - 1) / rows, p->ith, p->nth, &c0, &c1);
    __atomic_store_n(shares + (size_t)p->ith * SHARE_STRIDE, share_word((uint64_t)c0, (uint64_t)c1),
                     __ATOMIC_RELAXED);
}

/* Runs the chunks of `rows` rows of the shares (posted by post_share with the same rows). */
static void dot_shares(const struct llm_cpu_params *p, struct llm_tensor *dst, const struct mm_geom *g,
                       const char *xs, size_t xrow, int64_t rows, uint64_t *shares)
{
    uint64_t *share = shares + (size_t)p->ith * SHARE_STRIDE;
    bool front = true;
    for (int64_t m0, m1; next_rows(shares, p->nth, rows, g->s.M, &share, &front, &m0, &m1);)
        dot_chunk(g, dst, m0, m1, 0, 0, xs, xrow);
}

static void mul_mat_dot(const struct llm_cpu_params *p, struct llm_tensor *dst, const struct mm_geom *g,
                        char *work, int64_t *counter)
{
    size_t xrow = llm_row_size(g->s.wt->vec_dot_type, g->s.K);
    const bool decode = g->s.N <= PREFETCH_MAX_N;
    const int64_t batches = dst->ne[2] * dst->ne[3];
    /* shares need the barrier after converting src1 (F32 weights read src1 in place, without one) */
    uint64_t *shares = decode && batches == 1 && p->nth > 1 && g->s.convert
                           ? (uint64_t *)(work + converted_bytes(g))
                           : NULL;
    const int64_t rows = steal_chunk_rows(g);
    if (shares)
        post_share(p, rows, g->s.M, shares);
    const char *xs = convert_src1(p, g, work);
    if (dot_form_bytes(g)) {
        const size_t frow = llm_repack_x_size(g->w->type, g->s.K);
        xs = form_src1(p, g, xs, xrow, work + dot_form_offset(g, p->nth), frow);
        xrow = frow;
    }
    /* Batches: about 8 tasks per thread from the counter, enough to balance, few enough that each
     * thread streams long runs of consecutive rows (short interleaved runs defeat the hardware
     * prefetcher). Decode of batched matrices: one equal share each. */
    if (!decode && p->ith == 0)
        __atomic_store_n(counter, 0, __ATOMIC_RELAXED);
    if (!decode || xs != g->x->data) /* the counter, the shares or the converted rows are shared */
        pool_barrier(p);
    if (shares) {
        dot_shares(p, dst, g, xs, xrow, rows, shares);
        return;
    }
    int64_t tasks = (decode ? 1 : 8) * p->nth;
    int64_t chunk = (g->s.M + tasks - 1) / tasks;
    chunk = chunk < DOT_CHUNK ? DOT_CHUNK : chunk;
    if (repacked(g)) /* whole groups per task */
        chunk = (chunk + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS * LLM_REPACK_ROWS;
    const int64_t chunks = (g->s.M + chunk - 1) / chunk;
    for (int64_t mine = p->ith;; mine += p->nth) {
        int64_t t = decode ? mine : __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
        if (t >= chunks * batches)
            break;
        int64_t b = t / chunks, m0 = t % chunks * chunk;
        int64_t m1 = m0 + chunk < g->s.M ? m0 + chunk : g->s.M;
        dot_chunk(g, dst, m0, m1, b % dst->ne[2], b / dst->ne[2], xs + (size_t)(b * g->s.N) * xrow, xrow);
    }
}

/* ---- GEMM path ---------------------------------------------------------------------------- */

/* Prefill is compute-bound, yet the cores of a VM do not compute at the same rate either: with
 * fixed halves of the weight rows each matmul waited for the slower thread. So the GEMM paths share
 * out their rows as decode does (dot_shares): each thread's share is cut into GEMM_SHARE_CHUNKS
 * chunks walked from the front, and a thread done with its own takes chunks from the back of the
 * fullest share. A chunk is whole GEMM_CHUNK_ALIGN rows (the register tiles' rows of every kernel:
 * 24 or 48 float rows, 16 integer ones), so chunks add no edge tiles; each row's sum is computed
 * alike in any chunk, so results do not depend on who took it (bench/results/kernel_choices.md). */
#define GEMM_SHARE_CHUNKS 4
#define GEMM_CHUNK_ALIGN 48

/* Rows of a GEMM chunk: a thread's share of M in GEMM_SHARE_CHUNKS, rounded up to whole
 * GEMM_CHUNK_ALIGN rows (a multiple of LLM_REPACK_ROWS: repacked chunks are whole groups). */
static int64_t gemm_chunk_rows(int64_t M, int nth)
{
    const int64_t per = (int64_t)nth * GEMM_SHARE_CHUNKS;
    return ((M + per - 1) / per + GEMM_CHUNK_ALIGN - 1) / GEMM_CHUNK_ALIGN * GEMM_CHUNK_ALIGN;
}

_Static_assert(GEMM_CHUNK_ALIGN % LLM_REPACK_ROWS == 0, "GEMM chunks of whole repacked groups");

/* What a GEMM thread runs: the kernels and the src1 rows of matrix (i2, i3) at xs + i2 * x2 + i3 * x3,
 * xrow bytes apart; scratch is the thread's gemm_thread_size bytes. */
struct gemm_job {
    llm_gemm_fn gemm, packed;
    const char *xs;
    size_t xrow, x2, x3, kernel_scratch;
    void *scratch;
};

/* The job of a GEMM path (integer or float) reading src1 rows at xs, xrow bytes apart (matrix (i2,
 * i3) at xs + i2 * x2 + i3 * x3), with the thread's scratch. */
static struct gemm_job gemm_job_of(const struct mm_geom *g, enum mm_path path, const char *xs, size_t xrow, size_t x2,
                                   size_t x3, void *scratch)
{
    return (struct gemm_job){ .gemm = path == PATH_GEMM ? g->s.wt->gemm : g->s.wt->gemm_f32,
                              .packed = packed_kernel(g, path), .xs = xs, .xrow = xrow, .x2 = x2, .x3 = x3,
                              .kernel_scratch = kernel_scratch_size(g, path), .scratch = scratch };
}

/* Weight rows [m0, m1) against every src1 row of the batch, in blocks that stay in L2 while the src1
 * rows pass by. A repacked matrix (2-D) goes to the path's packed kernel (m0 a whole group), else is
 * unpacked into scratch's end block by block. */
static void gemm_rows(const struct gemm_job *j, struct llm_tensor *dst, const struct mm_geom *g, int64_t m0,
                      int64_t m1)
{
    if (j->packed) {
        const size_t gs = llm_repack_group_size(g->w->type, g->s.K);
        for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
                j->packed(g->s.K, m1 - m0, g->s.N, (const char *)g->w->data + (size_t)(m0 / LLM_REPACK_ROWS) * gs, gs,
                          j->xs + (size_t)i2 * j->x2 + (size_t)i3 * j->x3, j->xrow, tensor_at(dst, m0, 0, i2, i3),
                          dst->nb[1] / sizeof(float), j->scratch);
        return;
    }
    if (repacked(g)) {
        const size_t row_bytes = llm_row_size(g->w->type, g->s.K);
        char *rows = (char *)j->scratch + j->kernel_scratch;
        for (int64_t a = m0, block = gemm_block_rows(g->s.K); a < m1; a += block) {
            const int64_t b = a + block < m1 ? a + block : m1;
            llm_repack_unpack(g->w->type, g->s.K, g->w->data, a, b, rows, row_bytes);
            for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
                for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
                    j->gemm(g->s.K, b - a, g->s.N, rows, row_bytes, j->xs + (size_t)i2 * j->x2 + (size_t)i3 * j->x3,
                            j->xrow, tensor_at(dst, a, 0, i2, i3), dst->nb[1] / sizeof(float), j->scratch);
        }
        return;
    }
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            j->gemm(g->s.K, m1 - m0, g->s.N, tensor_at(g->w, 0, m0, i2 / g->s.r2, i3 / g->s.r3), g->w->nb[1],
                    j->xs + (size_t)i2 * j->x2 + (size_t)i3 * j->x3, j->xrow, tensor_at(dst, m0, 0, i2, i3),
                    dst->nb[1] / sizeof(float), j->scratch);
}

/* Runs the chunks of `rows` rows of the shares (posted by post_share with the same rows, after a
 * barrier), or, alone, all rows. */
static void gemm_share(const struct llm_cpu_params *p, struct llm_tensor *dst, const struct mm_geom *g,
                       const struct gemm_job *j, int64_t rows, uint64_t *shares)
{
    if (p->nth == 1) {
        gemm_rows(j, dst, g, 0, g->s.M);
        return;
    }
    uint64_t *share = shares + (size_t)p->ith * SHARE_STRIDE;
    bool front = true;
    for (int64_t m0, m1; next_rows(shares, p->nth, rows, g->s.M, &share, &front, &m0, &m1);)
        gemm_rows(j, dst, g, m0, m1);
}

/* The integer GEMM, after src1 is converted as for the dot path. */
static void mul_mat_gemm(const struct llm_cpu_params *p, struct llm_tensor *dst, const struct mm_geom *g,
                         char *work)
{
    const size_t xrow = llm_row_size(g->s.wt->vec_dot_type, g->s.K), per = gemm_thread_size(g, PATH_GEMM);
    const size_t converted = converted_bytes(g);
    const struct gemm_job j = gemm_job_of(g, PATH_GEMM, convert_src1(p, g, work), xrow, (size_t)g->s.N * xrow,
                                          (size_t)(dst->ne[2] * g->s.N) * xrow,
                                          work + converted + shares_bytes(p->nth) + (size_t)p->ith * per);
    uint64_t *shares = (uint64_t *)(work + converted);
    const int64_t rows = gemm_chunk_rows(g->s.M, p->nth);
    if (p->nth > 1)
        post_share(p, rows, g->s.M, shares);
    pool_barrier(p);
    gemm_share(p, dst, g, &j, rows, shares);
}

/* The float GEMM reads the F32 src1 rows in place. */
static void mul_mat_float_gemm(const struct llm_cpu_params *p, struct llm_tensor *dst, const struct mm_geom *g,
                               char *work)
{
    const struct gemm_job j = gemm_job_of(g, PATH_FLOAT_GEMM, g->x->data, g->x->nb[1], g->x->nb[2], g->x->nb[3],
                                          work + shares_bytes(p->nth) +
                                              (size_t)p->ith * gemm_thread_size(g, PATH_FLOAT_GEMM));
    uint64_t *shares = (uint64_t *)work;
    const int64_t rows = gemm_chunk_rows(g->s.M, p->nth);
    if (p->nth > 1) {
        post_share(p, rows, g->s.M, shares);
        pool_barrier(p);
    }
    gemm_share(p, dst, g, &j, rows, shares);
}

/* ---- BLAS path ---------------------------------------------------------------------------- */

/* sgemm of a weight tile (mt rows from row m0, ldb floats apart) against every src1 matrix that
 * broadcasts onto weight matrix (j2, j3). */
static void sgemm_tile(struct llm_tensor *dst, const struct mm_geom *g, int64_t j2, int64_t j3, int64_t m0,
                       int64_t mt, const float *tile, int64_t ldb)
{
    for (int64_t i3 = j3 * g->s.r3; i3 < (j3 + 1) * g->s.r3; i3++)
        for (int64_t i2 = j2 * g->s.r2; i2 < (j2 + 1) * g->s.r2; i2++)
            llm_blas_sgemm_nt((int)g->s.N, (int)mt, (int)g->s.K, tensor_at(g->x, 0, 0, i2, i3),
                              (int)(g->x->nb[1] / sizeof(float)), tile, (int)ldb,
                              tensor_at(dst, m0, 0, i2, i3), (int)(dst->nb[1] / sizeof(float)));
}

/* Weight rows [m0, m0 + mt) of matrix (j2, j3) as F32 rows for sgemm: in place for F32 weights, else
 * dequantized into mine; *ldb gets their stride in floats. Never a repacked matrix: repacking needs
 * AVX2, where every repackable type has a GEMM (tests/test_repack.c checks). */
static const float *blas_rows(const struct mm_geom *g, int64_t j2, int64_t j3, int64_t m0, int64_t mt, float *mine,
                              int64_t *ldb)
{
    const struct llm_tensor *w = g->w;
    if (w->type == LLM_TYPE_F32) {
        *ldb = (int64_t)(w->nb[1] / sizeof(float));
        return tensor_at(w, 0, m0, j2, j3);
    }
    for (int64_t r = 0; r < mt; r++)
        g->s.wt->to_float_fast(tensor_at(w, 0, m0 + r, j2, j3), mine + r * g->s.K, g->s.K);
    *ldb = g->s.K;
    return mine;
}

static void mul_mat_blas(const struct llm_cpu_params *p, struct llm_tensor *dst, const struct mm_geom *g,
                         float *work)
{
    const struct llm_tensor *w = g->w;
    /* Each thread owns a slice of weight rows: it dequantizes the slice (when not F32) and runs a
     * single-threaded sgemm on it, so no thread waits and no extra threads compete for cores. The
     * dequantized rows go to the thread's own scratch region: slices move when the last tile of a
     * matrix is shorter, and a thread may start the next tile while another still runs sgemm. */
    int64_t tile = blas_tile_rows(g);
    float *mine = work + (size_t)p->ith * (size_t)blas_thread_rows(g, p->nth) * (size_t)g->s.K;
    for (int64_t j3 = 0; j3 < w->ne[3]; j3++)
        for (int64_t j2 = 0; j2 < w->ne[2]; j2++)
            for (int64_t m0 = 0; m0 < g->s.M; m0 += tile) {
                int64_t mt = g->s.M - m0 < tile ? g->s.M - m0 : tile, r0, r1;
                thread_rows(mt, p->ith, p->nth, &r0, &r1);
                if (r1 <= r0)
                    continue;
                int64_t ldb;
                const float *rows = blas_rows(g, j2, j3, m0 + r0, r1 - r0, mine, &ldb);
                sgemm_tile(dst, g, j2, j3, m0 + r0, r1 - r0, rows, ldb);
            }
}

void cpu_mul_mat_plan(const struct llm_tensor *dst, struct llm_cpu_plan *plan)
{
    struct mm_geom g = geom(dst);
    plan->mm_path = (int)choose_path(&g, dst);
    plan->mm = g.s;
}

void cpu_mul_mat(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    struct llm_cpu_plan plan;
    cpu_mul_mat_plan(dst, &plan);
    cpu_mul_mat_planned(p, dst, &plan);
}

void cpu_mul_mat_planned(const struct llm_cpu_params *p, struct llm_tensor *dst, const struct llm_cpu_plan *plan)
{
    const struct mm_geom g = { .w = dst->src[0], .x = dst->src[1], .s = plan->mm };
    /* wdata aligned up to a cache line: [counter][work] */
    char *base = (char *)(((uintptr_t)p->wdata + WDATA_HEADER - 1) & ~(uintptr_t)(WDATA_HEADER - 1));
    switch ((enum mm_path)plan->mm_path) {
    case PATH_FLOAT_GEMM: mul_mat_float_gemm(p, dst, &g, base + WDATA_HEADER); break;
    case PATH_GEMM: mul_mat_gemm(p, dst, &g, base + WDATA_HEADER); break;
    case PATH_BLAS: mul_mat_blas(p, dst, &g, (float *)(base + WDATA_HEADER)); break;
    case PATH_DOT: mul_mat_dot(p, dst, &g, base + WDATA_HEADER, (int64_t *)base); break;
    }
}

/* ---- one product's rows chunk by chunk, for a fused kernel (mul_mat_swiglu.c) -------------- */

/* Rows of a chunk on the GEMM and dot paths: a share's chunk as the GEMM deals them, or fewer, so
 * that a chunk's results (N of them per row) fit tile_bytes; whole register tiles either way. */
static int64_t rows_chunk(const struct mm_geom *g, int nth, size_t tile_bytes)
{
    const int64_t most = (int64_t)(tile_bytes / ((size_t)g->s.N * sizeof(float))) / GEMM_CHUNK_ALIGN * GEMM_CHUNK_ALIGN;
    const int64_t rows = gemm_chunk_rows(g->s.M, nth);
    return most < GEMM_CHUNK_ALIGN ? GEMM_CHUNK_ALIGN : most < rows ? most : rows;
}

/* The scratch of rows mode, from a line: src1 converted (dot and integer GEMM paths), the shares'
 * words, src1 in a repacked kernel's form (dot path), then each thread's own (GEMM panels, the BLAS
 * path's dequantized rows). */
struct rows_layout {
    size_t shares, form, thread, per_thread, size;
};

static struct rows_layout rows_layout(const struct mm_geom *g, enum mm_path path, int nth)
{
    struct rows_layout l;
    const bool converts = g->s.convert && (path == PATH_DOT || path == PATH_GEMM);
    l.shares = converts ? converted_bytes(g) : 0;
    l.form = l.shares + align64(shares_bytes(nth) + sizeof(uint64_t)); /* one thread has a share too */
    l.thread = l.form + align64(path == PATH_DOT ? dot_form_bytes(g) : 0);
    l.per_thread = path == PATH_GEMM || path == PATH_FLOAT_GEMM ? align64(gemm_thread_size(g, path))
                   : path == PATH_BLAS && g->w->type != LLM_TYPE_F32
                       ? align64((size_t)blas_thread_rows(g, nth) * (size_t)g->s.K * sizeof(float))
                       : 0;
    l.size = l.thread + (size_t)nth * l.per_thread;
    return l;
}

size_t cpu_mul_mat_rows_work_size(const struct llm_tensor *node, int nth)
{
    struct mm_geom g = geom(node);
    size_t most = 0;
    for (int path = PATH_DOT; path <= PATH_FLOAT_GEMM; path++) { /* whichever this batch or a smaller one takes */
        const enum mm_path pa = (enum mm_path)path;
        const size_t size = path_possible(&g, node, pa) ? rows_layout(&g, pa, nth).size : 0;
        most = size > most ? size : most;
    }
    return most;
}

int64_t cpu_mul_mat_rows_most(const struct llm_tensor *node, int nth, size_t tile_bytes)
{
    struct mm_geom g = geom(node);
    const int64_t chunk = rows_chunk(&g, nth, tile_bytes);
    const int64_t blas = blas_path_ok(&g, node) ? blas_thread_rows(&g, nth) : 0;
    return chunk > blas ? chunk : blas;
}

void cpu_mul_mat_rows_begin(const struct llm_cpu_params *p, const struct llm_cpu_plan *plan,
                            const struct llm_tensor *node, char *work, size_t tile_bytes, struct llm_mm_cursor *c)
{
    const struct mm_geom g = { .w = node->src[0], .x = node->src[1], .s = plan->mm };
    const enum mm_path path = (enum mm_path)plan->mm_path;
    const struct rows_layout l = rows_layout(&g, path, p->nth);
    *c = (struct llm_mm_cursor){ .share = (uint64_t *)(work + l.shares) + (size_t)p->ith * SHARE_STRIDE,
                                 .front = true, .rows = rows_chunk(&g, p->nth, tile_bytes) };
    if (path == PATH_BLAS) /* its chunks are its own slices of its tiles: nothing to deal */
        return;
    post_share(p, c->rows, g.s.M, (uint64_t *)(work + l.shares));
    if (path == PATH_FLOAT_GEMM)
        return;
    const char *xs = convert_src1(p, &g, work);
    if (path == PATH_DOT && dot_form_bytes(&g))
        form_src1(p, &g, xs, llm_row_size(g.s.wt->vec_dot_type, g.s.K), work + l.form,
                  llm_repack_x_size(g.w->type, g.s.K));
}

bool cpu_mul_mat_rows_next(const struct llm_cpu_params *p, const struct llm_cpu_plan *plan,
                           const struct llm_tensor *node, char *work, struct llm_mm_cursor *c, int64_t *m0,
                           int64_t *m1)
{
    const struct mm_geom g = { .w = node->src[0], .x = node->src[1], .s = plan->mm };
    const enum mm_path path = (enum mm_path)plan->mm_path;
    if (path == PATH_BLAS) { /* thread ith's slice of each tile, as mul_mat_blas takes them */
        const int64_t tile = blas_tile_rows(&g);
        for (; c->tile * tile < g.s.M; c->tile++) {
            const int64_t t0 = c->tile * tile, mt = g.s.M - t0 < tile ? g.s.M - t0 : tile;
            int64_t r0, r1;
            thread_rows(mt, p->ith, p->nth, &r0, &r1);
            if (r1 > r0) {
                *m0 = t0 + r0, *m1 = t0 + r1;
                c->tile++;
                return true;
            }
        }
        return false;
    }
    uint64_t *shares = (uint64_t *)(work + rows_layout(&g, path, p->nth).shares);
    return next_rows(shares, p->nth, c->rows, g.s.M, &c->share, &c->front, m0, m1);
}

/* Rows [m0, m1) of the weights as a matrix of their own: the file's rows from m0, or the groups
 * from m0's in a repacked matrix (m0 a whole group). */
static struct llm_tensor weight_rows(const struct llm_tensor *w, int64_t m0, int64_t m1)
{
    struct llm_tensor r = *w;
    r.ne[1] = m1 - m0;
    r.data = (w->flags & LLM_TENSOR_REPACKED)
                 ? (char *)w->data + (size_t)(m0 / LLM_REPACK_ROWS) * llm_repack_group_size(w->type, w->ne[0])
                 : (char *)w->data + (size_t)m0 * w->nb[1];
    return r;
}

void cpu_mul_mat_rows_run(const struct llm_cpu_params *p, const struct llm_cpu_plan *plan,
                          const struct llm_tensor *node, char *work, int64_t m0, int64_t m1, float *out,
                          size_t out_nb1)
{
    const struct mm_geom whole = { .w = node->src[0], .x = node->src[1], .s = plan->mm };
    const enum mm_path path = (enum mm_path)plan->mm_path;
    const struct rows_layout l = rows_layout(&whole, path, p->nth);
    char *mine = work + l.thread + (size_t)p->ith * l.per_thread;
    const int64_t len = m1 - m0, K = whole.s.K, N = whole.s.N;
    struct llm_tensor dst = *node; /* the chunk's results as a node of len rows */
    dst.data = out;
    dst.ne[0] = len;
    dst.nb[1] = out_nb1;
    dst.nb[2] = dst.nb[3] = out_nb1 * (size_t)N;
    if (path == PATH_BLAS) { /* mul_mat_blas's work on its slice [m0, m1) */
        int64_t ldb;
        const float *rows = blas_rows(&whole, 0, 0, m0, len, (float *)mine, &ldb);
        sgemm_tile(&dst, &whole, 0, 0, 0, len, rows, ldb);
        return;
    }
    const struct llm_tensor w = weight_rows(whole.w, m0, m1);
    struct mm_geom g = { .w = &w, .x = whole.x, .s = whole.s };
    g.s.M = len;
    const bool converts = whole.s.convert && path != PATH_FLOAT_GEMM;
    const char *xs = converts ? work : (const char *)whole.x->data;
    size_t xrow = converts ? llm_row_size(whole.s.wt->vec_dot_type, K) : whole.x->nb[1];
    if (path == PATH_DOT) {
        if (dot_form_bytes(&whole)) {
            xs = work + l.form;
            xrow = llm_repack_x_size(whole.w->type, K);
        }
        dot_chunk(&g, &dst, 0, len, 0, 0, xs, xrow);
        return;
    }
    const struct gemm_job j = gemm_job_of(&whole, path, xs, xrow, (size_t)N * xrow, (size_t)N * xrow, mine);
    gemm_rows(&j, &dst, &g, 0, len);
}
