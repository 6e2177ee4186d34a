/* Internal to src/ops: what the float GEMM kernels of F16 / BF16 weights (llm_fgemm, gemm.h) share,
 * written once over the vector operations of the file that includes it (gemm_f16_avx2.c,
 * gemm_f16_avx512.c), which defines first:
 *   FT_TARGET                the target attribute of the functions
 *   FT_LANES, FT_RV, FT_NR   floats per vector; the register tile, FT_RV panels by FT_NR activation rows
 *   FT_VEC, FT_MASK          a vector of floats, a set of its lanes (FT_MASK_OF(n): the first n)
 *   FT_ZERO(), FT_LOAD(p) (aligned), FT_SET1(x), FT_FMA(a, b, c) = a * b + c in one rounding
 *   FT_MASKLOAD(m, p), FT_MASKSTORE(p, m, v): lanes outside m neither read nor written
 *   FT_LOADU(p), FT_STOREU(p, v): every lane, unaligned (a full tile's output)
 *   FT_UNPACKLO(a, b), FT_UNPACKHI(a, b), FT_SHUFFLE(a, b, imm): unpcklps, unpckhps, shufps
 *   FT_KERNEL                the name of its lookup of kernels by type (quants.h)
 * and, after including it, load_row() and transpose_store() (declared below).
 * No include guard: each kernel file includes it once. */
#include "gemm.h"
#include "ops/types/types.h"

/* The first steps of transposing FT_LANES rows r of FT_LANES floats: s[4h + j] holds, in each
 * 128-bit lane L, rows 4h .. 4h + 3 at element 4L + j. */
static inline FT_TARGET void transpose_quads(const FT_VEC *r, FT_VEC *s)
{
    for (int h = 0; h < FT_LANES / 4; h++) {
        FT_VEC t0 = FT_UNPACKLO(r[4 * h], r[4 * h + 1]), t1 = FT_UNPACKHI(r[4 * h], r[4 * h + 1]);
        FT_VEC t2 = FT_UNPACKLO(r[4 * h + 2], r[4 * h + 3]), t3 = FT_UNPACKHI(r[4 * h + 2], r[4 * h + 3]);
        s[4 * h] = FT_SHUFFLE(t0, t2, 0x44);
        s[4 * h + 1] = FT_SHUFFLE(t0, t2, 0xee);
        s[4 * h + 2] = FT_SHUFFLE(t1, t3, 0x44);
        s[4 * h + 3] = FT_SHUFFLE(t1, t3, 0xee);
    }
}

/* Defined by the kernel file after this one: FT_LANES elements of a row from p as floats (zeros
 * past live elements, which are not read), and the last steps of the transpose. */
static inline __attribute__((always_inline)) FT_TARGET FT_VEC load_row(enum llm_type t, const char *p, int live);
static inline FT_TARGET void transpose_store(const FT_VEC *r, float *out, int live);

/* out[c * FT_LANES + i] = element k + c of row[i] as a float, for c < live. */
static inline __attribute__((always_inline)) FT_TARGET void pack_block(enum llm_type t, const char *const *row,
                                                                      int64_t k, int live, float *out)
{
    FT_VEC v[FT_LANES];
    #pragma GCC unroll 16
    for (int r = 0; r < FT_LANES; r++)
        v[r] = load_row(t, row[r] + k * 2, live);
    transpose_store(v, out, live);
}

static inline __attribute__((always_inline)) FT_TARGET void pack_type(enum llm_type t, int64_t k0, int64_t kc,
                                                                     int64_t rows, const char *w, size_t wstride,
                                                                     float *out)
{
    for (int64_t p = 0; p < (rows + FT_LANES - 1) / FT_LANES; p++) {
        const char *row[FT_LANES];
        for (int r = 0; r < FT_LANES; r++)
            row[r] = w + (size_t)(p * FT_LANES + r < rows ? p * FT_LANES + r : rows - 1) * wstride + (size_t)k0 * 2;
        for (int64_t k = 0; k < kc; k += FT_LANES)
            pack_block(t, row, k, kc - k < FT_LANES ? (int)(kc - k) : FT_LANES,
                       out + (size_t)((p * kc + k) * FT_LANES));
    }
}

/* Quantized weights: each row's kc elements dequantized (to_float_fast) into a row-major buffer,
 * then transposed into the panel as F16 rows are. k0 and kc are multiples of the block size. */
static FT_TARGET void pack_dequant(enum llm_type t, int64_t k0, int64_t kc, int64_t rows, const char *w,
                                   size_t wstride, float *out)
{
    const struct llm_type_info *ti = llm_type_info(t);
    const llm_to_float_fn to_float = llm_type_traits(t)->to_float_fast;
    const size_t offset = (size_t)(k0 / ti->blck_size) * ti->type_size;
    _Alignas(64) float buf[FT_LANES][FGEMM_KC];
    for (int64_t p = 0; p < (rows + FT_LANES - 1) / FT_LANES; p++) {
        for (int r = 0; r < FT_LANES; r++) {
            const int64_t row = p * FT_LANES + r < rows ? p * FT_LANES + r : rows - 1;
            to_float(w + (size_t)row * wstride + offset, buf[r], kc);
        }
        for (int64_t k = 0; k < kc; k += FT_LANES) {
            const int live = kc - k < FT_LANES ? (int)(kc - k) : FT_LANES;
            FT_VEC v[FT_LANES];
            for (int r = 0; r < FT_LANES; r++)
                v[r] = FT_MASKLOAD(FT_MASK_OF(live), buf[r] + k);
            transpose_store(v, out + (size_t)((p * kc + k) * FT_LANES), live);
        }
    }
}

static FT_TARGET void pack(enum llm_type t, int64_t k0, int64_t kc, int64_t rows, const char *w, size_t wstride,
                           float *out)
{
    if (t == LLM_TYPE_F16)
        pack_type(LLM_TYPE_F16, k0, kc, rows, w, wstride, out);
    else if (t == LLM_TYPE_BF16)
        pack_type(LLM_TYPE_BF16, k0, kc, rows, w, wstride, out);
    else
        pack_dequant(t, k0, kc, rows, w, wstride, out);
}

/* The fgemm_tile_fn contract for rv (<= FT_RV) panels, rv a constant once inlined. A full tile
 * (every lane of its rv panels live) reads and writes its output with plain moves: AVX2's masked
 * moves are slow on AMD, and without them pp512 of an F16 model ran 14 % faster on a Zen 3
 * (bench/results/gemm_f16.md). */
static inline __attribute__((always_inline)) FT_TARGET void tile_rv(int rv, int64_t kc, const float *panels,
                                                                   const float *const *x, float *dst, size_t ldd,
                                                                   int nn, int live, bool first)
{
    const bool full = live == rv * FT_LANES;
    FT_VEC acc[FT_RV][FT_NR];
    FT_MASK m[FT_RV];
    const float *xr[FT_NR];
    #pragma GCC unroll 8
    for (int i = 0; i < rv; i++)
        m[i] = FT_MASK_OF(live - i * FT_LANES);
    #pragma GCC unroll 8
    for (int j = 0; j < FT_NR; j++) {
        xr[j] = x[j];
        #pragma GCC unroll 8
        for (int i = 0; i < rv; i++)
            acc[i][j] = first || j >= nn ? FT_ZERO()
                        : full       ? FT_LOADU(dst + (size_t)j * ldd + i * FT_LANES)
                                     : FT_MASKLOAD(m[i], dst + (size_t)j * ldd + i * FT_LANES);
    }
    for (int64_t k = 0; k < kc; k++) {
        FT_VEC wv[FT_RV];
        #pragma GCC unroll 8
        for (int i = 0; i < rv; i++)
            wv[i] = FT_LOAD(panels + (size_t)((i * kc + k) * FT_LANES));
        #pragma GCC unroll 8
        for (int j = 0; j < FT_NR; j++) {
            FT_VEC b = FT_SET1(xr[j][k]);
            #pragma GCC unroll 8
            for (int i = 0; i < rv; i++)
                acc[i][j] = FT_FMA(wv[i], b, acc[i][j]);
        }
    }
    #pragma GCC unroll 8
    for (int j = 0; j < FT_NR; j++)
        #pragma GCC unroll 8
        for (int i = 0; i < rv; i++)
            if (j < nn && full)
                FT_STOREU(dst + (size_t)j * ldd + i * FT_LANES, acc[i][j]);
            else if (j < nn)
                FT_MASKSTORE(dst + (size_t)j * ldd + i * FT_LANES, m[i], acc[i][j]);
}

static FT_TARGET void tile(int64_t kc, int nv, const float *panels, const float *const *x, float *dst, size_t ldd,
                           int nn, int live, bool first)
{
    if (nv == 3)
        tile_rv(3, kc, panels, x, dst, ldd, nn, live, first);
    else if (nv == 2)
        tile_rv(2, kc, panels, x, dst, ldd, nn, live, first);
    else
        tile_rv(1, kc, panels, x, dst, ldd, nn, live, first);
}

_Static_assert(FT_RV == 3 && FT_NR <= FGEMM_MAX_NR, "tile() instantiates 1 to 3 panels");

static const struct fgemm_kernel kernel = { .lanes = FT_LANES, .rv = FT_RV, .nr = FT_NR, .pack = pack, .tile = tile };

/* One llm_gemm_fn per weight type (the contract has no type argument). */
#define FT_GEMM_OF(T)                                                                                   \
    static void gemm_##T(int64_t k, int64_t M, int64_t N, const void *w, size_t wstride, const void *x, \
                         size_t xstride, float *dst, size_t ldd, void *scratch)                          \
    {                                                                                                   \
        llm_fgemm(&kernel, LLM_TYPE_##T, k, M, N, w, wstride, x, xstride, dst, ldd, scratch);            \
    }
#define FT_CASE(T)                                                                                      \
    case LLM_TYPE_##T:                                                                                  \
        return gemm_##T;
/* F16 and BF16 converted in registers, the others dequantized per row (pack_dequant); not Q8_0
 * or Q4_0, whose integer GEMM is faster (Q5_0 keeps this one where matmul.c's gemm_batch does not
 * take its AVX2 integer GEMM). */
#define FT_TYPES(X) X(F16) X(BF16) X(Q4_1) X(Q5_0) X(Q5_1) X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K)
FT_TYPES(FT_GEMM_OF)

llm_gemm_fn FT_KERNEL(enum llm_type t)
{
    switch (t) {
    FT_TYPES(FT_CASE)
    default:
        return NULL;
    }
}
