#!/usr/bin/env bash
# Options in combination that must not change the greedy text, the sampled text of a seed, or
# llm-bench's tests and graph counters (issue 24): tests/option_matrix.py.
exec python3 "$(dirname "$0")/option_matrix.py"
