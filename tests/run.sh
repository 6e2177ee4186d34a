#!/usr/bin/env bash
# Runs each test program given as an argument, each under a time limit, then prints the summed
# "N passed, N failed" line, followed by ", N skipped" when some check was skipped.
#
# A program counts as (at least) one failure when it exits non-zero, is killed by a signal, runs
# longer than TEST_TIMEOUT seconds, prints no "<name>: N passed, N failed[, N skipped]" line, or runs
# no check at all ("0 passed, 0 failed"). Skipped checks (harness.h SKIP, or a script's own count)
# are summed and their "SKIP ..." lines shown: a skip is never a pass.
#
# Env: TEST_TIMEOUT seconds per program (default 600: the slowest program, test_gen under ASan,
#      takes about a minute on a 2-core machine, so only a hang reaches it); SUITE (name on the
#      closing line); RESULTS (file that receives "passed failed skipped", which the top-level
#      Makefile's test target sums).
set -u
limit=${TEST_TIMEOUT:-600}
passed=0; failed=0; skipped=0; broken=()
summary_re='^[a-z_0-9]+: [0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$'
for t in "$@"; do
  start=$SECONDS
  # Scripts run through bash (an exec bit missing from a new script is no failure of its checks).
  # -k: a program that ignores SIGTERM is killed 10 s later; timeout signals the whole process
  # group, so a script's children (valgrind, bin/llm) go too. stdin is /dev/null: timeout runs the
  # program in a background process group, where reading the terminal would stop it.
  if [[ "$t" == *.sh ]]; then cmd=(bash "$t"); else cmd=("$t"); fi
  out=$(timeout -k 10 "$limit" "${cmd[@]}" 2>&1 </dev/null); rc=$?
  elapsed=$((SECONDS - start))
  if { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && [ "$elapsed" -ge "$limit" ]; then
    printf '%s\n' "$out" | tail -n 20
    echo "$t: TIMEOUT: still running after ${limit} s (TEST_TIMEOUT), killed"
    failed=$((failed + 1)); broken+=("$t"); continue
  fi
  line=$(printf '%s\n' "$out" | grep -E "$summary_re" | tail -n 1)
  if [ -z "$line" ]; then
    printf '%s\n' "$out" | tail -n 20
    if [ "$rc" -gt 128 ]; then
      echo "$t: killed by signal $((rc - 128)) (exit $rc) before printing its summary"
    else
      echo "$t: printed no summary line (exit $rc)"
    fi
    failed=$((failed + 1)); broken+=("$t"); continue
  fi
  p=$(sed -E 's/^[^:]*: ([0-9]+) passed.*/\1/' <<<"$line")
  f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
  s=0
  if [[ "$line" =~ ([0-9]+)\ skipped$ ]]; then s=${BASH_REMATCH[1]}; fi
  if [ "$f" -ne 0 ] || [ "$rc" -ne 0 ]; then
    printf '%s\n' "$out" | grep -Ev "$summary_re" | grep -v '^SKIP' | tail -n 40
  fi
  if [ "$s" -ne 0 ]; then printf '%s\n' "$out" | grep '^SKIP' | head -n 20; fi
  echo "$line"
  if [ "$rc" -gt 128 ]; then
    f=$((f + 1)); echo "$t: killed by signal $((rc - 128)) (exit $rc) after printing its summary"
  elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1; echo "$t: exit $rc although it reported no failure"
  fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
    f=1; echo "$t: ran no checks (0 passed, 0 failed): counted as a failure"
  fi
  [ "$f" -ne 0 ] && broken+=("$t")
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
done
if [ "${#broken[@]}" -gt 0 ]; then echo "${SUITE:-tests}: failing: ${broken[*]}"; fi
closing="${SUITE:-tests}: $passed passed, $failed failed"
if [ "$skipped" -gt 0 ]; then closing="$closing, $skipped skipped"; fi
echo "$closing"
if [ -n "${RESULTS:-}" ]; then echo "$passed $failed $skipped" >"$RESULTS"; fi
[ "$failed" -eq 0 ]
