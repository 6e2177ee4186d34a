#!/usr/bin/env bash
# llm-bench end to end on stories260K against ../shared/ref/llama-bench/ (run, like the references,
# from the models folder so model_filename is the bare file name): each printer's field names, order,
# quoting and number formats; the test order and names; ranges; --progress lines; llama-bench's
# error lines; the npu A/B with the graph statistics the design predicts; Ctrl-C printing the finished
# tests and the md footer.
set -u
LLM=$(cd "$(dirname "${LLM:-bin/llm}")" && pwd)/$(basename "${LLM:-bin/llm}")
SHARED=$(cd "${SHARED:-../shared}" && pwd)
M=$SHARED/models
REF=$SHARED/ref/llama-bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0; skipped=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

bench() { (cd "$M" && "$LLM" bench "$@"); }

# Structure of our output ($2) against a reference ($1) for format $3 (python3, stdlib only).
compare() {
  python3 - "$1" "$2" "$3" <<'EOF'
import json, re, sys
ref_path, out_path, fmt = sys.argv[1:4]
ref, out = open(ref_path, encoding='utf-8').read(), open(out_path, encoding='utf-8').read()
EXTRA = ['acl_graph', 'graph_captures', 'graph_replays', 'graph_hits', 'graph_misses', 'graph_evictions',
         'eager_launches', 'npu_launch_us', 'ops_replayed', 'host_launch_us_per_token', 'host_match_us_per_token',
         'host_serial_us_per_token', 'device_us_per_token', 'host_waits', 'host_waits_shared_cpu', 'n_splits',
         'copy_bytes_per_token', 'n_ranks', 'ranks_split', 'use_mmap']
# their values on cpu (no graph cache, one split, one rank; -lm auto maps the file) and sql types;
# sql puts n_splits .. ranks_split in llm_bench_splits and use_mmap in llm_bench_load (N_EXTRA of
# them stay in llm_bench_extra, whose columns never change)
EXTRA_CPU = ['1'] + ['0'] * 8 + ['0.000000'] * 4 + ['0'] * 2 + ['1', '0.000000', '1', '5', '1']
EXTRA_SQL = ['INTEGER'] * 9 + ['REAL'] * 4 + ['INTEGER'] * 3 + ['REAL', 'INTEGER', 'TEXT', 'INTEGER']
N_EXTRA = 15
# after them operator fusion and the kernels per token with and without it (sql: llm_bench_fusion)
FUSION = ['operator_fusion', 'launches_per_token', 'launches_per_token_unfused']
FUSION_CPU = ['0', '0.000000', '0.000000']
FUSION_SQL = ['INTEGER', 'REAL', 'REAL']
VOLATILE = {'build_commit', 'build_number', 'cpu_info', 'test_time', 'avg_ns', 'stddev_ns', 'avg_ts', 'stddev_ts'}
FORMATS = {'build_number': r'\d+', 'test_time': r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ', 'avg_ns': r'\d+',
           'stddev_ns': r'\d+', 'avg_ts': r'\d+\.\d{6}', 'stddev_ts': r'\d+\.\d{6}'}
errors = []
def err(msg): errors.append(msg)

def check_record(names, want, got, raw_got):
    """names: reference field names; want/got: dicts of values; raw_got: text form of got's values."""
    for n in names:
        if n not in got: err('missing field ' + n); continue
        if n in FORMATS and not re.fullmatch(FORMATS[n], raw_got[n]): err('%s: bad format %r' % (n, raw_got[n]))
        if n not in VOLATILE and want[n] != got[n]: err('%s: %r != %r' % (n, got[n], want[n]))

def split_csv(line):
    vals = re.findall(r'"((?:[^"]|"")*)"(?:,|$)', line)
    if ','.join('"%s"' % v for v in vals) != line: err('csv quoting: ' + line)
    return [v.replace('""', '"') for v in vals]

if fmt == 'csv':
    rl, ol = ref.splitlines(), out.splitlines()
    names = rl[0].split(',')
    if ol[0].split(',') != names + EXTRA + FUSION: err('csv header: ' + ol[0])
    if len(rl) != len(ol): err('csv rows %d != %d' % (len(ol), len(rl)))
    for r, o in zip(rl[1:], ol[1:]):
        w, g = split_csv(r), split_csv(o)
        check_record(names, dict(zip(names, w)), dict(zip(names, g)), dict(zip(names, g)))
        if g[len(names):] != EXTRA_CPU + FUSION_CPU: err('extra csv values %r' % g[len(names):])
elif fmt in ('json', 'jsonl'):
    if fmt == 'json':
        want, got = json.loads(ref), json.loads(out)
        # layout: 4-space fields, objects joined by ",\n", closing "\n]\n"
        if not (out.startswith('[\n  {\n    "build_commit": ') and out.endswith('\n  }\n]\n') and '\n  },\n  {\n' in out):
            err('json layout')
        raw = re.findall(r'^    "(\w+)": (.*?),?$', out, re.M)
    else:
        want = [json.loads(l) for l in ref.splitlines()]
        got = [json.loads(l) for l in out.splitlines()]
        for l in out.splitlines():
            if not re.fullmatch(r'\{("\w+": ("[^"]*"|-?\d+(\.\d+)?|true|false), )+"samples_ns": \[ [\d, ]+ \],'
                                r'"samples_ts": \[ [\d., e+]+ \]\}', l): err('jsonl layout: ' + l[:80])
        raw = re.findall(r'"(\w+)": ("[^"]*"|[^,\]]+|\[[^\]]*\])', out)
    if len(want) != len(got): err('objects %d != %d' % (len(got), len(want)))
    per = len(raw) // max(len(got), 1)
    for i, (w, g) in enumerate(zip(want, got)):
        names = list(w.keys())
        if list(g.keys()) != names[:-2] + EXTRA + FUSION + names[-2:]: err('json keys: %r' % list(g.keys()))
        rawd = {k: v.strip('"') for k, v in raw[i * per:(i + 1) * per]}
        check_record(names[:-2], w, g, rawd)
        if len(g['samples_ns']) != len(w['samples_ns']) or len(g['samples_ts']) != len(w['samples_ts']):
            err('samples')
        # samples_ts printed like C++ ostream (%g: 6 significant digits)
        for x in re.findall(r'"samples_ts": \[ ([^\]]*) \]', out):
            for v in x.split(', '):
                if v != '%g' % float(v): err('samples_ts format ' + v)
elif fmt == 'sql':
    # llama-bench's text once ours is taken out: our CREATE TABLE (after llama-bench's) and, after
    # each llama_bench INSERT, the llm_bench_extra INSERT keyed to the new rowid, test_time and avg_ns.
    mask = lambda s: re.sub(r"'[^']*'", "'V'", s)
    rl, ol = ref.splitlines(), out.splitlines()
    names_all, cpu_all, sql_all = EXTRA + FUSION, EXTRA_CPU + FUSION_CPU, EXTRA_SQL + FUSION_SQL
    linked_tables = (('llm_bench_splits', N_EXTRA, len(EXTRA) - 1), ('llm_bench_load', len(EXTRA) - 1, len(EXTRA)),
                     ('llm_bench_fusion', len(EXTRA), len(names_all)))
    def table(name, lo, hi):
        t = ['CREATE TABLE IF NOT EXISTS %s (' % name, '  llama_bench_rowid INTEGER,', '  test_time TEXT,',
             '  avg_ns INTEGER,'] + ['  %s %s,' % (n, t) for n, t in zip(names_all[lo:hi], sql_all[lo:hi])] + [');', '']
        t[-3] = t[-3].rstrip(',')
        return t
    create = table('llm_bench_extra', 0, N_EXTRA) + sum((table(*t) for t in linked_tables), [])
    i = ol.index('CREATE TABLE IF NOT EXISTS llm_bench_extra (') if create[0] in ol else len(ol)
    if i != rl.index(');') + 2 or ol[i:i + len(create)] != create: err('sql llm_bench_extra table: %r' % ol[i:i + len(create)])
    del ol[i:i + len(create)]
    extra_re = (r"INSERT INTO llm_bench_extra \(llama_bench_rowid, test_time, avg_ns, %s\) SELECT rowid, test_time, "
                r"avg_ns, %s FROM llama_bench WHERE rowid = last_insert_rowid\(\) AND test_time = '([^']*)' AND "
                r"avg_ns = '(\d+)';" % (', '.join(EXTRA[:N_EXTRA]), ', '.join("'%s'" % v for v in EXTRA_CPU[:N_EXTRA])))
    for name, lo, hi in linked_tables:
        linked_re = (r"INSERT INTO %s \(llama_bench_rowid, test_time, avg_ns, %s\) SELECT e.llama_bench_rowid, "
                     r"e.test_time, e.avg_ns, %s FROM \(SELECT llama_bench_rowid, test_time, avg_ns FROM llm_bench_extra "
                     r"WHERE test_time = '[^']*' AND avg_ns = '\d+' ORDER BY rowid DESC LIMIT 1\) AS e;"
                     % (name, ', '.join(names_all[lo:hi]), re.escape(', '.join("'%s'" % v for v in cpu_all[lo:hi]))))
        linked = [l for l in ol if l.startswith('INSERT INTO %s ' % name)]
        if len(linked) != len([l for l in rl if l.startswith('INSERT')]) or not all(re.fullmatch(linked_re, l) for l in linked):
            err('sql %s inserts: %r' % (name, linked[:1]))
        ol = [l for l in ol if not l.startswith('INSERT INTO %s ' % name)]
    mine = []
    for k in range(len(ol) - 1, -1, -1):
        if ol[k].startswith('INSERT INTO llm_bench_extra'):
            m = re.fullmatch(extra_re, ol[k])
            if not m or k == 0 or not ol[k - 1].startswith('INSERT INTO llama_bench ('): err('sql extra insert: ' + ol[k][:160])
            elif "'%s', '%s', " % m.groups() not in ol[k - 1]: err('sql extra insert keys %r' % (m.groups(),))
            mine.append(ol.pop(k))
    if len(mine) != len([l for l in rl if l.startswith('INSERT')]): err('sql extra inserts: %d' % len(mine))
    if len(rl) != len(ol): err('sql lines %d != %d' % (len(ol), len(rl)))
    for r, o in zip(rl, ol):
        if not r.startswith('INSERT'):
            if r != o: err('sql: %r != %r' % (o, r))
            continue
        if mask(r) != mask(o): err('sql insert layout: ' + o[:120])
        names = re.search(r'\((.*?)\) VALUES', r).group(1).split(', ')
        w = dict(zip(names, re.findall(r"'([^']*)'", r)))
        g = dict(zip(names, re.findall(r"'([^']*)'", o)))
        check_record(names, w, g, g)
elif fmt == 'md':
    rl, ol = ref.splitlines(), out.splitlines()
    if len(rl) != len(ol): err('md lines %d != %d' % (len(ol), len(rl)))
    for r, o in zip(rl, ol):
        if r.startswith('build: '):
            if not re.fullmatch(r'build: (unknown|[0-9a-f]{4,}) \(\d+\)', o): err('md footer: ' + o)
        elif '±' in r:
            if len(o) != len(r) or o.rsplit('|', 2)[0] != r.rsplit('|', 2)[0] or \
               not re.fullmatch(r' +\d+\.\d\d ± \d+\.\d\d ', o.rsplit('|', 2)[1]):
                err('md row: %r vs %r' % (o, r))
        elif r != o: err('md: %r != %r' % (o, r))
for e in errors[:10]: print(fmt + ': ' + e)
sys.exit(1 if errors else 0)
EOF
}

# Each printer against its reference.
for fmt in md csv json jsonl sql; do
  bench -m stories260K.gguf -p 16 -n 8 -r 2 -t 1 -o $fmt >"$tmp/out.$fmt" 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 0 ] && compare "$REF/stories260K.p16.n8.r2.t1.$fmt" "$tmp/out.$fmt" $fmt; then ok
  else fail "-o $fmt (exit $rc): $(head -c 300 "$tmp/err")"; fi
done
bench -m stories260K.gguf -p 16 -n 8 -pg 16,8 -d 0,32 -r 2 -t 1 -o md >"$tmp/pg.md" 2>"$tmp/err"
[ $? -eq 0 ] && compare "$REF/stories260K.p16.n8.pg16-8.d0-32.r2.t1.md" "$tmp/pg.md" md && ok \
  || fail "-pg 16,8 -d 0,32: $(head -c 300 "$tmp/err")"

# -oe: a second printer on stderr; the same rows.
bench -m stories260K.gguf -p 16 -n 8 -r 1 -t 1 -o csv -oe json >"$tmp/a.csv" 2>"$tmp/b.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if [x["n_prompt"] for x in d]==[16,0] else 1)' \
  "$tmp/b.json" && [ "$(wc -l <"$tmp/a.csv")" = 3 ] && ok || fail "-oe json"

# Test order and values of ranges (csv columns n_prompt, n_gen, n_depth, n_threads).
cols() { python3 -c 'import csv,sys; r=list(csv.DictReader(sys.stdin)); print(" ".join("/".join(x[c] for c in sys.argv[1:]) for x in r))' "$@"; }
got=$(bench -m stories260K.gguf -p 8 -n 4 -d 0,16 -r 1 -t 1 -o csv 2>/dev/null | cols n_prompt n_gen n_depth)
[ "$got" = "8/0/0 0/4/0 8/0/16 0/4/16" ] && ok || fail "test order: $got"
got=$(bench -m stories260K.gguf -p 1-4 -n 0 -r 1 -t 1 --no-warmup -o csv 2>/dev/null | cols n_prompt)
[ "$got" = "1 2 3 4" ] && ok || fail "-p 1-4: $got"
got=$(bench -m stories260K.gguf -p 2-16*2 -n 0 -r 1 -t 1 --no-warmup -o csv 2>/dev/null | cols n_prompt)
[ "$got" = "2 4 8 16" ] && ok || fail "-p 2-16*2: $got"
got=$(bench -m stories260K.gguf -p 4 -n 0 -t 1-8+3 -r 1 --no-warmup -o csv 2>/dev/null | cols n_threads)
[ "$got" = "1 4 7" ] && ok || fail "-t 1-8+3: $got"
got=$(bench -m stories260K.gguf -p 0 -n 0 -pg 4,2 -r 1 -t 1 -o csv 2>/dev/null | cols n_prompt n_gen)
[ "$got" = "4/2" ] && ok || fail "-p 0 -n 0 -pg 4,2: $got"
got=$(bench -m stories260K.gguf -p 4 -n 2 -r 3 -t 1 -ctk f32 -ctv f32 -fa off -ngl 0 -b 64 -ub 32 -o csv 2>/dev/null \
      | cols type_k type_v flash_attn n_gpu_layers n_batch n_ubatch)
[ "$got" = "f32/f32/0/0/64/32 f32/f32/0/0/64/32" ] && ok || fail "recorded parameters: $got"

# The A/B dimensions: md shows dev and acl_graph only when given.
bench -m stories260K.gguf -p 4 -n 0 -r 1 -t 1 -dev cpu -g on,off >"$tmp/ab.md" 2>"$tmp/err"
head -1 "$tmp/ab.md" | grep -qF '| dev          |  acl_graph |' && [ "$(grep -c '| cpu  ' "$tmp/ab.md")" = 2 ] \
  && ok || fail "-dev/-g columns: $(cat "$tmp/ab.md" "$tmp/err")"
GGML_CANN_ACL_GRAPH=off bench -m stories260K.gguf -p 4 -n 0 -r 1 -t 1 -o jsonl 2>/dev/null | grep -q '"acl_graph": false' \
  && ok || fail "GGML_CANN_ACL_GRAPH=off default"

# --progress: llama-bench's lines, in order.
bench -m stories260K.gguf -p 4 -n 2 -d 8 -r 2 -t 1 --progress -o csv >/dev/null 2>"$tmp/progress"
cat >"$tmp/want" <<'EOF'
llama-bench: benchmark 1/2: starting
llama-bench: benchmark 1/2: warmup prompt run
llama-bench: benchmark 1/2: depth run 1/2
llama-bench: benchmark 1/2: prompt run 1/2
llama-bench: benchmark 1/2: depth run 2/2
llama-bench: benchmark 1/2: prompt run 2/2
llama-bench: benchmark 2/2: starting
llama-bench: benchmark 2/2: warmup generation run
llama-bench: benchmark 2/2: depth run 1/2
llama-bench: benchmark 2/2: generation run 1/2
llama-bench: benchmark 2/2: depth run 2/2
llama-bench: benchmark 2/2: generation run 2/2
EOF
diff "$tmp/want" "$tmp/progress" >/dev/null && ok || fail "--progress: $(cat "$tmp/progress")"

# --roofline: machine limits once, then one line per pp / tg test, on stderr (stdout stays md).
bench -m stories260K.gguf -p 8 -n 4 -r 1 -t 1 --roofline >"$tmp/roof.md" 2>"$tmp/roof"
grep -q '^llm-bench: roofline: read bandwidth [0-9.]* GB/s' "$tmp/roof" \
  && grep -q '^llm-bench: roofline: pp8: .*% of FMA peak' "$tmp/roof" \
  && grep -q '^llm-bench: roofline: tg4: .*% of read bandwidth' "$tmp/roof" \
  && [ "$(grep -c '^|' "$tmp/roof.md")" = 4 ] && ok || fail "--roofline: $(cat "$tmp/roof")"
# its FMA peak is measured with the widest kernel LLM_CPU_ISA allows the inference kernels
(export LLM_CPU_ISA=scalar; bench -m stories260K.gguf -p 0 -n 1 -r 1 -t 1 --roofline >/dev/null 2>"$tmp/roof")
grep -q '^llm-bench: roofline: .* GFLOP/s (1 thread), .*, scalar kernels$' "$tmp/roof" && ok \
  || fail "--roofline under LLM_CPU_ISA=scalar: $(cat "$tmp/roof")"

# llama-bench's parse errors: its two lines on stderr, usage on stdout, exit 1.
expect_parse_error() {
  local want=$1; shift
  bench "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 1 ] && [ "$(cat "$tmp/err")" = "$(printf "$want")" ] && head -1 "$tmp/out" | grep -q '^usage: '; then ok
  else fail "$*: exit $rc, stderr: $(cat "$tmp/err")"; fi
}
expect_parse_error 'error: invalid range\nerror: invalid parameter for argument: -p' -p '1-4*1'
expect_parse_error 'error: invalid range format\nerror: invalid parameter for argument: -p' -p '16x'
expect_parse_error 'error: invalid range format\nerror: invalid parameter for argument: -n' -n '-4'
expect_parse_error 'error: invalid parameter for argument: --frobnicate' --frobnicate
expect_parse_error 'error: invalid parameter for argument: -m' -m
expect_parse_error 'error: invalid parameter for argument: -o' -o xml
expect_parse_error 'error: stoi\nerror: invalid parameter for argument: -r' -r x
bench -h >"$tmp/out" 2>&1 && head -1 "$tmp/out" | grep -q '^usage: ' && ok || fail "-h"

# Our errors: one "llm: error:" line, non-zero exit.
expect_error() {
  local name=$1; shift
  bench "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^llm: error: ' "$tmp/err"; then ok
  else fail "$name: exit $rc, stderr: $(head -c 300 "$tmp/err")"; fi
}
expect_error "missing model" -m nope.gguf -p 4 -n 0 -r 1
# The quantized cache's two rules: head dim 8 takes no 32-element block; a quantized V needs -fa
# (refused before any test runs, whatever the other values of the lists).
expect_error "-ctk q8_0 on head dim 8" -m stories260K.gguf -ctk q8_0 -p 4 -n 0 -r 1
grep -q 'block size 32 does not divide the head dim 8' "$tmp/err" && ok || fail "head dim rule: $(cat "$tmp/err")"
expect_error "-ctv q8_0 -fa 0" -m llama-k256-f32.gguf -ctv f16,q8_0 -fa 1,0 -p 4 -n 0 -r 1
grep -q 'quantized V cache (Q8_0) needs flash attention' "$tmp/err" && [ ! -s "$tmp/out" ] && ok \
  || fail "-ctv q8_0 -fa 0: $(cat "$tmp/out" "$tmp/err")"
# A test that fails after others ran: rows so far and the footer remain.
bench -m stories260K.gguf,nope.gguf -p 4 -n 0 -r 1 -t 1 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && [ "$(grep -c 'pp4' "$tmp/out")" = 1 ] && tail -1 "$tmp/out" | grep -q '^build: ' && ok \
  || fail "second model missing: $(cat "$tmp/out" "$tmp/err")"

# The npu and its graph statistics, exactly as the design predicts (python3 reads the jsonl).
stats() { python3 -c 'import json,sys
for l in sys.stdin:
    r=json.loads(l); print(r["devices"], int(r["acl_graph"]), r["npu_launch_us"], r["graph_captures"], r["graph_hits"],
          r["graph_misses"], r["graph_replays"], r["eager_launches"] > 0, r["ops_replayed"] > 0, r["avg_ts"] > 0)'; }
# tg16 x 3: the warm-up token captures the decode graph, the 48 timed tokens replay it.
got=$(bench -m stories260K.gguf -dev npu -p 0 -n 16 -r 3 -t 2 -o jsonl 2>"$tmp/err" | stats)
[ "$got" = "npu 1 0 1 48 1 49 True True True" ] && ok || fail "npu tg16 statistics: $got $(cat "$tmp/err")"
# pp64 x 3: prefill is eager unless GGML_CANN_PREFILL_USE_GRAPH; then warm-up captures, 3 hits.
got=$(bench -m stories260K.gguf -dev npu -p 64 -n 0 -r 3 -t 1 -o jsonl 2>"$tmp/err" | stats)
[ "$got" = "npu 1 0 0 0 0 0 True False True" ] && ok || fail "npu pp64 eager: $got $(cat "$tmp/err")"
got=$(GGML_CANN_PREFILL_USE_GRAPH=1 bench -m stories260K.gguf -dev npu -p 64 -n 0 -r 3 -t 1 -o jsonl 2>"$tmp/err" | stats)
[ "$got" = "npu 1 0 1 3 1 4 True True True" ] && ok || fail "npu pp64 with prefill graphs: $got $(cat "$tmp/err")"
# pp64 eager launches: the same graph 4 times (warm-up + 3), every computing node launched.
n1=$(bench -m stories260K.gguf -dev npu -p 64 -n 0 -r 1 -t 1 -o jsonl 2>/dev/null | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["eager_launches"])')
n3=$(bench -m stories260K.gguf -dev npu -p 64 -n 0 -r 3 -t 1 -o jsonl 2>/dev/null | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["eager_launches"])')
[ $((n3 * 2)) -eq $((n1 * 4)) ] && ok || fail "eager launches grow with repetitions: $n1 (r 1), $n3 (r 3)"
# Kernels per decode token with operator fusion off and on, replayed and eager: stories260K's 98
# nodes and one RoPE table per token (no CHANNEL_NORM: attention reads only its K and V padded, from
# the padded cache); fusion absorbs 26 of them, the same count unfused either way.
got=$(for f in off on; do GGML_CANN_OPERATOR_FUSION=$f bench -m stories260K.gguf -dev npu -g on,off -p 0 -n 4 -r 1 -t 1 \
      -o jsonl 2>"$tmp/err"; done | python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l); print(r["operator_fusion"], r["launches_per_token"], r["launches_per_token_unfused"], end=",")')
[ "$got" = "False 99.0 99.0,False 99.0 99.0,True 73.0 99.0,True 73.0 99.0," ] && ok \
  || fail "launches per token with and without fusion: $got $(cat "$tmp/err")"
# The A/B in one run: cpu, npu graph on and off, launch costs 0 and 5; md shows the dimensions.
bench -m stories260K.gguf -dev cpu,npu -g on,off --npu-launch-us 0,5 -p 0 -n 4 -r 1 -t 1 -o jsonl >"$tmp/ab.jsonl" 2>"$tmp/err"
got=$(stats <"$tmp/ab.jsonl" | cut -d' ' -f1-4 | tr '\n' ',')
[ "$got" = "cpu 1 0 0,cpu 1 5 0,cpu 0 0 0,cpu 0 5 0,npu 1 0 1,npu 1 5 1,npu 0 0 0,npu 0 5 0," ] && ok \
  || fail "-dev cpu,npu -g on,off --npu-launch-us 0,5: $got $(cat "$tmp/err")"
bench -m stories260K.gguf -dev npu --npu-launch-us 0,5 -p 0 -n 2 -r 1 -t 1 >"$tmp/ab.md" 2>"$tmp/err"
head -1 "$tmp/ab.md" | grep -qF '| dev          | launch_us |' && [ "$(grep -c '| npu  ' "$tmp/ab.md")" = 2 ] \
  && ok || fail "launch_us column: $(cat "$tmp/ab.md" "$tmp/err")"
# -v: the execution mode once per mode, the launch cost and the statistics per test.
bench -m stories260K.gguf -dev npu -g on,off --npu-launch-us 3 -p 0 -n 2 -r 1 -t 1 -v >/dev/null 2>"$tmp/v"
[ "$(grep -c 'execution mode is GRAPH' "$tmp/v")" = 1 ] && [ "$(grep -c 'execution mode is EAGER' "$tmp/v")" = 1 ] \
  && grep -q 'launch cost model: 3 us' "$tmp/v" && [ "$(grep -c 'npu launch cost 3 us: captures' "$tmp/v")" = 2 ] \
  && ok || fail "-v npu lines: $(cat "$tmp/v")"
# the machine warm-up: once, before the first test, at least 300 ms (it keeps the tests' counters
# exact: the graph counts above are the tests' own); none with --no-warmup
[ "$(grep -c '^llm-bench: machine warm-up: [0-9]* rounds of 16 tokens in \(3[0-9][0-9]\|[4-9][0-9][0-9]\|1[0-9][0-9][0-9]\)\.' "$tmp/v")" = 1 ] \
  && ok || fail "-v machine warm-up line: $(cat "$tmp/v")"
bench -m stories260K.gguf -dev npu -p 0 -n 2 -r 1 -t 1 -v --no-warmup >/dev/null 2>"$tmp/v"
! grep -q 'machine warm-up' "$tmp/v" && ok || fail "--no-warmup still warms up: $(cat "$tmp/v")"

# --token-times: per repetition the prompt entry (pp, pg) and one entry per decode step, adding up
# to within 1 % of the repetition's time; depth-shifted too; the summaries only where they apply;
# -v prints them; none of it without the flag (the printers' checks above).
bench -m stories260K.gguf -p 8 -n 6 -pg 8,6 -d 0,4 -r 3 -t 1 -o jsonl --token-times -v >"$tmp/tok.jsonl" 2>"$tmp/tok.err"
python3 - "$tmp/tok.jsonl" <<'EOF2' && ok || fail "--token-times: $(head -c 300 "$tmp/tok.err")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 6, len(rows)
for r in rows:
    p, g = r['n_prompt'], r['n_gen']
    assert len(r['token_ns']) == 3 == len(r['samples_ns']), r['token_ns']
    for toks, total in zip(r['token_ns'], r['samples_ns']):
        assert len(toks) == (p > 0) + g, (p, g, toks)
        assert all(isinstance(t, int) and t > 0 for t in toks), toks
        assert abs(sum(toks) - total) <= 0.01 * total, (sum(toks), total)
    assert ('ttft_ms' in r) == (p > 0 and g > 0), r.keys()
    assert ('itl_p50_ms' in r) == (g > 0), r.keys()
    if g:
        steps = sorted(t for toks in r['token_ns'] for t in toks[(p > 0):])
        assert len(steps) == 3 * g
        rank = lambda q: steps[max(1, -(-q * len(steps) // 100)) - 1] / 1e6  # nearest rank
        for q in (50, 90, 99):
            assert abs(r['itl_p%d_ms' % q] - rank(q)) < 1e-6, (q, r['itl_p%d_ms' % q], rank(q))
        assert abs(r['itl_max_ms'] - steps[-1] / 1e6) < 1e-6
    if 'ttft_ms' in r:
        want = sum(t[0] + t[1] for t in r['token_ns']) / 3 / 1e6
        assert abs(r['ttft_ms'] - want) < 1e-6, (r['ttft_ms'], want)
EOF2
[ "$(grep -c 'inter-token latency over 18 decode steps: p50 ' "$tmp/tok.err")" = 4 ] \
  && [ "$(grep -c ': TTFT [0-9.]* ms (mean of 3), inter-token' "$tmp/tok.err")" = 2 ] && ok \
  || fail "--token-times -v: $(grep -i latency "$tmp/tok.err")"
bench -m stories260K.gguf -p 8 -n 6 -r 2 -t 1 -o json >"$tmp/notok.json" 2>/dev/null
! grep -q 'token_ns\|ttft_ms\|itl_' "$tmp/notok.json" && ok || fail "token times without --token-times"
# llm-run -v: TTFT and the inter-token percentiles of its generation
"$LLM" run -m "$M/stories260K.gguf" -p "Once upon a time" -n 20 --temp 0 --ignore-eos -v >/dev/null 2>"$tmp/run.err"
grep -q '^llm-run: latency: TTFT [0-9.]* ms, inter-token over 19 tokens: p50 [0-9.]* ms, p90 [0-9.]* ms, p99 [0-9.]* ms, max [0-9.]* ms$' \
  "$tmp/run.err" && ok || fail "llm-run -v latency: $(grep latency "$tmp/run.err")"

# Graph mode captures once per 256-cell window: without the warm-up run (which would capture them
# first), tg600's decode steps 0, 256 and 512 each capture and replay: 4-6 times the 16 replayed
# steps after them on this VM, 2.5-3.5 under ASan; only a floor is checked (the VM's hiccups make
# other steps slow too).
bench -m stories260K.gguf -dev npu -p 0 -n 600 -r 1 -t 1 --no-warmup --token-times -o json >"$tmp/spike.json" 2>/dev/null
python3 - "$tmp/spike.json" <<'EOF2' && ok || fail "capture spikes: $(head -c 300 "$tmp/spike.json")"
import json, statistics, sys
r = json.load(open(sys.argv[1]))[0]
t = r['token_ns'][0]
assert len(t) == 600 and r['graph_captures'] == 3, (len(t), r['graph_captures'])
after = {i: statistics.median(t[i + 1:i + 17]) for i in (0, 256, 512)}
assert all(t[i] > 1.5 * after[i] for i in after), [(i, t[i], after[i]) for i in after]
EOF2

# -ngl takes effect on the npu (issue 25): -ngl 0 leaves it idle (one cpu split, nothing copied);
# -ngl 3 puts stories260K's last two layers and its output there (the cpu runs the first three:
# two splits); -ngl 99 all but the token embedding (two splits); rows say CANN, md shows ngl.
bench -m stories260K.gguf -dev npu -ngl 0,3,99 -p 0 -n 4 -r 1 -t 1 -o jsonl >"$tmp/ngl.jsonl" 2>"$tmp/err"
got=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["backends"], r["n_gpu_layers"], r["n_splits"], r["copy_bytes_per_token"] > 0,
                            r["graph_replays"] > 0, end=",")' "$tmp/ngl.jsonl")
[ "$got" = "CANN 0 1 False False,CANN 3 2 True True,CANN 99 2 True True," ] && ok || fail "-ngl rows: $got $(cat "$tmp/err")"
bench -m stories260K.gguf -dev npu -ngl 0,99 -p 0 -n 2 -r 1 -t 1 >"$tmp/ngl.md" 2>"$tmp/err"
grep -q '^| model .* | backend    | ngl | threads |' "$tmp/ngl.md" && grep -q '| CANN       |  99 |' "$tmp/ngl.md" \
  && ok || fail "md ngl column: $(cat "$tmp/ngl.md" "$tmp/err")"

# -nkvo 0,1 (a list, as llama-bench's): with the cache in host memory attention runs on the cpu,
# so each layer splits the graph; the rows record it, md shows an nkvo column.
bench -m stories260K.gguf -dev npu -nkvo 0,1 -p 0 -n 2 -r 1 -t 1 -o jsonl >"$tmp/nkvo.jsonl" 2>"$tmp/err"
got=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["no_kv_offload"], r["n_splits"] > 2, end=",")' "$tmp/nkvo.jsonl")
[ "$got" = "False False,True True," ] && ok || fail "-nkvo rows: $got $(cat "$tmp/err")"
bench -m stories260K.gguf -dev npu -nkvo 0,1 -p 0 -n 2 -r 1 -t 1 2>/dev/null | grep -q '| nkvo |' && ok || fail "md nkvo column"

# -ot alternatives (',') of PAT=DEV items (';'), as llama-bench's: the FFN kept on the cpu splits
# every layer; the token embedding on the npu and the output layer on the cpu make two splits the
# other way round; each row records its overrides.
bench -m stories260K.gguf -dev npu -ot 'ffn_(up|gate|down)=CPU,^output=cpu;token_embd=npu' -p 0 -n 2 -r 1 -t 1 \
  -o jsonl >"$tmp/ot.jsonl" 2>"$tmp/err"
got=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["tensor_buft_overrides"], r["n_splits"], end=",")' "$tmp/ot.jsonl")
[ "$got" = "ffn_(up|gate|down)=CPU 12,^output=cpu;token_embd=npu 2," ] && ok || fail "-ot rows: $got $(cat "$tmp/err")"

# --list-devices: llama-bench's list (the devices beside the cpu), exit 0; -dev none runs on the
# cpu alone and says so in devices.
bench --list-devices >"$tmp/devs" 2>&1 && [ "$(head -1 "$tmp/devs")" = "Available devices:" ] \
  && grep -Eq '^  CANN0: emulated Ascend NPU \(65536 MiB, 65536 MiB free\)$' "$tmp/devs" && [ "$(wc -l <"$tmp/devs")" = 2 ] \
  && ok || fail "--list-devices: $(cat "$tmp/devs")"
# The npu's memory size (LLM_NPU_MEMORY_MIB, an Ascend 910B's 65536 MiB by default) in the list; a
# placement that does not fit is one error line naming the bytes needed and available.
(cd "$M" && LLM_NPU_MEMORY_MIB=1024 "$LLM" bench --list-devices) | grep -qx '  CANN0: emulated Ascend NPU (1024 MiB, 1024 MiB free)' \
  && ok || fail "--list-devices with LLM_NPU_MEMORY_MIB=1024"
(cd "$M" && LLM_NPU_MEMORY_MIB=x "$LLM" bench --list-devices 2>&1 >/dev/null) | grep -q "LLM_NPU_MEMORY_MIB='x' is not a size" \
  && ok || fail "LLM_NPU_MEMORY_MIB=x warns"
(cd "$M" && LLM_NPU_MEMORY_MIB=10 "$LLM" run -m qwen2-tiny-f16.gguf -p hi -n 2 -dev npu >"$tmp/out" 2>"$tmp/err"); rc=$?
[ $rc = 1 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] \
  && grep -qx 'llm: error: cannot place 19646720 bytes of weights in npu memory: 10485760 of 10485760 bytes available' "$tmp/err" \
  && ok || fail "npu out of memory: exit $rc: $(cat "$tmp/out" "$tmp/err")"
got=$(bench -m stories260K.gguf -dev none -p 0 -n 2 -r 1 -t 1 -o jsonl 2>/dev/null | python3 -c 'import json,sys
r = json.loads(sys.stdin.readline()); print(r["devices"], r["backends"], r["n_splits"], r["graph_replays"])')
[ "$got" = "none CPU 1 0" ] && ok || fail "-dev none: $got"

# -lm (and the older -mmp, -dio) as llama-bench's: a list, one model load per mode (-v says how),
# recorded as given in load_mode, with use_mmap beside it; md shows an lm column.
bench -m stories260K.gguf -lm none,mmap+mlock -mmp 0,1 -dio 1 -p 0 -n 2 -r 1 -t 1 -o jsonl -v >"$tmp/lm.jsonl" 2>"$tmp/err"
got=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["load_mode"], r["use_mmap"], end=",")' "$tmp/lm.jsonl")
[ "$got" = "none False,mmap+mlock True,none False,mmap True,dio False," ] && ok || fail "-lm rows: $got $(cat "$tmp/err")"
got=$(grep -o 'loaded stories260K.gguf (-lm [a-z+]*' "$tmp/err" | sed 's/.*-lm //' | tr '\n' ,)
[ "$got" = "none,mmap+mlock,none,mmap,dio," ] && ok || fail "-lm loads: $got"
bench -m stories260K.gguf -lm dio -p 0 -n 2 -r 1 -t 1 >"$tmp/lm.md" 2>/dev/null
grep -q '^| model .* | threads |         lm |' "$tmp/lm.md" && grep -q '|        dio |' "$tmp/lm.md" \
  && ok || fail "md lm column: $(cat "$tmp/lm.md")"
bench -m stories260K.gguf -lm mmap+dio -p 0 -n 2 -r 1 -t 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 1 ] && grep -qx 'error: invalid parameter for argument: -lm' "$tmp/err" && ok || fail "-lm mmap+dio: exit $rc"

# -C, --cpu-strict, --poll (lists, as llama-bench's): each row records its own (md: the columns of
# those given); --numa is accepted and -v says what it does with one node; a --prio the system
# refuses (run as nobody) is one error line before any test.
bench -m stories260K.gguf -C 0x1,0x3 --cpu-strict 1 --poll 0,100 -p 0 -n 2 -r 1 -t 2 -o jsonl >"$tmp/cpu.jsonl" 2>"$tmp/err"
got=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["cpu_mask"], r["cpu_strict"], r["poll"], end=",")' "$tmp/cpu.jsonl")
[ "$got" = "0x1 True 0,0x1 True 100,0x3 True 0,0x3 True 100," ] && ok || fail "-C/--cpu-strict/--poll rows: $got $(cat "$tmp/err")"
bench -m stories260K.gguf -C 0x1 --poll 0 --numa distribute -v -p 0 -n 2 -r 1 -t 1 >"$tmp/cpu.md" 2>"$tmp/err"
grep -q '^| model .* | threads | cpu_mask   |       poll |' "$tmp/cpu.md" && grep -q '| 0x1        |          0 |' "$tmp/cpu.md" \
  && grep -qx 'llm-bench: --numa distribute: one NUMA node, nothing to place' "$tmp/err" && ok \
  || fail "md cpu_mask/poll columns, --numa -v: $(cat "$tmp/cpu.md" "$tmp/err")"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  (cd "$M" && setpriv --reuid=65534 --regid=65534 --clear-groups "$LLM" bench -m stories260K.gguf --prio 2 -p 0 -n 2 \
     -r 1 -t 1 >"$tmp/prio.out" 2>"$tmp/err"); rc=$?
  [ $rc = 1 ] && [ ! -s "$tmp/prio.out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] \
    && grep -q "^llm: error: --prio 2: cannot set the process's nice value to -10: .*needs root or CAP_SYS_NICE" "$tmp/err" \
    && ok || fail "--prio 2 as nobody: exit $rc: $(cat "$tmp/prio.out" "$tmp/err")"
else
  skipped=$((skipped + 1)); echo "SKIP: --prio refusal needs root and setpriv to run as nobody"
fi

# Device options, as llama-bench's lists: -dev items by our names or --list-devices' (CANN0), devices
# joined by '/' run on the npu when they name it, and are recorded as given; -sm none|layer, -mg 0,
# -ts (one share), -ncmoe, -nopo, --no-host are recorded (md: sm, ts, n_cpu_moe, nopo, noh columns),
# in llama-bench's loop order (n_cpu_moe outside devices).
bench -m stories260K.gguf -dev CANN0,npu/cpu,auto,none -sm none -mg 0 -ts 1 -ncmoe 0,2 -nopo 1 --no-host 1 -p 0 -n 2 -r 1 \
  -t 1 -o jsonl >"$tmp/dev.jsonl" 2>"$tmp/err"
got=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["devices"], r["backends"], r["split_mode"], r["main_gpu"], r["tensor_split"], r["n_cpu_moe"],
                            r["no_op_offload"], r["no_host"], end=",")' "$tmp/dev.jsonl")
want="CANN0 CANN none 0 1.00 0 1 True,npu/cpu CANN none 0 1.00 0 1 True,auto CPU none 0 1.00 0 1 True,none CPU none 0 1.00 0 1 True,"
want="${want}CANN0 CANN none 0 1.00 2 1 True,npu/cpu CANN none 0 1.00 2 1 True,auto CPU none 0 1.00 2 1 True,none CPU none 0 1.00 2 1 True,"
[ "$got" = "$want" ] && ok || fail "device option rows: $got $(cat "$tmp/err")"
bench -m stories260K.gguf -sm none -ts 1 -ncmoe 2 -nopo 1 --no-host 1 -p 0 -n 2 -r 1 -t 1 >"$tmp/dev.md" 2>"$tmp/err"
grep -q '^| model .* |  n_cpu_moe | threads |     sm | ts           | nopo |  noh |' "$tmp/dev.md" \
  && ok || fail "md device columns: $(cat "$tmp/dev.md" "$tmp/err")"
for a in "-sm row:-sm row splits tensors over several devices" "-sm tensor:-sm tensor splits" "-mg 1:-mg 1: there is one device" \
         "-ts 1/1:-ts 1.00/1.00: there is one device" "-ncmoe -1:error: invalid range format" "-dev npu/tpu:invalid device: npu/tpu"; do
  bench -m stories260K.gguf ${a%%:*} -p 0 -n 2 -r 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ $rc = 1 ] && grep -qF -- "${a#*:}" "$tmp/err" && ok || fail "${a%%:*}: exit $rc: $(head -c 300 "$tmp/err")"
done
# -embd 0,1: the embeddings context runs every test as usual (its decode stops at the output norm).
bench -m stories260K.gguf -embd 0,1 -p 8 -n 2 -r 1 -t 1 -o jsonl >"$tmp/embd.jsonl" 2>"$tmp/err"
got=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["embeddings"], r["n_prompt"], r["n_gen"], r["avg_ns"] > 0, end=",")' "$tmp/embd.jsonl")
[ "$got" = "False 8 0 True,False 0 2 True,True 8 0 True,True 0 2 True," ] && ok || fail "-embd rows: $got $(cat "$tmp/err")"
# -fitt MiB (a list): on the npu the largest -ngl whose weights and caches leave that much of
# LLM_NPU_MEMORY_MIB free (-v says which; -ngl 0 leaves one split, on the cpu); -fitc is recorded.
(cd "$M" && LLM_NPU_MEMORY_MIB=400 "$LLM" bench -m qwen2-tiny-f16.gguf -dev npu -fitt 0,370,399 -fitc 256 -ub 8 -p 8 -n 0 -r 1 \
   -t 1 -v -o jsonl >"$tmp/fit.jsonl" 2>"$tmp/err")
got=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["fit_target"], r["fit_min_ctx"], r["n_splits"] > 1, end=",")' "$tmp/fit.jsonl")
[ "$got" = "0 256 True,370 256 True,399 256 False," ] && grep -qx 'llm-bench: -fitt 370: -ngl 3' "$tmp/err" \
  && grep -qx 'llm-bench: -fitt 399: -ngl 0' "$tmp/err" && ok || fail "-fitt rows: $got $(grep fitt "$tmp/err")"
# Downloads and RPC: one line each, nothing on stdout.
for a in "-hf x/y" "-hfr x/y" "-hff f.gguf" "-hft tok" "--offline" "-rpc host:50052"; do
  bench $a -p 0 -n 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ $rc = 1 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "pass -m FILE" "$tmp/err" \
    && ok || fail "$a: exit $rc: $(cat "$tmp/out" "$tmp/err")"
done

# Ctrl-C during the second test's --delay: the first test's row, the footer, exit non-zero.
# The signal goes once the first row is out (the machine warm-up and start-up take a varying time,
# longer under ASan), well inside the second test's 3 s delay.
(cd "$M" && exec "$LLM" bench -m stories260K.gguf -p 4,8 -n 0 -r 1 -t 1 --delay 3 >"$tmp/int.md" 2>"$tmp/int.err") &
pid=$!
for _ in $(seq 200); do grep -q '^| .*pp4 |' "$tmp/int.md" && break; sleep 0.1; done
sleep 0.5
kill -INT $pid
wait $pid
rc=$?
[ $rc -ne 0 ] && [ "$(grep -c '^| .*pp4 |' "$tmp/int.md")" = 1 ] && ! grep -q 'pp8' "$tmp/int.md" \
  && tail -1 "$tmp/int.md" | grep -q '^build: ' && ok || fail "SIGINT: exit $rc: $(cat "$tmp/int.md" "$tmp/int.err")"

echo "test_bench_cli: $passed passed, $failed failed$([ $skipped = 0 ] || echo ", $skipped skipped")"
[ $failed -eq 0 ]
