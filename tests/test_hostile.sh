#!/usr/bin/env bash
# Hostile and llama.cpp-habit command lines (issue 10): every one either works as llama.cpp users
# expect or fails at once with one "llm: error: ..." line naming the option, before any output or
# work (no table header, no prompt echoed, no file left behind). Files: tests/test_hostile.c.
set -u
LLM=${LLM:-bin/llm}
SHARED=${SHARED:-../shared}
M=$SHARED/models
BIN=$(dirname "$LLM")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
S=$M/stories260K.gguf
Q=$M/qwen2-tiny-q8_0.gguf

# expect_error NAME WANT CMD...: exit 1 within 20 s, stdout empty, stderr exactly one "llm: error:"
# line containing WANT.
expect_error() {
  local name=$1 want=$2; shift 2
  timeout 20 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ $rc -eq 1 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^llm: error: ' "$tmp/err" \
     && grep -qF -- "$want" "$tmp/err"; then ok
  else fail "$name: exit $rc (want 1), want '$want'; stdout: $(head -c 200 "$tmp/out"); stderr: $(head -c 300 "$tmp/err")"; fi
}

# -t is capped (llama.cpp's GGML_MAX_N_THREADS, 512): far above it fails at once, 512 itself passes
# the check (the missing model is what fails then).
expect_error "llm-run -t 100000" "for -t: must be between 1 and 512" "$BIN/llm-run" -m "$S" -p hi -t 100000
expect_error "llm-run -t 513" "for -t" "$BIN/llm-run" -m "$S" -p hi -t 513
expect_error "llm-run -t 512" "nope.gguf" "$BIN/llm-run" -m "$tmp/nope.gguf" -p hi -t 512
expect_error "llm-bench -t 100000" "for -t: must be between 1 and 512" "$BIN/llm-bench" -m "$S" -t 100000
expect_error "llm synth -t 100000" "for -t" "$LLM" synth --preset tiny --type F32 -t 100000 -o "$tmp/s.gguf"

# Inputs and outputs are checked before anything runs.
mkdir -p "$tmp/dir"
expect_error "-f DIR" "Is a directory" "$BIN/llm-run" -m "$S" -f "$tmp/dir"
expect_error "--dump-logits DIR" "is a directory" "$BIN/llm-run" -m "$S" -p hi -n 2 --dump-logits "$tmp/dir"
expect_error "--dump-logits in a missing folder" "No such file" "$BIN/llm-run" -m "$S" -p hi -n 2 --dump-logits "$tmp/none/l.f32"
[ -z "$(ls -A "$tmp/dir")" ] && ok || fail "--dump-logits DIR left files: $(ls -A "$tmp/dir")"
expect_error "--dump-logits with a bad model" "nope.gguf" "$BIN/llm-run" -m "$tmp/nope.gguf" -p hi --dump-logits "$tmp/l.f32"
[ ! -e "$tmp/l.f32" ] && [ ! -e "$tmp/l.f32.tmp" ] && ok || fail "a failed run left $tmp/l.f32(.tmp)"
expect_error "synth -o DIR" "is a directory" "$LLM" synth --preset tiny --type F32 -o "$tmp/dir"

# llm-bench checks its whole command line first, names the option, prints no header.
expect_error "bench -r 0" "for -r" "$BIN/llm-bench" -m "$S" -p 4 -n 0 -r 0
expect_error "bench -r -1" "for -r" "$BIN/llm-bench" -m "$S" -p 4 -n 0 -r -1
expect_error "bench --delay -1" "for --delay" "$BIN/llm-bench" -m "$S" -p 4 -n 0 -r 1 --delay -1
expect_error "bench -p 5-1" "-p '5-1' gives no values" "$BIN/llm-bench" -m "$S" -p 5-1 -n 0 -r 1
expect_error "bench -p ''" "-p '' gives no values" "$BIN/llm-bench" -m "$S" -p '' -n 0 -r 1
expect_error "bench -pg -1,5" "for -pg" "$BIN/llm-bench" -m "$S" -pg -1,5 -r 1
expect_error "bench -t 0" "for -t" "$BIN/llm-bench" -m "$S" -p 4 -n 0 -r 1 -t 0
expect_error "bench -b 0" "for -b" "$BIN/llm-bench" -m "$S" -p 4 -n 0 -r 1 -b 0
expect_error "bench -ub 0" "for -ub" "$BIN/llm-bench" -m "$S" -p 4 -n 0 -r 1 -ub 0
expect_error "bench context overflow" "-p/-n/-pg plus -d" "$BIN/llm-bench" -m "$S" -p 2000000000 -n 2000000000 -r 1
expect_error "bench -ctv q8_0 -fa 0" "-ctv q8_0" "$BIN/llm-bench" -m "$S" -p 4 -n 0 -r 1 -ctv q8_0 -fa 0
expect_error "bench bad model" "nope.gguf" "$BIN/llm-bench" -m "$tmp/nope.gguf" -p 4 -n 0 -r 1
printf 'GGUF' >"$tmp/trunc.gguf"
expect_error "bench truncated model" "trunc.gguf" "$BIN/llm-bench" -m "$tmp/trunc.gguf" -p 4 -n 0 -r 1 -o json
# llama-bench's own parse errors keep its two lines, both naming the option; usage, no table.
"$BIN/llm-bench" -m "$S" -p 99999999999 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q 'invalid parameter for argument: -p$' "$tmp/err" && ! grep -q '^|' "$tmp/out" && ok \
  || fail "bench -p 99999999999: exit $rc: $(cat "$tmp/err")"
# A repeated -m adds to the list, as llama-bench's does.
"$BIN/llm-bench" -m "$S" -m "$M/stories260K-q8_0.gguf" -p 4 -n 0 -r 1 -t 1 -o csv >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c 'stories260K' "$tmp/out")" = 2 ] && grep -q 'q8_0' "$tmp/out" && ok \
  || fail "repeated -m: exit $rc: $(cat "$tmp/out" "$tmp/err")"

# llm-run's range errors name the offending option.
for a in "-n -2:-n" "-c -1:-c" "-b 0:-b" "-ub 0:-ub" "-t 0:-t" "--top-k -1:--top-k" "--repeat-last-n -1:--repeat-last-n" \
         "--temp nan:--temp" "--top-p -1:--top-p" "--min-p -1:--min-p" "--repeat-penalty 0:--repeat-penalty" \
         "--seed -2:--seed" "-ctk q6_k:-ctk"; do
  opt=${a#*:}
  # shellcheck disable=SC2086
  expect_error "llm-run ${a%%:*}" "for $opt" "$BIN/llm-run" -m "$S" -p hi ${a%%:*}
done

# Called as llm-run / llm-bench, the program names itself by its basename, and the hint works.
"$BIN/llm-run" --frobnicate >"$tmp/out" 2>"$tmp/err"
grep -qF "(try 'llm-run -h')" "$tmp/err" && ! grep -q "llm $BIN" "$tmp/err" && ok || fail "llm-run hint: $(cat "$tmp/err")"
"$BIN/llm-run" -h >"$tmp/out" 2>&1 && head -1 "$tmp/out" | grep -q '^usage: llm-run \[' && ok || fail "llm-run -h: $(head -2 "$tmp/out")"
"$LLM" run -h >"$tmp/out" 2>&1 && head -1 "$tmp/out" | grep -q '^usage: llm run \[' && ok || fail "llm run -h: $(head -2 "$tmp/out")"
"$LLM" tokenize --frobnicate >"$tmp/out" 2>"$tmp/err"
grep -qF "(try 'llm tokenize -h')" "$tmp/err" && ok || fail "llm tokenize hint: $(cat "$tmp/err")"
"$BIN/llm-bench" -h >"$tmp/out" 2>&1 && head -1 "$tmp/out" | grep -q '^usage: llm-bench \[options\]' && ok \
  || fail "llm-bench -h: $(head -2 "$tmp/out")"
"$BIN/llm-bench" -r 0 >"$tmp/out" 2>"$tmp/err"
grep -qF "(try 'llm-bench -h')" "$tmp/err" && ok || fail "llm-bench hint: $(cat "$tmp/err")"

# One message for an unknown device in both tools, without paths; the npu runs in both.
expect_error "llm-run -dev tpu" "invalid device: tpu" "$BIN/llm-run" -m "$S" -p hi -dev tpu
grep -q '/' "$tmp/err" && fail "llm-run -dev tpu names a path: $(cat "$tmp/err")" || ok
"$BIN/llm-bench" -m "$S" -dev tpu >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q '^error: invalid device: tpu$' "$tmp/err" && ! grep -q '/' "$tmp/err" && ok \
  || fail "llm-bench -dev tpu: exit $rc: $(cat "$tmp/err")"
"$BIN/llm-run" -m "$S" -p hi -n 2 -dev npu >/dev/null 2>"$tmp/err" && ok || fail "llm-run -dev npu: $(cat "$tmp/err")"
"$BIN/llm-bench" -m "$S" -p 0 -n 2 -r 1 -t 1 -dev npu >/dev/null 2>"$tmp/err" && ok || fail "llm-bench -dev npu: $(cat "$tmp/err")"

# llm-roofline -h prints its help at once (the measurement takes seconds).
timeout 5 "$BIN/llm-roofline" -h >"$tmp/out" 2>&1 && head -1 "$tmp/out" | grep -q '^usage: llm-roofline' && ok \
  || fail "llm-roofline -h: $(head -3 "$tmp/out")"
expect_error "llm-roofline -x" "llm-roofline takes no arguments" "$BIN/llm-roofline" -x

# llama.cpp habits: what maps to a feature works, the rest is named as not supported.
"$BIN/llm-run" -m "$S" -p hi -n 3 --seed -1 >/dev/null 2>"$tmp/err" && grep -q 'generated 3 tokens' "$tmp/err" && ok \
  || fail "--seed -1: $(cat "$tmp/err")"
"$BIN/llm-run" -m "$S" -p hi -n 3 -s 4294967295 -no-cnv --no-warmup --no-conversation >/dev/null 2>"$tmp/err" \
  && ok || fail "-s 4294967295 -no-cnv --no-warmup: $(cat "$tmp/err")"
"$BIN/llm-run" -m "$S" -p 'a\nb\x41' -e -n 1 --temp 0 >"$tmp/out" 2>/dev/null
[ "$(head -c 4 "$tmp/out")" = "$(printf 'a\nbA')" ] && ok || fail "-e: $(head -c 20 "$tmp/out" | od -c)"
"$BIN/llm-run" -m "$S" -p 'a\nb' -n 1 --temp 0 >"$tmp/out" 2>/dev/null
[ "$(head -c 4 "$tmp/out")" = 'a\nb' ] && ok || fail "no -e keeps backslashes: $(head -c 20 "$tmp/out")"
for o in -cnv -i --grammar --chat-template -sys --color --lora; do
  expect_error "llm-run $o" "'$o' is a llama.cpp option that llm-run does not support" "$BIN/llm-run" -m "$S" -p hi $o x
done
# llama-cli's load options (issue 28): they run (tests/option_matrix.py checks the text), and the
# contradicting pairs are one error each.
expect_error "--mmap --no-mmap" "give --mmap or --no-mmap, not both" "$BIN/llm-run" -m "$S" -p hi --mmap --no-mmap
expect_error "--mlock -dio" "give --mlock or -dio, not both" "$BIN/llm-run" -m "$S" -p hi --mlock -dio
expect_error "-e --no-escape" "give -e or --no-escape, not both" "$BIN/llm-run" -m "$S" -p hi -e --no-escape
# llama-cli's cpu options (issue 28): out of range or unusable, one error line each.
expect_error "-C zz" "invalid value 'zz' for -C" "$BIN/llm-run" -m "$S" -p hi -C zz
expect_error "-C beyond the cpus" "invalid value '0x10000000000000000' for -C" "$BIN/llm-run" -m "$S" -p hi \
  -C 0x10000000000000000
expect_error "--poll 101" "invalid value 101 for --poll: must be between 0 and 100" "$BIN/llm-run" -m "$S" -p hi --poll 101
expect_error "--cpu-strict 2" "invalid value 2 for --cpu-strict" "$BIN/llm-run" -m "$S" -p hi --cpu-strict 2
expect_error "--prio 4" "invalid value 4 for --prio: must be between -1 and 3" "$BIN/llm-run" -m "$S" -p hi --prio 4
expect_error "--numa foo" "invalid value 'foo' for --numa" "$BIN/llm-run" -m "$S" -p hi --numa foo
expect_error "llm-run -sm row" "-sm row splits tensors over several devices" "$BIN/llm-run" -m "$S" -p hi -sm row
expect_error "llm-run -sm x" "invalid value 'x' for -sm" "$BIN/llm-run" -m "$S" -p hi -sm x
expect_error "llm-run -mg 1" "-mg 1: there is one device beside the cpu, 0" "$BIN/llm-run" -m "$S" -p hi -mg 1
expect_error "llm-run -ts 1,1" "-ts 1,1: there is one device beside the cpu" "$BIN/llm-run" -m "$S" -p hi -ts 1,1
expect_error "llm-run -ts x" "invalid value 'x' for -ts" "$BIN/llm-run" -m "$S" -p hi -ts x
"$BIN/llm-run" -m "$S" -p hi -n 2 -sm none -mg 0 -ts 1,0 -dev npu >/dev/null 2>"$tmp/err" && ok || fail "-sm none -mg 0 -ts 1,0: $(cat "$tmp/err")"
expect_error "llm-bench -C zz" "invalid value 'zz' for -C" "$BIN/llm-bench" -m "$S" -C zz
expect_error "llm-bench --poll 101" "invalid value 101 for --poll" "$BIN/llm-bench" -m "$S" --poll 101
expect_error "llm-bench --prio 4" "invalid value 4 for --prio" "$BIN/llm-bench" -m "$S" --prio 4
"$BIN/llm-run" -m "$S" -p -i -n 1 >/dev/null 2>"$tmp/err" && ok || fail "-p -i (a prompt that looks like an option): $(cat "$tmp/err")"

# -v: time per phase, tokens, KV cache use (5 + 8 tokens, the last one sampled but not evaluated;
# the npu's graph counters are checked by tests/test_cli.sh).
"$BIN/llm-run" -m "$S" -p "Once upon a time" -n 8 --temp 0 -v >/dev/null 2>"$tmp/err"
grep -q '^llm-run: time: load .* ms, tokenize .* ms, context .* ms, prompt .* ms, generation .* ms' "$tmp/err" \
  && grep -q '^llm-run: tokens: prompt 5 (.*), generated 8 (' "$tmp/err" \
  && grep -q '^llm-run: kv cache: 12 of 2048 tokens used' "$tmp/err" && ok || fail "-v statistics: $(cat "$tmp/err")"

# Special tokens in the text: parsed by default by llm tokenize and llm-run alike, and both say so.
[ "$("$LLM" tokenize -m "$Q" -p '<|im_end|>' --ids 2>&1)" = "[151645]" ] && ok || fail "tokenize parses specials by default"
n_plain=$("$LLM" tokenize -m "$Q" -p '<|im_end|>' --ids --no-parse-special 2>&1 | tr -cd ',' | wc -c)
[ "$n_plain" -gt 1 ] && ok || fail "tokenize --no-parse-special: $n_plain commas"
"$BIN/llm-run" -m "$Q" -p '<|im_end|>' -n 1 >/dev/null 2>"$tmp/err" && grep -q 'prompt 1 tokens' "$tmp/err" && ok \
  || fail "llm-run parses specials: $(cat "$tmp/err")"
"$BIN/llm-run" -m "$Q" -p '<|im_end|>' -n 1 --no-parse-special >/dev/null 2>"$tmp/err" \
  && grep -q "prompt $((n_plain + 1)) tokens" "$tmp/err" && ok || fail "llm-run --no-parse-special: $(cat "$tmp/err")"
"$LLM" tokenize -h | grep -q 'Special tokens written in the text' && "$BIN/llm-run" -h | grep -q 'Special tokens written in the prompt' \
  && ok || fail "-h of tokenize and llm-run state the special-token rule"

# Ctrl-C during llm-run: the text so far, the summary, exit 130.
"$BIN/llm-run" -m "$S" -p "Once upon a time" -n -1 -c 60000 --temp 0 >"$tmp/int.out" 2>"$tmp/int.err" &
pid=$!
sleep 2
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] && [ -s "$tmp/int.out" ] && grep -q 'generated [1-9][0-9]* tokens.*(stopped: interrupted)' "$tmp/int.err" \
  && grep -q '^llm-run: backend cpu' "$tmp/int.err" && ok || fail "SIGINT: exit $rc: $(cat "$tmp/int.err")"

echo "test_hostile_cli: $passed passed, $failed failed"
[ $failed -eq 0 ]
