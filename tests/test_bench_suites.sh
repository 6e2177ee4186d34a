#!/usr/bin/env bash
# bench/run.sh's suite knobs (BENCH_QUICK=1: tiny models, seconds): BENCH_DEPTH, BENCH_1T and
# BENCH_CHAT set empty run no model in their suite; unset, their default models run.
set -u
SHARED=$(cd "${SHARED:-../shared}" && pwd)
BIN=$(cd "$(dirname "${LLM:-bin/llm}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

quick() { SHARED=$SHARED BIN=$BIN BENCH_QUICK=1 LLAMA_BENCH= bash bench/run.sh >"$1" 2>"$tmp/err"; }
sections='^## \(Long context\|1 thread\|Chat-sized prompts\)'

(unset BENCH_DEPTH BENCH_1T BENCH_CHAT; quick "$tmp/default.md"); rc=$?
[ $rc -eq 0 ] && [ "$(grep -c "$sections" "$tmp/default.md")" -eq 3 ] && ok \
  || fail "defaults (exit $rc): $(grep '^## ' "$tmp/default.md") $(tail -3 "$tmp/err")"
BENCH_DEPTH= BENCH_1T= BENCH_CHAT= quick "$tmp/empty.md"; rc=$?
[ $rc -eq 0 ] && [ "$(grep -c "$sections" "$tmp/empty.md")" -eq 0 ] && grep -q '^## 2 threads' "$tmp/empty.md" && ok \
  || fail "empty knobs still ran a suite (exit $rc): $(grep '^## ' "$tmp/empty.md")"

echo "test_bench_suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
