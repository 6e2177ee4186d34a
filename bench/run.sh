#!/usr/bin/env bash
# make bench [LLAMA_BENCH=/path/to/llama-bench]: our llm-bench and llama.cpp's llama-bench side by side
# on the same GGUF files, one model at a time, in BENCH_ROUNDS rounds (default 2) whose order
# alternates (ours then theirs, then theirs then ours), so a machine that slows down or speeds up
# during the run hits both alike; the report takes each program's better round per test (the VMs we
# run on have minutes at half speed, which one round per program hands to whichever ran then).
# Writes bench/results/latest.md with t/s ± sd of each, the ratio, and ours as a fraction of the
# roofline (llm-bench --roofline). Without LLAMA_BENCH: ours and the roofline only.
#
# Suites (a full run of 2 rounds takes ~20 min on 2 cores, -d 4096 about half of it):
#   2 threads, -p 512 -n 128 -r 3, every model of BENCH_MODELS (default: all of `specs` but tiny-q4_0),
#     then per model and program the peak RSS (-p 512 -n 1) and the start-up time (-p 0 -n 1, best of 3);
#   long context, -d 4096, 2 threads, on BENCH_DEPTH (default: the 0.5B Q8_0);
#   1 thread on BENCH_1T (default: the 0.5B Q8_0 and Q4_0 mix, stories260K);
#   chat-sized prompts, -p 16,64 -n 0, 2 threads, on BENCH_CHAT (default: the 0.5B Q8_0 and Q4_K_M);
#   BENCH_DEPTH, BENCH_1T and BENCH_CHAT models run only when they are in BENCH_MODELS too; set
#   empty (BENCH_DEPTH=), a suite runs on no model.
# BENCH_LONG=1 adds the larger shapes (Qwen2.5-1.5B and 3B, Llama-2-7B, Q4_0 mix: 0.9-3.6 GiB, past
# any L3 cache) to the 2-thread suite, for decode's cost per byte against model size (the report's
# last table); the 7B file alone takes ~4 GiB of models/ and minutes to generate.
# BENCH_QUICK=1: a smoke test of the whole script in seconds (tiny-q4_0 and stories260K, -p 64 -n 16
# -d 256 -r 1), written to bench/results/tmp/quick.md instead.
set -euo pipefail
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
LLAMA_BENCH=${LLAMA_BENCH:-}
MODELS=models
OUT=bench/results
TMP=$OUT/tmp
mkdir -p "$MODELS" "$TMP"

if [ -n "$LLAMA_BENCH" ] && [ ! -x "$LLAMA_BENCH" ]; then
  echo "make bench: LLAMA_BENCH=$LLAMA_BENCH is not an executable (see ../shared/tools/llama-anchor.sh)" >&2
  exit 1
fi

# name | `llm synth` arguments, or "file PATH" | label (as in ../shared/ref/perf.md)
specs=(
  "qwen2-0.5b-f16|--arch qwen2 --preset qwen2-0.5b --type F16|qwen2 0.5B F16"
  "qwen2-0.5b-q8_0|--arch qwen2 --preset qwen2-0.5b --type Q8_0|qwen2 0.5B Q8_0"
  "qwen2-0.5b-q4_0|--arch qwen2 --preset qwen2-0.5b --type Q4_0|qwen2 0.5B Q4_0 (mix)"
  "qwen2-0.5b-q4_0-pure|--arch qwen2 --preset qwen2-0.5b --type Q4_0 --pure|qwen2 0.5B Q4_0 (pure)"
  "qwen2-0.5b-q4_k_m|--arch qwen2 --preset qwen2-0.5b --type Q4_K_M|qwen2 0.5B Q4_K_M"
  "tinyllama-1.1b-q4_0|--arch llama --preset tinyllama-1.1b --type Q4_0|llama 1.1B Q4_0 (mix)"
  "tinyllama-1.1b-q8_0|--arch llama --preset tinyllama-1.1b --type Q8_0|llama 1.1B Q8_0"
  "stories260K|file $SHARED/models/stories260K.gguf|stories260K F32"
  "tiny-q4_0|--preset tiny --type Q4_0|tiny d256 L2 Q4_0 (mix)"
  "qwen2-1.5b-q4_0|--arch qwen2 --preset qwen2-1.5b --type Q4_0|qwen2 1.5B Q4_0 (mix)"
  "qwen2-3b-q4_0|--arch qwen2 --preset qwen2-3b --type Q4_0|qwen2 3B Q4_0 (mix)"
  "llama2-7b-q4_0|--arch llama --preset llama2-7b --type Q4_0|llama 7B Q4_0 (mix)"
)
# the larger shapes BENCH_LONG=1 adds (BENCH_QUICK: a tiny stand-in, the script's path only)
large="qwen2-1.5b-q4_0 qwen2-3b-q4_0 llama2-7b-q4_0"

if [ "${BENCH_QUICK:-0}" = 1 ]; then
  models=${BENCH_MODELS:-tiny-q4_0 stories260K} depth=${BENCH_DEPTH-tiny-q4_0} one=${BENCH_1T-tiny-q4_0}
  chat=${BENCH_CHAT-tiny-q4_0} large=tiny-q4_0
  PP=64 TG=16 DEPTH=256 REPS=1 ROUNDS=1 md=$TMP/quick.md quick=1
else
  all=$(printf '%s\n' "${specs[@]%%|*}" | grep -vx -e tiny-q4_0 -e ${large// / -e } | tr '\n' ' ')
  models=${BENCH_MODELS:-$all} depth=${BENCH_DEPTH-qwen2-0.5b-q8_0}
  one=${BENCH_1T-qwen2-0.5b-q8_0 qwen2-0.5b-q4_0 stories260K}
  chat=${BENCH_CHAT-qwen2-0.5b-q8_0 qwen2-0.5b-q4_k_m}
  PP=512 TG=128 DEPTH=4096 REPS=3 ROUNDS=${BENCH_ROUNDS:-2} md=$OUT/latest.md quick=
fi

# The spec line of a model name.
spec_of() {
  local s
  for s in "${specs[@]}"; do [ "${s%%|*}" = "$1" ] && echo "$s" && return; done
  echo "make bench: unknown model '$1' (known: ${specs[*]%%|*})" >&2
  return 1
}

# model_file NAME ARGS: the GGUF file, made by `llm synth` the first time it is asked for.
model_file() {
  case $2 in file\ *) echo "${2#file }"; return ;; esac
  if [ ! -s "$MODELS/$1.gguf" ]; then
    echo "make bench: generating $MODELS/$1.gguf (once)" >&2
    # shellcheck disable=SC2086 # args are words
    "$BIN/llm" synth $2 --seed 1 -o "$MODELS/$1.tmp.gguf" >&2
    mv "$MODELS/$1.tmp.gguf" "$MODELS/$1.gguf"
  fi
  echo "$MODELS/$1.gguf"
}

# run PREFIX CMD...: stdout to PREFIX.jsonl, stderr to PREFIX.err and the terminal, and the command's
# peak RSS (KiB) and wall seconds to PREFIX.usage (os.wait4 gives the child's own rusage). The child
# is spawned without a subprocess.Popen object: one dropped at once reaps a child that has already
# exited, and wait4 then failed with ECHILD (seen under make test's load).
run() {
  local prefix=$1; shift
  echo "make bench: $*" | tee -a "$TMP/bench.cmds" >&2
  { python3 -c '
import os, signal, sys, time
t0 = time.monotonic()
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the benchmark, which prints what finished
_, status, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write("%d %.6f\n" % (ru.ru_maxrss, time.monotonic() - t0))
sys.exit(os.waitstatus_to_exitcode(status))' "$prefix.usage" "$@" 2>&1 >&3 | tee "$prefix.err" >&2; } 3>"$prefix.jsonl"
}

# suite SUITE "MODELS" ARGS...: for each model, ROUNDS rounds of ours and llama-bench with the same
# test arguments (round r in bench.SUITE.MODEL.PROG.rR.*), ours first in odd rounds. The 2-thread
# suite also probes memory and start-up, right after each program's run of the first round.
suite() {
  local name=$1 list=$2 m spec args label f prog exe p i r order; shift 2
  local extra=()
  for m in $list; do
    spec=$(spec_of "$m")
    IFS='|' read -r _ args label <<<"$spec"
    f=$(model_file "$m" "$args")
    echo "$name|$m|$f|$label" >>"$TMP/bench.manifest"
    for ((r = 1; r <= ROUNDS; r++)); do
      order="llm llama"
      ((r % 2)) || order="llama llm"
      for prog in $order; do
        # --roofline is ours only; it allocates 512 MiB, so memory is measured in runs without it
        case $prog in llm) exe=$BIN/llm-bench extra=(--roofline) ;; llama) exe=$LLAMA_BENCH extra=() ;; esac
        [ -n "$exe" ] || continue
        p=$TMP/bench.$name.$m.$prog
        run "$p.r$r" "$exe" -m "$f" "$@" -o jsonl -oe md "${extra[@]}"
        [ "$name" = main ] && [ "$r" = 1 ] || continue
        run "$p.rss" "$exe" -m "$f" -p "$PP" -n 1 -r 1 -t 2 --no-warmup -o jsonl
        for i in 1 2 3; do run "$p.start$i" "$exe" -m "$f" -p 0 -n 1 -r 1 -t 2 --no-warmup -o jsonl; done
      done
    done
  done
}

case ${BENCH_LONG:-} in
  1) for m in $large; do [[ " $models " == *" $m "* ]] || models="$models $m"; done ;;
  ''|0) ;;
  *) echo "make bench: BENCH_LONG=$BENCH_LONG is not 1 or 0" >&2; exit 1 ;;
esac
for m in $models; do spec_of "$m" >/dev/null; done # a typo fails before anything runs
rm -f "$TMP"/bench.*
# keep only the long-context and 1-thread models that are in the run
in_run() { local m; for m in $1; do [[ " $models " == *" $m "* ]] && printf '%s ' "$m"; done; true; }
depth=$(in_run "$depth") one=$(in_run "$one") chat=$(in_run "$chat")
start=$(date +%s)
load=$(cut -d' ' -f1-3 /proc/loadavg)
tests=(-p "$PP" -n "$TG" -r "$REPS")
suite main "$models" "${tests[@]}" -t 2
suite depth "$depth" "${tests[@]}" -t 2 -d "$DEPTH"
suite 1t "$one" "${tests[@]}" -t 1
suite chat "$chat" -p 16,64 -n 0 -r "$REPS" -t 2
elapsed=$(($(date +%s) - start))

python3 bench/report.py --tmp "$TMP" --bin "$BIN" --perf "$SHARED/ref/perf.md" --side-by-side "${LLAMA_BENCH:+yes}" \
  --cpu "$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)" --elapsed "$elapsed" --load "$load" \
  --tests "${tests[*]}" --depth "$DEPTH" --pp "$PP" --rounds "$ROUNDS" ${quick:+--quick} >"$md"
echo "make bench: wrote $md (${elapsed}s)" >&2
cat "$md"
