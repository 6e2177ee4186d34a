#!/usr/bin/env python3
"""bench/run.sh's report: prints bench/results/latest.md from the files run.sh left in
bench/results/tmp. bench.manifest lists the runs (suite|model|file|label); each program's run is
bench.SUITE.MODEL.PROG.rR (PROG llm or llama, R the round), its probes bench.SUITE.MODEL.PROG with
.rss and .start1-3, and each has .jsonl (stdout), .err (stderr) and .usage (peak RSS in KiB, wall
seconds). Of the rounds, each program's best per test (highest mean t/s) is reported."""
import argparse, datetime, json, os, re, subprocess

SUITES = {'main': '2 threads', 'depth': 'Long context, 2 threads', '1t': '1 thread',
          'chat': 'Chat-sized prompts, 2 threads (`-p 16,64 -n 0`)'}
ISA = ('avx2', 'avx512f', 'avx512_vnni', 'avx512_bf16', 'avx_vnni')


def read_text(path):
    return open(path, encoding='utf-8').read() if os.path.exists(path) else ''


def read_jsonl(path):
    return [json.loads(line) for line in read_text(path).splitlines() if line.strip()]


def usage(path):
    """(peak RSS in KiB, wall seconds) of one run, or None if it did not run."""
    words = read_text(path).split()
    return (int(words[0]), float(words[1])) if len(words) == 2 else None


def test_name(t):
    """llama-bench's test name: pp512, tg128, pp512+tg128, then ' @ d4096' for a depth."""
    if t['n_gen'] == 0:
        name = 'pp%d' % t['n_prompt']
    elif t['n_prompt'] == 0:
        name = 'tg%d' % t['n_gen']
    else:
        name = 'pp%d+tg%d' % (t['n_prompt'], t['n_gen'])
    return name + (' @ d%d' % t['n_depth'] if t['n_depth'] else '')


def same_test(t):
    return (t['n_prompt'], t['n_gen'], t['n_depth'], t['n_threads'])


def size(n):
    return '%.2f GiB' % (n / 2**30) if n >= 2**30 else '%.2f MiB' % (n / 2**20)


def ts(t):
    return '%.2f ± %.2f' % (t['avg_ts'], t['stddev_ts']) if t else 'n/a'


def table(cols, rows):
    """A markdown table; text columns left-aligned, figures right-aligned."""
    print('| ' + ' | '.join(cols) + ' |')
    print('|' + '|'.join('---' if c in ('model', 'test') else '---:' for c in cols) + '|')
    for row in rows:
        print('| ' + ' | '.join(row) + ' |')


def perf_table(perf):
    """{perf.md row: {pp512: t/s, tg128: t/s}} from its '2 threads, default CPU build' table."""
    title = '## 2 threads, default CPU build'
    text = read_text(perf)
    if title not in text:
        return {}
    lines = [l for l in text.split(title, 1)[1].split('\n## ', 1)[0].splitlines() if l.startswith('|')]
    head = [c.strip() for c in lines[0].strip('|').split('|')]
    out = {}
    for l in lines[2:]:
        cells = [c.strip() for c in l.strip('|').split('|')]
        out[cells[0]] = {h: cells[i].split('±')[0].strip() for i, h in enumerate(head) if h in ('pp512', 'tg128')}
    return out


def kv_bytes(binary, model, n_ctx):
    """F16 K and V of every layer for n_ctx cells, from the model's hyper-parameters."""
    info = subprocess.run([binary + '/llm', 'info', '--json', model], check=True, capture_output=True, text=True)
    hp = json.loads(info.stdout)['hparams']
    return 2 * 2 * hp['n_layer'] * n_ctx * hp['n_head_kv'] * hp['n_embd_head']


class Run:
    """The files of one bench/run.sh run."""

    def __init__(self, tmp, rounds):
        self.tmp, self.rounds = tmp, rounds
        with open(os.path.join(tmp, 'bench.manifest'), encoding='utf-8') as f:
            self.runs = [line.rstrip('\n').split('|') for line in f]  # suite, model, file, label

    def path(self, suite, model, prog, ext, probe=''):
        return os.path.join(self.tmp, 'bench.%s.%s.%s%s.%s' % (suite, model, prog, probe, ext))

    def errs(self, suite, model, prog):
        return [read_text(self.path(suite, model, prog, 'err', '.r%d' % r)) for r in range(1, self.rounds + 1)]

    def best(self, suite, model, prog):
        """Each test of one program's rounds at its best (highest mean t/s), in the order of the
        first round, with the stderr of the round it comes from."""
        best = {}
        for r, err in enumerate(self.errs(suite, model, prog), 1):
            for t in read_jsonl(self.path(suite, model, prog, 'jsonl', '.r%d' % r)):
                if same_test(t) not in best or t['avg_ts'] > best[same_test(t)][0]['avg_ts']:
                    best[same_test(t)] = (t, err)
        return list(best.values())

    def tests(self, prog):
        return [t for s, m, _, _ in self.runs for t, _ in self.best(s, m, prog)]

    def startup(self, model, prog):
        """Best start-up in seconds: wall time of a -p 0 -n 1 run minus its timed token; None if none ran."""
        times = []
        for i in (1, 2, 3):
            u = usage(self.path('main', model, prog, 'usage', '.start%d' % i))
            t = read_jsonl(self.path('main', model, prog, 'jsonl', '.start%d' % i))
            if u and t:
                times.append(u[1] - t[0]['avg_ns'] / 1e9)
        return min(times) if times else None


def build(tests):
    return '%s (%s)' % (tests[0]['build_commit'], tests[0]['build_number']) if tests else 'n/a'


def header(a, run, side):
    ours, theirs = run.tests('llm'), run.tests('llama')
    errs = [e for s, m, _, _ in run.runs for e in run.errs(s, m, 'llm')]
    lines = [l.split('roofline: ', 1)[1] for e in errs for l in e.splitlines() if 'roofline: read bandwidth' in l]
    bandwidths = [float(re.search(r'read bandwidth ([\d.]+) GB/s', l).group(1)) for l in lines]
    flags = next((l.split(':', 1)[1].split() for l in read_text('/proc/cpuinfo').splitlines()
                  if l.startswith('flags')), [])

    if side:
        print('# llm-bench vs llama.cpp\'s llama-bench, side by side\n')
    else:
        print('# llm-bench and the roofline (no side-by-side run)\n')
        print('**No side-by-side run**: LLAMA_BENCH was not set, so this table has our figures and their')
        print('roofline fractions only. Ratios to llama.cpp need `make bench LLAMA_BENCH=...` (see bench/README.md).\n')
    print('- machine: %s, %d CPUs; %s' % (a.cpu or 'unknown CPU', os.cpu_count(),
                                         ', '.join('%s %s' % (f, 'yes' if f in flags else 'no') for f in ISA)))
    print('- date: %s UTC; run time %s s; load average before the run: %s' % (
        datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M'), a.elapsed, a.load))
    print('- llm build: %s' % build(ours) + ('; llama.cpp build: %s' % build(theirs) if side else ''))
    print('- roofline, measured by each llm-bench run (`--roofline`): %s' % (lines[0] if lines else 'not measured'))
    if len(bandwidths) > 1:
        print('  (read bandwidth over the %d runs: %.2f-%.2f GB/s)'
              % (len(bandwidths), min(bandwidths), max(bandwidths)))
    print('- roofline fraction: tg = model bytes x t/s / read bandwidth; pp = 2 x non-embedding params x t/s /')
    print('  FP32 FMA peak at the test\'s thread count')
    print('- tests: `%s`, t/s = mean ± sample sd; %s' % (
        a.tests, 'per model, llm-bench and llama-bench on the same GGUF file' if side else 'llm-bench only'))
    if a.rounds > 1:
        print('  in %d rounds of alternating order (ours first, then theirs first); each program\'s better round per'
              % a.rounds)
        print('  test is shown (this VM has minutes at up to half speed, which one round hands to whichever ran then)')
    print('- models: synthetic Qwen2.5-0.5B and TinyLlama-1.1B shapes (with BENCH_LONG=1 also Qwen2.5-1.5B and 3B,')
    print('  Llama-2-7B; `llm synth --seed 1`, random weights,')
    print('  cached in models/) and stories260K; "mix" = llama-quantize\'s default type mix, "pure" = every')
    print('  matrix of the type')
    if a.quick:
        print('- **smoke test** (`BENCH_QUICK=1`): tiny models, one repetition; checks the script, measures nothing')


def speed_tables(a, run, side):
    perf = {} if side else perf_table(a.perf)
    for suite, heading in SUITES.items():
        names = [(m, label) for s, m, _, label in run.runs if s == suite]
        if not names:
            continue
        depth = ' (`-d %s`)' % a.depth if suite == 'depth' else ''
        subset = '' if suite == 'main' else ': %s only, to keep the run short' % ', '.join(l for _, l in names)
        print('\n## %s%s%s\n' % (heading, depth, subset))
        # perf.md: another machine, another day: an order of magnitude, never a ratio
        show_perf = suite == 'main' and a.pp == '512' and any(label in perf for _, label in names)
        cols = ['model', 'size', 'test', 'llm t/s'] + (['llama.cpp t/s', 'llm / llama.cpp'] if side else [])
        cols += ['llm roofline'] + (['llama.cpp on another machine (perf.md, Zen 3): order of magnitude only']
                                    if show_perf else [])
        rows = []
        for m, label in names:
            theirs = {same_test(t): t for t, _ in run.best(suite, m, 'llama')}
            for t, err in run.best(suite, m, 'llm'):
                roof = dict(re.findall(r'roofline: (.+?): [\d.]+ G\w+/s = ([\d.]+%) of', err))
                name, their = test_name(t), theirs.pop(same_test(t), None)
                row = [label, size(t['model_size']), name, ts(t)]
                if side:
                    row += [ts(their), '%.2f' % (t['avg_ts'] / their['avg_ts']) if their else 'n/a']
                row += [roof.get(name, 'n/a')] + ([perf.get(label, {}).get(name, '')] if show_perf else [])
                rows.append(row)
            for their in theirs.values():  # tests that only llama-bench finished
                rows.append([label, size(their['model_size']), test_name(their), 'n/a', ts(their), 'n/a', 'n/a'])
        table(cols, rows)


def memory_table(a, run, side):
    models = [(m, f, label) for s, m, f, label in run.runs if s == 'main']
    if not models:
        return
    print('\n## Resident memory and start-up, 2 threads\n')
    print('Peak RSS (the kernel\'s high-water mark, mapped file pages included) of `-p %s -n 1 -r 1 --no-warmup`;'
          % a.pp)
    print('budget = file size + F16 KV cache of %s cells + 64 MiB. Start-up = wall time of' % a.pp)
    print('`-p 0 -n 1 -r 1 --no-warmup` minus its timed token (process start, model load, context), best of 3.\n')
    progs = ['llm', 'llama'] if side else ['llm']
    who = {'llm': 'llm', 'llama': 'llama.cpp'}
    cols = ['model', 'file', 'budget'] + ['%s peak RSS' % who[p] for p in progs]
    cols += ['%s start-up' % who[p] for p in progs] + (['llm / llama.cpp'] if side else [])
    rows = []
    for m, f, label in models:
        n = os.path.getsize(f)
        row = [label, size(n), size(n + kv_bytes(a.bin, f, int(a.pp)) + 64 * 2**20)]
        for p in progs:
            u = usage(run.path('main', m, p, 'usage', '.rss'))
            row.append(size(u[0] * 1024) if u else 'n/a')
        start = [run.startup(m, p) for p in progs]
        row += ['%.0f ms' % (s * 1e3) if s is not None else 'n/a' for s in start]
        if side:
            row.append('%.2f' % (start[0] / start[1]) if None not in start and start[1] else 'n/a')
        rows.append(row)
    table(cols, rows)


def per_byte_table(run, side):
    """Decode's read rate against model size: model bytes x tg t/s, which stays flat as the model
    grows past the caches when decode is bound by memory alone (BENCH_LONG=1 adds the larger shapes)."""
    rows = []
    for s, m, _, label in run.runs:
        if s != 'main':
            continue
        theirs = {same_test(t): t for t, _ in run.best(s, m, 'llama')}
        for t, _ in run.best(s, m, 'llm'):
            if t.get('n_gen', 0) and not t.get('n_prompt', 0):
                their = theirs.get(same_test(t))
                row = [label, size(t['model_size']), '%.2f' % (t['model_size'] * t['avg_ts'] / 1e9)]
                if side:
                    row += ['%.2f' % (their['model_size'] * their['avg_ts'] / 1e9) if their else 'n/a']
                rows.append((t['model_size'], row))
    if not rows:
        return
    print('\n## Decode: weight bytes read per second against model size, 2 threads\n')
    print('Model bytes x tg t/s; flat from the smallest file that misses the L3 cache to the largest when decode')
    print('is bound by memory alone.\n')
    table(['model', 'size', 'llm GB/s'] + (['llama.cpp GB/s'] if side else []), [r for _, r in sorted(rows)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--rounds', type=int, default=1)
    for opt in ('tmp', 'bin', 'perf', 'side-by-side', 'cpu', 'elapsed', 'load', 'tests', 'depth', 'pp'):
        ap.add_argument('--' + opt, default='')
    a = ap.parse_args()
    run, side = Run(a.tmp, a.rounds), a.side_by_side == 'yes'
    header(a, run, side)
    speed_tables(a, run, side)
    per_byte_table(run, side)
    memory_table(a, run, side)


if __name__ == '__main__':
    main()
