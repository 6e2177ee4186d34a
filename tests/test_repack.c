/* Weights repacked at load for decode (issue 26, src/ops/types/repack.h): every repacked type (Q4_0,
 * Q5_0, Q8_0, Q4_K, Q6_K), odd row counts and the last group that four rows do not fill, block
 * counts with and without a partial chunk of 8 blocks.
 *  - layout: unpacking gives back the file's bytes (0 tolerance), dequantizing a repacked row the
 *    file row's floats, a matrix packed in pieces (as the loader does) the same bytes as in one go;
 *    the accessors of a block's d and quants (Q4_0 / Q5_0 / Q8_0) find each file block's bytes;
 *  - kernels: the oracle (llm_vec_dot_packed_ref) gives each row vec_dot_ref's float; the fast
 *    kernel gives each row the bits the type's AVX2 kernel on the file's rows gives it (the
 *    four-row vec_dot4 of Q4_0 / Q5_0 / Q8_0, the one-row vec_dot of Q4_K / Q6_K: so greedy text
 *    does not move), and against the oracle (the unrepacked reference dot) each row is within
 *    1e-4 x (1 + |oracle|) and the NMSE over the matrix at most 1e-9 (the integer sums are exact;
 *    only the order of the float scaling differs, ~1e-7 relative); the padding rows give 0;
 *  - MUL_MAT on the dot, integer GEMM and BLAS paths and GET_ROWS give, on 1-3 threads, the bits of
 *    the same node on the file's layout (on an AVX-512 CPU, whose decode of the file's layout runs
 *    its own kernels, decode within 1e-4 relative of it);
 *  - loading ../shared/models/qwen2-tiny-q8_0.gguf repacks its matrices and drops their file pages:
 *    the file-backed resident memory grows by at most the file's bytes not repacked (plus the
 *    pages matrices share at their ends); loading llama-k256-q4_k_m.gguf repacks its Q4_K and
 *    Q6_K matrices (the loader's code is the same for every type), and with --mlock the lock moves
 *    from the file's dropped pages to the repacked copy.
 * Without a fast kernel on this CPU (no AVX2, or a CPU whose vec_dot4 is another kernel) the
 * checks that need one are skipped. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph.h"
#include "harness.h"
#include "model/model.h"
#include "model/synth.h"
#include "mul_mat_job.h"
#include "ops/types/blocks.h"
#include "ops/cpu/cpu.h"
#include "cpu_features.h"
#include "ops/types/quants.h"
#include "ops/types/repack.h"
#include "ops/types/types.h"

/* Each repacked type with the AVX2 kernel of the file's rows whose bits its repacked kernel keeps:
 * four rows at once (dot4) or one (dot1). */
static const struct {
    enum llm_type type;
    llm_vec_dot4_fn dot4;
    llm_vec_dot_fn dot1;
} types[] = {
    { LLM_TYPE_Q4_0, llm_vec_dot4_q4_0_avx2, NULL }, { LLM_TYPE_Q5_0, llm_vec_dot4_q5_0_avx2, NULL },
    { LLM_TYPE_Q8_0, llm_vec_dot4_q8_0_avx2, NULL }, { LLM_TYPE_Q4_K, NULL, llm_vec_dot_q4_K_avx2 },
    { LLM_TYPE_Q6_K, NULL, llm_vec_dot_q6_K_avx2 },
};
#define N_TYPES (sizeof types / sizeof types[0])

static float frand(void)
{
    return (float)(test_rand() >> 8) / (float)(1u << 24) - 0.5f;
}

static float value(int64_t r, int64_t i)
{
    (void)r, (void)i;
    return frand();
}

static int64_t n_groups(int64_t M)
{
    return (M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS;
}

/* The matrix of M rows repacked, groups [0, split) and [split, all) in two calls. */
static char *packed(enum llm_type t, int64_t K, int64_t M, const char *rows, int64_t split)
{
    char *p = malloc(llm_repack_size(t, K, M));
    llm_repack_groups(t, K, M, rows, llm_row_size(t, K), 0, split, p);
    llm_repack_groups(t, K, M, rows, llm_row_size(t, K), split, n_groups(M), p);
    return p;
}

static void test_layout(enum llm_type t, int64_t K, int64_t M)
{
    const size_t row = llm_row_size(t, K);
    char *rows = typed_rows(t, K, M, row, value);
    char *p = packed(t, K, M, rows, 0), *q = packed(t, K, M, rows, n_groups(M) / 2);
    CHECK(memcmp(p, q, llm_repack_size(t, K, M)) == 0, "%s K%lld M%lld: packed in pieces differs",
          llm_type_name(t), (long long)K, (long long)M);
    const int64_t all = n_groups(M) * LLM_REPACK_ROWS;
    char *back = malloc((size_t)all * (row + 1)), *zero = calloc(1, row);
    llm_repack_unpack(t, K, p, 0, all, back, row);
    CHECK(memcmp(back, rows, (size_t)M * row) == 0, "%s K%lld M%lld: unpacked rows differ", llm_type_name(t),
          (long long)K, (long long)M);
    for (int64_t m = M; m < all; m++)
        CHECK(memcmp(back + (size_t)m * row, zero, row) == 0, "%s K%lld M%lld: padding row %lld not zero",
              llm_type_name(t), (long long)K, (long long)M, (long long)m);
    /* ranges that start and end inside a group (the GEMMs unpack a thread's share of rows), into
     * rows wider than the file's */
    for (int64_t m0 = 0; m0 < M; m0 += 3)
        for (int64_t m1 = m0 + 1; m1 <= M; m1 += 5) {
            memset(back, 0x5a, (size_t)all * (row + 1));
            llm_repack_unpack(t, K, p, m0, m1, back, row + 1);
            int64_t off = 0;
            for (int64_t m = m0; m < m1; m++)
                off += memcmp(back + (size_t)(m - m0) * (row + 1), rows + (size_t)m * row, row) != 0;
            CHECK(off == 0 && (unsigned char)back[(size_t)(m1 - m0 - 1) * (row + 1) + row] == 0x5a,
                  "%s K%lld M%lld: rows [%lld, %lld) unpacked wrong (%lld rows)", llm_type_name(t), (long long)K,
                  (long long)M, (long long)m0, (long long)m1, (long long)off);
        }
    float *want = malloc((size_t)K * sizeof(float)), *got = malloc((size_t)K * sizeof(float));
    int64_t bad = 0;
    for (int64_t m = 0; m < M; m++) {
        llm_type_traits(t)->to_float_fast(rows + (size_t)m * row, want, K);
        llm_repack_row_to_float(t, K, p, m, got);
        bad += memcmp(want, got, (size_t)K * sizeof(float)) != 0;
    }
    CHECK(bad == 0, "%s K%lld M%lld: %lld dequantized rows differ", llm_type_name(t), (long long)K, (long long)M,
          (long long)bad);
    /* a repacked tensor spans its whole groups (what copies and uploads of it move) */
    struct llm_tensor tt = { .type = t, .ne = { K, M, 1, 1 }, .flags = LLM_TENSOR_REPACKED };
    tt.nb[0] = llm_type_info(t)->type_size, tt.nb[1] = row, tt.nb[2] = tt.nb[3] = row * (size_t)M;
    CHECK(llm_nbytes(&tt) == llm_repack_size(t, K, M), "%s K%lld M%lld: llm_nbytes %zu, repacked %zu", llm_type_name(t),
          (long long)K, (long long)M, llm_nbytes(&tt), llm_repack_size(t, K, M));
    free(want), free(got), free(back), free(zero), free(p), free(q), free(rows);
}

/* llm_repack_q5_0_qh moves the fifth bit of element 8k + 4h + m to bit 8m + 4h + k, and undoes
 * itself. */
static void test_q5_0_qh(void)
{
    int bad = 0;
    for (int e = 0; e < 32; e++) {
        const int k = e / 8, h = e / 4 % 2, m = e % 4;
        bad += llm_repack_q5_0_qh(1u << e) != 1u << (8 * m + 4 * h + k);
        bad += llm_repack_q5_0_qh(llm_repack_q5_0_qh(0x9e3779b9u << (e % 7))) != 0x9e3779b9u << (e % 7);
    }
    CHECK(bad == 0, "llm_repack_q5_0_qh: %d bits misplaced", bad);
}

/* llm_repack_scale_offset / llm_repack_piece_offset against the file's blocks, every row, block
 * and piece (the padding rows of the last group: zero bytes; Q5_0's qh in its piece's bit order). */
static void test_offsets(enum llm_type t, int64_t K, int64_t M)
{
    const size_t row = llm_row_size(t, K), bs = llm_type_info(t)->type_size, gs = llm_repack_group_size(t, K);
    const size_t q = bs - sizeof(uint16_t);
    const int64_t nb = K / QK;
    char *rows = typed_rows(t, K, M, row, value), *p = packed(t, K, M, rows, 0);
    static const char zero[sizeof(struct block_q8_0)];
    int64_t bad = 0;
    for (int64_t m = 0; m < n_groups(M) * LLM_REPACK_ROWS; m++)
        for (int64_t b = 0; b < nb; b++) {
            const char *blk = m < M ? rows + (size_t)m * row + (size_t)b * bs : zero;
            const char *g = p + (size_t)(m / LLM_REPACK_ROWS) * gs;
            const int r = (int)(m % LLM_REPACK_ROWS);
            bad += memcmp(g + llm_repack_scale_offset(t, nb, r, b), blk, sizeof(uint16_t)) != 0;
            for (int i = 0; i < llm_repack_pieces(t); i++) {
                const size_t len = llm_repack_piece_length(t, q, i);
                char want[sizeof(struct block_q8_0)];
                memcpy(want, blk + sizeof(uint16_t) + llm_repack_piece_start(t, i), len);
                if (t == LLM_TYPE_Q5_0 && i == 0) {
                    uint32_t qh;
                    memcpy(&qh, want, sizeof qh);
                    qh = llm_repack_q5_0_qh(qh);
                    memcpy(want, &qh, sizeof qh);
                }
                bad += memcmp(g + llm_repack_piece_offset(t, nb, r, b, i), want, len) != 0;
            }
        }
    CHECK(bad == 0, "%s K%lld M%lld: %lld blocks not where the accessors say", llm_type_name(t), (long long)K,
          (long long)M, (long long)bad);
    free(p), free(rows);
}

/* The bits of rows [4g, 4g + 4) of the file's matrix (M rows) under the AVX2 kernel of the file's
 * layout (rows past M: 0, what the padding gives). */
static void file_bits(size_t ti, int64_t K, int64_t M, const char *rows, size_t row, int64_t g, const void *x,
                      float out[4])
{
    const void *r4[4];
    for (int r = 0; r < 4; r++)
        r4[r] = rows + (size_t)(g * 4 + r < M ? g * 4 + r : M - 1) * row;
    if (types[ti].dot4)
        types[ti].dot4(K, out, r4, x);
    else
        for (int r = 0; r < 4; r++)
            types[ti].dot1(K, &out[r], r4[r], x);
    for (int r = 0; r < 4; r++)
        out[r] = g * 4 + r < M ? out[r] : 0.0f;
}

static void test_kernels(size_t ti, int64_t K, int64_t M)
{
    const enum llm_type t = types[ti].type;
    const struct llm_type_traits *tt = llm_type_traits(t);
    const size_t row = llm_row_size(t, K);
    char *rows = typed_rows(t, K, M, row, value), *p = packed(t, K, M, rows, 0);
    char *x = typed_rows(tt->vec_dot_type, K, 1, llm_row_size(tt->vec_dot_type, K), value);
    const int64_t groups = n_groups(M), all = groups * LLM_REPACK_ROWS;
    float *ref = malloc((size_t)all * sizeof(float)), *fast = malloc((size_t)all * sizeof(float));
    llm_vec_dot_packed_ref(t, K, groups, ref, p, x);
    int64_t bad = 0;
    for (int64_t m = 0; m < all; m++) {
        float want = 0.0f;
        if (m < M)
            tt->vec_dot_ref(K, &want, rows + (size_t)m * row, x);
        bad += memcmp(&want, &ref[m], sizeof want) != 0;
    }
    CHECK(bad == 0, "%s K%lld M%lld: oracle differs from vec_dot_ref in %lld rows", llm_type_name(t), (long long)K,
          (long long)M, (long long)bad);
    llm_vec_dot_packed_fn kern = llm_repack_kernel(t);
    if (!kern) {
        SKIP("%s K%lld M%lld: no repacked kernel on this CPU", llm_type_name(t), (long long)K, (long long)M);
    } else {
        /* forms of rows placed one after another (matmul.c) each start on a line */
        CHECK(llm_repack_x_size(t, K) % 64 == 0, "%s K%lld: the activations' form of %zu bytes", llm_type_name(t),
              (long long)K, llm_repack_x_size(t, K));
        char *form = aligned_alloc(64, llm_repack_x_size(t, K) + 64); /* + 64: never 0 bytes */
        kern(K, groups, fast, p, llm_repack_x(t, K, x, form));
        free(form);
        int64_t not_bits = 0, far = 0;
        double err2 = 0.0, ref2 = 0.0;
        for (int64_t g = 0; g < groups; g++) {
            float want[4];
            file_bits(ti, K, M, rows, row, g, x, want);
            for (int r = 0; r < 4; r++) {
                const int64_t m = g * 4 + r;
                const double d = (double)fast[m] - ref[m];
                not_bits += memcmp(&want[r], &fast[m], sizeof want[r]) != 0;
                far += !(fabs(d) <= 1e-4 * (1.0 + fabs((double)ref[m])));
                err2 += d * d, ref2 += (double)ref[m] * ref[m];
            }
        }
        CHECK(not_bits == 0, "%s K%lld M%lld: %lld rows differ from the file layout's bits", llm_type_name(t),
              (long long)K, (long long)M, (long long)not_bits);
        CHECK(far == 0, "%s K%lld M%lld: %lld rows off the oracle", llm_type_name(t), (long long)K, (long long)M,
              (long long)far);
        CHECK(err2 <= 1e-9 * ref2, "%s K%lld M%lld: NMSE %g against the oracle", llm_type_name(t), (long long)K,
              (long long)M, ref2 > 0 ? err2 / ref2 : err2);
    }
    free(ref), free(fast), free(x), free(p), free(rows);
}

/* Runs node d on nth pool threads into d's data. */
static void run_node(struct llm_tensor *d, int nth)
{
    struct llm_threadpool *pool = llm_threadpool_new(nth);
    size_t wsize = llm_cpu_work_size(d, nth);
    struct job j = { .node = d, .wdata = malloc(wsize + 1), .wsize = wsize, .pool = pool };
    llm_threadpool_run(pool, run_job, &j);
    free(j.wdata);
    llm_threadpool_free(pool);
}

/* A node of op with src0 w (or its repacked copy) and src1 s1 into an F32 [ne0, ne1] output: the
 * same bits when exact, else (decode on a CPU whose file-layout kernel is not the AVX2 twin of the
 * repacked one: AVX-512) each output within 1e-4 x (1 + |file layout's|). */
static void same_bits(const char *what, enum llm_op op, struct llm_tensor *w, struct llm_tensor *s1, int64_t ne0,
                      int64_t ne1, bool exact)
{
    struct llm_tensor wp = *w, d0, d1;
    wp.data = packed(w->type, w->ne[0], w->ne[1], w->data, 0);
    wp.flags = LLM_TENSOR_WEIGHT | LLM_TENSOR_REPACKED;
    init_tensor(&d0, LLM_TYPE_F32, ne0, ne1);
    init_tensor(&d1, LLM_TYPE_F32, ne0, ne1);
    d0.op = d1.op = op;
    d0.src[0] = w, d1.src[0] = &wp;
    d0.src[1] = d1.src[1] = s1;
    CHECK(llm_cpu_supports(&d1), "%s: not supported", what);
    /* the BLAS path dequantizes the file's rows only (matmul.c, blas_rows) */
    CHECK(op != LLM_OP_MUL_MAT || !llm_cpu_mul_mat_uses_blas(&d1), "%s: a repacked matrix on the BLAS path", what);
    for (int nth = 1; nth <= 3; nth++) {
        memset(d0.data, 0xff, d0.nb[2]);
        memset(d1.data, 0xfe, d1.nb[2]); /* NaNs of other bits: rows nobody wrote differ */
        run_node(&d0, nth);
        run_node(&d1, nth);
        if (exact) {
            CHECK(memcmp(d0.data, d1.data, d0.nb[2]) == 0, "%s, %d threads: repacked weights give other bits", what,
                  nth);
            continue;
        }
        int64_t far = 0;
        for (int64_t i = 0; i < ne0 * ne1; i++) {
            const double a = ((const float *)d0.data)[i], b = ((const float *)d1.data)[i];
            far += !(fabs(a - b) <= 1e-4 * (1.0 + fabs(a)));
        }
        CHECK(far == 0, "%s, %d threads: %lld outputs off the file layout's", what, nth, (long long)far);
    }
    free(wp.data), free(d0.data), free(d1.data);
}

static void test_nodes(size_t ti, int64_t K, int64_t M)
{
    const enum llm_type t = types[ti].type;
    const struct llm_type_traits *tt = llm_type_traits(t);
    /* decode on the file's layout runs the AVX2 twin of the repacked kernel (else an AVX-512 one) */
    const bool twin = types[ti].dot4 ? tt->vec_dot4 == types[ti].dot4 : tt->vec_dot == types[ti].dot1;
    char what[96];
    struct llm_tensor w, x, ids;
    if (!llm_repack_kernel(t)) { /* the loader repacks nothing then, and decode has no kernel for it */
        SKIP("%s K%lld M%lld nodes: no repacked kernel on this CPU", llm_type_name(t), (long long)K, (long long)M);
        return;
    }
    init_tensor(&w, t, K, M);
    free(w.data);
    w.data = typed_rows(t, K, M, w.nb[1], value);
    w.flags = LLM_TENSOR_WEIGHT;
    /* N 1 and 3: the dot path; 16: the integer GEMM (AVX2); 100: BLAS or a GEMM */
    static const int64_t Ns[] = { 1, 3, 16, 100 };
    for (size_t i = 0; i < sizeof Ns / sizeof Ns[0]; i++) {
        init_tensor(&x, LLM_TYPE_F32, K, Ns[i]);
        for (int64_t e = 0; e < K * Ns[i]; e++)
            ((float *)x.data)[e] = frand();
        snprintf(what, sizeof what, "MUL_MAT %s K%lld M%lld N%lld", llm_type_name(t), (long long)K, (long long)M,
                 (long long)Ns[i]);
        same_bits(what, LLM_OP_MUL_MAT, &w, &x, M, Ns[i], twin || Ns[i] >= 16);
        free(x.data);
    }
    init_tensor(&ids, LLM_TYPE_I32, 5, 1);
    const int32_t pick[5] = { 0, (int32_t)(M - 1), (int32_t)(M / 2), -1, (int32_t)M };
    memcpy(ids.data, pick, sizeof pick);
    snprintf(what, sizeof what, "GET_ROWS %s K%lld M%lld", llm_type_name(t), (long long)K, (long long)M);
    same_bits(what, LLM_OP_GET_ROWS, &w, &ids, K, 5, true);
    free(ids.data), free(w.data);
}

/* A kB figure of this process's /proc/self/status, read with its line's format ("RssFile: %ld kB":
 * file-backed resident memory, "VmLck: %ld kB": memory locked in RAM), or -1. */
static long status_kb(const char *format)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, format, &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* Pages of [from, to) this process has mapped (/proc/self/pagemap's present bit), or -1. */
static long mapped_pages(const void *from, const void *to)
{
    FILE *f = fopen("/proc/self/pagemap", "rb");
    const uintptr_t page = 4096;
    long n = 0;
    for (uintptr_t p = (uintptr_t)from / page; f && p < ((uintptr_t)to + page - 1) / page; p++) {
        uint64_t e = 0;
        if (fseek(f, (long)(p * sizeof e), SEEK_SET) != 0 || fread(&e, sizeof e, 1, f) != 1) {
            n = -1;
            break;
        }
        n += (long)(e >> 63);
    }
    if (f)
        fclose(f);
    return f ? n : -1;
}

static void test_load(void)
{
    const char *path = test_path("models/qwen2-tiny-q8_0.gguf");
    const long before = status_kb("RssFile: %ld kB");
    struct llm_model *m = NULL;
    struct llm_error err = { 0 };
    CHECK(llm_model_load(path, &m, &err) == 0, "%s: %s", path, err.msg);
    if (!m)
        return;
    struct stat st;
    CHECK(stat(path, &st) == 0, "%s: cannot stat", path);
    size_t repacked = 0, file = 0;
    int64_t n_repacked = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct llm_tensor *t = &m->tensors[i];
        file += llm_nbytes(t);
        if (t->flags & LLM_TENSOR_REPACKED)
            repacked += llm_nbytes(t), n_repacked++;
    }
    if (!llm_repack_kernel(LLM_TYPE_Q8_0)) {
        CHECK(n_repacked == 0, "%lld matrices repacked without a kernel", (long long)n_repacked);
        SKIP("%s: no repacked Q8_0 kernel on this CPU", path);
    } else {
        CHECK(n_repacked > 0 && repacked > file / 2, "%s: %lld matrices, %zu of %zu bytes repacked", path,
              (long long)n_repacked, repacked, file);
        /* the metadata (the vocabulary) and the tensors not repacked may be resident, and the pages
         * a matrix shares with its neighbours */
        const size_t kept = (size_t)st.st_size - repacked;
        const long grew = status_kb("RssFile: %ld kB") - before, allowed = (long)(kept / 1024) + 8 * n_repacked + 1024;
        CHECK(before >= 0 && grew <= allowed, "%s: file pages grew by %ld kB (at most %ld: %zu bytes not repacked)",
              path, grew, allowed, kept);
        /* every tensor now lives in the model's memory: no page of the file's data section stays
         * mapped, not even those two tensors share */
        const char *base = (const char *)m->file->base;
        const long left = mapped_pages(base + m->file->data_offset + 4095, base + m->file->size - 4096);
        CHECK(left == 0, "%s: %ld pages of the data section still mapped", path, left);
    }
    llm_model_free(m);
}

/* --mlock: the lock moves from the file's data pages (dropped, none left mapped) to the repacked
 * copy. Locking needs the file under the locked-memory limit (ulimit -l), else it is skipped. */
static void test_load_locked(void)
{
    const char *path = test_path("models/llama-k256-q4_k_m.gguf");
    struct llm_model *m = NULL;
    struct llm_error err = { 0 };
    CHECK(llm_model_load_mode(path, GGUF_LOAD_MLOCK, 1, &m, &err) == 0, "%s: %s", path, err.msg);
    if (!m)
        return;
    if (!m->file->locked || !m->repacked) {
        SKIP("%s: %s", path, m->repacked ? "not locked (ulimit -l)" : "nothing repacked on this CPU");
    } else {
        const char *base = (const char *)m->file->base;
        const long left = mapped_pages(base + m->file->data_offset + 4095, base + m->file->size - 4096);
        CHECK(left == 0, "%s, locked: %ld pages of the data section still mapped", path, left);
        /* the copy, and the file's first pages (its header) */
        const long lck = status_kb("VmLck: %ld kB"), copy = (long)(m->repacked_bytes / 1024);
        CHECK(lck >= copy && lck <= copy + (long)(m->file->data_offset / 1024) + 8,
              "%s: %ld kB locked, want the copy's %ld kB and the header's", path, lck, copy);
    }
    llm_model_free(m);
}

/* One model's matrices of type t: how many, and how many of them are repacked. */
static void count_repacked(const struct llm_model *m, enum llm_type t, int64_t *n, int64_t *n_repacked)
{
    *n = *n_repacked = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const struct llm_tensor *w = &m->tensors[i];
        if (w->type == t && w->ne[1] > 1) {
            ++*n;
            *n_repacked += (w->flags & LLM_TENSOR_REPACKED) != 0;
        }
    }
}

/* Which CPUs repack (types.c): with AVX2, where decode of the file's layout runs the AVX2 twin of
 * the repacked kernel (every AVX2 CPU for the K-quants, CPUs without an AVX-512 or AVX-VNNI
 * vec_dot4 of the type for the others), everywhere with AVX2 under LLM_REPACK=all, nowhere under
 * LLM_REPACK=0; none without AVX2 (LLM_CPU_ISA=scalar, test_isa_caps.sh), whose kernels must not
 * run AVX2 code. */
static void test_dispatch(void)
{
    const char *env = getenv("LLM_REPACK");
    const bool on = !(env && strcmp(env, "0") == 0), all = env && strcmp(env, "all") == 0;
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const struct llm_type_traits *tt = llm_type_traits(types[ti].type);
        const bool twin = types[ti].dot4 ? tt->vec_dot4 == types[ti].dot4 : tt->vec_dot == types[ti].dot1;
        const bool want = llm_cpu_has_avx2() && on && (twin || all);
        CHECK((llm_repack_kernel(types[ti].type) != NULL) == want, "%s: repacked kernel %s, want %s",
              llm_type_name(types[ti].type), llm_repack_kernel(types[ti].type) ? "set" : "unset", want ? "set" : "unset");
    }
}

static void test_load_k(void)
{
    const char *path = test_path("models/llama-k256-q4_k_m.gguf");
    struct llm_model *m = NULL;
    struct llm_error err = { 0 };
    CHECK(llm_model_load(path, &m, &err) == 0, "%s: %s", path, err.msg);
    if (!m)
        return;
    static const enum llm_type kt[] = { LLM_TYPE_Q4_K, LLM_TYPE_Q6_K };
    for (size_t i = 0; i < 2; i++) {
        int64_t n, n_repacked;
        count_repacked(m, kt[i], &n, &n_repacked);
        const int64_t want = llm_repack_kernel(kt[i]) ? n : 0;
        CHECK(n > 0 && n_repacked == want, "%s: %lld of %lld %s matrices repacked (want %lld)", path,
              (long long)n_repacked, (long long)n, llm_type_name(kt[i]), (long long)want);
    }
    llm_model_free(m);
}

/* ---- the threaded load ------------------------------------------------------------------------ */

/* A llama (d1024 L1 h8/kv4 ff2048, SPM vocab of 515) whose matrices take every repacked type, a type
 * without a repacked layout (Q5_1: copied) and F32 norms; 515 rows leave a last group of 3, and
 * groups of ffn_down span more than a page. Random bytes: only the bytes are compared. */
static const struct {
    const char *name;
    enum llm_type type;
    int64_t ne0, ne1;
} thread_tensors[] = {
    { "token_embd.weight", LLM_TYPE_Q8_0, 1024, 515 },      { "output_norm.weight", LLM_TYPE_F32, 1024, 1 },
    { "output.weight", LLM_TYPE_Q4_0, 1024, 515 },          { "blk.0.attn_norm.weight", LLM_TYPE_F32, 1024, 1 },
    { "blk.0.attn_q.weight", LLM_TYPE_Q4_K, 1024, 1024 },   { "blk.0.attn_k.weight", LLM_TYPE_Q6_K, 1024, 512 },
    { "blk.0.attn_v.weight", LLM_TYPE_Q5_0, 1024, 512 },    { "blk.0.attn_output.weight", LLM_TYPE_Q5_1, 1024, 1024 },
    { "blk.0.ffn_norm.weight", LLM_TYPE_F32, 1024, 1 },     { "blk.0.ffn_gate.weight", LLM_TYPE_Q8_0, 1024, 2048 },
    { "blk.0.ffn_up.weight", LLM_TYPE_Q4_K, 1024, 2048 },   { "blk.0.ffn_down.weight", LLM_TYPE_Q6_K, 2048, 1024 },
};
#define N_THREAD_TENSORS (sizeof thread_tensors / sizeof thread_tensors[0])

/* Writes that model to path; *bytes: the tensors' bytes (the caller frees them). */
static bool write_thread_model(const char *path, unsigned char *bytes[N_THREAD_TENSORS])
{
    struct gguf_writer *w = gguf_writer_new();
    struct llm_error err = { 0 };
    gguf_writer_add_str(w, "general.architecture", "llama");
    static const char *const keys[] = { "llama.context_length", "llama.embedding_length", "llama.block_count",
                                        "llama.feed_forward_length", "llama.attention.head_count",
                                        "llama.attention.head_count_kv" };
    static const uint32_t vals[] = { 256, 1024, 1, 2048, 8, 4 };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        gguf_writer_add_u32(w, keys[i], vals[i]);
    gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    CHECK(llm_synth_vocab(w, false, 515, &err) == 0, "vocab: %s", err.msg);
    for (size_t i = 0; i < N_THREAD_TENSORS; i++) {
        const int64_t ne[2] = { thread_tensors[i].ne0, thread_tensors[i].ne1 };
        const size_t n = llm_row_size(thread_tensors[i].type, ne[0]) * (size_t)ne[1];
        bytes[i] = malloc(n);
        for (size_t b = 0; b < n; b++)
            bytes[i][b] = (unsigned char)(test_rand() >> 13);
        gguf_writer_add_tensor(w, thread_tensors[i].name, thread_tensors[i].type, ne[1] > 1 ? 2 : 1, ne, bytes[i]);
    }
    const bool ok = gguf_writer_write(w, path, &err) == 0;
    CHECK(ok, "writing %s: %s", path, err.msg);
    gguf_writer_free(w);
    return ok;
}

/* Loading on 1, 2, 3, 7 and 64 threads (parts that end inside matrices, in the last group, and
 * parts smaller than a tensor), mapped and read into memory: every tensor holds the file's bytes
 * (unpacked when repacked), the repacked copy is the same bytes whatever the thread count, and no
 * page of the mapped file's data section stays mapped. */
static void test_load_threads(void)
{
    char path[] = "/tmp/test_repack_threads.XXXXXX";
    const int fd = mkstemp(path);
    unsigned char *bytes[N_THREAD_TENSORS] = { 0 };
    if (fd < 0 || !write_thread_model(path, bytes)) {
        CHECK(fd >= 0, "mkstemp");
        return;
    }
    close(fd);
    static const int threads[] = { 1, 2, 3, 7, 64 };
    static const enum gguf_load_mode modes[] = { GGUF_LOAD_MMAP, GGUF_LOAD_READ };
    struct llm_model *first = NULL;
    for (size_t mi = 0; mi < 2; mi++)
        for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++) {
            struct llm_model *m = NULL;
            struct llm_error err = { 0 };
            CHECK(llm_model_load_mode(path, modes[mi], threads[ti], &m, &err) == 0, "%s: %s", path, err.msg);
            if (!m)
                continue;
            for (int64_t i = 0; i < m->n_tensors && i < (int64_t)N_THREAD_TENSORS; i++) {
                const struct llm_tensor *t = &m->tensors[i];
                const size_t row = t->nb[1], n = row * (size_t)t->ne[1];
                unsigned char *got = malloc(n);
                if (t->flags & LLM_TENSOR_REPACKED)
                    llm_repack_unpack(t->type, t->ne[0], t->data, 0, t->ne[1], got, row);
                else
                    memcpy(got, t->data, n);
                CHECK(memcmp(got, bytes[i], n) == 0, "%s on %d threads (%s): %s differs", path, threads[ti],
                      gguf_load_mode_name(modes[mi]), t->name);
                free(got);
            }
            if (first && m->repacked)
                CHECK(m->repacked_bytes == first->repacked_bytes &&
                          memcmp(m->repacked, first->repacked, m->repacked_bytes) == 0,
                      "%s: the repacked copy on %d threads (%s) differs from one thread's", path, threads[ti],
                      gguf_load_mode_name(modes[mi]));
            if (m->repacked && modes[mi] == GGUF_LOAD_MMAP) {
                const char *base = (const char *)m->file->base;
                const long left = mapped_pages(base + m->file->data_offset + 4095, base + m->file->size - 4096);
                CHECK(left == 0, "%s on %d threads: %ld pages of the data section still mapped", path, threads[ti], left);
            }
            if (!first)
                first = m;
            else
                llm_model_free(m);
        }
    if (first && !first->repacked)
        SKIP("%s: nothing repacked on this CPU (only the bytes were compared)", path);
    llm_model_free(first);
    for (size_t i = 0; i < N_THREAD_TENSORS; i++)
        free(bytes[i]);
    unlink(path);
}

/* Read into memory (--no-mmap), a part's page-aligned drops must not reach the page it shares with
 * the part before: dropping there zeroes bytes the other thread may not have read yet. stories260K's
 * two parts meet inside a small matrix, the second part's thread then moves on to the next tensor
 * at once: a load on 2 or 3 threads gave other bytes than one thread's, most times. */
static void test_load_read_shared(void)
{
    const char *path = test_path("models/stories260K-q8_0.gguf");
    struct llm_model *one = NULL;
    struct llm_error err = { 0 };
    CHECK(llm_model_load_mode(path, GGUF_LOAD_READ, 1, &one, &err) == 0, "%s: %s", path, err.msg);
    if (!one || !one->repacked) {
        if (one)
            SKIP("%s: nothing repacked on this CPU", path);
        llm_model_free(one);
        return;
    }
    for (int round = 0; round < 5; round++)
        for (int threads = 2; threads <= 3; threads++) {
            struct llm_model *m = NULL;
            CHECK(llm_model_load_mode(path, GGUF_LOAD_READ, threads, &m, &err) == 0, "%s: %s", path, err.msg);
            if (!m)
                continue;
            CHECK(m->repacked_bytes == one->repacked_bytes &&
                      memcmp(m->repacked, one->repacked, one->repacked_bytes) == 0,
                  "%s read into memory on %d threads: the repacked copy differs from one thread's", path, threads);
            llm_model_free(m);
        }
    llm_model_free(one);
}

int main(void)
{
    /* the in-memory copy is what these tests check; the repack cache has its own
     * (tests/test_repack_cache.sh) */
    setenv("LLM_REPACK_CACHE", "off", 1);
    /* K in blocks: legacy types one partial chunk (2 blocks), whole chunks (8, 16 blocks), whole
     * chunks and a partial one (9, 28 blocks: qwen2-0.5B's 896; 600: more than the Q4_0 kernel's
     * window of activation offsets); K-quants 1, 2 and 5 super-blocks. M: fewer than a group, odd
     * counts, whole groups */
    static const int64_t blocks_legacy[] = { 2, 8, 9, 16, 28, 600 }, blocks_k[] = { 1, 2, 5 };
    static const int64_t Ms[] = { 1, 3, 4, 5, 7, 13, 64 };
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const int64_t bk = llm_type_info(types[ti].type)->blck_size;
        const bool k = bk == QK_K;
        const size_t nk = k ? sizeof blocks_k / sizeof blocks_k[0] : sizeof blocks_legacy / sizeof blocks_legacy[0];
        for (size_t ki = 0; ki < nk; ki++)
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                const int64_t K = (k ? blocks_k[ki] : blocks_legacy[ki]) * bk;
                test_layout(types[ti].type, K, Ms[mi]);
                if (!k)
                    test_offsets(types[ti].type, K, Ms[mi]);
                test_kernels(ti, K, Ms[mi]);
            }
        test_nodes(ti, k ? 5 * bk : 896, 37);
        test_nodes(ti, k ? bk : 288, 130);
    }
    test_dispatch();
    test_q5_0_qh();
    test_load();
    test_load_k();
    test_load_locked();
    test_load_threads();
    test_load_read_shared();
    return test_done("test_repack");
}
