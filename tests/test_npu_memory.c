/* Issue 28: the emulated npu has a memory size (and -fitt fits -ngl into it), LLM_NPU_MEMORY_MIB (an Ascend 910B's 65536 MiB by
 * default): aclrtGetMemInfo reports it, an aclrtMalloc beyond what is free fails with CANN's
 * ACL_ERROR_RT_MEMORY_ALLOCATION, and a context whose placement (KV cache, compute buffer) does not
 * fit fails with one line naming the bytes needed and available. This program sets the size before the runtime reads it. */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "model/context.h"
#include "model/model.h"
#include "npu/acl.h"

int main(void)
{
    setenv("LLM_NPU_MEMORY_MIB", "2", 1);
    CHECK(aclInit(NULL) == ACL_SUCCESS);
    size_t free_bytes = 0, total = 0;
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total) == ACL_SUCCESS && total == 2u << 20 && free_bytes == total,
          "%zu free of %zu", free_bytes, total);
    void *a = NULL, *b = NULL;
    CHECK(aclrtMalloc(&a, 1u << 20, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total) == ACL_SUCCESS && free_bytes == 1u << 20, "%zu free",
          free_bytes);
    CHECK(aclrtMalloc(&b, (1u << 20) + 1, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_ERROR_RT_MEMORY_ALLOCATION && !b);
    CHECK(strstr(aclGetRecentErrMsg(), "1048577 bytes needed, 1048576 of 2097152 available"), "%s",
          aclGetRecentErrMsg());
    CHECK(aclrtMalloc(&b, 1u << 20, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS, "exactly what is free fits");
    CHECK(aclrtFree(a) == ACL_SUCCESS && aclrtFree(b) == ACL_SUCCESS);
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total) == ACL_SUCCESS && free_bytes == total);

    /* stories260K's 1.1 MiB of weights fit in 2 MiB, its KV cache and compute buffers do not */
    struct llm_error err = { 0 };
    struct llm_model *m = NULL;
    CHECK(llm_model_load(test_path("models/stories260K.gguf"), &m, &err) == 0, "%s", err.msg);
    if (m) {
        struct llm_context_params cp = llm_context_default_params();
        cp.device = LLM_DEVICE_NPU;
        cp.n_ctx = 4096;
        struct llm_context *c = NULL;
        CHECK(llm_context_new(m, &cp, &c, &err) != 0 && !c, "a context that does not fit was made");
        CHECK(strstr(err.msg, "in npu memory: ") && strstr(err.msg, " bytes available") && !strchr(err.msg, '\n'),
              "%s", err.msg);
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total) == ACL_SUCCESS && free_bytes == total,
              "the failed context left %zu bytes allocated", total - free_bytes);
        /* weights and a 256-cell cache fit, a 512-token compute buffer does not: its line has both sizes */
        cp.n_ctx = 256;
        CHECK(llm_context_new(m, &cp, &c, &err) != 0 && !c, "a compute buffer that does not fit was placed");
        size_t need = 0, avail = 0, of = 0;
        CHECK(sscanf(err.msg, "cannot place %zu bytes of compute buffer in npu memory: %zu of %zu bytes available",
                     &need, &avail, &of) == 3 && need > avail && of == 2u << 20 && !strchr(err.msg, '\n'),
              "%s", err.msg);
        /* -fitt: the largest -ngl that leaves the margin free (0: off, -ngl as asked); all of the
         * memory as margin: none */
        cp.n_ctx = 256;
        cp.n_ubatch = 8; /* small compute buffers: -fitt counts weights and caches only */
        int32_t fitted[3] = { -2, -2, -2 };
        for (int mib = 0; mib <= 2; mib++) {
            cp.fit_target_mib = mib;
            CHECK(llm_context_new(m, &cp, &c, &err) == 0, "-fitt %d: %s", mib, err.msg);
            fitted[mib] = c ? llm_context_n_gpu_layers(c) : -2;
            llm_context_free(c);
            c = NULL;
        }
        CHECK(fitted[0] == -1 && fitted[1] > 0 && fitted[1] < (int32_t)m->hp.n_layer + 1 && fitted[2] == 0,
              "-fitt 0, 1, 2 MiB of 2: -ngl %d, %d, %d", fitted[0], fitted[1], fitted[2]);
        /* -fitt counts the compute buffers too: with 512-token micro-batches the -ngl that weights and
         * caches allow cannot place its compute buffer, so fewer layers go to the npu, leaving the margin */
        for (int ub = 16; ub <= 512; ub *= 2) {
            for (int nopo = 0; nopo < 2; nopo++) {
                cp.n_ubatch = ub;
                cp.fit_target_mib = 1;
                cp.no_op_offload = nopo;
                CHECK(llm_context_new(m, &cp, &c, &err) == 0, "-fitt 1 -ub %d -nopo %d: %s", ub, nopo, err.msg);
                CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total) == ACL_SUCCESS && free_bytes >= 1u << 20,
                      "-fitt 1 -ub %d -nopo %d: %zu bytes free", ub, nopo, free_bytes);
                CHECK(c && llm_context_n_gpu_layers(c) <= fitted[1] && (ub < 512 || llm_context_n_gpu_layers(c) < fitted[1]),
                      "-fitt 1 -ub %d -nopo %d: -ngl %d", ub, nopo, c ? llm_context_n_gpu_layers(c) : -2);
                llm_context_free(c);
                c = NULL;
            }
        }
        cp.n_ubatch = 8;
        cp.no_op_offload = false;
        cp.fit_target_mib = 0;
        cp.device = LLM_DEVICE_CPU; /* host memory has no such size */
        CHECK(llm_context_new(m, &cp, &c, &err) == 0, "%s", err.msg);
        llm_context_free(c);
        llm_model_free(m);
    }
    aclFinalize();
    return test_done("test_npu_memory");
}
