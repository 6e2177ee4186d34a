#!/usr/bin/env bash
# LLM_CPU_ISA caps the kernels, so every SIMD path is tested on whatever machine runs this: under
# `scalar` (the plain C kernels), `avx2` (the AVX2 kernels on an AVX-VNNI or AVX-512 machine;
# elsewhere the native runs already cover them) and `avxvnni` (the AVX-VNNI kernels on an AVX-512
# machine that has them too; skipped, counted, on a CPU without AVX-VNNI) the kernel tests pass
# (their counts are added to this script's; test_repack also under scalar with LLM_REPACK=all);
# greedy text with the scalar kernels equals the SIMD one; an unknown value is one warning line,
# then native.
set -u
LLM=$(cd "$(dirname "${LLM:-bin/llm}")" && pwd)/$(basename "${LLM:-bin/llm}")
TESTS=${TEST_BUILD:-build}/tests
M=${SHARED:-../shared}/models/stories260K.gguf
passed=0; failed=0; skipped=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
skip() { skipped=$((skipped + 1)); echo "SKIP test_isa_caps: $*" >&2; }

# under_cap ISA TEST...: each test program under LLM_CPU_ISA=ISA, its counts added to ours.
under_cap() {
  local isa=$1 t out rc line p f
  shift
  for t in "$@"; do
    out=$(LLM_CPU_ISA=$isa "$TESTS/$t" 2>&1); rc=$?
    line=$(grep -E "^$t: [0-9]+ passed, [0-9]+ failed" <<<"$out" | tail -1)
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
      fail "LLM_CPU_ISA=$isa $t (exit $rc): $(tail -5 <<<"$out")"; continue
    fi
    read -r p f < <(sed -E 's/^[^:]*: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/' <<<"$line")
    passed=$((passed + p)); failed=$((failed + f))
  done
}

under_cap scalar test_vec_dot test_dequant test_quants test_ops test_backend_ops test_decode test_gemm test_gemm_f16 test_repack
under_cap avx2 test_gemm test_gemm_f16 test_vec_dot test_decode test_ops test_backend_ops test_repack
# LLM_REPACK=all asks for the AVX2 repacked kernels on every CPU: without AVX2 there are none
LLM_REPACK=all under_cap scalar test_repack

# The kernel's own flag says whether the CPU has AVX-VNNI, apart from our CPUID reading: with it,
# the cap must choose the AVX-VNNI kernels (test_gemm names them) and the tests pass on them.
if grep -qw avx_vnni /proc/cpuinfo 2>/dev/null; then
  chosen=$(LLM_CPU_ISA=avxvnni "$TESTS/test_gemm" 2>&1 | grep -c ': AVX-VNNI GEMM$')
  [ "$chosen" = 2 ] && ok || fail "LLM_CPU_ISA=avxvnni: test_gemm ran $chosen of 2 AVX-VNNI GEMM kernels"
  under_cap avxvnni test_gemm test_vec_dot test_decode test_ops test_backend_ops
else
  skip "LLM_CPU_ISA=avxvnni: this CPU has no AVX-VNNI (no avx_vnni in /proc/cpuinfo)"
fi

for dev in cpu npu; do
  native=$("$LLM" run -m "$M" -p "Once upon a time" -n 48 --temp 0 -dev $dev 2>/dev/null)
  scalar=$(LLM_CPU_ISA=scalar "$LLM" run -m "$M" -p "Once upon a time" -n 48 --temp 0 -dev $dev 2>/dev/null)
  [ -n "$native" ] && [ "$native" = "$scalar" ] && ok || fail "-dev $dev: scalar text differs: '$scalar' vs '$native'"
done

err=$(LLM_CPU_ISA=avx9 "$LLM" run -m "$M" -p "Once" -n 2 --temp 0 2>&1 >/dev/null)
[ "$(grep -c 'warning: LLM_CPU_ISA=avx9 is not scalar, avx2, avxvnni, avx512 or native' <<<"$err")" = 1 ] && ok \
  || fail "unknown LLM_CPU_ISA: $err"

if [ $skipped -gt 0 ]; then echo "test_isa_caps: $passed passed, $failed failed, $skipped skipped"
else echo "test_isa_caps: $passed passed, $failed failed"; fi
[ $failed -eq 0 ]
