#!/usr/bin/env bash
# Command-line behaviour of bin/llm: the stories260K story byte for byte (ref/gen/
# stories260K.once.greedy200.txt), also as make run tells it and on the npu, llm info on every shared
# model, bad input giving exactly one "llm: error: ..." line and exit status 1, and valgrind on the
# end-to-end paths (skipped, counted and shown when $LLM is an ASan build, which valgrind cannot
# run). Every check looks at the exit status of the command it is about.
set -u
LLM=${LLM:-bin/llm}
SHARED=${SHARED:-../shared}
M=$SHARED/models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0; skipped=0

ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
skip() { skipped=$((skipped + 1)); echo "SKIP test_cli: $*" >&2; }

# expect_error NAME CMD...: exit status 1 (bin/llm's error status; a crash or an abort is not it),
# stderr exactly one "llm: error:" line.
expect_error() {
  local name=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  local lines; lines=$(wc -l <"$tmp/err")
  if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && grep -q '^llm: error: ' "$tmp/err"; then ok
  else fail "$name: exit $rc (want 1), stderr: $(head -c 400 "$tmp/err")"; fi
}

# The 200-token story, prompt echoed, exactly as llama.cpp prints it.
"$LLM" run -m "$M/stories260K.gguf" -p "Once upon a time" -n 200 --temp 0 >"$tmp/story" 2>"$tmp/err"
if [ $? -eq 0 ] && cmp -s <(printf '%s\n' "$(cat "$SHARED/ref/gen/stories260K.once.greedy200.txt")") "$tmp/story"; then ok
else fail "200-token story differs: $(head -c 300 "$tmp/story")"; fi
grep -q 'generated 200 tokens' "$tmp/err" && ok || fail "no generation summary on stderr"

# make run tells it from the model the repository ships: the same file, so the same bytes.
cmp -s models/stories260K.gguf "$M/stories260K.gguf" && ok || fail "models/stories260K.gguf differs from $M/stories260K.gguf"
bash tools/run-default.sh "$(dirname "$LLM")" >"$tmp/run-default" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && cmp -s "$tmp/story" "$tmp/run-default" && ok \
  || fail "make run's story (exit $rc) differs: $(head -c 300 "$tmp/run-default") $(head -c 300 "$tmp/err")"

# The same story on the emulated npu, graph mode on (default) and off; -v shows the mode and statistics.
for g in on off; do
  GGML_CANN_ACL_GRAPH=$g "$LLM" run -m "$M/stories260K.gguf" -p "Once upon a time" -n 200 --temp 0 -dev npu -v \
    >"$tmp/story.npu" 2>"$tmp/err.npu"
  rc=$?
  [ $rc -eq 0 ] && cmp -s "$tmp/story" "$tmp/story.npu" && ok \
    || fail "npu story (graph $g, exit $rc) differs: $(head -c 300 "$tmp/err.npu")"
  grep -q 'backend npu' "$tmp/err.npu" && ok || fail "npu summary (graph $g): $(cat "$tmp/err.npu")"
done
# The simplest wait policy (LLM_NPU_WAIT=simple: futex waits, no spinning or hand-over) tells the same
# story in graph mode; an unknown policy is one error line.
LLM_NPU_WAIT=simple "$LLM" run -m "$M/stories260K.gguf" -p "Once upon a time" -n 200 --temp 0 -dev npu >"$tmp/story.simple" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && cmp -s "$tmp/story" "$tmp/story.simple" && ok || fail "LLM_NPU_WAIT=simple story (exit $rc) differs: $(head -c 300 "$tmp/err")"
LLM_NPU_WAIT=bogus "$LLM" run -m "$M/stories260K.gguf" -p "Once" -n 4 -dev npu >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q '^llm: error: .*LLM_NPU_WAIT=bogus (tuned or simple)' "$tmp/err" && ok \
  || fail "LLM_NPU_WAIT=bogus (exit $rc): $(cat "$tmp/err")"
# Confined to one cpu, host and device threads share it: every wait then sleeps instead of spinning
# (acl_wait_tuned.c acl_on_cpu_of), and the story must come out the same, graph on and off, without hanging;
# -v counts each of the host's waits as one with the device on its cpu (but perhaps the first: the
# device thread may not have taken a task yet).
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then
  for g in on off; do
    GGML_CANN_ACL_GRAPH=$g timeout 60 taskset -c 0 "$LLM" run -m "$M/stories260K.gguf" -p "Once upon a time" -n 200 \
      --temp 0 -dev npu -t 2 -v >"$tmp/story.one" 2>"$tmp/err.one"
    rc=$?
    [ $rc -eq 0 ] && cmp -s "$tmp/story" "$tmp/story.one" && ok \
      || fail "npu story on one cpu (graph $g, exit $rc) differs: $(head -c 300 "$tmp/err.one")"
    waits=$(sed -n 's/.*host_waits \([0-9]*\), host_waits_shared_cpu \([0-9]*\);.*/\1 \2/p' "$tmp/err.one")
    read -r w s <<<"$waits"
    [ -n "$w" ] && [ "$w" -gt 1 ] && [ "$s" -ge $((w - 1)) ] && [ "$s" -le "$w" ] && ok \
      || fail "host waits on one cpu (graph $g): '$waits' from $(grep 'host_waits' "$tmp/err.one")"
  done
else
  skip "taskset cannot confine this process to cpu 0"
fi
grep -q 'execution mode is EAGER' "$tmp/err.npu" && grep -q '^llm-run: npu: captures 0, replays 0' "$tmp/err.npu" && ok \
  || fail "npu -v with graph off: $(cat "$tmp/err.npu")"
"$LLM" run -m "$M/stories260K.gguf" -p "Once upon a time" -n 200 --temp 0 -dev npu -v >/dev/null 2>"$tmp/err.npu"
rc=$?
[ $rc -eq 0 ] && grep -q 'execution mode is GRAPH' "$tmp/err.npu" && grep -q '^llm-run: npu: captures 1, replays 199, hits 198, misses 1' "$tmp/err.npu" \
  && ok || fail "npu -v with graph on: $(cat "$tmp/err.npu")"
# -v says once per kind of graph what the layout pass inserted (a decode graph: nothing, attention
# reads its 8-wide Q dense and its K and V from the padded cache; a naive pass would convert some)
grep -q 'a 1-token graph .*layout align: 0 CHANNEL_NORM nodes, [0-9]* by a naive pass, [0-9]* bytes of padding, [0-9]* us$' "$tmp/err.npu" \
  && ok || fail "npu -v: no layout line for the decode graph: $(grep 'operator fusion' "$tmp/err.npu")"

# Called as llm-run, --no-display-prompt leaves only the continuation on stdout.
"$(dirname "$LLM")/llm-run" -m "$M/stories260K.gguf" -p "Once upon a time" -n 24 --temp 0 --no-display-prompt >"$tmp/cont" 2>"$tmp/err"
rc=$?
want=$(python3 -c "import json,sys;print(bytes.fromhex(json.load(open(sys.argv[1]))['greedy_text_hex']).decode())" "$SHARED/ref/gen/stories260K.once.json")
wrc=$?
[ $rc -eq 0 ] && [ $wrc -eq 0 ] && [ -n "$want" ] && [ "$(cat "$tmp/cont")" = "$want" ] && ok \
  || fail "--no-display-prompt (exit $rc, reference read exit $wrc) output: $(cat "$tmp/cont") $(head -c 300 "$tmp/err")"

# Same seed, same sampled text; -n beyond the context stops at a full context.
a=$("$LLM" run -m "$M/stories260K.gguf" -p "Lily" -n 30 --seed 7 2>/dev/null); arc=$?
b=$("$LLM" run -m "$M/stories260K.gguf" -p "Lily" -n 30 --seed 7 -t 1 2>/dev/null); brc=$?
[ $arc -eq 0 ] && [ $brc -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ] && ok \
  || fail "seeded sampling not reproducible (exit $arc and $brc)"
"$LLM" run -m "$M/stories260K.gguf" -p "Once upon a time" -c 32 -n 100 --temp 0 >/dev/null 2>"$tmp/err"
[ $? -eq 0 ] && grep -q 'context full' "$tmp/err" && ok || fail "-n beyond the context: $(cat "$tmp/err")"

# --dump-logits writes n_prompt rows of n_vocab float32.
"$LLM" run -m "$M/stories260K.gguf" -p "Once upon a time" -n 1 --dump-logits "$tmp/l.f32" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(stat -c %s "$tmp/l.f32" 2>/dev/null)" = $((5 * 512 * 4)) ] && ok \
  || fail "--dump-logits (exit $rc) size: $(stat -c %s "$tmp/l.f32" 2>&1) $(head -c 300 "$tmp/err")"

# llm info on every shared model file.
for f in "$M"/*.gguf "$M"/vocab/*.gguf "$M"/quant/*.gguf; do
  "$LLM" info "$f" >"$tmp/out" 2>"$tmp/err" && [ -s "$tmp/out" ] && ok || fail "info $f: $(cat "$tmp/err")"
done
"$LLM" info --json "$M/stories260K.gguf" >"$tmp/info.json" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/info.json" && ok \
  || fail "info --json (exit $rc) is not JSON: $(head -c 300 "$tmp/info.json") $(head -c 300 "$tmp/err")"

# Bad input: one clear line, exit status 1.
head -c 1000 "$M/stories260K.gguf" >"$tmp/trunc.gguf"
printf 'not a gguf file at all' >"$tmp/junk.gguf"
long=$(printf 'Once upon a time %.0s' $(seq 1 100))
expect_error "missing model file"   "$LLM" run -m "$tmp/nope.gguf" -p hi
expect_error "truncated model"      "$LLM" run -m "$tmp/trunc.gguf" -p hi
expect_error "not a gguf"           "$LLM" run -m "$tmp/junk.gguf" -p hi
expect_error "directory as model"   "$LLM" run -m "$tmp" -p hi
expect_error "no model"             "$LLM" run -p hi
expect_error "unknown -ctk"         "$LLM" run -m "$M/stories260K.gguf" -p hi -ctk q9_9
expect_error "-ctk q6_k"            "$LLM" run -m "$M/llama-k256-f32.gguf" -p hi -ctk q6_k
# a quantized KV cache: a quantized V needs flash attention; the block size must divide the head dim
expect_error "-ctv q8_0 -fa off"    "$LLM" run -m "$M/llama-k256-f32.gguf" -p hi -ctv q8_0 -fa off
grep -q 'quantized V cache (Q8_0) needs flash attention' "$tmp/err" && ok || fail "-ctv q8_0 -fa off: $(cat "$tmp/err")"
expect_error "-ctk q8_0 head dim 8" "$LLM" run -m "$M/stories260K.gguf" -p hi -ctk q8_0
grep -q 'K cache type Q8_0 with block size 32 does not divide the head dim 8' "$tmp/err" && [ ! -s "$tmp/out" ] && ok \
  || fail "-ctk q8_0 on stories260K: $(cat "$tmp/out" "$tmp/err")"
expect_error "-ctv iq4_nl head dim 4" "$LLM" run -m "$M/llama-2-tiny-random.gguf" -p hi -ctv iq4_nl
expect_error "bad -n value"         "$LLM" run -m "$M/stories260K.gguf" -p hi -n abc
expect_error "negative threads"     "$LLM" run -m "$M/stories260K.gguf" -p hi -t 0
expect_error "unknown option"       "$LLM" run -m "$M/stories260K.gguf" -p hi --frobnicate
expect_error "prompt over context"  "$LLM" run -m "$M/stories260K.gguf" -p "$long" -c 64
expect_error "empty prompt (no BOS)" "$LLM" run -m "$M/qwen2-tiny-q8_0.gguf" -p ""
expect_error "missing prompt file"  "$LLM" run -m "$M/stories260K.gguf" -f "$tmp/none.txt"
expect_error "unknown device"       "$LLM" run -m "$M/stories260K.gguf" -p hi -dev tpu
expect_error "NaN --top-p"          "$LLM" run -m "$M/stories260K.gguf" -p hi --top-p nan
expect_error "negative --min-p"     "$LLM" run -m "$M/stories260K.gguf" -p hi --min-p -1
expect_error "zero repeat penalty"  "$LLM" run -m "$M/stories260K.gguf" -p hi --repeat-penalty 0
expect_error "-ub 0"                "$LLM" run -m "$M/stories260K.gguf" -p hi -ub 0
expect_error "bad -fa"              "$LLM" run -m "$M/stories260K.gguf" -p hi -fa maybe
expect_error "unknown command"      "$LLM" frobnicate
expect_error "info missing file"    "$LLM" info "$tmp/nope.gguf"
expect_error "info truncated"       "$LLM" info "$tmp/trunc.gguf"
expect_error "tokenize no model"    "$LLM" tokenize -p hi
expect_error "tokenize bad file"    "$LLM" tokenize -m "$tmp/junk.gguf" -p hi

# llm-roofline prints positive bandwidth and FMA figures.
"$(dirname "$LLM")/llm-roofline" >"$tmp/roof" 2>&1 && grep -Eq 'read bandwidth: [1-9][0-9.]* GB/s' "$tmp/roof" &&
  grep -Eq 'FMA peak: [1-9][0-9.]* GFLOP/s' "$tmp/roof" && ok || fail "llm-roofline: $(cat "$tmp/roof")"

# Valgrind: no invalid access, no use of uninitialised memory and no definite leak on the end-to-end
# paths (generation with a batched prompt through BLAS, info, tokenize, a corrupt file, the npu).
# vg NAME WANT CMD...: CMD under valgrind must exit with status WANT (0, or 1 for the corrupt file:
# a crash, an abort or a valgrind error is a failure) and valgrind must report nothing: with -q its
# log ($tmp/vg.log, apart from the program's own stderr) stays empty unless it found an error.
# An ASan build cannot run under valgrind (ASan reserves the shadow memory valgrind needs): then
# these checks are skipped, counted and shown, never passed; the ASan suite checks the same
# accesses itself.
vg() {
  local name=$1 want=$2; shift 2
  if $asan; then skip "valgrind $name: not run, $LLM is an ASan build"; return; fi
  rm -f "$tmp/vg.log"
  valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    --log-file="$tmp/vg.log" "$@" >/dev/null 2>"$tmp/vg.err" </dev/null
  local rc=$?
  if [ $rc -eq "$want" ] && [ -f "$tmp/vg.log" ] && [ ! -s "$tmp/vg.log" ]; then ok
  else fail "valgrind $name: exit $rc (want $want); valgrind: $(head -c 600 "$tmp/vg.log" 2>&1); stderr: $(head -c 300 "$tmp/vg.err")"; fi
}
asan=false
if grep -qa '__asan_init' "$LLM"; then asan=true; fi
if $asan || command -v valgrind >/dev/null; then
  vg run 0 "$LLM" run -m "$M/stories260K.gguf" -p "$(printf 'Once upon a time %.0s' $(seq 1 12))" -n 8 --temp 0
  vg "run qwen2" 0 "$LLM" run -m "$M/qwen2-tiny-q8_0.gguf" -p "Hello" -n 2 --temp 0 -fa off
  vg info 0 "$LLM" info "$M/llama-k256-q4_k_m.gguf"
  vg tokenize 0 "$LLM" tokenize -m "$M/qwen2-tiny-f16.gguf" -p "Hello <|im_end|> world" --parse-special
  vg "corrupt file" 1 "$LLM" run -m "$tmp/trunc.gguf" -p hi
  if ! $asan; then
    grep -q '^llm: error: ' "$tmp/vg.err" && ok || fail "valgrind corrupt file: no error line: $(head -c 300 "$tmp/vg.err")"
  fi
  vg npu 0 "$LLM" run -m "$M/stories260K.gguf" -p "Once upon a time" -n 8 --temp 0 -dev npu
else
  fail "valgrind is not installed (make deps installs it)"
fi

if [ $skipped -gt 0 ]; then echo "test_cli: $passed passed, $failed failed, $skipped skipped"
else echo "test_cli: $passed passed, $failed failed"; fi
[ $failed -eq 0 ]
