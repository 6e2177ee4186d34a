#!/usr/bin/env bash
# Pipeline stages over MPI on this one machine (bench/results/mpi.md's measured part): the per-hop
# latency of the transport (bin/llm-mpi-hop), decode latency per token with 1, 2 and 3 ranks
# (llm-bench tg64, rounds in alternating order), prompts in -ub 128 micro-batches with
# each rank's computing and waiting time (llm-run -v: the bubble), and each rank's resident memory.
# Models: stories260K and the Qwen2.5-0.5B Q8_0 shape (made by bench/npu_common.sh). Raw output in
# bench/results/tmp/mpi.txt. Env: BIN (bin), SHARED (../shared), ROUNDS (3).
set -eu
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
ROUNDS=${ROUNDS:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. bench/npu_common.sh
out=bench/results/tmp/mpi.txt
mkdir -p bench/results/tmp
: >"$out"
run() { echo "\$ $*" >>"$out"; "$@" >>"$out" 2>&1; }
np() { local k=$1; shift; if [ "$k" -eq 1 ]; then "$@"; else mpirun --oversubscribe --bind-to none -np "$k" "$@"; fi; }

run mpirun --oversubscribe --bind-to none -np 2 "$BIN/llm-mpi-hop"
for m in "$SHARED/models/stories260K.gguf" "$q8"; do
  for r in $(seq "$ROUNDS"); do
    for k in 1 2 3; do
      echo "# round $r, $k ranks" >>"$out"
      run np "$k" "$BIN/llm-bench" -m "$m" -p 0 -n 64 -r 3 -o jsonl
    done
  done
done
# 432 tokens (4 micro-batches) on 1 and 3 ranks, 2160 tokens (17) on 1 and 2
for spec in "24 1 3" "120 1 2"; do
  set -- $spec
  prompt=$(for i in $(seq "$1"); do printf 'The cat sat on the mat. '; done)
  for k in "$2" "$3"; do
    run np "$k" "$BIN/llm-run" -m "$q8" -p "$prompt" -n 4 --temp 0 -ub 128 -v --no-display-prompt
  done
done
echo "wrote $out" >&2
