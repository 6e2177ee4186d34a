#!/usr/bin/env bash
# LLM_CPU_ISA=avx2 caps the kernels at AVX2 on an AVX-512 machine: the kernel tests pass on the
# AVX2 path too (their counts are added to this script's). Where the CPU has no AVX-512 the
# native runs already cover this path.
set -u
TESTS=${TEST_BUILD:-build}/tests
passed=0; failed=0
for t in test_gemm test_gemm_f16 test_vec_dot test_ops test_backend_ops; do
  out=$(LLM_CPU_ISA=avx2 "$TESTS/$t" 2>&1); rc=$?
  line=$(grep -E "^$t: [0-9]+ passed, [0-9]+ failed" <<<"$out" | tail -1)
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    failed=$((failed + 1)); echo "FAIL: LLM_CPU_ISA=avx2 $t (exit $rc): $(tail -5 <<<"$out")" >&2; continue
  fi
  read -r p f < <(sed -E 's/^[^:]*: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/' <<<"$line")
  passed=$((passed + p)); failed=$((failed + f))
done
echo "test_isa_avx2: $passed passed, $failed failed"
[ $failed -eq 0 ]
