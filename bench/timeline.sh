#!/usr/bin/env bash
# make bench, after graph_ab.sh: one decode token of the Qwen2.5-0.5B Q8_0 shape (models/, made by
# `llm synth` when missing) on the emulated NPU as a timeline, eager (--npu-launch-us 20) against
# graph replay. Runs llm-bench -p 0 -n 3 -r 1 -t 2 --trace once with -g off and once with -g on, takes
# from each Chrome trace the last decode token (the last "graph compute" host span, cat "host") and
# every span overlapping it, and draws host / npu worker 0 / npu worker 1 for both on one µs axis:
# bench/results/timeline.png (gnuplot) and bench/results/timeline.md (commands, token times, counts).
# The traces, jsonl and plot data stay in bench/results/tmp. Installs gnuplot-nox when missing (bench
# only, not `make deps`). Takes a few seconds.
set -euo pipefail
BIN=${BIN:-bin}
OUT=bench/results
TMP=$OUT/tmp
LAUNCH_US=20
mkdir -p "$TMP"
# shellcheck source=bench/npu_common.sh
source "$(dirname "$0")/npu_common.sh"

jsonl=$TMP/timeline.jsonl
cmds=$TMP/timeline.cmds
: >"$jsonl"
: >"$cmds"
start=$(date +%s.%N)
load=$(cut -d' ' -f1-3 /proc/loadavg)
stat0=$(grep '^cpu ' /proc/stat)
for mode in off on; do
  case $mode in off) name=eager ;; on) name=graph ;; esac
  trace=$TMP/timeline-$name.json
  cmd="$BIN/llm-bench -m $q8 -dev npu -g $mode --npu-launch-us $LAUNCH_US -p 0 -n 3 -r 1 -t 2 --trace $trace -o jsonl"
  echo "make bench: $cmd" >&2
  echo "$cmd" >>"$cmds"
  # shellcheck disable=SC2086 # words
  $cmd >>"$jsonl"
done
stat1=$(grep '^cpu ' /proc/stat)
elapsed=$(echo "$start $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')

python3 - "$TMP/timeline-eager.json" "$TMP/timeline-graph.json" "$jsonl" "$cmds" "$elapsed" \
  "$load|$stat0|$stat1" "$LAUNCH_US" "$TMP/timeline" "$OUT/timeline.png" >"$OUT/timeline.md" <<'EOF'
import json, sys
eager_f, graph_f, jsonl, cmds, elapsed, load, launch_us, base, png = sys.argv[1:10]
tests = [json.loads(l) for l in open(jsonl) if l.strip()]
commands = [l.strip() for l in open(cmds) if l.strip()]

HOST, W0, W1 = 2, 1, 0               # row of the host track and of npu workers 0 and 1
KINDS = [  # kind, legend, colour
    ('launch', 'host: eager launch', '#ff7f0e'),
    ('sync', 'host: synchronize (waiting)', '#c7c7c7'),
    ('other', 'host: graph match, aclmdlRI*', '#9467bd'),
    ('mulmat', 'device: MUL_MAT', '#1f77b4'),
    ('devother', 'device: other ops', '#2ca02c'),
]
COLOR = {k: int(c[1:], 16) for k, _, c in KINDS}

def kind(e):
    if e['tid'] == 1:
        return {'launch': 'launch', 'sync': 'sync'}.get(e['cat'], 'other')
    return 'mulmat' if e['cat'] == 'MUL_MAT' else 'devother'

def token(path):
    """The last decode token of a trace: its 'graph compute' window and the spans inside, rebased."""
    ev = json.load(open(path))
    computes = [e for e in ev if e.get('ph') == 'X' and e.get('cat') == 'host' and e['name'] == 'graph compute']
    gc = computes[-1]
    a, b = gc['ts'], gc['ts'] + gc['dur']
    spans, instants = [], []
    for e in ev:
        if e is gc:
            continue
        if e.get('ph') == 'X' and e['ts'] < b and e['ts'] + e['dur'] > a and e['tid'] in (1, 100, 101):
            s, t = max(e['ts'], a) - a, min(e['ts'] + e['dur'], b) - a
            spans.append(dict(e, s=s, t=t, kind=kind(e)))
        elif e.get('ph') == 'i' and a <= e['ts'] <= b:
            instants.append(dict(e, s=e['ts'] - a))
    return dict(dur=gc['dur'], spans=spans, instants=instants, tokens=[c['dur'] for c in computes],
                drains=drains(path, gc))

def drains(path, gc):
    """When the tracer wrote a full 64 KiB buffer to the file inside the token (src/trace.c: the thread
    whose event did not fit writes it, outside the trace lock, while the others fill the second buffer).
    Replays the buffer: one event per line, emptied by the flush after each decode's 'logits read'; a
    drain happens when the next event does not fit. [] when the file is not one event per line."""
    a, b = gc['ts'], gc['ts'] + gc['dur']
    size, out = 0, []
    for line in open(path, encoding='utf-8'):
        text = line.rstrip('\n')
        if text in ('[', ']', ''):
            continue
        try:
            e = json.loads(text.rstrip(','))
        except ValueError:
            return []
        n = len(text.encode()) + 1           # the event and its ",\n" separator
        if size + n > 65536:
            end = e['ts'] + e.get('dur', 0)
            if a <= end <= b:
                out.append(end - a)
            size = 0
        size += n
        if e.get('name') == 'logits read' and e.get('cat') == 'host':
            size = 0
    return out

panels = [('npu eager (%s µs launches)' % launch_us, token(eager_f)), ('npu graph (replay)', token(graph_f))]
test = {t['acl_graph']: t for t in tests}

def idle(spans):
    """µs a worker is idle between its first and its last span (spans on one worker do not overlap)."""
    return max(e['t'] for e in spans) - min(e['s'] for e in spans) - sum(e['t'] - e['s'] for e in spans)

def stats(tk):
    sp = tk['spans']
    host = [e for e in sp if e['tid'] == 1]
    launches = [e for e in host if e['kind'] == 'launch']
    sync = [e for e in host if e['kind'] == 'sync']
    other = [e for e in host if e['kind'] == 'other']
    w = {tid: [e for e in sp if e['tid'] == tid] for tid in (100, 101)}
    ops = [e for e in w[100] if e['name'] != 'rope cache']   # every op runs on worker 0
    dev = w[100] + w[101]
    return dict(
        launches=len(launches), launch_end=max((e['t'] for e in launches), default=0.0),
        launch_us=sum(e['t'] - e['s'] for e in launches),
        sync_names=sorted({e['name'] for e in sync}), sync_us=sum(e['t'] - e['s'] for e in sync), sync_start=min((e['s'] for e in sync), default=0.0),
        other=list(dict.fromkeys(e['name'] for e in sorted(other, key=lambda e: e['s']))), other_us=sum(e['t'] - e['s'] for e in other),
        ops=len(ops), mulmat=sum(1 for e in ops if e['cat'] == 'MUL_MAT'),
        w0=len(w[100]), w1=len(w[101]),
        busy0=sum(e['t'] - e['s'] for e in w[100]), busy1=sum(e['t'] - e['s'] for e in w[101]),
        mm_us=sum(e['t'] - e['s'] for e in w[100] + w[101] if e['cat'] == 'MUL_MAT'),
        dev_first=min(e['s'] for e in dev), dev_last=max(e['t'] for e in dev),
        idle0=idle(w[100]), idle1=idle(w[101]),
        instants=[e['name'] for e in tk['instants']], drains=tk['drains'])

st = [stats(tk) for _, tk in panels]

# ---- the page ----
load, stat0, stat1 = load.split('|')
jiffies = [b - a for a, b in zip(map(int, stat0.split()[1:9]), map(int, stat1.split()[1:9]))]
total = sum(jiffies) or 1
t0 = tests[0]
(ne, te), (ng, tg) = panels
se, sg = st
print('# One decode token on the emulated NPU: eager against graph replay\n')
print('`make bench` (bench/timeline.sh): Qwen2.5-0.5B Q8_0 shape (synthetic), `-dev npu -t 2`, '
      '`--npu-launch-us %s`, `-p 0 -n 3 -r 1`, once with `-g off` and once with `-g on`, each with `--trace`. '
      'Run time %s s, load average before: %s; during the run the CPUs were %.0f %% busy (this run and '
      'anything else) and %.1f %% stolen by the hypervisor. build %s (%s), cpu: %s.\n'
      % (launch_us, elapsed, load, 100 * (total - jiffies[3] - jiffies[4]) / total, 100 * jiffies[7] / total,
         t0['build_commit'], t0['build_number'], t0['cpu_info']))
print('```')
print('\n'.join(commands))
print('```\n')
print('From each trace (bench/results/tmp, open it in ui.perfetto.dev) the last decode token is drawn: the '
      'last `graph compute` host span (from submitting the graph to the backend until its synchronize '
      'returns; graph build, input upload and the logits read lie outside it) and every span overlapping '
      'it, on one µs axis from its start. Rows: the host thread, npu device workers 0 and 1 (worker 1 '
      'only joins kernels split across both: MUL_MAT, FLASH_ATTN, SET_ROWS).\n')
print('![one decode token, npu eager (20 µs launches) against npu graph (replay)](timeline.png)\n')
print('| | npu eager (%s µs launches) | npu graph (replay) |' % launch_us)
print('|---|---:|---:|')
rows = [
    ('token (`graph compute`), µs', '%.0f' % te['dur'], '%.0f' % tg['dur']),
    ('graph/eager', '', '%.2fx faster' % (te['dur'] / tg['dur']) if tg['dur'] < te['dur']
     else '%.2fx slower' % (tg['dur'] / te['dur'])),
    ('every decode token of the run, µs (warm-up first)', ', '.join('%.0f' % d for d in te['tokens']),
     ', '.join('%.0f' % d for d in tg['tokens'])),
    ('llm-bench tg t/s (3 tokens)', '%.2f' % test[False]['avg_ts'], '%.2f' % test[True]['avg_ts']),
    ('eager launches in the token', '%d' % se['launches'], '%d' % sg['launches']),
    ('host launching, µs (sum of launch spans)', '%.0f' % se['launch_us'], '%.0f' % sg['launch_us']),
    ('last launch ends at, µs', '%.0f' % se['launch_end'] if se['launches'] else '–',
     '%.0f' % sg['launch_end'] if sg['launches'] else '–'),
    ('host graph match + aclmdlRI*, µs', '%.0f' % se['other_us'] if se['other'] else '–', '%.0f' % sg['other_us']),
    ('host waiting in synchronize, µs (from µs)', '%.0f (%.0f)' % (se['sync_us'], se['sync_start']),
     '%.0f (%.0f)' % (sg['sync_us'], sg['sync_start'])),
    ('ops run on the device (MUL_MAT)', '%d (%d)' % (se['ops'], se['mulmat']), '%d (%d)' % (sg['ops'], sg['mulmat'])),
    ('device spans worker 0 / worker 1', '%d / %d' % (se['w0'], se['w1']), '%d / %d' % (sg['w0'], sg['w1'])),
    ('device busy worker 0 / worker 1, µs', '%.0f / %.0f' % (se['busy0'], se['busy1']),
     '%.0f / %.0f' % (sg['busy0'], sg['busy1'])),
    ('worker 0 / worker 1 idle between its first and last span, µs', '%.0f / %.0f' % (se['idle0'], se['idle1']),
     '%.0f / %.0f' % (sg['idle0'], sg['idle1'])),
    ('of which MUL_MAT, µs (both workers)', '%.0f' % se['mm_us'], '%.0f' % sg['mm_us']),
    ('first device span starts / last ends, µs', '%.0f / %.0f' % (se['dev_first'], se['dev_last']),
     '%.0f / %.0f' % (sg['dev_first'], sg['dev_last'])),
    ('graph cache events', ', '.join(se['instants']) or '–', ', '.join(sg['instants']) or '–'),
    ('trace buffer writes (64 KiB), at µs', ', '.join('%.0f' % x for x in se['drains']) or '–',
     ', '.join('%.0f' % x for x in sg['drains']) or '–'),
]
for r in rows:
    print('| %s | %s | %s |' % r)
print()
bound = 'device' if se['launch_end'] < se['dev_last'] else 'host'
print('Eager, the host enqueues the token\'s %d launches (each op\'s executor build plus the emulated '
      '%s µs driver cost) while the workers already run them, and then waits in aclrtSynchronizeStream '
      'for the device to drain: at this shape the token is %s-bound (launching ends at %.0f µs, the device '
      'at %.0f µs). Graph replay replaces the launches by one graph match and one aclmdlRIExecuteAsync '
      '(%.0f µs together), so the host waits from the start and the token is the device\'s time alone. '
      'Here eager is %s than replay by %.0f µs; its workers sit idle %.0f / %.0f µs between their first and '
      'last span (replay: %.0f / %.0f µs), in part waiting for launches where small ops follow one another. '
      'The marks (▼) are the tracer writing a full 64 KiB buffer to the file (~0.1 ms): the thread whose '
      'event did not fit writes it outside the trace lock while the other threads append to the second '
      'buffer, so only that thread pauses; when it is a device worker, a kernel split across both workers '
      'waits for it (a gap in both worker rows). '
      'Token times move with the load of the machine (see the load above; `make bench` runs best on a quiet '
      'machine): graph_ab.md measures the same pair over 128 tokens.'
      % (se['launches'], launch_us, bound, se['launch_end'], se['dev_last'], sg['other_us'],
         'longer' if te['dur'] >= tg['dur'] else 'shorter', abs(te['dur'] - tg['dur']),
         se['idle0'], se['idle1'], sg['idle0'], sg['idle1']))

# ---- gnuplot data: per panel one block of boxes (x y xlo xhi ylo yhi colour) ----
# a span narrower than a pixel is drawn one pixel wide (as trace viewers do), in time order, the wait
# underneath
H = 0.36
xmax = max(te['dur'], tg['dur']) * 1.03
px = xmax / 1050
for i, (_, tk) in enumerate(panels):
    with open('%s-%d.dat' % (base, i), 'w') as fh:
        fh.write('# x y xlo xhi ylo yhi rgb  (name, cat)\n')
        for e in sorted(tk['spans'], key=lambda e: (e['kind'] != 'sync', e['s'])):
            y = {1: HOST, 100: W0, 101: W1}[e['tid']]
            fh.write('%.3f %d %.3f %.3f %.2f %.2f %d  # %s %s\n' % (
                (e['s'] + e['t']) / 2, y, e['s'], max(e['t'], e['s'] + px), y - H, y + H, COLOR[e['kind']], e['name'], e['cat']))
    with open('%s-%d-drains.dat' % (base, i), 'w') as fh:
        fh.write('# µs of each trace buffer write inside the token\n')
        fh.writelines('%.3f %.2f\n' % (x, HOST + H + 0.12) for x in tk['drains'])

# the key: two rows of three, filled column by column: host kinds above, device kinds below
entries = ["keyentry with boxes fs solid 1.0 noborder lc rgb '%s' title '%s'" % (c, l) for _, l, c in KINDS]
entries.append("keyentry with points pt 11 ps 1.2 lc rgb 'black' title 'trace buffer write'"
               if se['drains'] or sg['drains'] else 'keyentry with points pt 0 lc rgb "white" title " "')
keys = ', \\\n     '.join(entries[i] for i in (0, 3, 1, 4, 2, 5))
def panel_gp(i, title, tk, s, top, bottom, last):
    d = tk['dur']
    g = ['set tmargin at screen %.3f' % top, 'set bmargin at screen %.3f' % bottom,
         'set title "%s: one decode token = %.0f µs (%.1f ms)" font "sans,14"' % (title, d, d / 1000),
         'unset label', 'unset arrow',
         'set arrow from %.1f, graph 0 to %.1f, graph 1 nohead dt 2 lw 1.5 lc rgb "black" front' % (d, d),
         'set label "token end" at %.1f, -0.62 %s font "sans,10"'
         % (d, 'left offset 0.5, 0' if d < 0.9 * xmax else 'right offset -0.5, 0')]
    for e in tk['spans']:   # the LM head, the token's largest op, by name
        if e['name'] == 'logits' and e['tid'] in (100, 101) and e['t'] - e['s'] > 0.04 * xmax:
            g.append('set label "logits" at %.1f, %d center front tc rgb "white" font "sans,10"'
                     % ((e['s'] + e['t']) / 2, W0 if e['tid'] == 100 else W1))
    if s['launches']:
        g.append('set label "%d eager launches: %.1f ms of host time" at %.1f, 2.76 center font "sans,10"'
                 % (s['launches'], s['launch_us'] / 1000, s['launch_end'] / 2))
        g.append('set label "waits %.1f ms in %s" at %.1f, 2.76 center font "sans,10"'
                 % (s['sync_us'] / 1000, ' / '.join(s['sync_names']), (s['launch_end'] + d) / 2))
    else:
        g.append('set label "%s: %.0f µs" at 0, 3.0 left font "sans,10"'
                 % (' + '.join(s['other']), s['other_us']))
        g.append('set label "waits %.1f ms in %s" at %.1f, 2.76 center font "sans,10"'
                 % (s['sync_us'] / 1000, ' / '.join(s['sync_names']), 0.6 * d))
    g.append('set label "device: %d ops, busy %.1f / %.1f ms (worker 0 / 1), MUL_MAT %.1f ms" at %.1f, -0.62 '
             'center font "sans,10"' % (s['ops'], s['busy0'] / 1000, s['busy1'] / 1000, s['mm_us'] / 1000, d / 2))
    if last:
        g += ['set xlabel "µs from the start of the token (graph compute)"', 'set format x "%g"']
    else:
        g += ['unset xlabel', 'set format x ""']
    drains = ", \\\n     '%s-%d-drains.dat' using 1:2 with points pt 11 ps 1.2 lc rgb 'black' notitle" % (base, i)
    g.append("plot '%s-%d.dat' using 1:2:3:4:5:6:7 with boxxyerror fs solid 1.0 noborder lc rgb variable notitle%s%s"
             % (base, i, drains if s['drains'] else '', ', \\\n     ' + keys if last else ''))
    return '\n'.join(g)

with open(base + '.gp', 'w') as fh:
    fh.write('''set terminal pngcairo size 1200,660 font "sans,11" noenhanced
set output '%s'
set multiplot title "Qwen2.5-0.5B Q8_0 shape, emulated NPU, 2 device workers: the last decode token of llm-bench -n 3, eager against graph replay" font "sans,13"
set lmargin at screen 0.085
set rmargin at screen 0.975
set xrange [0:%.1f]
set yrange [-0.85:3.15]
set ytics ("host" %d, "worker 0" %d, "worker 1" %d) scale 0
set xtics 5000 nomirror
set mxtics 5
set grid xtics mxtics lc rgb "#e0e0e0" lw 1 back
set border 1+2
unset key
%s
set key at screen 0.53, 0.045 center horizontal maxcols 3 width 2 samplen 1.5 reverse Left font "sans,11"
%s
unset multiplot
''' % (png, xmax, HOST, W0, W1,
       panel_gp(0, ne, te, se, 0.885, 0.565, False), panel_gp(1, ng, tg, sg, 0.48, 0.16, True)))
EOF

command -v gnuplot >/dev/null || { echo "make bench: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
gnuplot "$TMP/timeline.gp"
echo "make bench: wrote $OUT/timeline.md and $OUT/timeline.png (${elapsed}s)" >&2
cat "$OUT/timeline.md"
