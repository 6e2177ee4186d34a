/* MUL_MAT_SWIGLU: silu(src0 · src1) * (src2 · src1), an FFN's gate and up products and their SWIGLU
 * in one node. Unfused, a prefill holds both [n_ff, n] products at once (55 MB on the 1.5B shape at
 * 512 tokens). Here each thread takes chunks of rows as the GEMM deals them (matmul.c's rows mode):
 * the gate rows straight into the result, the up rows into a tile of its own, then multiplies the
 * tile in. Both products share one preparation of src1 and no barrier follows it.
 *
 * Each product's floats are MUL_MAT's (rows mode) and cpu_swiglu_part gives each element SWIGLU's
 * float, so the result is that of the three unfused nodes, bit for bit (tests/test_mul_mat_swiglu.c
 * checks every path). */
#include "kernels.h"

/* A thread's tile of up rows: at most this, or the fewest rows a chunk has (48 per batch row). At
 * 512 tokens that is chunks of about 1000 rows, near the GEMM's own (a quarter of a thread's
 * share): a quarter of that was slower, and peak RSS moved by 3 MiB at most
 * (bench/results/kernel_choices.md). */
#define TILE_BYTES (2u << 20)

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* The node's products as MUL_MAT nodes on its memory: the gate's (whose plan both run) and the up's. */
static void products_of(const struct llm_tensor *dst, struct llm_tensor *gate, struct llm_tensor *up)
{
    *gate = as_op(dst, LLM_OP_MUL_MAT, dst->src[0], dst->src[1]);
    *up = as_op(dst, LLM_OP_MUL_MAT, dst->src[2], dst->src[1]);
}

/* [the products' scratch][a tile per thread] */
static size_t tile_size(const struct llm_tensor *gate, int nth)
{
    return align64((size_t)cpu_mul_mat_rows_most(gate, nth, TILE_BYTES) * (size_t)gate->ne[1] * sizeof(float));
}

size_t cpu_mul_mat_swiglu_work_size(const struct llm_tensor *dst, int nth)
{
    const struct llm_tensor gate = as_op(dst, LLM_OP_MUL_MAT, dst->src[0], dst->src[1]); /* up's is the same */
    return 64 + align64(cpu_mul_mat_rows_work_size(&gate, nth)) + (size_t)nth * tile_size(&gate, nth);
}

bool cpu_mul_mat_swiglu_supported(const struct llm_tensor *n)
{
    struct llm_tensor gate, up;
    products_of(n, &gate, &up);
    return n->src[0]->type == n->src[2]->type && n->src[0]->flags == n->src[2]->flags &&
           n->nb[0] == sizeof(float) && cpu_mul_mat_supports(&gate) && cpu_mul_mat_supports(&up);
}

void cpu_mul_mat_swiglu(const struct llm_cpu_params *p, struct llm_tensor *dst)
{
    struct llm_tensor gate, up;
    products_of(dst, &gate, &up);
    struct llm_cpu_plan plan;
    cpu_mul_mat_plan(&gate, &plan);
    char *work = (char *)(((uintptr_t)p->wdata + 63) & ~(uintptr_t)63);
    float *tile = (float *)(work + align64(cpu_mul_mat_rows_work_size(&gate, p->nth)) +
                            (size_t)p->ith * tile_size(&gate, p->nth));
    struct llm_mm_cursor c;
    cpu_mul_mat_rows_begin(p, &plan, &gate, work, TILE_BYTES, &c);
    pool_barrier(p);
    for (int64_t m0, m1; cpu_mul_mat_rows_next(p, &plan, &gate, work, &c, &m0, &m1);) {
        const int64_t len = m1 - m0;
        cpu_mul_mat_rows_run(p, &plan, &gate, work, m0, m1, tensor_at(dst, m0, 0, 0, 0), dst->nb[1]);
        cpu_mul_mat_rows_run(p, &plan, &up, work, m0, m1, tile, (size_t)len * sizeof(float));
        for (int64_t n = 0; n < dst->ne[1]; n++) {
            float *z = tensor_at(dst, m0, n, 0, 0);
            cpu_swiglu_part(dst->ne[0], m0, len, z, z, tile + n * len);
        }
    }
}
