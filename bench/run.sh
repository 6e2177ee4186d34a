#!/usr/bin/env bash
# make bench: llm-bench -p 512 -n 128 -r 3 -t 2 on synthetic models with the shapes of Qwen2.5-0.5B
# (F16, Q8_0, Q4_0) and TinyLlama-1.1B (Q4_0), made once by `llm synth` and cached in models/, and on
# stories260K; writes bench/results/latest.md with llama.cpp's figures (../shared/ref/perf.md, 2
# threads), the ratio, and the roofline fraction measured in the same run.
set -euo pipefail
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
MODELS=models
OUT=bench/results
TMP=$OUT/tmp
mkdir -p "$MODELS" "$TMP"

# name | synth arguments | perf.md row
specs=(
  "qwen2-0.5b-f16|--arch qwen2 --preset qwen2-0.5b --type F16|qwen2 0.5B F16"
  "qwen2-0.5b-q8_0|--arch qwen2 --preset qwen2-0.5b --type Q8_0|qwen2 0.5B Q8_0"
  "qwen2-0.5b-q4_0|--arch qwen2 --preset qwen2-0.5b --type Q4_0|qwen2 0.5B Q4_0 (mix)"
  "tinyllama-1.1b-q4_0|--arch llama --preset tinyllama-1.1b --type Q4_0|llama 1.1B Q4_0 (mix)"
)

files=()
rows=()
for spec in "${specs[@]}"; do
  IFS='|' read -r name args row <<<"$spec"
  f=$MODELS/$name.gguf
  if [ ! -s "$f" ]; then
    echo "make bench: generating $f (once)" >&2
    # shellcheck disable=SC2086 # args are words
    "$BIN/llm" synth $args --seed 1 -o "$MODELS/$name.tmp.gguf"
    mv "$MODELS/$name.tmp.gguf" "$f"
  fi
  files+=("$f")
  rows+=("$row")
done
files+=("$SHARED/models/stories260K.gguf")
rows+=("stories260K F32")

list=$(IFS=,; echo "${files[*]}")
echo "make bench: llm-bench -m $list -p 512 -n 128 -r 3 -t 2 --roofline" >&2
start=$(date +%s)
load=$(cut -d' ' -f1-3 /proc/loadavg)
# jsonl on stdout for the table; md (-oe) and the roofline lines on stderr, kept and shown live
{ "$BIN/llm-bench" -m "$list" -p 512 -n 128 -r 3 -t 2 --roofline -o jsonl -oe md 2>&1 >&3 \
    | tee "$TMP/latest.stderr" >&2; } 3>"$TMP/latest.jsonl"
elapsed=$(($(date +%s) - start))

python3 - "$TMP/latest.jsonl" "$TMP/latest.stderr" "$SHARED/ref/perf.md" "$elapsed" "$load" "${rows[@]}" >"$OUT/latest.md" <<'EOF'
import json, re, sys
jsonl, stderr, perf, elapsed, load, rows = sys.argv[1:6] + [sys.argv[6:]]
tests = [json.loads(l) for l in open(jsonl) if l.strip()]
err = open(stderr, encoding='utf-8').read().splitlines()
machine = next((l.split('roofline: ', 1)[1] for l in err if 'roofline: read bandwidth' in l), 'not measured')
# one roofline line per pp / tg test, in test order
fractions = [re.search(r'roofline: (\S+): .*= ([\d.]+)% of (FMA peak|read bandwidth)', l) for l in err]
fractions = [m for m in fractions if m]
md = [l for l in err if l.startswith('|') or l.startswith('build:')]

def perf_table(title):
    """{row name: {pp512: x, tg128: y}} from a table of perf.md under the heading starting with title."""
    text = open(perf, encoding='utf-8').read()
    sec = text.split('## ' + title, 1)[1].split('\n## ', 1)[0]
    lines = [l for l in sec.splitlines() if l.startswith('|')]
    head = [c.strip() for c in lines[0].strip('|').split('|')]
    out = {}
    for l in lines[2:]:
        cells = [c.strip() for c in l.strip('|').split('|')]
        out[cells[0]] = {h: float(cells[i].split('±')[0]) for i, h in enumerate(head) if h in ('pp512', 'tg128')}
    return out

default, blas = perf_table('2 threads, default CPU build'), perf_table('2 threads, OpenBLAS build')
print('# llm-bench vs llama.cpp (2 threads)\n')
print('`make bench`: `llm-bench -p 512 -n 128 -r 3 -t 2 --roofline` on synthetic models with the exact shapes')
print('of Qwen2.5-0.5B and TinyLlama-1.1B (`llm synth --seed 1`, cached in models/) and on stories260K.')
print('llama.cpp: ../shared/ref/perf.md, the better of its default and OpenBLAS builds, 2 threads, measured')
print('on another day on a 2-core AMD EPYC (Zen 3, AVX2, no AVX-512). When this run\'s CPU differs, the ratio')
print('compares machines as well as programs; the roofline column (a fraction of this machine\'s own limits,')
print('measured in the same run) is the fair figure.\n')
if tests:
    t0 = tests[0]
    print('- build: %s (%s), cpu: %s, run time %s s, load average before the run: %s'
          % (t0['build_commit'], t0['build_number'], t0['cpu_info'], elapsed, load))
print('- machine, measured in the same run: ' + machine)
print('- roofline: tg = model bytes x t/s / read bandwidth; pp = 2 x non-embedding params x t/s / FMA peak\n')
print('| model | size | test | llm t/s | llama.cpp t/s | llm / llama.cpp | roofline |')
print('|---|---:|---|---:|---:|---:|---:|')
for i, t in enumerate(tests):
    test = 'pp%d' % t['n_prompt'] if t['n_gen'] == 0 else 'tg%d' % t['n_gen']
    row = rows[i // 2] if i // 2 < len(rows) else '?'
    refs = [(v, name) for name, tab in (('default', default), ('BLAS', blas)) for v in [tab.get(row, {}).get(test)] if v]
    ref, which = max(refs) if refs else (None, '')
    size = t['model_size'] / 2**20
    size = '%.2f MiB' % size if size < 1024 else '%.2f GiB' % (size / 1024)
    frac = next((m.group(2) + ' %' for m in fractions[i:i + 1] if m.group(1) == test), '')
    print('| %s | %s | %s | %.2f ± %.2f | %s | %s | %s |' % (
        t['model_type'] + ' (' + row + ')' if row.startswith(('qwen2', 'llama')) else t['model_type'], size, test,
        t['avg_ts'], t['stddev_ts'], '%.2f (%s)' % (ref, which) if ref else 'n/a',
        '%.2f' % (t['avg_ts'] / ref) if ref else 'n/a', frac))
print('\n## llm-bench output\n')
print('\n'.join(md))
EOF
echo "make bench: wrote $OUT/latest.md (${elapsed}s)" >&2
cat "$OUT/latest.md"
