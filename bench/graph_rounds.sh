#!/usr/bin/env bash
# Graph mode against eager and against the cpu, in ROUNDS alternating rounds (default 9) of one
# sitting: the check of issue 27's goals that survives a machine whose speed drifts from minute to
# minute. Each round runs, per model of NPU_AB_MODELS (npu_common.sh) and per launch cost of
# LAUNCH_US (default 0,5,20), graph mode and eager in one llm-bench process (on,off in even rounds,
# off,on in odd ones), then the cpu; ratios are taken within a round, and the report gives their
# median and range. Writes bench/results/graph_rounds.md (jsonl in bench/results/tmp).
set -euo pipefail
ROUNDS=${ROUNDS:-9}
LAUNCH_US=${LAUNCH_US:-0,5,20}
# shellcheck source=bench/npu_common.sh
source "$(dirname "$0")/npu_common.sh"

jsonl=$TMP/graph_rounds.jsonl
: >"$jsonl"
load=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
for i in $(seq "$ROUNDS"); do
  order=$([ $((i % 2)) -eq 0 ] && echo on,off || echo off,on)
  for spec in "${NPU_AB_MODELS[@]}"; do
    IFS='|' read -r file _ reps <<<"$spec"
    for dev in "npu -g $order --npu-launch-us $LAUNCH_US" cpu; do
      echo "graph_rounds: round $i: $file -dev $dev" >&2
      # shellcheck disable=SC2086 # words
      "$BIN/llm-bench" -m "$file" -dev $dev -p 0 -n 128 -r "$reps" -t 2 -o jsonl |
        python3 -c 'import json, sys
for l in sys.stdin:
    t = json.loads(l); t["round"] = int(sys.argv[1]); print(json.dumps(t))' "$i" >>"$jsonl"
    done
  done
done
elapsed=$(($(date +%s) - start))

python3 - "$jsonl" "$ROUNDS" "$load" "$(cut -d' ' -f1-3 /proc/loadavg)" "$elapsed" >"$OUT/graph_rounds.md" <<'EOF'
import json, statistics, sys
jsonl, rounds, load0, load1, elapsed = sys.argv[1:6]
tests = [json.loads(l) for l in open(jsonl) if l.strip()]
t0 = tests[0]
print('# Graph mode against eager and the cpu, alternating rounds (issue 27)\n')
print('`bench/graph_rounds.sh`: %s rounds in %s s, build %s, %s, %d threads; load average %s before, %s after. '
      'Each round runs, per model and launch cost, graph mode and eager in one llm-bench process (their order '
      'alternating from round to round), then the cpu; the ratios are taken within a round.\n'
      % (rounds, elapsed, t0['build_commit'], t0['cpu_info'], t0['n_threads'], load0, load1))
print('| model | launch µs | graph/eager median (min-max) | graph/cpu median (min-max) | goal |')
print('|---|---:|---:|---:|---|')
def span(xs):
    return '%.2f (%.2f-%.2f)' % (statistics.median(xs), min(xs), max(xs))
for f in dict.fromkeys(t['model_filename'] for t in tests):
    ts = [t for t in tests if t['model_filename'] == f]
    cpu = {t['round']: t['avg_ts'] for t in ts if t['devices'] == 'cpu'}
    for us in sorted({t['npu_launch_us'] for t in ts if t['devices'] == 'npu'}):
        mode = {(t['round'], t['acl_graph']): t['avg_ts'] for t in ts if t['devices'] == 'npu' and t['npu_launch_us'] == us}
        rs = sorted({r for r, _ in mode})
        ge = [mode[(r, True)] / mode[(r, False)] for r in rs]
        gc = [mode[(r, True)] / cpu[r] for r in rs if r in cpu]
        goals = ['graph/eager ≥ 1.0: %s' % ('met' if statistics.median(ge) >= 1.0 else '**missed**')]
        if 'qwen2-0.5b' in f:
            goals.append('graph/cpu ≥ 0.95: %s' % ('met' if statistics.median(gc) >= 0.95 else '**missed**'))
        if 'stories260K' in f and us == 0:
            goals.append('graph/eager ≥ 2.0: %s' % ('met' if statistics.median(ge) >= 2.0 else '**missed**'))
        print('| %s | %g | %s | %s | %s |' % (f.split('/')[-1], us, span(ge), span(gc), '; '.join(goals)))
EOF
echo "graph_rounds: wrote $OUT/graph_rounds.md" >&2
cat "$OUT/graph_rounds.md"
