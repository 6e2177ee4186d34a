#!/usr/bin/env bash
# Fuzzes the paths that read hostile files, with libFuzzer + ASan + UBSan, one target after another:
#   fuzz_gguf   gguf_parse on the bytes, then every accessor of the parsed file (tests/fuzz/fuzz_gguf.c)
#   fuzz_vocab  vocab_load on the tokenizer keys, then tokenize / detokenize / pieces (fuzz_vocab.c)
#   fuzz_model  llm_model_load on the bytes as a file, then every bound weight, its shape, the
#               tokenizer's ids against the embedding and a short decode (fuzz_model.c)
# src/ is compiled into $OUT/obj/libfuzz.a (instrumented, incrementally; the linker takes what each
# target uses: the parser alone for fuzz_gguf, the tokenizers for fuzz_vocab, everything a decode
# needs for fuzz_model). Seeds, in $OUT/corpus/<target>/: small shared models and truncated prefixes
# of them, vocabularies cut from the shared ones, tiny generated models (tests/fuzz/seed_*.c).
# Each target runs for its share of FUZZ_TIME. Any finding (crash, leak, undefined behaviour, an input
# slower than 25 s, a broken contract, a run that does not end) fails the run, with the input kept in
# $OUT/artifacts/fuzz_<target>-* and the fuzzer's log in $OUT/fuzz_<target>.log.
# Env: SHARED (fixtures, default ../shared), FUZZ_TIME (seconds for all targets together, default 30,
#      split evenly: 10 s each), FUZZ_OUT (default build/fuzz), RESULTS (file for "passed failed").
set -u
cd "$(dirname "$0")/.." || exit 1
SHARED=${SHARED:-../shared}
TIME=${FUZZ_TIME:-30}
OUT=${FUZZ_OUT:-build/fuzz}
TARGETS=(gguf vocab model)
# -max_len per target: the model target takes a whole small shared model (stories260K-q4_0, 387 KB)
declare -A MAX_LEN=([gguf]=65536 [vocab]=65536 [model]=524288)
CFLAGS=(-std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -Isrc)
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all)
# the fuzzers run one process: the MPI transport's stub stands in for Open MPI
SRC=()
for s in src/*.c src/*/*.c src/*/*/*.c; do [ "$s" = src/mpi/mpi_link.c ] || SRC+=("$s"); done

passed=0; failed=0
result() {
  echo "fuzz: $passed passed, $failed failed"
  if [ -n "${RESULTS:-}" ]; then echo "$passed $failed" >"$RESULTS"; fi
}
die() { echo "fuzz: $*" >&2; failed=$((failed + 1)); result; exit 1; }

mkdir -p "$OUT/obj" "$OUT/artifacts" || die "cannot create $OUT"
for t in "${TARGETS[@]}"; do mkdir -p "$OUT/corpus/$t" || die "cannot create $OUT/corpus/$t"; done
# a corpus of the GGUF-only fuzzer kept from before the split goes on with fuzz_gguf
find "$OUT/corpus" -maxdepth 1 -type f -exec mv -t "$OUT/corpus/gguf" {} + || die "cannot move the old corpus"

# Objects, nproc at a time: rebuilt when older than their source or than any header under src/.
obj_of() { local o=${1%.c}; echo "$OUT/obj/${o//\//_}.o"; }
newest_h=$(find src -name '*.h' -printf '%T@ %p\n' | sort -n | tail -n 1 | cut -d' ' -f2)
pids=(); bad=0; objs=()
for s in "${SRC[@]}"; do
  o=$(obj_of "$s"); objs+=("$o")
  if [ -e "$o" ] && [ "$o" -nt "$s" ] && [ "$o" -nt "$newest_h" ]; then continue; fi
  clang "${CFLAGS[@]}" -fsanitize=fuzzer-no-link "${SAN[@]}" -c "$s" -o "$o" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$(nproc)" ]; then wait "${pids[0]}" || bad=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || bad=1; done
[ "$bad" -eq 0 ] || die "build of the sources failed"
rm -f "$OUT/obj/libfuzz.a"
ar rcs "$OUT/obj/libfuzz.a" "${objs[@]}" || die "ar failed"
for t in "${TARGETS[@]}"; do
  clang "${CFLAGS[@]}" -fsanitize=fuzzer "${SAN[@]}" "tests/fuzz/fuzz_$t.c" "$OUT/obj/libfuzz.a" \
    -lm -ldl -pthread -o "$OUT/fuzz_$t" || die "build of fuzz_$t failed"
done
for h in seed_gguf seed_model; do
  clang "${CFLAGS[@]}" -fsanitize=fuzzer-no-link "${SAN[@]}" "tests/fuzz/$h.c" "$OUT/obj/libfuzz.a" \
    -lm -ldl -pthread -o "$OUT/$h" || die "build of $h failed"
done

# Seeds.
M=$SHARED/models
for f in quant/Q8_0.gguf quant/Q4_K.gguf stories260K-q4_0.gguf stories260K-q8_0.gguf llama-k256-q2_k.gguf \
         stories260K.gguf vocab/ggml-vocab-gpt-2.gguf vocab/ggml-vocab-llama-spm.gguf qwen2-tiny-q8_0.gguf; do
  [ -r "$M/$f" ] || die "missing fixture $M/$f"
done
"$OUT/seed_gguf" "$OUT/corpus/gguf/seed-all-types.gguf" || die "seed_gguf failed"
for f in quant/Q8_0.gguf quant/Q4_K.gguf; do cat "$M/$f" >"$OUT/corpus/gguf/seed-${f##*/}"; done
head -c 65536 "$M/stories260K-q4_0.gguf" >"$OUT/corpus/gguf/seed-stories260K-q4_0-64k.gguf"
"$OUT/seed_model" "$OUT/corpus/vocab" "$OUT/corpus/model" "$M" || die "seed_model failed"
cat "$M/stories260K-q4_0.gguf" >"$OUT/corpus/model/seed-stories260K-q4_0.gguf"
for f in stories260K-q8_0 llama-k256-q2_k stories260K; do
  head -c 65536 "$M/$f.gguf" >"$OUT/corpus/model/seed-$f-64k.gguf"
done

# Runs.
per=$((TIME / ${#TARGETS[@]}))
[ "$per" -ge 1 ] || per=1
for t in "${TARGETS[@]}"; do
  log="$OUT/fuzz_$t.log"
  touch "$OUT/.start_$t"
  # the outer timeout only catches a fuzzer that does not stop by itself (-timeout catches slow inputs)
  timeout -k 10 $((per + 300)) "$OUT/fuzz_$t" -max_total_time="$per" -timeout=25 -rss_limit_mb=2048 \
    -max_len="${MAX_LEN[$t]}" -artifact_prefix="$OUT/artifacts/fuzz_$t-" -print_final_stats=1 \
    "$OUT/corpus/$t" 2>"$log"
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1)
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$log"
    art=$(find "$OUT/artifacts" -name "fuzz_$t-*" -newer "$OUT/.start_$t" | head -n 1)
    echo "fuzz_$t: FINDING (exit $rc) after ${execs:-?} runs: input ${art:-not saved}, log $log" >&2
    echo "fuzz_$t: 0 passed, 1 failed"
    failed=$((failed + 1))
  else
    echo "fuzz_$t: ${per} s, ${execs:-?} runs, ${cov:-cov: ?}, peak RSS ${rss:-?} MB"
    echo "fuzz_$t: 1 passed, 0 failed"
    passed=$((passed + 1))
  fi
done
result
[ "$failed" -eq 0 ]
