/* Internal to src/ops: the software prefetch of decode's weight streams, one rule for the file's
 * layout (kernels/matmul.c) and the repacked groups (the packed kernels of isa/). Decode reads each
 * weight once and is limited by how many cache misses one core keeps in flight, so asking for the
 * bytes ahead raises its read rate. The distance holds on every CPU the project runs on: farther
 * than the bytes a core reads in one memory latency (<= 3 KiB), within half the smallest L1d among
 * them (16 KiB of 32), so a line is still in L1 when the kernel gets there. Quantized rows take
 * several instructions per byte and gain from asking further ahead; float ones lose
 * (bench/results/kernel_choices.md, decode.md). */
#ifndef LLM_OPS_PREFETCH_H
#define LLM_OPS_PREFETCH_H

#include <stddef.h>

#define PREFETCH_AHEAD_FLOAT 4096
#define PREFETCH_AHEAD_QUANT 16384
/* A one-row kernel streaming float rows asks for the line this far ahead of each 64 bytes it reads,
 * interleaved with its loads rather than a row's worth at once: about the bytes a core reads in one
 * memory latency, which carries the stream across the 4 KiB pages the hardware prefetcher stops at
 * (the measurement: bench/results/decode.md, kernel_choices.md). */
#define PREFETCH_IN_STREAM 1536

/* Asks for the `bytes` from `from` + `ahead`, a line at a time. */
static inline void prefetch_ahead(const void *from, size_t bytes, size_t ahead)
{
    const char *p = (const char *)from + ahead;
    for (size_t o = 0; o < bytes; o += 64)
        __builtin_prefetch(p + o);
}

#endif
