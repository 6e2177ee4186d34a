#!/usr/bin/env bash
# Runs each test program given as an argument, then prints the summed "N passed, N failed" line.
set -u
passed=0; failed=0; broken=()
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  line=$(printf '%s\n' "$out" | grep -E '^[a-z_0-9]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  if [ -z "$line" ]; then
    printf '%s\n' "$out" | tail -n 20
    echo "$t: crashed or printed no summary (exit $rc)"
    failed=$((failed + 1)); broken+=("$t"); continue
  fi
  p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$line")
  if [ "$f" -ne 0 ] || [ "$rc" -ne 0 ]; then printf '%s\n' "$out" | grep -v ' passed, ' | tail -n 40; fi
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && { f=1; echo "$t: exit $rc"; }
  echo "$line"
  passed=$((passed + p)); failed=$((failed + f))
done
echo "${SUITE:-tests}: $passed passed, $failed failed"
[ -n "${RESULTS:-}" ] && echo "$passed $failed" >"$RESULTS"
[ "$failed" -eq 0 ]
