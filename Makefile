# llm — build, test, bench. See README.md.
CC      ?= gcc
BUILD   ?= build
BIN     ?= bin
SHARED  ?= ../shared

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -pthread -Isrc $(EXTRA_CFLAGS)
# OpenBLAS is loaded at run time (src/ops/kernels/blas.c), so it is not on the link line.
LDLIBS  = -ldl -largtable2 -lcjson -lm -pthread $(MPI_LIBS)
TEST_LDLIBS := -lcjson

# Pipeline stages over MPI (src/mpi): built on Open MPI when its mpicc is installed, else a stub
# that runs one process (the MPI tests then say they are skipped). `make HAVE_MPI= BUILD=build/nompi
# BIN=build/nompi/bin` forces the stub (in a build tree of its own: the objects are the same).
ifeq ($(origin HAVE_MPI),undefined)
HAVE_MPI := $(shell command -v mpicc >/dev/null 2>&1 && echo 1)
endif
MPI_CFLAGS := $(if $(HAVE_MPI),$(patsubst -I%,-isystem %,$(shell mpicc --showme:compile)))
MPI_LIBS := $(if $(HAVE_MPI),$(shell mpicc --showme:link))
MPI_SRC := $(if $(HAVE_MPI),src/mpi/mpi_link.c src/mpi/startup_watch.c,src/mpi/no_mpi.c)
NO_MPI_LLM = $(BUILD)/no_mpi/llm
SRC     := $(sort $(filter-out src/mpi/%,$(wildcard src/*.c src/*/*.c src/*/*/*.c)) $(MPI_SRC))
TOOLS   := $(sort $(wildcard tools/*.c))
TESTS   := $(sort $(wildcard tests/test_*.c))
TEST_SCRIPTS := $(sort $(wildcard tests/test_*.sh))
OBJ     := $(SRC:%.c=$(BUILD)/%.o)
TOOL_OBJ := $(TOOLS:%.c=$(BUILD)/%.o)
TEST_BIN := $(TESTS:tests/%.c=$(BUILD)/tests/%)
LIB     := $(BUILD)/libllm.a

DEB_PKGS := libopenblas-dev libargtable2-dev libcjson-dev clang unicode-data valgrind python3 libopenmpi-dev openmpi-bin

# The tests and benchmarks read the shared models and llama.cpp references: without them, stop at
# once with one line (never skip the reference tests silently).
ifneq ($(filter test test-unit test-asan fuzz bench mutants,$(MAKECMDGOALS)),)
ifneq ($(words $(wildcard $(SHARED)/models/stories260K.gguf $(SHARED)/ref/gen)),2)
$(error $(SHARED) has no shared fixtures (models/, ref/): put them beside the checkout as ../shared or run make $(MAKECMDGOALS) SHARED=/path/to/shared)
endif
endif

.PHONY: all deps run test test-unit test-asan fuzz bench clean mutants
all: $(BIN)/llm $(BIN)/llm-run $(BIN)/llm-bench $(BIN)/llm-roofline $(BIN)/llm-repack-ab $(BIN)/llm-attn-ab $(BIN)/llm-gemm-ab $(if $(HAVE_MPI),$(BIN)/llm-mpi-hop $(NO_MPI_LLM))

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/src/mpi/mpi_link.o: ALL_CFLAGS += $(MPI_CFLAGS)

$(LIB): $(OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN)/llm: $(TOOL_OBJ) $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(ALL_CFLAGS) $(TOOL_OBJ) $(LIB) $(LDLIBS) -o $@

$(BIN)/llm-run $(BIN)/llm-bench: $(BIN)/llm
	ln -sf llm $@

# With MPI, the build without it is checked too (tests/test_mpi.sh runs it): the same objects with
# the stub linked instead of Open MPI, one more compile and link.
$(NO_MPI_LLM): $(TOOL_OBJ) $(filter-out $(BUILD)/src/mpi/mpi_link.o $(BUILD)/src/mpi/startup_watch.o,$(OBJ)) $(BUILD)/src/mpi/no_mpi.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $^ -ldl -largtable2 -lcjson -lm -pthread -o $@

# bench/roofline.c: the machine's bandwidth and FMA peak alone (the measurement is tools/roofline.c).
$(BIN)/llm-roofline: bench/roofline.c $(BUILD)/tools/roofline.o $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(ALL_CFLAGS) -Itools $^ -lm -pthread -o $@

# bench/repack_ab.c: decode's matrix-vector products on the file's layout against the repacked one.
$(BIN)/llm-repack-ab: bench/repack_ab.c $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(ALL_CFLAGS) $^ $(LDLIBS) -o $@

# bench/attn_tile_ab.c: FLASH_ATTN's prefill tiles against the row-at-a-time path, in one process.
$(BIN)/llm-attn-ab: bench/attn_tile_ab.c $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(ALL_CFLAGS) $^ $(LDLIBS) -o $@

# bench/gemm_ab.c: prefill's integer GEMM (Q4_0 / Q5_0 / Q8_0) against its repacked twin, the float GEMM,
# the dot path and dequantize + sgemm, alternated in one process.
$(BIN)/llm-gemm-ab: bench/gemm_ab.c $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(ALL_CFLAGS) $^ $(LDLIBS) -o $@

# bench/mpi_hop.c: the transport's per-hop latency, under mpirun -np 2 (bench/results/mpi.md).
$(BIN)/llm-mpi-hop: bench/mpi_hop.c $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(ALL_CFLAGS) $^ $(LDLIBS) -o $@

# llm-bench's "build: <commit> (<number>)"; rebuilt when HEAD moves; "unknown (0)" outside git.
GIT_LOG := $(wildcard $(shell git rev-parse --git-dir 2>/dev/null)/logs/HEAD)
$(BUILD)/tools/bench.o: ALL_CFLAGS += -DLLM_BUILD_COMMIT='"$(or $(shell git rev-parse --short HEAD 2>/dev/null),unknown)"' \
	-DLLM_BUILD_NUMBER=$(or $(shell git rev-list --count HEAD 2>/dev/null),0)
$(BUILD)/tools/bench.o: $(GIT_LOG)

# Tests are one program per file; tests/harness.h gives CHECK macros and the closing count line.
# Tool sources other than the entry point are linked into tests so commands can be tested in-process.
TOOL_LIB := $(BUILD)/libtools.a
$(TOOL_LIB): $(filter-out $(BUILD)/tools/llm.o,$(TOOL_OBJ))
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/tests/%: tests/%.c tests/harness.h $(TOOL_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests $< $(TOOL_LIB) $(LIB) $(LDLIBS) $(TEST_LDLIBS) -o $@

deps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

run: deps all
	@bash tools/run-default.sh $(BIN)

# tests/run.sh gives each program TEST_TIMEOUT seconds (a hang fails instead of stalling) and counts
# a program that runs no check as a failure; results.txt gets "passed failed skipped".
TEST_TIMEOUT ?= 600
test-unit: all $(TEST_BIN)
	@mkdir -p $(BUILD)
	@rm -rf $(BUILD)/repack-cache
	@SHARED=$(SHARED) LLM=$(BIN)/llm LLM_HAVE_MPI=$(HAVE_MPI) TEST_BUILD=$(BUILD) SUITE=$(SUITE) RESULTS=$(BUILD)/results.txt TEST_TIMEOUT=$(TEST_TIMEOUT) \
	  LLM_REPACK_CACHE=$(abspath $(BUILD))/repack-cache bash tests/run.sh $(TEST_BIN) $(TEST_SCRIPTS)

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build tree.
SUITE ?= unit
test-asan:
	@$(MAKE) --no-print-directory BUILD=build/asan BIN=build/asan/bin SUITE=asan \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test-unit

# libFuzzer on the GGUF parser, vocabulary loading and model loading, FUZZ_TIME seconds in all (30).
fuzz: all
	@SHARED=$(SHARED) RESULTS=build/fuzz/results.txt LLM_REPACK_CACHE=off bash tests/fuzz.sh

# Unit + end-to-end tests, the same under ASan+UBSan, the fuzzer; then one closing count line
# ("N passed, N failed", then ", N skipped" when checks were skipped: a third column of results.txt).
test: test-unit test-asan fuzz
	@cat build/results.txt build/asan/results.txt build/fuzz/results.txt | \
	  awk '{p += $$1; f += $$2; s += $$3} END {printf "%d passed, %d failed", p, f; \
	    if (s > 0) printf ", %d skipped", s; printf "\n"; exit f > 0}'

# llm-bench on synthetic Qwen2.5-0.5B / TinyLlama-1.1B shapes (cached in models/) and stories260K:
# bench/results/latest.md. LLAMA_BENCH=/path/to/llama-bench (built on this machine by
# ../shared/tools/llama-anchor.sh SNAPSHOT) runs llama.cpp's llama-bench on the same files, model by
# model in two rounds of alternating order, for the side-by-side ratios (each program's better round
# per test); without it, ours and the roofline only. ~20 min with it,
# about half without, on 2 cores. BENCH_QUICK=1: a smoke test of bench/run.sh in seconds and nothing
# else (run.sh has the other knobs). BENCH_LONG=1 adds the Qwen2.5-1.5B / 3B and Llama-2-7B Q4_0 shapes
# to the 2-thread suite (decode's bytes per second against model size; ~6 GiB more of models/, and
# an hour more with LLAMA_BENCH); make test never runs them. Then the NPU graph-mode A/B (installs gnuplot-nox if missing):
# graph_ab.md, crossover.png; operator fusion off and on, eager and graph, at 0 and 20 µs per launch,
# with the layout pass's report: fusion_ab.md; and one decode token of the 0.5B shape, eager against graph, as a
# timeline: timeline.md, timeline.png; the 0.5B Q8_0 and Q4_K_M shapes at -ngl 0..99 on the npu:
# ngl.md, ngl.png; pp512 with op offload off and on at -ngl 0 and 12: op_offload.md; tg128 on stories260K with and without --token-times: token_times_ab.md; a
# 2048-token decode of the 0.5B Q8_0 shape with per-token times: depth.md, depth.png. Last,
# tg128 on stories260K with --profile, --trace and neither
# against the build before them (built once into build/profile_ab/): profile_ab.md. Last, the
# quantized KV cache (f16, q8_0, q4_0 at -d 4096 and 16384, beside llama-bench): kvq.md.
LLAMA_BENCH ?=
BENCH_QUICK ?=
BENCH_LONG ?=
bench: all
	@SHARED=$(SHARED) BIN=$(BIN) LLAMA_BENCH=$(LLAMA_BENCH) BENCH_QUICK=$(BENCH_QUICK) BENCH_LONG=$(BENCH_LONG) bash bench/run.sh
	@[ "$(BENCH_QUICK)" = 1 ] || SHARED=$(SHARED) BIN=$(BIN) bash bench/graph_ab.sh
	@[ "$(BENCH_QUICK)" = 1 ] || SHARED=$(SHARED) BIN=$(BIN) bash bench/fusion_ab.sh
	@[ "$(BENCH_QUICK)" = 1 ] || SHARED=$(SHARED) BIN=$(BIN) bash bench/timeline.sh
	@[ "$(BENCH_QUICK)" = 1 ] || SHARED=$(SHARED) BIN=$(BIN) bash bench/ngl_sweep.sh
	@[ "$(BENCH_QUICK)" = 1 ] || SHARED=$(SHARED) BIN=$(BIN) bash bench/op_offload_ab.sh
	@[ "$(BENCH_QUICK)" = 1 ] || SHARED=$(SHARED) BIN=$(BIN) bash bench/token_times_ab.sh
	@[ "$(BENCH_QUICK)" = 1 ] || SHARED=$(SHARED) BIN=$(BIN) LLAMA_BENCH=$(LLAMA_BENCH) bash bench/depth.sh
	@[ "$(BENCH_QUICK)" = 1 ] || BIN=$(BIN) bash bench/profile_ab.sh
	@[ "$(BENCH_QUICK)" = 1 ] || SHARED=$(SHARED) BIN=$(BIN) LLAMA_BENCH=$(LLAMA_BENCH) bash bench/kvq.sh

# Planted bugs (tests/mutants.txt), one at a time in a scratch copy of the working tree
# ($(BUILD)/mutants/): fails if any survives or no longer applies. MUTANTS="rope sampler" runs the
# mutants whose names contain those words. About 3 min on 2 cores.
mutants:
	@SHARED=$(SHARED) python3 tests/mutants.py --scratch $(BUILD)/mutants $(MUTANTS)

clean:
	rm -rf build $(BIN)

-include $(OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(wildcard $(BUILD)/src/mpi/*.d)
