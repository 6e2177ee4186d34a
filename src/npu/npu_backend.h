/* The npu backend: an emulated Ascend NPU behind struct llm_backend. Weights, KV cache, inputs and
 * compute buffers live in device memory (aclrtMalloc); each op is an aclnn-style two-phase launch
 * on a device stream; with graph mode on, decode graphs are captured once and replayed from an LRU
 * cache (src/graphcache). */
#ifndef LLM_NPU_BACKEND_H
#define LLM_NPU_BACKEND_H

#include "../backend.h"

/* p->n_threads device worker threads; graph mode and launch cost from p (or the environment). NULL
 * with err filled on failure. */
struct llm_backend *llm_backend_npu_new(const struct llm_backend_params *p, struct llm_error *err);

#endif
