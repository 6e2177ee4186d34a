/* CPU kernels against their scalar reference kernels (src/ops/ref/cpu_ref.h), by normalised mean squared
 * error (NMSE = Σ(fast - ref)² / Σ ref²), on random shapes with odd sizes, non-contiguous sources
 * (permuted and row-padded views) and 1, 2 and 3 threads (real threads and a pthread barrier).
 * Tolerances: exact data movement (GET_ROWS, SET_ROWS, CPY, ADD, MUL, SCALE) 0; float kernels whose
 * sums run in float instead of double (RMS_NORM, SILU, SOFT_MAX, ROPE, FLASH_ATTN) 1e-10; MUL_MAT
 * 1e-10 with F32 activations (F32 weights, BLAS path), otherwise the error of rounding the
 * activations to the weights' vec_dot_type (F16/BF16 1e-5, 8-bit 1e-3), and 1e-10 against a
 * reference that applies the same rounding to its activations. Every weight type the backend takes
 * must run MUL_MAT (a refusal is a failure, not a skip). ROPE, whose reference computes its angles
 * independently of the fast kernel, is also checked, both kernels, against the spec's formula
 * evaluated here in double (linear scaling and freq factors included) and against hand-worked
 * values. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "harness.h"
#include "cpu_features.h"
#include "ops/cpu/cpu.h"
#include "ops/kernels/kernels.h"
#include "ops/ref/cpu_ref.h"
#include "ops/types/blocks.h"
#include "ops/types/repack.h"
#include "ops/types/types.h"

/* ---- random numbers ----------------------------------------------------------------------- */

static float frand(void) /* uniform in [-1, 1) */
{
    return (float)test_rand() / 2147483648.0f - 1.0f;
}

static int irand(int lo, int hi) /* in [lo, hi] */
{
    return lo + (int)(test_rand() % (uint32_t)(hi - lo + 1));
}

/* ---- tensors: every buffer is tracked and freed at the end --------------------------------- */

#define MAX_BUFS 16384
static void *bufs[MAX_BUFS];
static size_t buf_sizes[MAX_BUFS];
static int n_bufs;

static void *alloc_buf(size_t size)
{
    void *p = calloc(1, size ? size : 1);
    if (!p || n_bufs == MAX_BUFS)
        abort();
    bufs[n_bufs] = p;
    buf_sizes[n_bufs++] = size;
    return p;
}

/* The tracked buffer holding address p, with its size. */
static void *buf_of(const void *p, size_t *size)
{
    for (int i = 0; i < n_bufs; i++)
        if ((const char *)p >= (char *)bufs[i] && (const char *)p < (char *)bufs[i] + buf_sizes[i]) {
            *size = buf_sizes[i];
            return bufs[i];
        }
    abort();
}

static void free_bufs(void)
{
    for (int i = 0; i < n_bufs; i++)
        free(bufs[i]);
    n_bufs = 0;
}

static struct llm_tensor *tensor_pool_get(void)
{
    return alloc_buf(sizeof(struct llm_tensor));
}

/* A tensor with rows padded by pad bytes (pad 0: contiguous). */
static struct llm_tensor *new_tensor_pad(enum llm_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                                         int64_t ne3, size_t pad)
{
    struct llm_tensor *t = tensor_pool_get();
    t->type = type;
    t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = ne2, t->ne[3] = ne3;
    t->nb[0] = llm_type_info(type)->type_size;
    t->nb[1] = llm_row_size(type, ne0) + pad;
    t->nb[2] = t->nb[1] * (size_t)ne1;
    t->nb[3] = t->nb[2] * (size_t)ne2;
    t->data = alloc_buf(t->nb[3] * (size_t)ne3);
    return t;
}

static struct llm_tensor *new_tensor(enum llm_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
    return new_tensor_pad(type, ne0, ne1, ne2, ne3, 0);
}

/* View of t with dims a and b swapped (a permutation; data shared). */
static struct llm_tensor *swap_dims(struct llm_tensor *t, int a, int b)
{
    struct llm_tensor *v = tensor_pool_get();
    *v = *t;
    v->ne[a] = t->ne[b], v->ne[b] = t->ne[a];
    v->nb[a] = t->nb[b], v->nb[b] = t->nb[a];
    v->op = LLM_OP_PERMUTE;
    v->view_src = t;
    return v;
}

/* A tensor of shape (ne0..ne3) whose dims a and b are swapped in memory: non-contiguous. */
static struct llm_tensor *new_permuted(enum llm_type type, int64_t ne[4], int a, int b)
{
    int64_t m[4] = { ne[0], ne[1], ne[2], ne[3] };
    m[a] = ne[b], m[b] = ne[a];
    return swap_dims(new_tensor(type, m[0], m[1], m[2], m[3]), a, b);
}

/* Random values in every element (quantized: quantized random floats, or random blocks with sane
 * scales where the type has no quantizer). */
static void fill(struct llm_tensor *t, float amp)
{
    const struct llm_type_info *info = llm_type_info(t->type);
    const struct llm_type_traits *tt = llm_type_traits(t->type);
    float row[8192];
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                char *r = (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                if (t->type == LLM_TYPE_I32) {
                    for (int64_t i = 0; i < t->ne[0]; i++)
                        *(int32_t *)(r + i * t->nb[0]) = irand(0, 1000);
                    continue;
                }
                for (int64_t i = 0; i < t->ne[0]; i++)
                    row[i] = frand() * amp;
                if (info->blck_size == 1) {
                    for (int64_t i = 0; i < t->ne[0]; i++)
                        tt->from_float(&row[i], r + i * t->nb[0], 1);
                } else if (tt->from_float) {
                    tt->from_float(row, r, t->ne[0]);
                } else {
                    size_t nbytes = llm_row_size(t->type, t->ne[0]);
                    for (size_t i = 0; i < nbytes; i++)
                        ((uint8_t *)r)[i] = (uint8_t)test_rand();
                    for (int64_t b = 0; b < t->ne[0] / info->blck_size; b++) {
                        char *blk = r + b * info->type_size;
                        uint16_t d = llm_fp32_to_fp16(0.01f + 0.01f * (frand() + 1)),
                                 dm = llm_fp32_to_fp16(0.005f * (frand() + 1));
                        if (t->type == LLM_TYPE_Q2_K)
                            ((struct block_q2_K *)blk)->d = d, ((struct block_q2_K *)blk)->dmin = dm;
                        else if (t->type == LLM_TYPE_Q3_K)
                            ((struct block_q3_K *)blk)->d = d;
                        else if (t->type == LLM_TYPE_Q5_K)
                            ((struct block_q5_K *)blk)->d = d, ((struct block_q5_K *)blk)->dmin = dm;
                    }
                }
            }
}

static void set_f32(struct llm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v)
{
    *(float *)((char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]) = v;
}

/* Element (i0, i1, i2) of an F32 or F16 tensor set to NaN. */
static void set_nan(struct llm_tensor *t, int64_t i0, int64_t i1, int64_t i2)
{
    char *p = (char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2];
    if (t->type == LLM_TYPE_F16)
        *(uint16_t *)p = 0x7e00;
    else
        *(float *)p = NAN;
}

static float get_elem(const struct llm_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    const char *p = (const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    if (t->type == LLM_TYPE_F16)
        return llm_fp16_to_fp32(*(const uint16_t *)p);
    if (t->type == LLM_TYPE_BF16)
        return llm_bf16_to_fp32(*(const uint16_t *)p);
    return *(const float *)p;
}

static struct llm_tensor *node(enum llm_op op, struct llm_tensor *dst, struct llm_tensor *a,
                               struct llm_tensor *b, struct llm_tensor *c, struct llm_tensor *d)
{
    dst->op = op;
    dst->src[0] = a, dst->src[1] = b, dst->src[2] = c, dst->src[3] = d;
    return dst;
}

/* ---- running a node on n threads ---------------------------------------------------------- */

struct run {
    struct llm_tensor *node;
    struct llm_cpu_params p;
};

static void barrier_wait(void *pool)
{
    pthread_barrier_wait(pool);
}

static void *run_thread(void *arg)
{
    struct run *r = arg;
    llm_cpu_compute(&r->p, r->node);
    return NULL;
}

#define MAX_TEST_THREADS 3

/* Runs runs[0..nth) at once, runs[0] on the calling thread. */
static void run_all(struct run *runs, int nth)
{
    pthread_t th[MAX_TEST_THREADS];
    for (int i = 1; i < nth; i++)
        pthread_create(&th[i], NULL, run_thread, &runs[i]);
    run_thread(&runs[0]);
    for (int i = 1; i < nth; i++)
        pthread_join(th[i], NULL);
}

static void compute(struct llm_tensor *n, int nth, struct llm_rope_cache *rope)
{
    size_t wsize = llm_cpu_work_size(n, nth);
    void *wdata = malloc(wsize ? wsize : 1);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nth);
    struct run runs[MAX_TEST_THREADS];
    for (int i = 0; i < nth; i++)
        runs[i] = (struct run){ .node = n, .p = { .ith = i, .nth = nth, .wdata = wdata, .wsize = wsize,
                                                   .barrier = barrier_wait, .pool = &bar, .rope = rope } };
    run_all(runs, nth);
    pthread_barrier_destroy(&bar);
    free(wdata);
}

/* ---- comparing ---------------------------------------------------------------------------- */

static double nmse(const struct llm_tensor *a, const struct llm_tensor *b, bool *finite)
{
    double err = 0.0, ref = 0.0;
    *finite = true;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                    double x = get_elem(a, i0, i1, i2, i3), y = get_elem(b, i0, i1, i2, i3);
                    if (!isfinite(x) || !isfinite(y))
                        *finite = false;
                    err += (x - y) * (x - y);
                    ref += y * y;
                }
    return ref > 0.0 ? err / ref : err;
}

/* a and b hold the same float bits in every element. */
static bool same_bits(const struct llm_tensor *a, const struct llm_tensor *b)
{
    for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
        for (int64_t i1 = 0; i1 < a->ne[1]; i1++)
            for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
                if (memcmp((const char *)a->data + i0 * a->nb[0] + i1 * a->nb[1] + i2 * a->nb[2],
                           (const char *)b->data + i0 * b->nb[0] + i1 * b->nb[1] + i2 * b->nb[2], sizeof(float)))
                    return false;
    return true;
}

/* A copy of node n whose dst memory is a fresh copy of the buffer n->data lies in (views too). */
static struct llm_tensor *clone_dst(const struct llm_tensor *n)
{
    size_t size;
    char *base = buf_of(n->data, &size);
    char *copy = alloc_buf(size);
    memcpy(copy, base, size);
    struct llm_tensor *c = tensor_pool_get();
    *c = *n;
    c->data = copy + ((char *)n->data - base);
    return c;
}

/* Runs n with 1, 2 and 3 threads (from the same initial dst memory) and compares each result
 * with the reference kernel. Returns the worst NMSE. */
static double check_node(const char *what, struct llm_tensor *n, double tol, struct llm_rope_cache *rope)
{
    CHECK(llm_cpu_supports(n), "%s: not supported", what);
    struct llm_tensor *ref = clone_dst(n), *init = clone_dst(n);
    llm_ref_compute(ref);
    size_t size;
    char *base = buf_of(n->data, &size), *ibase = buf_of(init->data, &size);
    double worst = 0.0;
    for (int nth = 1; nth <= 3; nth++) {
        memcpy(base, ibase, size);
        if (rope)
            llm_rope_cache_reset(rope);
        compute(n, nth, rope);
        bool finite;
        double e = nmse(n, ref, &finite);
        CHECK(finite && e <= tol, "%s nth=%d: NMSE %.3g > %.3g (finite %d)", what, nth, e, tol, finite);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* ---- element-wise, norm, softmax ---------------------------------------------------------- */

static void rand_shape(int64_t ne[4])
{
    ne[0] = irand(1, 70), ne[1] = irand(1, 9), ne[2] = irand(1, 4), ne[3] = irand(1, 3);
}

/* src0 of shape ne: contiguous, row-padded, or with dims 0 and 1 swapped in memory. */
static struct llm_tensor *make_src(int64_t ne[4], int layout)
{
    struct llm_tensor *t = layout == 0 ? new_tensor(LLM_TYPE_F32, ne[0], ne[1], ne[2], ne[3])
                         : layout == 1 ? new_tensor_pad(LLM_TYPE_F32, ne[0], ne[1], ne[2], ne[3], 12)
                                       : new_permuted(LLM_TYPE_F32, ne, 0, 1);
    fill(t, 2.0f);
    return t;
}

static void test_elementwise(void)
{
    for (int iter = 0; iter < 12; iter++) {
        int64_t ne[4], bne[4];
        rand_shape(ne);
        if (iter % 4 == 1)
            ne[0] = 6 * irand(1, 11);
        int layout = iter % 3;
        for (int d = 0; d < 4; d++) /* each dim of src1: full or broadcast */
            bne[d] = test_rand() % 2 ? ne[d] : 1;
        if (iter % 4 == 0)
            bne[0] = ne[0];
        else if (iter % 4 == 1) /* a proper divisor of ne0: src1's row repeats within a row */
            bne[0] = ne[0] / (iter % 8 == 1 ? 2 : 3);
        struct llm_tensor *a = make_src(ne, layout), *b = make_src(bne, (layout + 1) % 3);
        struct llm_tensor *b_full = make_src(ne, (layout + 2) % 3);
        char what[160];
        snprintf(what, sizeof what, "ADD %lldx%lldx%lldx%lld layout %d", (long long)ne[0], (long long)ne[1],
                 (long long)ne[2], (long long)ne[3], layout);
        check_node(what, node(LLM_OP_ADD, make_src(ne, layout), a, b, NULL, NULL), 0.0, NULL);
        what[0] = 'M', what[1] = 'U', what[2] = 'L';
        check_node(what, node(LLM_OP_MUL, make_src(ne, 0), a, b, NULL, NULL), 0.0, NULL);

        struct llm_tensor *s = node(LLM_OP_SCALE, make_src(ne, 1), a, NULL, NULL, NULL);
        llm_set_op_f32(s, 0, 0.37f);
        check_node("SCALE", s, 0.0, NULL);
        check_node("SILU", node(LLM_OP_SILU, make_src(ne, 0), a, NULL, NULL, NULL), 1e-10, NULL);
        check_node("SWIGLU", node(LLM_OP_SWIGLU, make_src(ne, layout), a, b_full, NULL, NULL), 1e-10, NULL);
        struct llm_tensor *r = node(LLM_OP_RMS_NORM, make_src(ne, (layout + 1) % 3), a, NULL, NULL, NULL);
        llm_set_op_f32(r, 0, 1e-6f);
        check_node("RMS_NORM", r, 1e-10, NULL);
    }
    /* long rows take the AVX2 loops with tails */
    int64_t ne[4] = { 4864 + 5, 3, 1, 1 };
    struct llm_tensor *a = make_src(ne, 0), *b = make_src(ne, 1);
    check_node("SWIGLU long", node(LLM_OP_SWIGLU, make_src(ne, 0), a, b, NULL, NULL), 1e-10, NULL);
    struct llm_tensor *r = node(LLM_OP_RMS_NORM, make_src(ne, 0), a, NULL, NULL, NULL);
    llm_set_op_f32(r, 0, 1e-5f);
    check_node("RMS_NORM long", r, 1e-10, NULL);
    /* the AVX2 ADD / MUL rows with a tail: src1 a full row per row, one row for all (a norm
     * weight), and one value per row */
    int64_t wide[4] = { 64 + 3, 5, 1, 1 }, row[4] = { 64 + 3, 1, 1, 1 }, one[4] = { 1, 5, 1, 1 };
    struct llm_tensor *xa = make_src(wide, 0), *bs[3] = { make_src(wide, 0), make_src(row, 0), make_src(one, 0) };
    for (int i = 0; i < 3; i++) {
        static const char *const names[3] = { "full", "row", "value" };
        char what[64];
        snprintf(what, sizeof what, "ADD unit rows, src1 %s", names[i]);
        check_node(what, node(LLM_OP_ADD, make_src(wide, 0), xa, bs[i], NULL, NULL), 0.0, NULL);
        snprintf(what, sizeof what, "MUL unit rows, src1 %s", names[i]);
        check_node(what, node(LLM_OP_MUL, make_src(wide, 0), xa, bs[i], NULL, NULL), 0.0, NULL);
    }
    /* silu at the ends of the exp range */
    float ext[] = { -200.0f, -88.0f, -87.0f, -20.0f, -1e-3f, 0.0f, 1e-3f, 20.0f, 87.0f, 88.5f, 100.0f };
    struct llm_tensor *x = new_tensor(LLM_TYPE_F32, 11, 1, 1, 1);
    memcpy(x->data, ext, sizeof ext);
    check_node("SILU extremes", node(LLM_OP_SILU, new_tensor(LLM_TYPE_F32, 11, 1, 1, 1), x, NULL, NULL, NULL),
               1e-12, NULL);
}

/* Causal mask for n_q queries at the end of n_kv cells: -inf for future cells; row 0 of the
 * first iteration is all -inf (a query that sees nothing). */
static struct llm_tensor *causal_mask(int64_t n_kv, int64_t n_q, int64_t pad_rows, bool dead_row)
{
    struct llm_tensor *m = new_tensor(LLM_TYPE_F32, n_kv, n_q + pad_rows, 1, 1);
    for (int64_t q = 0; q < n_q + pad_rows; q++)
        for (int64_t j = 0; j < n_kv; j++)
            set_f32(m, j, q, 0, 0, (j <= n_kv - n_q + q && !(dead_row && q == 0)) ? 0.0f : -INFINITY);
    return m;
}

static void test_soft_max(void)
{
    for (int iter = 0; iter < 6; iter++) {
        int64_t n_kv = irand(1, 300), n_q = irand(1, 9), heads = irand(1, 4);
        int64_t ne[4] = { n_kv, n_q, heads, 1 };
        struct llm_tensor *a = make_src(ne, iter % 3);
        struct llm_tensor *m = iter % 2 ? causal_mask(n_kv, n_q, 2, iter == 1) : NULL;
        struct llm_tensor *s = node(LLM_OP_SOFT_MAX, new_tensor(LLM_TYPE_F32, n_kv, n_q, heads, 1), a, m, NULL, NULL);
        llm_set_op_f32(s, 0, 0.125f + (float)iter);
        check_node("SOFT_MAX", s, 1e-10, NULL);
        if (iter == 1) { /* the all -inf row gives zeros */
            bool zero = true;
            for (int64_t j = 0; j < n_kv; j++)
                zero = zero && get_elem(s, j, 0, 0, 0) == 0.0f;
            CHECK(zero, "SOFT_MAX: masked-out row is not zero");
        }
    }
}

/* ---- rope ----------------------------------------------------------------------------------- */

static struct llm_tensor *rope_node(struct llm_tensor *a, struct llm_tensor *pos, struct llm_tensor *ff,
                                    int n_dims, int mode, float base, float scale, float attn)
{
    struct llm_tensor *r = node(LLM_OP_ROPE, new_tensor(LLM_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], 1), a, pos, ff, NULL);
    r->op_params[1] = n_dims, r->op_params[2] = mode, r->op_params[3] = 4096, r->op_params[4] = 4096;
    llm_set_op_f32(r, 5, base);
    llm_set_op_f32(r, 6, scale);
    llm_set_op_f32(r, 7, 0.0f);
    llm_set_op_f32(r, 8, attn);
    return r;
}

/* Element (j, i1, i2) of a ROPE node's result, computed here in double from the formula of
 * ../shared/spec/gguf.md §3.7 (a third opinion beside the fast kernel and llm_ref_rope):
 * θ_i = pos · freq_scale · freq_base^(−2i/n_dims) / factor_i, NORMAL pairs (2i, 2i+1), NEOX pairs
 * (i, i + n_dims/2), the rotated pair times attn_factor, dims from n_dims on copied. */
static double rope_oracle(const struct llm_tensor *r, int64_t j, int64_t i1, int64_t i2)
{
    const struct llm_tensor *a = r->src[0], *ff = r->src[2];
    const int n_dims = r->op_params[1], half = n_dims / 2;
    const bool neox = r->op_params[2] == 2;
    if (j >= n_dims)
        return get_elem(a, j, i1, i2, 0);
    const int i = neox ? (int)(j % half) : (int)(j / 2);
    const int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + half : 2 * i + 1;
    const double pos = ((const int32_t *)r->src[1]->data)[i2];
    double theta = pos * llm_get_op_f32(r, 6) * exp(-2.0 * i / n_dims * log(llm_get_op_f32(r, 5)));
    if (ff)
        theta /= ((const float *)ff->data)[i];
    const double x0 = get_elem(a, j0, i1, i2, 0), x1 = get_elem(a, j1, i1, i2, 0);
    const double y = j == j0 ? x0 * cos(theta) - x1 * sin(theta) : x0 * sin(theta) + x1 * cos(theta);
    return y * llm_get_op_f32(r, 8);
}

/* Largest |t − rope_oracle| over the elements of ROPE node r whose result t holds. */
static double rope_oracle_err(const struct llm_tensor *r, const struct llm_tensor *t)
{
    double worst = 0.0;
    for (int64_t i2 = 0; i2 < r->ne[2]; i2++)
        for (int64_t i1 = 0; i1 < r->ne[1]; i1++)
            for (int64_t j = 0; j < r->ne[0]; j++) {
                double e = fabs(get_elem(t, j, i1, i2, 0) - rope_oracle(r, j, i1, i2));
                worst = e > worst || isnan(e) ? e : worst;
            }
    return worst;
}

/* Both the fast kernel's result (r, as computed last) and llm_ref_rope's against rope_oracle.
 * Tolerance 1e-6 absolute for |x| < 2 and attn_factor ≤ 1.3: measured worst 2.5e-7 for the fast
 * kernel (cos and sin rounded to float) and 1.2e-7 for the reference (the float result); a wrong
 * angle errs by O(|x|). */
static void check_rope_oracle(const char *what, struct llm_tensor *r)
{
    struct llm_tensor *ref = clone_dst(r);
    llm_ref_rope(ref);
    double ef = rope_oracle_err(r, r), er = rope_oracle_err(r, ref);
    CHECK(ef <= 1e-6, "%s: fast kernel vs the formula: max error %.3g", what, ef);
    CHECK(er <= 1e-6, "%s: llm_ref_rope vs the formula: max error %.3g", what, er);
}

/* Two nodes whose results are worked out by hand (values of cos and sin only): each kernel must
 * give them, so a wrong angle cannot hide behind an oracle that shares its mistake. */
static void test_rope_by_hand(void)
{
    /* NORMAL, n_dims 2 of 3: i = 0 so θ = pos · freq_scale / factor_0 = 3 · 0.5 / 2 = 0.75 */
    struct llm_tensor *a = new_tensor(LLM_TYPE_F32, 3, 1, 1, 1), *pos = new_tensor(LLM_TYPE_I32, 1, 1, 1, 1);
    struct llm_tensor *ff = new_tensor(LLM_TYPE_F32, 2, 1, 1, 1);
    memcpy(a->data, (float[]){ 1.0f, 0.0f, 5.0f }, 3 * sizeof(float));
    ((int32_t *)pos->data)[0] = 3;
    memcpy(ff->data, (float[]){ 2.0f, 0.25f }, 2 * sizeof(float));
    const double want1[3] = { cos(0.75), sin(0.75), 5.0 };
    /* NEOX, n_dims 4, base 100, pos 10, freq_scale 0.5, factors (5, 0.25), attn 1:
     * θ_0 = 10·0.5·1/5 = 1, θ_1 = 10·0.5·100^(−1/2)/0.25 = 2; pairs (0, 2) and (1, 3) */
    struct llm_tensor *b = new_tensor(LLM_TYPE_F32, 4, 1, 1, 1), *pos2 = new_tensor(LLM_TYPE_I32, 1, 1, 1, 1);
    struct llm_tensor *ff2 = new_tensor(LLM_TYPE_F32, 2, 1, 1, 1);
    memcpy(b->data, (float[]){ 1.0f, 2.0f, 0.0f, 0.0f }, 4 * sizeof(float));
    ((int32_t *)pos2->data)[0] = 10;
    memcpy(ff2->data, (float[]){ 5.0f, 0.25f }, 2 * sizeof(float));
    const double want2[4] = { cos(1.0), 2 * cos(2.0), sin(1.0), 2 * sin(2.0) };
    struct {
        struct llm_tensor *node;
        const double *want;
    } cases[2] = {
        { rope_node(a, pos, ff, 2, 0, 10000.0f, 0.5f, 1.0f), want1 },
        { rope_node(b, pos2, ff2, 4, 2, 100.0f, 0.5f, 1.0f), want2 },
    };
    for (int c = 0; c < 2; c++) {
        struct llm_tensor *r = cases[c].node, *ref = clone_dst(r);
        compute(r, 1, NULL);
        llm_ref_rope(ref);
        double ef = 0.0, er = 0.0;
        for (int64_t j = 0; j < r->ne[0]; j++) {
            ef = fmax(ef, fabs(get_elem(r, j, 0, 0, 0) - cases[c].want[j]));
            er = fmax(er, fabs(get_elem(ref, j, 0, 0, 0) - cases[c].want[j]));
        }
        CHECK(ef <= 1e-6, "ROPE by hand %d: fast kernel off by %.3g", c, ef);
        CHECK(er <= 1e-6, "ROPE by hand %d: llm_ref_rope off by %.3g", c, er);
    }
}

/* Fast kernel against llm_ref_rope (NMSE), and both against the formula, over NORMAL and NEOX,
 * partial rotation (n_dims < head size), padded and head-strided sources, attn_factor, linear
 * scaling (freq_scale 0.25, 0.5, 0.125) and freq factors (with and without scaling). */
static void test_rope(void)
{
    test_rope_by_hand();
    struct llm_rope_cache *cache = llm_rope_cache_new();
    CHECK(cache != NULL, "rope cache");
    for (int iter = 0; iter < 10; iter++) {
        int64_t hd = 2 * irand(2, 40), heads = irand(1, 5), n = irand(1, 7);
        int mode = iter % 2 ? 2 : 0, n_dims = iter % 3 == 0 ? (int)hd - 2 * irand(1, (int)hd / 2 - 1) : (int)hd;
        int64_t ne[4] = { hd, heads, n, 1 };
        struct llm_tensor *a = make_src(ne, iter % 3 == 2 ? 1 : iter % 3); /* padded rows, contiguous */
        if (iter == 5) /* a head-strided view like q inside a fused qkv row */
            a = swap_dims(make_src((int64_t[4]){ hd, n, heads, 1 }, 0), 1, 2);
        struct llm_tensor *pos = new_tensor(LLM_TYPE_I32, n, 1, 1, 1);
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)pos->data)[i] = irand(0, 30000);
        struct llm_tensor *ff = NULL;
        if (iter >= 6) {
            ff = new_tensor(LLM_TYPE_F32, n_dims / 2, 1, 1, 1);
            for (int i = 0; i < n_dims / 2; i++)
                ((float *)ff->data)[i] = 1.0f + 7.0f * (frand() + 1.0f);
        }
        const float scale = iter == 3 ? 0.25f : iter == 6 || iter == 9 ? 0.5f : iter == 7 ? 0.125f : 1.0f;
        struct llm_tensor *r = rope_node(a, pos, ff, n_dims, mode, iter < 4 ? 10000.0f : 1e6f, scale,
                                         iter == 4 ? 1.3f : iter == 9 ? 0.8f : 1.0f);
        char what[160];
        snprintf(what, sizeof what, "ROPE mode %d hd %lld n_dims %d freq_scale %g%s", mode, (long long)hd,
                 n_dims, (double)scale, ff ? " freq factors" : "");
        check_node(what, r, 1e-10, NULL);
        check_rope_oracle(what, r);
        check_node(what, r, 1e-10, cache);
        check_rope_oracle(what, r);
        /* a second node with the same positions and parameters reuses the table of the first */
        struct llm_tensor *r2 = rope_node(make_src(ne, 0), pos, ff, n_dims, mode, llm_get_op_f32(r, 5),
                                          llm_get_op_f32(r, 6), llm_get_op_f32(r, 8));
        struct llm_tensor *ref2 = clone_dst(r2);
        llm_ref_compute(ref2);
        for (int nth = 1; nth <= 3; nth++) {
            llm_rope_cache_reset(cache);
            compute(r, nth, cache);
            compute(r2, nth, cache);
            bool finite;
            double e = nmse(r2, ref2, &finite);
            CHECK(finite && e <= 1e-10, "ROPE cached second node nth=%d: NMSE %.3g", nth, e);
        }
        check_rope_oracle(what, r2);
    }
    /* YaRN is refused */
    int64_t ne[4] = { 8, 1, 1, 1 };
    struct llm_tensor *pos = new_tensor(LLM_TYPE_I32, 1, 1, 1, 1);
    struct llm_tensor *y = rope_node(make_src(ne, 0), pos, NULL, 8, 0, 10000.0f, 1.0f, 1.0f);
    llm_set_op_f32(y, 7, 1.0f);
    CHECK(!llm_cpu_supports(y), "ROPE with ext_factor must be refused");
    llm_rope_cache_free(cache);
}

/* ---- rows: get/set rows, cpy, cont --------------------------------------------------------- */

static const enum llm_type all_types[] = {
    LLM_TYPE_F32, LLM_TYPE_F16, LLM_TYPE_BF16, LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0,
    LLM_TYPE_Q5_1, LLM_TYPE_Q8_0, LLM_TYPE_Q2_K, LLM_TYPE_Q3_K, LLM_TYPE_Q4_K, LLM_TYPE_Q5_K,
    LLM_TYPE_Q6_K, LLM_TYPE_IQ4_NL,
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

static void test_get_rows(void)
{
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        enum llm_type t = all_types[ti];
        if (!llm_type_traits(t)->to_float)
            continue;
        const int64_t blck = llm_type_info(t)->blck_size;
        int64_t ne0 = blck == 1 ? irand(1, 100) : blck * irand(1, 3), rows = irand(2, 40);
        struct llm_tensor *a = new_tensor_pad(t, ne0, rows, 1, 1, ti % 2 ? 0 : 8);
        fill(a, 1.0f);
        int64_t n = irand(1, 9);
        struct llm_tensor *ids = new_tensor(LLM_TYPE_I32, n, 1, 1, 1);
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)ids->data)[i] = irand(0, (int)rows - 1);
        ((int32_t *)ids->data)[0] = (int32_t)rows - 1;
        char what[160];
        snprintf(what, sizeof what, "GET_ROWS %s", llm_type_name(t));
        check_node(what, node(LLM_OP_GET_ROWS, new_tensor(LLM_TYPE_F32, ne0, n, 1, 1), a, ids, NULL, NULL), 0.0,
                   NULL);
        if (t == LLM_TYPE_F16) { /* an out-of-range id gives zeros */
            ((int32_t *)ids->data)[0] = (int32_t)rows;
            check_node("GET_ROWS bad id", node(LLM_OP_GET_ROWS, new_tensor(LLM_TYPE_F32, ne0, n, 1, 1), a, ids,
                                               NULL, NULL), 0.0, NULL);
        }
    }
}

static void test_set_rows(void)
{
    const enum llm_type dts[] = { LLM_TYPE_F32, LLM_TYPE_F16 };
    for (int iter = 0; iter < 6; iter++) {
        enum llm_type t = dts[iter % 2];
        int64_t ne0 = irand(1, 90), cells = irand(4, 40), n = irand(1, 4);
        /* the KV cache buffer, and dst: a view of it with the same geometry */
        struct llm_tensor *cache = new_tensor(t, ne0, cells, 1, 1);
        fill(cache, 1.0f);
        struct llm_tensor *dst = tensor_pool_get();
        *dst = *cache;
        dst->view_src = cache;
        int64_t ne[4] = { ne0, n, 1, 1 };
        struct llm_tensor *src = make_src(ne, iter % 3);
        struct llm_tensor *ids = new_tensor(LLM_TYPE_I32, n, 1, 1, 1);
        int32_t start = irand(0, (int)(cells - n));
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)ids->data)[i] = start + (int32_t)i;
        char what[160];
        snprintf(what, sizeof what, "SET_ROWS into %s", llm_type_name(t));
        check_node(what, node(LLM_OP_SET_ROWS, dst, cache, src, ids, NULL), 0.0, NULL);
        bool written = true;
        for (int64_t e = 0; e < ne0; e++) {
            float want = get_elem(src, e, n - 1, 0, 0);
            if (t == LLM_TYPE_F16)
                want = llm_fp16_to_fp32(llm_fp32_to_fp16(want));
            written = written && get_elem(cache, e, start + n - 1, 0, 0) == want;
        }
        CHECK(written, "SET_ROWS: row not written through to the cache buffer");
    }
}

/* The split rule (llm_cpu_worth_splitting) counts each node by the work it does: a SET_ROWS by the
 * rows it writes, not the cache it writes into; an element-wise node by its elements; a matmul by
 * its multiply-adds; FLASH_ATTN by its results x KV cells. A prompt's nodes are split; a decode
 * token's one-row nodes (896, or a 7B's FFN row of 11008), its 896 x 128 K projection and its
 * attention over a short cache run on one thread, its attention over a long cache on both. */
static void test_split_rule(void)
{
    enum { CELLS = 4096 };
    struct llm_tensor *cache = new_tensor(LLM_TYPE_F16, 128, CELLS, 1, 1);
    const int64_t set_rows[] = { 1, CELLS }; /* a decode token's row; a prompt that fills the cache */
    for (size_t k = 0; k < sizeof set_rows / sizeof set_rows[0]; k++) {
        const int64_t n = set_rows[k];
        struct llm_tensor *dst = tensor_pool_get();
        *dst = *cache;
        dst->view_src = cache;
        int64_t ne[4] = { 128, n, 1, 1 };
        struct llm_tensor *ids = new_tensor(LLM_TYPE_I32, n, 1, 1, 1);
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)ids->data)[i] = (int32_t)i;
        node(LLM_OP_SET_ROWS, dst, cache, make_src(ne, 0), ids, NULL);
        CHECK(llm_cpu_worth_splitting(dst) == (n > 1), "SET_ROWS of %lld rows into %d cells: split %d", (long long)n,
              CELLS, (int)llm_cpu_worth_splitting(dst));
    }
    /* op, dst's ne0 x ne1, src0's ne0 x ne1 (ADD: a row like dst's; MUL_MAT: the weights; FLASH_ATTN:
     * K of head dim 64 over ne1 cells), split */
    const struct { enum llm_op op; int64_t ne0, ne1, s0, s1; bool split; } nodes[] = {
        { LLM_OP_ADD, 896, 256, 896, 256, true },      { LLM_OP_ADD, 896, 1, 896, 1, false },
        { LLM_OP_ADD, 11008, 1, 11008, 1, false },     { LLM_OP_MUL_MAT, 128, 1, 896, 128, false },
        { LLM_OP_MUL_MAT, 896, 1, 896, 896, true },    { LLM_OP_FLASH_ATTN, 64, 14, 64, 64, false },
        { LLM_OP_FLASH_ATTN, 64, 14, 64, 512, true },
    };
    for (size_t k = 0; k < sizeof nodes / sizeof nodes[0]; k++) {
        struct llm_tensor *dst = new_tensor(LLM_TYPE_F32, nodes[k].ne0, nodes[k].ne1, 1, 1);
        struct llm_tensor *a = new_tensor(LLM_TYPE_F32, nodes[k].s0, nodes[k].s1, 1, 1);
        if (nodes[k].op == LLM_OP_FLASH_ATTN) /* q, K, V */
            node(nodes[k].op, dst, new_tensor(LLM_TYPE_F32, 64, 1, 14, 1), a, a, NULL);
        else
            node(nodes[k].op, dst, a, nodes[k].op == LLM_OP_ADD ? a : new_tensor(LLM_TYPE_F32, nodes[k].s0, 1, 1, 1),
                 NULL, NULL);
        CHECK(llm_cpu_worth_splitting(dst) == nodes[k].split, "%s of %lld x %lld (source %lld x %lld): split %d",
              llm_op_name(nodes[k].op), (long long)nodes[k].ne0, (long long)nodes[k].ne1,
              (long long)nodes[k].s0, (long long)nodes[k].s1, (int)llm_cpu_worth_splitting(dst));
    }
}

/* SET_ROWS into a quantized (or BF16) KV cache: each new row quantized whole, the same bytes as the
 * reference quantizer with 1, 2 and 3 threads; a source without unit stride is refused. */
static void test_set_rows_quant(void)
{
    const enum llm_type dts[] = { LLM_TYPE_Q8_0, LLM_TYPE_Q4_0, LLM_TYPE_Q4_1, LLM_TYPE_Q5_0,
                                  LLM_TYPE_Q5_1, LLM_TYPE_IQ4_NL, LLM_TYPE_BF16 };
    for (size_t iter = 0; iter < 2 * sizeof dts / sizeof dts[0]; iter++) {
        const enum llm_type t = dts[iter % (sizeof dts / sizeof dts[0])];
        int64_t ne0 = 32 * irand(1, 4), cells = irand(4, 40), n = irand(1, 4);
        struct llm_tensor *cache = new_tensor(t, ne0, cells, 1, 1);
        fill(cache, 1.0f);
        struct llm_tensor *dst = tensor_pool_get();
        *dst = *cache;
        dst->view_src = cache;
        int64_t ne[4] = { ne0, n, 1, 1 };
        struct llm_tensor *src = make_src(ne, (int)(iter % 2)), *ids = new_tensor(LLM_TYPE_I32, n, 1, 1, 1);
        int32_t start = irand(0, (int)(cells - n));
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)ids->data)[i] = start + (int32_t)i;
        node(LLM_OP_SET_ROWS, dst, cache, src, ids, NULL);
        CHECK(llm_cpu_supports(dst), "SET_ROWS into %s: not supported", llm_type_name(t));
        struct llm_tensor *ref = clone_dst(dst), *init = clone_dst(dst);
        llm_ref_compute(ref);
        const size_t bytes = llm_row_size(t, ne0) * (size_t)cells;
        for (int nth = 1; nth <= 3; nth++) {
            memcpy(cache->data, init->data, bytes);
            compute(dst, nth, NULL);
            CHECK(memcmp(cache->data, ref->data, bytes) == 0, "SET_ROWS into %s, nth=%d: bytes differ from the reference",
                  llm_type_name(t), nth);
        }
        if (iter == 0) {
            struct llm_tensor *strided = make_src(ne, 2); /* dims 0 and 1 swapped: elements not adjacent */
            CHECK(!llm_cpu_supports(node(LLM_OP_SET_ROWS, clone_dst(dst), cache, strided, ids, NULL)),
                  "SET_ROWS into %s from a strided row must be refused", llm_type_name(t));
        }
    }
}

static void test_cpy(void)
{
    const enum llm_type pairs[][2] = {
        { LLM_TYPE_F32, LLM_TYPE_F32 }, { LLM_TYPE_F32, LLM_TYPE_F16 }, { LLM_TYPE_F16, LLM_TYPE_F32 },
        { LLM_TYPE_F32, LLM_TYPE_BF16 }, { LLM_TYPE_F16, LLM_TYPE_F16 },
    };
    for (int iter = 0; iter < 10; iter++) {
        enum llm_type ts = pairs[iter % 5][0], td = pairs[iter % 5][1];
        int64_t ne[4];
        rand_shape(ne);
        struct llm_tensor *a = iter % 2 ? new_permuted(ts, ne, 0, 1 + iter % 3)
                                        : new_tensor_pad(ts, ne[0], ne[1], ne[2], ne[3], 4);
        fill(a, 3.0f);
        /* destination: same shape, or the same elements as one flat row */
        struct llm_tensor *b = iter % 3 == 0 ? new_tensor(td, llm_nelements(a), 1, 1, 1)
                                             : new_tensor(td, ne[0], ne[1], ne[2], ne[3]);
        struct llm_tensor *dst = tensor_pool_get();
        *dst = *b;
        dst->view_src = b;
        char what[160];
        snprintf(what, sizeof what, "CPY %s -> %s%s", llm_type_name(ts), llm_type_name(td),
                 iter % 3 == 0 ? " (reshaped)" : "");
        check_node(what, node(LLM_OP_CPY, dst, a, b, NULL, NULL), 0.0, NULL);
        if (ts == td) {
            struct llm_tensor *c = new_tensor(ts, ne[0] * ne[1], ne[2], ne[3], 1);
            check_node("CONT", node(LLM_OP_CONT, c, a, NULL, NULL, NULL), 0.0, NULL);
        }
    }
    /* quantized CONT copies whole rows */
    struct llm_tensor *q = new_tensor_pad(LLM_TYPE_Q8_0, 64, 5, 2, 1, 8);
    fill(q, 1.0f);
    struct llm_tensor *qc = node(LLM_OP_CONT, new_tensor(LLM_TYPE_Q8_0, 64, 5, 2, 1), q, NULL, NULL, NULL);
    CHECK(llm_cpu_supports(qc), "CONT Q8_0");
    for (int nth = 1; nth <= 3; nth++) {
        memset(qc->data, 0, 68 * 10);
        compute(qc, nth, NULL);
        bool same = true;
        for (int r = 0; r < 10; r++)
            same = same && memcmp((char *)qc->data + r * 68, (char *)q->data + r * q->nb[1], 68) == 0;
        CHECK(same, "CONT Q8_0 nth=%d: rows differ", nth);
    }
}

/* ---- mul_mat ------------------------------------------------------------------------------ */

/* Reference on activations rounded to the vec_dot_type (when that type can be dequantized): the
 * dot path must match it up to float summation order. */
static double check_rounded(struct llm_tensor *mm, enum llm_type vdt)
{
    const struct llm_type_traits *vt = llm_type_traits(vdt);
    struct llm_tensor *x = mm->src[1];
    if (!vt->to_float || !vt->from_float)
        return -1.0; /* no rounded reference: the caller counts it as a failure */
    struct llm_tensor *xr = new_tensor(LLM_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3]);
    void *tmp = alloc_buf(llm_row_size(vdt, x->ne[0]));
    for (int64_t i3 = 0; i3 < x->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < x->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < x->ne[1]; i1++) {
                float *row = (float *)((char *)xr->data + i1 * xr->nb[1] + i2 * xr->nb[2] + i3 * xr->nb[3]);
                for (int64_t i0 = 0; i0 < x->ne[0]; i0++)
                    row[i0] = get_elem(x, i0, i1, i2, i3);
                vt->from_float(row, tmp, x->ne[0]);
                vt->to_float(tmp, row, x->ne[0]);
            }
    struct llm_tensor *ref = clone_dst(mm);
    ref->src[1] = xr;
    llm_ref_compute(ref);
    bool finite;
    double e = nmse(mm, ref, &finite);
    return finite ? e : -1.0;
}

/* The plan of mm (made once, as an npu executor makes it) run on a copy whose weights, activations
 * and output live elsewhere gives the bits mm's own run gives (one thread, as a lone device worker). */
static void check_plan_reuse(const char *what, struct llm_tensor *mm)
{
    struct llm_cpu_plan plan;
    llm_cpu_plan(mm, &plan);
    compute(mm, 1, NULL);
    struct llm_tensor *moved = clone_dst(mm);
    moved->src[0] = clone_dst(mm->src[0]);
    moved->src[1] = clone_dst(mm->src[1]);
    size_t out_size;
    char *out = buf_of(moved->data, &out_size);
    memset(out, 0xff, out_size); /* NaN until computed */
    size_t wsize = llm_cpu_work_size(moved, 1);
    void *wdata = malloc(wsize ? wsize : 1);
    struct llm_cpu_params p = { .ith = 0, .nth = 1, .wdata = wdata, .wsize = wsize, .barrier = barrier_wait };
    llm_cpu_compute_planned(&p, moved, &plan);
    free(wdata);
    CHECK(same_bits(moved, mm), "%s: the planned run at other addresses differs", what);
}

static double dot_tol(enum llm_type vdt)
{
    return vdt == LLM_TYPE_F32 ? 1e-10 : vdt == LLM_TYPE_F16 || vdt == LLM_TYPE_BF16 ? 1e-5 : 1e-3;
}

/* Every type whose weights the cpu backend takes (llm_cpu_supports_type: to_float, the BLAS path)
 * runs MUL_MAT in 3 batch sizes: a refused node, or a dot path without its rounded-activation
 * reference, is a counted failure, never a skip. The types of all_types (those with vec_dot
 * kernels) must be among them, and Q8_1 / Q8_K (to_float but no vec_dot) go through BLAS. */
static void test_mul_mat(void)
{
    const int64_t batches[] = { 1, 3, 40 };
    int n_run = 0, n_types = 0;
    bool listed[LLM_TYPE_COUNT] = { false };
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        CHECK(llm_cpu_supports_type(all_types[ti]), "%s: the cpu backend refuses weights of this type",
              llm_type_name(all_types[ti]));
        listed[all_types[ti]] = true;
    }
    for (int t = 0; t < LLM_TYPE_COUNT; t++) {
        const struct llm_type_traits *tt = llm_type_traits(t);
        if (!tt)
            continue;
        CHECK(!tt->vec_dot_ref || listed[t], "%s has a vec_dot kernel but is not in all_types", llm_type_name(t));
        if (!llm_cpu_supports_type(t))
            continue;
        n_types++;
        const struct llm_type_info *info = llm_type_info(t);
        for (int bi = 0; bi < 3; bi++) {
            int64_t N = batches[bi], K = info->blck_size == 1 ? 2 * irand(8, 150) + 1 : 256 * irand(1, 2);
            int64_t M = irand(1, 40), a2 = 2, b3 = 1, c2 = 2 * (bi + 1), d3 = 2;
            /* weights with padded rows; activations padded on odd batches */
            struct llm_tensor *w = new_tensor_pad(t, K, M, a2, b3, bi == 1 ? info->type_size * 2 : 0);
            struct llm_tensor *x = new_tensor_pad(LLM_TYPE_F32, K, N, c2, d3, bi == 0 ? 0 : 20);
            fill(w, 1.0f);
            fill(x, 1.0f);
            struct llm_tensor *mm = node(LLM_OP_MUL_MAT, new_tensor(LLM_TYPE_F32, M, N, c2, d3), w, x, NULL, NULL);
            char what[160];
            snprintf(what, sizeof what, "MUL_MAT %s K%lld M%lld N%lld", llm_type_name(t), (long long)K,
                     (long long)M, (long long)N);
            CHECK(llm_cpu_supports(mm), "%s: refused by the cpu backend", what);
            if (!llm_cpu_supports(mm))
                continue;
            n_run++;
            /* the BLAS path and the float GEMM keep F32 activations; the dot path and the integer
             * GEMM round them to vec_dot_type */
            enum llm_type vdt = tt->vec_dot ? tt->vec_dot_type : LLM_TYPE_F32;
            bool blas = llm_cpu_mul_mat_uses_blas(mm), gemm = llm_cpu_mul_mat_uses_gemm(mm);
            bool f32_acts = blas || (gemm && !llm_cpu_mul_mat_uses_int_gemm(mm));
            CHECK(!gemm || ((tt->gemm || tt->gemm_f32) && N > 1), "%s: GEMM path without a GEMM kernel, or for one row",
                  what);
            CHECK(blas == (!gemm && (N >= (t == LLM_TYPE_F32 || t == LLM_TYPE_F16 || t == LLM_TYPE_BF16 ? 8 : 24) || !tt->vec_dot)), "%s: unexpected path (blas %d)", what, blas);
            double e = check_node(what, mm, f32_acts ? 1e-10 : dot_tol(vdt), NULL);
            check_plan_reuse(what, mm);
            if (!f32_acts && vdt != LLM_TYPE_F32) {
                /* Q8_1 blocks carry d·Σq rounded to f16, which vec_dot uses for the weights' min;
                 * -1 (no rounded reference, or a non-finite result) fails */
                double er = check_rounded(mm, vdt), tol = vdt == LLM_TYPE_Q8_1 ? 1e-6 : 1e-10;
                CHECK(er >= 0.0 && er <= tol, "%s vs rounded-activation reference: NMSE %.3g", what, er);
                printf("%s: NMSE %.2g (vs rounded activations %.2g)\n", what, e, er);
            }
        }
    }
    printf("MUL_MAT: %d weight types x 3 batch sizes run\n", n_types);
    CHECK(n_types >= (int)N_TYPES, "only %d weight types take MUL_MAT", n_types);
    CHECK_EQ_INT(n_run, 3 * n_types);
}

/* The scratch a backend reserves for a batch of N rows (llm_cpu_work_size_bound) covers every
 * smaller batch, whichever path each takes: the paths change with N (AVX2's Q8_0 integer GEMM at
 * 16-63 rows needed more than dequantize + sgemm at 64: issue 24). Every weight type, K and M of the 0.5B
 * shape's matrices, N up to 512, 1-3 threads. */
static void dense_2d(struct llm_tensor *t, enum llm_type type, int64_t ne0, int64_t ne1)
{
    *t = (struct llm_tensor){ .type = type, .ne = { ne0, ne1, 1, 1 } };
    t->nb[0] = llm_type_info(type)->type_size;
    t->nb[1] = llm_row_size(type, ne0);
    t->nb[2] = t->nb[3] = t->nb[1] * (size_t)ne1;
}

static void test_mul_mat_work_bound(void)
{
    static const int64_t shapes[][2] = { { 896, 4864 }, { 4864, 896 }, { 256, 32 } };
    int n_checked = 0;
    for (size_t ti = 0; ti < N_TYPES; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int nth = 1; nth <= 3; nth++) {
                const enum llm_type t = all_types[ti];
                const int64_t K = shapes[si][0], M = shapes[si][1];
                if (K % llm_type_info(t)->blck_size)
                    continue;
                struct llm_tensor w, x, d;
                dense_2d(&w, t, K, M);
                size_t most = 0, bound = 0;
                int64_t worst = 0;
                for (int64_t N = 1; N <= 512; N++) {
                    dense_2d(&x, LLM_TYPE_F32, K, N);
                    dense_2d(&d, LLM_TYPE_F32, M, N);
                    d.op = LLM_OP_MUL_MAT;
                    d.src[0] = &w;
                    d.src[1] = &x;
                    size_t need = llm_cpu_work_size(&d, nth);
                    if (need > most) {
                        most = need;
                        worst = N;
                    }
                    bound = llm_cpu_work_size_bound(&d, nth);
                    if (bound < most)
                        break;
                }
                CHECK(bound >= most, "MUL_MAT %s K%lld M%lld %d threads: %zu bytes reserved at N 512, %zu needed at N %lld",
                      llm_type_name(t), (long long)K, (long long)M, nth, bound, most, (long long)worst);
                n_checked++;
            }
    CHECK(n_checked > 3 * (int)N_TYPES, "only %d shapes checked", n_checked);
}

/* Decode of weights past the cache (matmul.c's streamed dot path: 256 KiB or more of weights, one
 * activation row): rows under 2 KiB go four at a time behind one prefetched run, longer ones one
 * at a time through vec_dot1. Every row of every thread's share, row counts not a multiple of 4. */
static void test_mul_mat_streamed(void)
{
    const struct {
        enum llm_type t;
        int64_t K, M;
    } cases[] = {
        { LLM_TYPE_F16, 512, 259 },  /* 1 KiB rows */
        { LLM_TYPE_F16, 1536, 131 }, /* 3 KiB rows */
        { LLM_TYPE_Q8_0, 2048, 131 }, { LLM_TYPE_Q4_0, 1024, 515 }, { LLM_TYPE_Q4_0, 4096, 123 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const enum llm_type t = cases[i].t;
        const int64_t K = cases[i].K, M = cases[i].M;
        CHECK((size_t)M * llm_row_size(t, K) >= (256u << 10), "case %zu does not stream", i);
        struct llm_tensor *w = new_tensor(t, K, M, 1, 1), *x = new_tensor(LLM_TYPE_F32, K, 1, 1, 1);
        fill(w, 1.0f);
        fill(x, 1.0f);
        struct llm_tensor *mm = node(LLM_OP_MUL_MAT, new_tensor(LLM_TYPE_F32, M, 1, 1, 1), w, x, NULL, NULL);
        char what[96];
        snprintf(what, sizeof what, "streamed MUL_MAT %s K%lld M%lld", llm_type_name(t), (long long)K, (long long)M);
        const enum llm_type vdt = llm_type_traits(t)->vec_dot_type;
        double e = check_node(what, mm, dot_tol(vdt), NULL), er = check_rounded(mm, vdt);
        CHECK(er >= 0.0 && er <= 1e-10, "%s vs rounded-activation reference: NMSE %.3g", what, er);
        printf("%s: NMSE %.2g (vs rounded activations %.2g)\n", what, e, er);
    }
}

/* Decode's shares with stolen tails: thread 0 stalls after the barrier that publishes the shares,
 * so the other threads finish theirs and take its chunks from the back; every row is still computed
 * once, with the bits of the one-thread run (a row's sum does not depend on who computes it). */
struct stalled {
    pthread_barrier_t *bar;
    int ith, waits;
};

static void stalled_barrier(void *pool)
{
    struct stalled *s = pool;
    pthread_barrier_wait(s->bar);
    if (s->ith == 0 && s->waits++ == 0)
        usleep(30000);
}

/* Decode (N = 1: the dot path's shares) and batches of 32-40 (the GEMM paths' shares: the float
 * GEMM for F16 and Q4_K, the integer one for Q8_0 and Q4_0, repacked or not) with thread 0 stalled
 * after its first barrier: the others must take rows from its share, and every row must come out
 * as with one thread. */
static void test_mul_mat_shares(void)
{
    const struct {
        enum llm_type t;
        int64_t K, M, N;
        bool repack;
    } cases[] = {
        { LLM_TYPE_Q8_0, 1024, 1001, 1, false }, { LLM_TYPE_Q4_0, 2048, 333, 1, false },
        { LLM_TYPE_Q4_K, 512, 998, 1, false },   { LLM_TYPE_F16, 256, 517, 1, false },
        { LLM_TYPE_F16, 256, 517, 40, false },   { LLM_TYPE_Q4_K, 512, 998, 40, false },
        { LLM_TYPE_Q8_0, 256, 1001, 32, false }, { LLM_TYPE_Q4_0, 512, 333, 32, false },
        { LLM_TYPE_Q4_0, 512, 333, 32, true },   { LLM_TYPE_Q8_0, 256, 1001, 32, true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int nth = 2; nth <= 3; nth++) {
            const enum llm_type t = cases[i].t;
            const int64_t K = cases[i].K, M = cases[i].M, N = cases[i].N;
            struct llm_tensor *w = new_tensor(t, K, M, 1, 1), *x = new_tensor(LLM_TYPE_F32, K, N, 1, 1);
            fill(w, 1.0f);
            fill(x, 1.0f);
            if (cases[i].repack) {
                void *packed = alloc_buf(llm_repack_size(t, K, M));
                llm_repack_groups(t, K, M, w->data, w->nb[1], 0, (M + LLM_REPACK_ROWS - 1) / LLM_REPACK_ROWS, packed);
                w->data = packed;
                w->flags |= LLM_TENSOR_REPACKED;
            }
            struct llm_tensor *one = node(LLM_OP_MUL_MAT, new_tensor(LLM_TYPE_F32, M, N, 1, 1), w, x, NULL, NULL);
            struct llm_tensor *mm = node(LLM_OP_MUL_MAT, new_tensor(LLM_TYPE_F32, M, N, 1, 1), w, x, NULL, NULL);
            if (N > 1 && !llm_cpu_mul_mat_uses_gemm(mm)) { /* the scalar ISA has no GEMM: BLAS or dot products */
                CHECK(!llm_cpu_has_avx2(), "shares %s M%lld N%lld: no GEMM path with AVX2", llm_type_name(t),
                      (long long)M, (long long)N);
                continue;
            }
            compute(one, 1, NULL);
            const size_t wsize = llm_cpu_work_size(mm, nth);
            void *wdata = malloc(wsize);
            pthread_barrier_t bar;
            pthread_barrier_init(&bar, NULL, (unsigned)nth);
            struct stalled st[MAX_TEST_THREADS];
            struct run runs[MAX_TEST_THREADS];
            const int64_t stolen = llm_cpu_mul_mat_stolen_rows();
            for (int k = 0; k < nth; k++) {
                st[k] = (struct stalled){ .bar = &bar, .ith = k };
                runs[k] = (struct run){ .node = mm, .p = { .ith = k, .nth = nth, .wdata = wdata, .wsize = wsize,
                                                           .barrier = stalled_barrier, .pool = &st[k] } };
            }
            run_all(runs, nth);
            pthread_barrier_destroy(&bar);
            free(wdata);
            CHECK(same_bits(mm, one), "shares %s%s K%lld M%lld N%lld, %d threads: differs from one thread",
                  llm_type_name(t), cases[i].repack ? " repacked" : "", (long long)K, (long long)M, (long long)N, nth);
            CHECK(llm_cpu_mul_mat_stolen_rows() > stolen, "shares %s%s M%lld N%lld, %d threads: thread 0 stalled, yet "
                  "no row was taken from its share", llm_type_name(t), cases[i].repack ? " repacked" : "",
                  (long long)M, (long long)N, nth);
        }
}

/* ---- flash attention ------------------------------------------------------------------------ */

/* softmax(scale·k·q + mask)·v composed from the MUL_MAT, SOFT_MAX and CPY reference kernels. */
static struct llm_tensor *composed_attention(struct llm_tensor *q, struct llm_tensor *k, struct llm_tensor *v,
                                             struct llm_tensor *m, float scale)
{
    int64_t n_kv = k->ne[1], n_q = q->ne[1], heads = q->ne[2], hd_v = v->ne[0];
    struct llm_tensor *kf = new_tensor(LLM_TYPE_F32, k->ne[0], n_kv, k->ne[2], 1);
    llm_ref_cpy(node(LLM_OP_CPY, kf, k, kf, NULL, NULL));
    struct llm_tensor *kq = node(LLM_OP_MUL_MAT, new_tensor(LLM_TYPE_F32, n_kv, n_q, heads, 1), kf, q, NULL, NULL);
    llm_ref_mul_mat(kq);
    struct llm_tensor *sm = node(LLM_OP_SOFT_MAX, new_tensor(LLM_TYPE_F32, n_kv, n_q, heads, 1), kq, m, NULL, NULL);
    llm_set_op_f32(sm, 0, scale);
    llm_ref_soft_max(sm);
    /* vᵀ as contiguous F32 [n_kv, hd_v, heads_kv] */
    struct llm_tensor *vt = new_tensor(LLM_TYPE_F32, n_kv, hd_v, v->ne[2], 1);
    llm_ref_cpy(node(LLM_OP_CPY, swap_dims(vt, 0, 1), v, vt, NULL, NULL));
    struct llm_tensor *kqv = node(LLM_OP_MUL_MAT, new_tensor(LLM_TYPE_F32, hd_v, n_q, heads, 1), vt, sm, NULL, NULL);
    llm_ref_mul_mat(kqv);
    return swap_dims(kqv, 1, 2); /* [hd_v, heads, n_q] like FLASH_ATTN's dst */
}

static void test_flash_attn(void)
{
    for (int iter = 0; iter < 8; iter++) {
        enum llm_type kvt = iter % 2 ? LLM_TYPE_F16 : LLM_TYPE_F32;
        int64_t hd = iter < 4 ? 64 : irand(3, 40), heads_kv = irand(1, 2), heads = heads_kv * irand(1, 3);
        int64_t n_q = iter % 3 == 0 ? 1 : irand(2, 8), n_kv = n_q + irand(0, 60) + (iter == 2 ? 256 : 0);
        /* q as the builder makes it: a permuted view of [hd, heads, n_q] */
        struct llm_tensor *q = new_permuted(LLM_TYPE_F32, (int64_t[4]){ hd, n_q, heads, 1 }, 1, 2);
        struct llm_tensor *k = new_tensor(kvt, hd, n_kv, heads_kv, 1);
        struct llm_tensor *v = iter == 3 ? new_tensor_pad(kvt, hd, n_kv, heads_kv, 1, 16)
                                         : new_tensor(kvt, hd, n_kv, heads_kv, 1);
        fill(q, 1.0f);
        fill(k, 1.0f);
        fill(v, 1.0f);
        struct llm_tensor *m = causal_mask(n_kv, n_q, iter % 2, iter == 5);
        float scale = 1.0f / sqrtf((float)hd);
        struct llm_tensor *fa = node(LLM_OP_FLASH_ATTN, new_tensor(LLM_TYPE_F32, hd, heads, n_q, 1), q, k, v, m);
        llm_set_op_f32(fa, 0, scale);
        char what[160];
        snprintf(what, sizeof what, "FLASH_ATTN %s hd%lld heads %lld/%lld n_q %lld n_kv %lld", llm_type_name(kvt),
                 (long long)hd, (long long)heads, (long long)heads_kv, (long long)n_q, (long long)n_kv);
        check_node(what, fa, 1e-10, NULL);
        struct llm_tensor *comp = composed_attention(q, k, v, m, scale);
        bool finite;
        double e = nmse(fa, comp, &finite);
        CHECK(finite && e <= 1e-10, "%s vs mul_mat+soft_max+mul_mat: NMSE %.3g", what, e);
    }
}

/* Row q of a KV window of n_kv cells, n_used of them filled: it sees cells [start, n_used - n_q + q]
 * but not the hole [hole_lo, hole_hi) (cells of another sequence); head h of a per-head mask starts
 * 8·h cells later; the rest, the padded tail included, is -inf. heads 0: no mask. */
static struct llm_tensor *window_mask(int64_t n_kv, int64_t n_used, int64_t n_q, int64_t start, int64_t heads,
                                      int64_t hole_lo, int64_t hole_hi)
{
    if (heads == 0)
        return NULL;
    struct llm_tensor *m = new_tensor(LLM_TYPE_F32, n_kv, n_q, heads, 1);
    for (int64_t h = 0; h < heads; h++)
        for (int64_t q = 0; q < n_q; q++)
            for (int64_t j = 0; j < n_kv; j++)
                set_f32(m, j, q, h, 0,
                        j >= start + 8 * h && j <= n_used - n_q + q && (j < hole_lo || j >= hole_hi) ? 0.0f
                                                                                                   : -INFINITY);
    return m;
}

/* fa recomputed on inputs whose unread cells were poisoned with NaN, with 1, 2 and 3 threads: each
 * within NMSE 1e-10 of ref (computed on clean inputs) and the same bits as with 1 thread. */
static void check_poisoned(const char *what, struct llm_tensor *fa, const struct llm_tensor *ref)
{
    struct llm_tensor *one = NULL;
    for (int nth = 1; nth <= 3; nth++) {
        compute(fa, nth, NULL);
        bool finite;
        double e = nmse(fa, ref, &finite);
        CHECK(finite && e <= 1e-10, "%s, NaN in the padding, nth=%d: NMSE %.3g (finite %d)", what, nth, e, finite);
        if (nth == 1)
            one = clone_dst(fa);
        else
            CHECK(same_bits(fa, one), "%s: nth=%d differs from nth=1 bit for bit", what, nth);
    }
}

/* Shapes of the fast kernel's paths: head dims that are multiples of 8 or not (with hd_v != hd),
 * GQA groups of 1..8 heads (split between threads when there are fewer groups than threads),
 * padded KV windows whose masked cells hold NaN (they must be skipped, not multiplied by 0),
 * masked blocks between visible ones, masks that differ per head, no mask, query rows that see
 * nothing, and K/V with non-unit element stride (the scalar path). Head dims of 8 have a path of
 * their own (16 cells per block on AVX-512, 8 on AVX2, heads of several KV heads batched, a window
 * end that is not a multiple of the block), and so has prefill when hd is a multiple of 16 and hd_v of 64 (AVX-512:
 * tiles of query rows sharing each K and V block). Results must not depend on the thread count,
 * bit for bit: the npu compares itself with the cpu. */
static void test_flash_attn_shapes(void)
{
    static const struct {
        int kvt_f16, hd, hd_v, heads, heads_kv, n_q, n_kv, n_used, start, mask_heads, strided, hole_lo, hole_hi;
    } cases[] = {
        { 1, 8, 8, 8, 4, 1, 256, 37, 0, 1, 0, 0, 0 },        /* stories260K decode */
        { 1, 8, 8, 8, 4, 5, 256, 5, 0, 1, 0, 0, 0 },         /* stories260K prompt */
        { 1, 64, 64, 14, 2, 1, 512, 401, 0, 1, 0, 0, 0 },    /* qwen2-0.5B decode */
        { 0, 64, 64, 14, 2, 3, 512, 300, 40, 1, 0, 0, 0 },   /* F32, window start past the first blocks */
        { 0, 20, 12, 6, 2, 4, 70, 61, 3, 1, 0, 0, 0 },       /* hd and hd_v not multiples of 8 */
        { 1, 24, 40, 6, 3, 2, 100, 90, 0, 6, 0, 0, 0 },      /* a mask per head */
        { 1, 16, 16, 4, 1, 3, 64, 50, 10, 1, 1, 0, 0 },      /* strided K/V: scalar path */
        { 0, 13, 9, 3, 3, 2, 40, 33, 0, 3, 1, 0, 0 },
        { 1, 8, 8, 8, 4, 1, 256, 100, 0, 1, 0, 16, 56 }, /* a hole of whole blocks */
        { 0, 24, 16, 6, 2, 2, 128, 90, 0, 2, 0, 13, 50 }, /* a ragged hole, a mask per head */
        { 1, 8, 8, 8, 4, 1, 256, 64, 0, 1, 0, 0, 0 },     /* stories260K decode, whole blocks of 16 */
        { 0, 8, 8, 8, 4, 3, 45, 45, 0, 1, 0, 0, 0 },      /* F32, window end not a multiple of 16 */
        { 1, 8, 8, 8, 8, 2, 70, 50, 40, 1, 0, 0, 0 },     /* MHA, window start past the first block */
        { 1, 8, 8, 6, 2, 4, 96, 90, 0, 1, 0, 0, 0 },      /* groups of 3 heads */
        { 1, 8, 8, 16, 2, 1, 128, 77, 0, 1, 0, 0, 0 },    /* groups of 8 heads */
        { 1, 8, 8, 8, 4, 2, 61, 61, 0, 0, 0, 0, 0 },      /* no mask */
        { 1, 8, 8, 8, 4, 2, 64, 40, 50, 1, 0, 0, 0 },     /* rows that see nothing: zeros */
        { 0, 8, 8, 8, 2, 3, 64, 60, 0, 4, 0, 20, 37 },    /* a mask per head, a ragged hole */
        /* the prefill path (AVX-512, tiles of query rows): */
        { 1, 64, 64, 14, 2, 37, 128, 100, 0, 1, 0, 0, 0 },  /* qwen2-0.5B prompt, tiles of 4 rows */
        { 0, 64, 64, 8, 1, 9, 80, 80, 5, 1, 0, 0, 0 },      /* F32, MQA, a tile of one row */
        { 1, 32, 64, 6, 2, 11, 200, 190, 0, 6, 0, 40, 90 }, /* a mask per head, a hole of whole blocks */
        { 1, 16, 128, 4, 4, 40, 96, 96, 0, 1, 0, 13, 29 },  /* MHA (tiles of 32 rows), a ragged hole */
        { 0, 64, 64, 32, 1, 3, 50, 47, 0, 1, 0, 0, 0 },     /* a group of 32 heads: tiles of one row */
        { 1, 64, 64, 40, 1, 2, 50, 47, 0, 1, 0, 0, 0 },     /* 40 heads: too many, row at a time */
        { 1, 64, 64, 4, 2, 6, 64, 40, 50, 1, 0, 0, 0 },     /* rows that see nothing: zeros */
        { 0, 64, 64, 4, 2, 5, 45, 45, 0, 1, 0, 0, 0 },      /* window end not a multiple of 16 */
        { 1, 64, 64, 4, 2, 6, 61, 61, 0, 0, 0, 0, 0 },      /* no mask */
        { 1, 64, 64, 4, 2, 30, 600, 590, 0, 2, 0, 100, 333 }, /* a long window, masks per head, a hole */
        /* the AVX2 prefill tile takes hd a multiple of 8 and hd_v of 16 (steps of 16 cells): */
        { 1, 32, 32, 8, 4, 40, 300, 290, 0, 1, 0, 0, 0 },    /* llama-k256 prompt, tiles of 16 rows */
        { 0, 128, 128, 8, 2, 13, 150, 140, 9, 1, 0, 0, 0 },  /* hd 128, a window start mid-block */
        { 1, 40, 16, 6, 2, 7, 90, 85, 0, 2, 0, 20, 44 },     /* hd not a multiple of 16, masks per head */
        { 0, 8, 16, 4, 2, 5, 37, 37, 0, 1, 0, 0, 0 },        /* hd 8, hd_v 16, window end mid-block */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        enum llm_type kvt = cases[c].kvt_f16 ? LLM_TYPE_F16 : LLM_TYPE_F32;
        int64_t hd = cases[c].hd, hd_v = cases[c].hd_v, heads = cases[c].heads, heads_kv = cases[c].heads_kv;
        int64_t n_q = cases[c].n_q, n_kv = cases[c].n_kv, n_used = cases[c].n_used;
        struct llm_tensor *q = new_permuted(LLM_TYPE_F32, (int64_t[4]){ hd, n_q, heads, 1 }, 1, 2);
        struct llm_tensor *k, *v;
        if (cases[c].strided) {
            k = new_permuted(kvt, (int64_t[4]){ hd, n_kv, heads_kv, 1 }, 0, 1);
            v = new_permuted(kvt, (int64_t[4]){ hd_v, n_kv, heads_kv, 1 }, 0, 1);
        } else {
            k = new_tensor(kvt, hd, n_kv, heads_kv, 1);
            v = new_tensor(kvt, hd_v, n_kv, heads_kv, 1);
        }
        fill(q, 1.0f);
        fill(k, 1.0f);
        fill(v, 1.0f);
        struct llm_tensor *m =
            window_mask(n_kv, n_used, n_q, cases[c].start, cases[c].mask_heads, cases[c].hole_lo, cases[c].hole_hi);
        struct llm_tensor *fa = node(LLM_OP_FLASH_ATTN, new_tensor(LLM_TYPE_F32, hd_v, heads, n_q, 1), q, k, v, m);
        llm_set_op_f32(fa, 0, 1.0f / sqrtf((float)hd));
        char what[160];
        snprintf(what, sizeof what, "FLASH_ATTN %s hd %lld/%lld heads %lld/%lld n_q %lld n_kv %lld/%lld%s",
                 llm_type_name(kvt), (long long)hd, (long long)hd_v, (long long)heads, (long long)heads_kv,
                 (long long)n_q, (long long)n_used, (long long)n_kv, cases[c].strided ? " strided" : "");
        check_node(what, fa, 1e-10, NULL);

        /* the reference on clean data, then NaN in every cell no query may attend to */
        struct llm_tensor *ref = clone_dst(fa);
        llm_ref_compute(ref);
        for (int64_t h = 0; h < heads_kv; h++)
            for (int64_t j = 0; j < n_kv; j++) {
                if (j < n_used && (j < cases[c].hole_lo || j >= cases[c].hole_hi))
                    continue;
                for (int64_t i = 0; i < hd; i++)
                    set_nan(k, i, j, h);
                for (int64_t i = 0; i < hd_v; i++)
                    set_nan(v, i, j, h);
            }
        check_poisoned(what, fa, ref);
    }
}

/* The first binary16 of each block of cell j (its scale, or a BF16 element) set to NaN: a masked
 * cell of a quantized cache may hold anything. */
static void poison_cell(struct llm_tensor *t, int64_t j, int64_t h)
{
    const struct llm_type_info *ti = llm_type_info(t->type);
    char *row = (char *)t->data + j * t->nb[1] + h * t->nb[2];
    for (int64_t b = 0; b < t->ne[0] / ti->blck_size; b++)
        *(uint16_t *)(row + b * ti->type_size) = t->type == LLM_TYPE_BF16 ? 0x7fc0 : 0x7e00;
}

/* A quantized KV cache read block by block (decode and prefill paths), against the reference that
 * dequantizes K and V whole, then runs the plain attention in double: the fast paths dequantize to
 * the same floats, so the tolerance is the float-sum one, 1e-10. Cells past n_used have NaN scales;
 * results are the same bits with 1, 2 and 3 threads. */
static void test_flash_attn_quant(void)
{
    static const struct {
        enum llm_type kt, vt;
        int hd, hd_v, heads, heads_kv, n_q, n_kv, n_used, hole_lo, hole_hi;
    } cases[] = {
        { LLM_TYPE_Q8_0, LLM_TYPE_Q8_0, 32, 32, 8, 4, 1, 256, 37, 0, 0 },     /* llama-k256 decode */
        { LLM_TYPE_Q4_0, LLM_TYPE_Q4_0, 32, 32, 8, 4, 5, 256, 5, 0, 0 },      /* llama-k256 prompt */
        { LLM_TYPE_F16, LLM_TYPE_Q8_0, 64, 64, 14, 2, 1, 512, 401, 0, 0 },    /* qwen2-0.5B decode */
        { LLM_TYPE_Q5_1, LLM_TYPE_IQ4_NL, 64, 64, 14, 2, 37, 128, 100, 0, 0 }, /* prefill tiles */
        { LLM_TYPE_Q4_1, LLM_TYPE_Q5_0, 32, 64, 6, 2, 11, 200, 190, 40, 90 }, /* a hole, hd != hd_v */
        { LLM_TYPE_Q8_0, LLM_TYPE_F16, 64, 64, 4, 2, 30, 600, 590, 100, 333 },
        { LLM_TYPE_IQ4_NL, LLM_TYPE_Q4_0, 96, 96, 6, 3, 3, 300, 280, 0, 0 }, /* hd_v not a multiple of 64 */
        { LLM_TYPE_BF16, LLM_TYPE_BF16, 20, 12, 6, 2, 4, 70, 61, 0, 0 },      /* BF16, odd head dims */
        { LLM_TYPE_BF16, LLM_TYPE_BF16, 64, 64, 8, 4, 9, 80, 80, 0, 0 },
        { LLM_TYPE_Q4_0, LLM_TYPE_Q8_0, 32, 32, 8, 4, 20, 256, 200, 0, 0 },  /* llama-k256 q4_0/q8_0 prompt */
        { LLM_TYPE_Q5_0, LLM_TYPE_Q5_1, 32, 32, 8, 4, 17, 160, 150, 60, 80 }, /* a hole of whole steps */
        { LLM_TYPE_F32, LLM_TYPE_Q4_1, 128, 128, 4, 2, 6, 96, 90, 0, 0 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t hd = cases[c].hd, hd_v = cases[c].hd_v, heads = cases[c].heads, heads_kv = cases[c].heads_kv;
        int64_t n_q = cases[c].n_q, n_kv = cases[c].n_kv, n_used = cases[c].n_used;
        struct llm_tensor *q = new_permuted(LLM_TYPE_F32, (int64_t[4]){ hd, n_q, heads, 1 }, 1, 2);
        struct llm_tensor *k = new_tensor(cases[c].kt, hd, n_kv, heads_kv, 1);
        struct llm_tensor *v = new_tensor(cases[c].vt, hd_v, n_kv, heads_kv, 1);
        fill(q, 1.0f);
        fill(k, 1.0f);
        fill(v, 1.0f);
        struct llm_tensor *m = window_mask(n_kv, n_used, n_q, 0, 1, cases[c].hole_lo, cases[c].hole_hi);
        struct llm_tensor *fa = node(LLM_OP_FLASH_ATTN, new_tensor(LLM_TYPE_F32, hd_v, heads, n_q, 1), q, k, v, m);
        llm_set_op_f32(fa, 0, 1.0f / sqrtf((float)hd));
        char what[160];
        snprintf(what, sizeof what, "FLASH_ATTN K %s V %s hd %lld/%lld heads %lld/%lld n_q %lld n_kv %lld/%lld",
                 llm_type_name(cases[c].kt), llm_type_name(cases[c].vt), (long long)hd, (long long)hd_v,
                 (long long)heads, (long long)heads_kv, (long long)n_q, (long long)n_used, (long long)n_kv);
        check_node(what, fa, 1e-10, NULL);
        /* the reference on clean data, then NaN scales in every cell no query may attend to */
        struct llm_tensor *ref = clone_dst(fa);
        llm_ref_compute(ref);
        for (int64_t h = 0; h < heads_kv; h++)
            for (int64_t j = 0; j < n_kv; j++)
                if (j >= n_used || (j >= cases[c].hole_lo && j < cases[c].hole_hi)) {
                    if (cases[c].kt != LLM_TYPE_F16)
                        poison_cell(k, j, h);
                    if (cases[c].vt != LLM_TYPE_F16)
                        poison_cell(v, j, h);
                }
        check_poisoned(what, fa, ref);
    }
    /* a quantized K whose rows are not whole blocks cannot be read block by block */
    struct llm_tensor *q = new_tensor(LLM_TYPE_F32, 16, 1, 2, 1), *k = new_tensor(LLM_TYPE_Q8_0, 32, 8, 1, 1);
    k->ne[0] = 16;
    struct llm_tensor *v = new_tensor(LLM_TYPE_F16, 16, 8, 1, 1);
    CHECK(!llm_cpu_supports(node(LLM_OP_FLASH_ATTN, new_tensor(LLM_TYPE_F32, 16, 2, 1, 1), q, k, v, NULL)),
          "FLASH_ATTN with a Q8_0 K of 16-element rows must be refused");
}

/* Rows [a, a + n) of FLASH_ATTN node fa as a node of their own (views of q, the mask and dst). */
static struct llm_tensor *fa_rows(const struct llm_tensor *fa, int64_t a, int64_t n)
{
    struct llm_tensor *q = tensor_pool_get(), *m = NULL, *d = tensor_pool_get();
    *q = *fa->src[0], *d = *fa;
    q->ne[1] = n, q->data = (char *)q->data + a * (int64_t)q->nb[1];
    d->ne[2] = n, d->data = (char *)d->data + a * (int64_t)d->nb[2];
    if (fa->src[3]) {
        m = tensor_pool_get();
        *m = *fa->src[3];
        m->ne[1] = n, m->data = (char *)m->data + a * (int64_t)m->nb[1];
    }
    return node(LLM_OP_FLASH_ATTN, d, q, fa->src[1], fa->src[2], m);
}

/* A copy of rows [a, a + n) of fa in fresh memory, computed on nth threads. */
static struct llm_tensor *fa_rows_computed(const struct llm_tensor *fa, int64_t a, int64_t n, int nth)
{
    struct llm_tensor *r = fa_rows(fa, a, n);
    r->data = alloc_buf((size_t)n * fa->nb[2]); /* fa's dst is contiguous: rows nb[2] apart */
    compute(r, nth, NULL);
    return r;
}

/* The prefill tiles against the row-at-a-time path (the same rows as nodes of one query row, which
 * never tile), to the float-sum tolerance 1e-10 per row and, with a quantized V, bit for bit on the
 * AVX2 tile (a prompt fed a token at a time must give one batch's logits); and each row's bits
 * independent of its tile mates: rows [1, n_q) as a node of their own (every tile shifted by one
 * row) give the same bits as in the whole node, with 1 and 3 threads. */
static void test_flash_attn_tile_rows(void)
{
    static const struct {
        enum llm_type kt, vt;
        int hd, hd_v, heads, heads_kv, n_q, n_kv, n_used;
    } cases[] = {
        { LLM_TYPE_F16, LLM_TYPE_F16, 32, 32, 8, 4, 40, 300, 290 }, /* llama-k256 prompt */
        { LLM_TYPE_F32, LLM_TYPE_F32, 128, 128, 4, 2, 20, 200, 180 },
        { LLM_TYPE_Q8_0, LLM_TYPE_Q4_0, 64, 64, 14, 2, 9, 128, 100 }, /* tiles of 4 rows of 7 heads */
        { LLM_TYPE_BF16, LLM_TYPE_F16, 40, 48, 6, 3, 12, 100, 90 },
        { LLM_TYPE_F16, LLM_TYPE_Q8_0, 32, 32, 8, 4, 40, 256, 250 }, /* llama-k256, f16-q8_0 cache */
        { LLM_TYPE_Q5_1, LLM_TYPE_IQ4_NL, 32, 32, 8, 4, 21, 256, 200 },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t n_q = cases[c].n_q, hd_v = cases[c].hd_v, heads = cases[c].heads;
        struct llm_tensor *q = new_permuted(LLM_TYPE_F32, (int64_t[4]){ cases[c].hd, n_q, heads, 1 }, 1, 2);
        struct llm_tensor *k = new_tensor(cases[c].kt, cases[c].hd, cases[c].n_kv, cases[c].heads_kv, 1);
        struct llm_tensor *v = new_tensor(cases[c].vt, hd_v, cases[c].n_kv, cases[c].heads_kv, 1);
        fill(q, 1.0f);
        fill(k, 1.0f);
        fill(v, 1.0f);
        struct llm_tensor *m = window_mask(cases[c].n_kv, cases[c].n_used, n_q, 0, 1, 0, 0);
        struct llm_tensor *fa = node(LLM_OP_FLASH_ATTN, new_tensor(LLM_TYPE_F32, hd_v, heads, n_q, 1), q, k, v, m);
        llm_set_op_f32(fa, 0, 1.0f / sqrtf((float)cases[c].hd));
        compute(fa, 2, NULL);
        char what[128];
        snprintf(what, sizeof what, "FLASH_ATTN tiles K %s V %s hd %d/%d heads %d/%d n_q %lld",
                 llm_type_name(cases[c].kt), llm_type_name(cases[c].vt), cases[c].hd, cases[c].hd_v, cases[c].heads,
                 cases[c].heads_kv, (long long)n_q);
        double worst = 0.0;
        /* the AVX-512 tile sums its scores in another order than the row path */
        const bool v_converted = cases[c].vt != LLM_TYPE_F16 && cases[c].vt != LLM_TYPE_F32 &&
                                 strcmp(cpu_flash_attn_path(fa), "avx512 tiles");
        for (int64_t i = 0; i < n_q; i++) {
            bool finite;
            struct llm_tensor *row = fa_rows_computed(fa, i, 1, 1);
            double e = nmse(row, fa_rows(fa, i, 1), &finite);
            CHECK(finite && e <= 1e-10, "%s: row %lld vs the row path: NMSE %.3g", what, (long long)i, e);
            /* a converted V is summed cell by cell on both paths, the scores in one order: same bits */
            CHECK(!v_converted || same_bits(row, fa_rows(fa, i, 1)), "%s: row %lld differs from the row path's bits",
                  what, (long long)i);
            worst = e > worst ? e : worst;
        }
        for (int nth = 1; nth <= 3; nth += 2)
            CHECK(same_bits(fa_rows_computed(fa, 1, n_q - 1, nth), fa_rows(fa, 1, n_q - 1)),
                  "%s: rows 1.. alone (nth=%d) differ from the whole node bit for bit", what, nth);
        printf("%s: vs the row path NMSE %.2g\n", what, worst);
    }
}

/* Which path each shape takes on this CPU under its LLM_CPU_ISA cap (tests/test_isa_caps.sh runs
 * this under scalar and avx2 too): head dims of 8 (hd and hd_v) their own path, decode and prefill;
 * prefill tiles wherever AVX2 is, on AVX-512 only for hd a multiple of 16 and hd_v of 64, the AVX2
 * tile otherwise; decode and odd head dims a row at a time. */
static void test_flash_attn_paths(void)
{
    const bool avx2 = llm_cpu_has_avx2(), avx512 = llm_cpu_has_avx512();
    const char *tiles512 = avx512 ? "avx512 tiles" : avx2 ? "avx2 tiles" : "scalar";
    const char *tiles2 = avx2 ? "avx2 tiles" : "scalar", *rows = avx2 ? "avx2 rows" : "scalar";
    const char *hd8 = avx512 ? "avx512 hd8" : avx2 ? "avx2 hd8" : "scalar";
    static const struct {
        int hd, hd_v, heads, heads_kv, n_q, strided;
        int want; /* 0: tiles, AVX-512 when it fits; 1: tiles, AVX2 only; 2: rows; 3: scalar; 4: hd8 */
    } cases[] = {
        { 64, 64, 14, 2, 37, 0, 0 },  /* qwen2-0.5B prompt */
        { 32, 32, 8, 4, 40, 0, 1 },   /* llama-k256 prompt: hd_v 32 is no multiple of 64 */
        { 128, 128, 8, 2, 3, 0, 0 },
        { 40, 16, 6, 2, 7, 0, 1 },
        { 32, 32, 8, 4, 1, 0, 2 },    /* decode */
        { 20, 12, 6, 2, 4, 0, 2 },    /* hd not a multiple of 8 */
        { 64, 64, 40, 1, 2, 0, 2 },   /* a group of 40 heads: too many for a tile */
        { 32, 32, 8, 4, 40, 1, 3 },   /* strided K and V */
        { 8, 8, 8, 4, 1, 0, 4 },      /* stories260K decode */
        { 8, 8, 8, 4, 5, 0, 4 },      /* stories260K prompt */
        { 8, 16, 4, 2, 5, 0, 1 },     /* hd 8, hd_v 16: the AVX2 tile */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int hd = cases[c].hd, hd_v = cases[c].hd_v, kv = cases[c].heads_kv, n_q = cases[c].n_q;
        struct llm_tensor *q = new_permuted(LLM_TYPE_F32, (int64_t[4]){ hd, n_q, cases[c].heads, 1 }, 1, 2);
        struct llm_tensor *k = cases[c].strided ? new_permuted(LLM_TYPE_F16, (int64_t[4]){ hd, 64, kv, 1 }, 0, 1)
                                                : new_tensor(LLM_TYPE_F16, hd, 64, kv, 1);
        struct llm_tensor *v = cases[c].strided ? new_permuted(LLM_TYPE_F16, (int64_t[4]){ hd_v, 64, kv, 1 }, 0, 1)
                                                : new_tensor(LLM_TYPE_F16, hd_v, 64, kv, 1);
        struct llm_tensor *fa =
            node(LLM_OP_FLASH_ATTN, new_tensor(LLM_TYPE_F32, hd_v, cases[c].heads, n_q, 1), q, k, v, NULL);
        const char *want = (const char *[]){ tiles512, tiles2, rows, "scalar", hd8 }[cases[c].want];
        const char *got = cpu_flash_attn_path(fa);
        CHECK(!strcmp(got, want), "FLASH_ATTN hd %d/%d heads %d/%d n_q %d%s: path %s, want %s", hd, hd_v,
              cases[c].heads, kv, n_q, cases[c].strided ? " strided" : "", got, want);
    }
}

/* Nodes the kernels cannot run are reported, not attempted. */
static void test_supports(void)
{
    struct llm_tensor *w = new_tensor(LLM_TYPE_IQ2_XXS, 256, 4, 1, 1), *x = new_tensor(LLM_TYPE_F32, 256, 2, 1, 1);
    CHECK(!llm_cpu_supports(node(LLM_OP_MUL_MAT, new_tensor(LLM_TYPE_F32, 4, 2, 1, 1), w, x, NULL, NULL)),
          "MUL_MAT of a type without kernels must be refused");
    CHECK(!llm_cpu_supports(node(LLM_OP_CHANNEL_NORM, new_tensor(LLM_TYPE_F32, 16, 2, 1, 1), x, NULL, NULL, NULL)),
          "CHANNEL_NORM into another element count is refused");
    struct llm_tensor *a = new_tensor(LLM_TYPE_F32, 6, 4, 1, 1), *b = new_tensor(LLM_TYPE_F32, 4, 4, 1, 1);
    CHECK(!llm_cpu_supports(node(LLM_OP_ADD, new_tensor(LLM_TYPE_F32, 6, 4, 1, 1), a, b, NULL, NULL)),
          "ADD with a src1 that does not broadcast must be refused");
    CHECK(llm_cpu_supports(node(LLM_OP_VIEW, swap_dims(a, 0, 1), a, NULL, NULL, NULL)), "VIEW is a no-op");
}

int main(void)
{
    test_supports();
    test_elementwise();
    test_soft_max();
    test_rope();
    test_get_rows();
    test_set_rows();
    test_set_rows_quant();
    test_split_rule();
    test_cpy();
    test_mul_mat();
    test_mul_mat_work_bound();
    test_mul_mat_streamed();
    test_mul_mat_shares();
    test_flash_attn();
    test_flash_attn_shapes();
    test_flash_attn_quant();
    test_flash_attn_tile_rows();
    test_flash_attn_paths();
    free_bufs();
    return test_done("test_ops");
}
