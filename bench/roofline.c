/* llm-roofline: this machine's limits, measured now: memory read bandwidth (2 threads over
 * 512 MiB, and 1 thread) and FP32 FMA peak (1 thread and every core). llm-bench --roofline measures
 * the same in its own run; this tool shows the figures alone, e.g. to watch a noisy machine. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "roofline.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: llm-roofline [-h]\n\n"
                 "Measure this machine's memory read bandwidth (every core and 1 thread, 512 MiB) and FP32\n"
                 "FMA peak (1 thread and every core), as llm-bench --roofline does; takes a few seconds.\n\n"
                 "options:\n  -h, --help   print this help\n");
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "llm: error: llm-roofline takes no arguments, got '%s' (try 'llm-roofline -h')\n",
                argc == 2 || strcmp(argv[1], "-h") ? argv[1] : argv[2]);
        return 1;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cores > 0 ? (int)cores : 1;
    struct roofline all, one;
    if (roofline_measure(&all, n, (size_t)512 << 20, n) != 0 || roofline_measure(&one, 1, (size_t)512 << 20, 1) != 0) {
        fprintf(stderr, "llm: error: cannot allocate 512 MiB or start %d threads for the measurement\n", n);
        return 1;
    }
    printf("read bandwidth: %.2f GB/s (%d threads), %.2f GB/s (1 thread), 512 MiB\n", all.read_gbs, n,
           one.read_gbs);
    printf("FP32 FMA peak: %.2f GFLOP/s (1 thread), %.2f GFLOP/s (%d threads), %s kernels\n",
           all.fma_gflops_1, all.fma_gflops_n, n, all.kernel);
    return 0;
}
