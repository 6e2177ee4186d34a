#!/usr/bin/env bash
# --profile and --trace on the command line: llm-run prints a per-op table per phase and writes a
# trace that a JSON parser reads; llm-bench puts the profile in jsonl/csv/sql (a table of its own,
# joined to its llama_bench row) and writes one trace whose cache instants match the statistics;
# a trace path that cannot be written is one error line before any work.
set -u
LLM=$(cd "$(dirname "${LLM:-bin/llm}")" && pwd)/$(basename "${LLM:-bin/llm}")
SHARED=$(cd "${SHARED:-../shared}" && pwd)
M=$SHARED/models/stories260K.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# llm-run: the table (decode: 36 MUL_MAT per token on stories260K: 5 layers x 7 + the output) and a trace.
"$LLM" run -m "$M" -p "Once upon a time" -n 16 --temp 0 -dev npu --profile --trace "$tmp/run.json" \
  >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && ok || fail "llm-run --profile --trace: $(tail -3 "$tmp/err")"
grep -q '^llm-run: profile: npu, prefill: 5 tokens in 1 graphs' "$tmp/err" && ok || fail "prefill header: $(grep profile "$tmp/err")"
grep -q '^llm-run: profile: npu, decode: 15 tokens in 15 graphs' "$tmp/err" && ok || fail "decode header: $(grep profile "$tmp/err")"
grep -Eq '^llm-run: \| MUL_MAT F32 +\| +36\.00 \|' "$tmp/err" && ok || fail "MUL_MAT per token: $(grep MUL_MAT "$tmp/err")"
grep -q '^llm-run: host per token: build [0-9.]* us, launch [0-9.]* us' "$tmp/err" && ok || fail "npu host line"
python3 - "$tmp/run.json" <<'PY' && ok || fail "llm-run trace"
import json, sys
ev = json.load(open(sys.argv[1]))
spans = [e for e in ev if e['ph'] == 'X']
assert spans and all(e['dur'] >= 0 and e['ts'] >= 0 for e in spans)
assert sum(e['name'] == 'cache miss' for e in ev) == 1 and sum(e['name'] == 'cache hit' for e in ev) == 14
assert sum(e['name'] == 'aclmdlRIExecuteAsync' for e in ev) == 15
assert any(e['ph'] == 'M' and e['args']['name'] == 'npu worker 0' for e in ev)
PY
cmp -s <("$LLM" run -m "$M" -p "Once upon a time" -n 16 --temp 0 2>/dev/null) "$tmp/out" && ok || fail "profiling changed the text"

# The cpu's pool: with 2 threads the profile reports the threads' time at barriers (qwen2-tiny's decode
# splits its matmuls); with 1 thread there is no barrier and no such line.
Q=$SHARED/models/qwen2-tiny-q8_0.gguf
"$LLM" run -m "$Q" -p hi -n 4 --temp 0 -t 2 --profile >/dev/null 2>"$tmp/err" && ok || fail "llm-run -t 2 --profile"
grep -A99 'profile: cpu, decode' "$tmp/err" | sed -n 's/^llm-run: host per token: barrier_wait \([0-9.]*\) us$/\1/p' \
  | awk '{ exit !($1 > 0) }' && ok || fail "cpu barrier_wait line: $(grep -A20 'profile: cpu' "$tmp/err")"
"$LLM" run -m "$Q" -p hi -n 4 --temp 0 -t 1 --profile >/dev/null 2>"$tmp/err" && ok || fail "llm-run -t 1 --profile"
! grep -q 'barrier_wait' "$tmp/err" && ok || fail "one thread reports barrier waits"

# A trace that cannot be written: one error line, nothing run.
"$LLM" run -m "$M" -p hi --trace "$tmp" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q '^llm: error: cannot write the trace' "$tmp/err" && [ ! -s "$tmp/out" ] \
  && ok || fail "llm-run --trace DIR: $(cat "$tmp/err")"
"$LLM" bench -m "$M" -p 4 -n 0 -r 1 --trace "$tmp/no/such/dir.json" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q '^llm: error: cannot write the trace' "$tmp/err" && ok \
  || fail "llm-bench --trace in a missing folder: $(cat "$tmp/err")"

# llm-bench: profile field per test in jsonl, csv and sql; one trace for the run.
for o in jsonl csv sql; do
  "$LLM" bench -m "$M" -dev npu -p 8 -n 4 -r 2 -t 1 --profile -o $o --trace "$tmp/b.$o.json" >"$tmp/b.$o" 2>"$tmp/err" \
    && ok || fail "llm-bench --profile -o $o: $(tail -3 "$tmp/err")"
done
grep -q '^llm-bench: profile: npu, decode: 9 tokens in 9 graphs' "$tmp/err" && ok || fail "llm-bench table: $(grep profile "$tmp/err")"
python3 - "$tmp" <<'PY' && ok || fail "llm-bench profile fields and trace"
import csv, json, sqlite3, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(d + '/b.jsonl')]
pp, tg = rows
assert list(pp['profile']) == ['prefill'] and pp['profile']['prefill']['graphs'] == 3  # warm-up + 2
assert list(tg['profile']) == ['decode'] and tg['profile']['decode']['tokens'] == 9    # warm-up + 2 x 4
assert tg['profile']['decode']['ops']['MUL_MAT F32']['count'] == 9 * 36
c = list(csv.DictReader(open(d + '/b.csv')))
assert len(c) == 2 and json.loads(c[1]['profile'])['decode']['tokens'] == 9
db = sqlite3.connect(':memory:')
db.executescript(open(d + '/b.sql').read())
got = db.execute('SELECT b.n_gen, p.profile FROM llama_bench AS b JOIN llm_bench_profile AS p ON '
                 'p.llama_bench_rowid = b.rowid AND p.test_time = b.test_time AND p.avg_ns = b.avg_ns '
                 'ORDER BY b.rowid').fetchall()
assert [g[0] for g in got] == [0, 4] and json.loads(got[1][1])['decode']['tokens'] == 9
ev = json.load(open(d + '/b.jsonl.json'))
hits = sum(e['name'] == 'cache hit' for e in ev)
assert hits == pp['graph_hits'] + tg['graph_hits'], (hits, pp['graph_hits'], tg['graph_hits'])
PY

echo "test_profile_cli: $passed passed, $failed failed"
[ $failed -eq 0 ]
