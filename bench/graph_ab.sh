#!/usr/bin/env bash
# make bench, after run.sh: the ACL graph-mode A/B on the emulated NPU. For stories260K and the
# Qwen2.5-0.5B Q8_0 shape (models/, made by `llm synth` when missing), one sitting of
# llm-bench -p 0 -n 128 -t 2 (-r 10 / -r 3): cpu once per model (it ignores -g and --npu-launch-us), then npu
# with -g on,off x --npu-launch-us 0,5,10,20,40 x operator fusion off,on (GGML_CANN_OPERATOR_FUSION),
# twice in opposite order (each setting's better round). Writes bench/results/graph_ab.md (measured tg t/s, graph/eager and graph/cpu ratios, issue 27's goals met or missed, the host and device
# µs per token from the backend's statistics, and the ratio they predict: eagerly, an asynchronous
# stream overlaps host launching and device work, so a token costs about the host's serial work
# between tokens plus max(host launching, device), or at 0 us their sum where the device thread sat
# on the host's cpu (the host then runs the queue); in graph mode the host's matching and the one
# replay launch come before the device's work, so they add up) and bench/results/crossover.png
# (gnuplot: tg t/s against launch µs), then what a capture costs (bench/capture_cost.sh). The jsonl
# and the plot data stay in bench/results/tmp.
# Installs gnuplot-nox when missing (bench only, not `make deps`).
set -euo pipefail
LAUNCH_US=0,5,10,20,40
# shellcheck source=bench/npu_common.sh
source "$(dirname "$0")/npu_common.sh"

jsonl=$TMP/graph_ab.jsonl
cmds=$TMP/graph_ab.cmds
: >"$jsonl"
: >"$cmds"
start=$(date +%s)
load=$(cut -d' ' -f1-3 /proc/loadavg)
stat0=$(grep '^cpu ' /proc/stat)
labels=()
for spec in "${NPU_AB_MODELS[@]}"; do
  IFS='|' read -r file label reps <<<"$spec"
  args="-p 0 -n 128 -r $reps -t 2"
  labels+=("$label")
  # the npu in two rounds of opposite order (graph on first, then off first): this VM has minutes at
  # up to half speed, and one round hands them to whichever mode ran then; each setting's better
  # round is reported. Each round runs fusion off, then on.
  for run in "off|-dev cpu" "off|-dev npu -g on,off --npu-launch-us $LAUNCH_US" \
             "on|-dev npu -g on,off --npu-launch-us $LAUNCH_US" "off|-dev npu -g off,on --npu-launch-us $LAUNCH_US" \
             "on|-dev npu -g off,on --npu-launch-us $LAUNCH_US"; do
    IFS='|' read -r fusion dev <<<"$run"
    cmd="GGML_CANN_OPERATOR_FUSION=$fusion $BIN/llm-bench -m $file $dev $args -o jsonl"
    echo "make bench: $cmd" >&2
    echo "$cmd" >>"$cmds"
    # shellcheck disable=SC2086 # words
    GGML_CANN_OPERATOR_FUSION=$fusion "$BIN/llm-bench" -m "$file" $dev $args -o jsonl >>"$jsonl"
  done
done
elapsed=$(($(date +%s) - start))
stat1=$(grep '^cpu ' /proc/stat)

python3 - "$jsonl" "$cmds" "$elapsed" "$load|$stat0|$stat1" "$TMP/crossover.dat" "$TMP/crossover.gp" "$OUT/crossover.png" \
  "${labels[@]}" >"$OUT/graph_ab.md" <<'EOF'
import json, sys
jsonl, cmds, elapsed, load, dat, gp, png = sys.argv[1:8]
labels = sys.argv[8:]
tests = [json.loads(l) for l in open(jsonl) if l.strip()]
commands = [l.strip() for l in open(cmds) if l.strip()]
files = list(dict.fromkeys(t['model_filename'] for t in tests))
label = dict(zip(files, labels))

def host(t): return t['host_launch_us_per_token'] + t['host_match_us_per_token']
def dev(t): return t['device_us_per_token']
def serial(t): return t['host_serial_us_per_token']
def shared(t):  # share of the host's waits that found the device thread on the host's own cpu
    return 100.0 * t['host_waits_shared_cpu'] / t['host_waits'] if t['host_waits'] else 0.0
def pred_us(t):
    # graph: match + replay launch, then the replay. eager: launches overlap the device's work, except
    # at 0 µs in the share of waits where the device thread sat on the host's cpu (the host then runs
    # the queue itself after launching it: the two add up); with a launch cost the host sleeps in
    # every launch and the device thread, woken then, overlaps it
    if t['acl_graph']:
        return serial(t) + host(t) + dev(t)
    turns = shared(t) / 100.0 if t['npu_launch_us'] == 0 else 0.0
    return serial(t) + max(host(t), dev(t)) + turns * min(host(t), dev(t))
def n_tokens(t):  # timed tokens plus the one warm-up token the statistics also count
    return t['n_gen'] * len(t['samples_ns']) + 1

load, stat0, stat1 = load.split('|')
# /proc/stat cpu line: user nice system idle iowait irq softirq steal ...; busy = all but idle, iowait
jiffies = [b - a for a, b in zip(map(int, stat0.split()[1:9]), map(int, stat1.split()[1:9]))]
total = sum(jiffies) or 1
t0 = tests[0]
print('# ACL graph mode A/B on the emulated NPU (tg)\n')
print('`make bench` (bench/graph_ab.sh), one sitting, run time %s s, load average before: %s; during the run the '
      'CPUs were %.0f %% busy (this run and anything else) and %.1f %% stolen by the hypervisor. The npu runs '
      'in two rounds of opposite order (graph on first, then eager first); each setting shows its better round.'
      % (elapsed, load, 100 * (total - jiffies[3] - jiffies[4]) / total, 100 * jiffies[7] / total))
print('build %s (%s), cpu: %s, %d threads.\n' % (t0['build_commit'], t0['build_number'], t0['cpu_info'], t0['n_threads']))
print('```')
print('\n'.join(commands))
print('```\n')
print('launch µs is `--npu-launch-us`, the emulated driver cost of one eager launch (host time). The host')
print('and device µs per token come from the backend\'s statistics: H = launching + graph matching, D =')
print('device busy time, S = host serial time between tokens; "waits on one cpu" is the share f of the')
print('host\'s waits that found the device thread on the host\'s own cpu. Predicted graph/eager =')
print('(S + max(H, D) + f min(H, D)) eager (f = 0 from 1 µs on) / (S + H + D) graph: why, in')
print('[src/npu/README.md](../../src/npu/README.md#why-graph-mode-pays-s--h--d).\n')

summary, dat_blocks, ok_all, misses, fusion_rows, goal_rows = [], [], True, [], [], []
for f, fused in [(f, fu) for f in files for fu in (False, True)]:
    ts = [t for t in tests if t['model_filename'] == f]
    cpu = next(t for t in ts if t['devices'] == 'cpu')
    npu = {}  # (graph, launch µs) -> the better of the two rounds
    for t in ts:
        key = (t['acl_graph'], t['npu_launch_us'])
        if t['devices'] == 'npu' and t['operator_fusion'] == fused and (key not in npu or t['avg_ts'] > npu[key]['avg_ts']):
            npu[key] = t
    if not npu:
        continue
    launches = sorted({k[1] for k in npu})
    name = label.get(f, cpu['model_type']) + (', fusion on' if fused else '')
    print('## %s\n' % name)
    print('`%s`, %s, tg%d, %d repetitions, operator fusion %s: %.0f kernels per token (%.0f unfused). cpu: %.2f ± %.2f t/s.\n'
          % (f, cpu['model_type'], cpu['n_gen'], len(cpu['samples_ns']), 'on' if fused else 'off',
             npu[(False, launches[0])]['launches_per_token'], npu[(False, launches[0])]['launches_per_token_unfused'],
             cpu['avg_ts'], cpu['stddev_ts']))
    print('| launch µs | cpu t/s | npu eager t/s | npu graph t/s | graph/eager measured | graph/cpu | eager H / D / S µs/token '
          '| graph H / D / S µs/token | graph/eager predicted | predicted/measured | waits on one cpu eager / graph |')
    print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    rows = []
    for us in launches:
        e, g = npu[(False, us)], npu[(True, us)]
        meas = g['avg_ts'] / e['avg_ts']
        pred = pred_us(e) / pred_us(g)
        rows.append((us, meas, pred))
        goal_rows.append((f, name, us, meas, g['avg_ts'] / cpu['avg_ts']))
        dev_pm = pred / meas - 1
        if abs(dev_pm) > 0.15:
            ok_all = False
            misses.append('%s at %g µs: predicted %.2f, measured %.2f (%+.0f %%)' % (name, us, pred, meas, 100 * dev_pm))
        print('| %g | %.2f | %.2f ± %.2f | %.2f ± %.2f | %.2f | %.2f | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.2f '
              '| %.2f (%+.0f %%) | %.0f %% / %.0f %% |' % (
                  us, cpu['avg_ts'], e['avg_ts'], e['stddev_ts'], g['avg_ts'], g['stddev_ts'], meas, g['avg_ts'] / cpu['avg_ts'],
                  host(e), dev(e), serial(e), host(g), dev(g), serial(g), pred, pred / meas, 100 * dev_pm,
                  shared(e), shared(g)))
        if not fused:
            dat_blocks.append((name, us, e['avg_ts'], g['avg_ts'], cpu['avg_ts']))
        fusion_rows.append((label.get(f, f), fused, us, e, g))
    # where eager turns host-bound: its host time grows by (launches per token) x launch µs until it
    # reaches the device time (the median over the launch costs: one disturbed run moves it little)
    e0 = npu[(False, launches[0])]
    per_tok = e0['eager_launches'] / n_tokens(e0)
    d_eager = sorted(dev(npu[(False, us)]) for us in launches)[len(launches) // 2]
    knee = (d_eager - host(e0)) / per_tok if per_tok else float('nan')
    g0 = npu[(True, launches[0])]
    print('\nGraph counters (graph on, %g µs): %d captures, %d replays, %d hits, %d misses, %d evictions, '
          '%d eager launches (the warm-up token, captured), %d ops replayed. Eager: %.0f launches per token.\n'
          % (launches[0], g0['graph_captures'], g0['graph_replays'], g0['graph_hits'], g0['graph_misses'],
             g0['graph_evictions'], g0['eager_launches'], g0['ops_replayed'], per_tok))

    def crossover(col):
        """Lowest launch cost from which graph/eager stays >= 1.5 (column 1 measured, 2 predicted)."""
        x = None
        for r in reversed(rows):
            if r[col] < 1.5:
                break
            x = r[0]
        return 'from %g µs on' % x if x is not None else 'nowhere up to %g µs' % launches[-1]
    slower = [us for us, m, _ in rows if m < 1.0]
    summary.append('- %s: graph/eager ≥ 1.5 %s (predicted: %s); eager turns host-bound '
                   '(host = device) at ≈ %.1f µs per launch ((%.0f − %.0f) µs / %.0f launches per token)%s.' % (
                       name, crossover(1), crossover(2), knee, d_eager, host(e0), per_tok,
                       '; graph slower than eager at ' + ', '.join('%g µs' % us for us in slower) if slower else ''))

# fusion's own effect, apart from graph mode's: on / off in each mode, beside the kernels per token
print('## Operator fusion on / off\n')
print('tg t/s with GGML_CANN_OPERATOR_FUSION on over off, in each mode (each from its better round), and the '
      'kernels the device ran per decode token (RoPE table fills included).\n')
print('| model | launch µs | kernels/token off → on | eager on/off | graph on/off |')
print('|---|---:|---:|---:|---:|')
by = {(n, fu, us): (e, g) for n, fu, us, e, g in fusion_rows}
for n, fu, us, e, g in fusion_rows:
    if fu or (n, True, us) not in by:
        continue
    e1, g1 = by[(n, True, us)]
    print('| %s | %g | %.0f → %.0f | %.2f | %.2f |' % (n, us, e['launches_per_token'], e1['launches_per_token'],
                                                      e1['avg_ts'] / e['avg_ts'], g1['avg_ts'] / g['avg_ts']))
print()
print('## Summary\n')
print('\n'.join(summary))
if ok_all:
    print('- every predicted/measured ratio is within ±15 %.')
else:
    print('- predicted/measured outside ±15 %: ' + '; '.join(misses) + '.')
# issue 27's goals, each checked on this run: graph mode never loses to eager; on the 0.5B shape the
# npu's graph mode keeps up with the cpu; stories260K's replay doubles eager at 0 µs
print('\n## Goals (issue 27)\n')
def verdict(ok):
    return 'met' if ok else '**missed**'
lows = [(n, us, m) for f, n, us, m, _ in goal_rows if m < 1.0]
print('- graph/eager ≥ 1.0 at every launch cost: %s%s' % (verdict(not lows), ''.join(
    '; %s at %g µs: %.2f' % low for low in lows)))
for f, n, us, m, c in goal_rows:
    if 'qwen2-0.5b' in f and us == 0:
        print('- npu graph / cpu ≥ 0.95 on %s: %.2f, %s' % (n, c, verdict(c >= 0.95)))
    if 'stories260K' in f and us == 0:
        print('- graph/eager ≥ 2.0 at 0 µs on %s: %.2f, %s' % (n, m, verdict(m >= 2.0)))
print('\n![tg t/s against launch µs](crossover.png)')

# gnuplot: one block per model (x, eager, graph, cpu), then the script
with open(dat, 'w') as fh:
    for i, f in enumerate(files):
        name = label.get(f, f)
        fh.write('# %s\n' % name)
        for n, us, e, g, c in dat_blocks:
            if n == name:
                fh.write('%g %.4f %.4f %.4f\n' % (us, e, g, c))
        fh.write('\n\n')
colors = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd']
plots, labels_gp = [], []
for i, f in enumerate(files):
    name = label.get(f, f)
    short = name.split(' (')[0]
    c = colors[i % len(colors)]
    plots.append("'%s' index %d using 1:3 with linespoints lw 2 pt 7 ps 1.3 lc rgb '%s' title '%s: graph on'" % (dat, i, c, short))
    plots.append("'%s' index %d using 1:2 with linespoints lw 2 pt 6 ps 1.3 lc rgb '%s' title '%s: graph off (eager)'" % (dat, i, c, short))
    plots.append("'%s' index %d using 1:4 with lines lw 1.5 dt 2 lc rgb '%s' title '%s: cpu'" % (dat, i, c, short))
    n, us, e, g, _ = [b for b in dat_blocks if b[0] == name][-1]
    labels_gp.append("set label '%.1fx' at %g, %g left offset 0.8, 0 tc rgb '%s'" % (g / e, us, (e * g) ** 0.5, c))
with open(gp, 'w') as fh:
    fh.write('''set terminal pngcairo size 1000,750 font "sans,12" noenhanced
set output '%s'
set title "Emulated NPU, tg%d: ACL graph on / off against the driver cost of one eager launch\\n(%s, %d threads; labels: graph/eager at the highest cost)"
set xlabel "host cost per eager launch (µs, --npu-launch-us)"
set ylabel "tg t/s (log scale)"
set logscale y
set format y "%%g"
set xrange [-1:45]
set xtics (0, 5, 10, 20, 40)
set grid xtics ytics mytics
set key below horizontal maxcols 3 box
set bmargin 8
set lmargin 11
%s
plot %s
''' % (png, t0['n_gen'], t0['cpu_info'], t0['n_threads'], '\n'.join(labels_gp), ', \\\n     '.join(plots)))
EOF

command -v gnuplot >/dev/null || { echo "make bench: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
gnuplot "$TMP/crossover.gp"
BIN=$BIN SHARED=$SHARED bash "$(dirname "$0")/capture_cost.sh" >>"$OUT/graph_ab.md"
echo "make bench: wrote $OUT/graph_ab.md and $OUT/crossover.png (A/B ${elapsed}s)" >&2
cat "$OUT/graph_ab.md"
