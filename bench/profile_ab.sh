#!/usr/bin/env bash
# make bench, after timeline.sh: what --profile and --trace cost, and that having them (both off)
# costs nothing. Builds an older commit (argument 1; default: the parent of the commit that added
# src/profile.c) from `git archive` into build/profile_ab/<commit> (kept: later runs reuse it), then
# in one sitting runs llm-bench -m models/stories260K.gguf -p 0 -n 128 -r 5 -t 2 -o jsonl, ROUNDS
# times (default 30), each round every configuration once in a rotated order: old binary, new
# binary, new --profile, new --trace, on -dev cpu and -dev npu. Writes bench/results/profile_ab.md:
# t/s mean ± sd and median over all repetitions; the ratios new/old, profile/off, trace/off with
# the median and quartiles of the per-round ratios (the noise); the machine, date and commits. The
# jsonl stays in bench/results/tmp. About 2 minutes on a 2-core VM (plus ~1 to build the old commit).
set -euo pipefail
BIN=${BIN:-bin}
ROUNDS=${ROUNDS:-30}
MODEL=models/stories260K.gguf
OUT=bench/results
TMP=$OUT/tmp
mkdir -p "$TMP"

added=$(git log --diff-filter=A --format=%H -- src/profile.c | tail -n 1)
base=$(git rev-parse --verify "${1:-$added^}^{commit}")
old=build/profile_ab/$(git rev-parse --short=12 "$base")
if [ ! -x "$old/bin/llm" ]; then
  echo "make bench: building $(git log -1 --format='%h %s' "$base") into $old" >&2
  rm -rf "$old"
  mkdir -p "$old/src"
  git archive "$base" | tar -x -C "$old/src"
  abs=$(cd "$old" && pwd)
  make -C "$old/src" -j"$(nproc)" BUILD="$abs/build" BIN="$abs/bin" all >"$old/build.log" 2>&1 ||
    { tail -n 20 "$old/build.log" >&2; exit 1; }
fi

# name | binary | extra flags
trace=$TMP/profile_ab-trace.json
configs=(
  "old|$old/bin/llm-bench|"
  "off|$BIN/llm-bench|"
  "profile|$BIN/llm-bench|--profile"
  "trace|$BIN/llm-bench|--trace $trace"
)
runs=$TMP/profile_ab.tsv
: >"$runs"
start=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 0; r < ROUNDS; r++)); do
  echo "make bench: profile A/B round $((r + 1))/$ROUNDS" >&2
  for dev in cpu npu; do
    for ((i = 0; i < ${#configs[@]}; i++)); do # rotated: no configuration always runs first
      IFS='|' read -r name bin extra <<<"${configs[(i + r) % ${#configs[@]}]}"
      # shellcheck disable=SC2086 # extra is words
      json=$("$bin" -m "$MODEL" -dev "$dev" -p 0 -n 128 -r 5 -t 2 $extra -o jsonl 2>/dev/null)
      printf '%s\t%s\t%d\t%s\n' "$name" "$dev" "$r" "$json" >>"$runs"
    done
  done
done
elapsed=$(($(date +%s) - start))
load1=$(cut -d' ' -f1-3 /proc/loadavg)
head=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain -- src tools Makefile)" ] || head="$head + uncommitted changes"
between=$(git log --format='%h %s' "$base..HEAD" -- src | grep -v 'issue 13' || true)

machine="$(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores"
python3 - "$runs" "$trace" "$ROUNDS" "$elapsed" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$machine" "$load0" "$load1" \
  "$(git log -1 --format='%h %s' "$base")" "$head" "$MODEL" "$between" >"$OUT/profile_ab.md" <<'EOF'
import json, statistics as st, sys
runs, trace, rounds, elapsed, date, machine, load0, load1, old, new, model, between = sys.argv[1:13]
NAMES = {'old': 'old binary', 'off': 'new, both off', 'profile': 'new, --profile', 'trace': 'new, --trace'}
samples, rnd = {}, {}
for line in open(runs):
    name, dev, r, js = line.rstrip('\n').split('\t', 3)
    t = json.loads(js)
    samples.setdefault((dev, name), []).extend(t['samples_ts'])
    rnd[(dev, name, int(r))] = t['avg_ts']
devs = list(dict.fromkeys(k[0] for k in samples))
mean = {k: st.mean(v) for k, v in samples.items()}
# events per decoded token, from the last --trace run: one 'graph compute' host span per decode
ev = json.load(open(trace))
per_token = len(ev) / max(1, sum(1 for e in ev if e.get('name') == 'graph compute'))

print('# --profile and --trace: their cost, and the cost of having them\n')
print('`make bench` (bench/profile_ab.sh), one sitting of %s rounds, %s s, %s; machine: %s; load average %s '
      'before, %s after.\n' % (rounds, elapsed, date, machine, load0, load1))
print('- old: %s\n- new: %s\n' % (old, new))
print('Each round runs every configuration once, in a rotated order, for `-dev cpu` and `-dev npu` (graph mode on):\n')
print('```\n<binary> -m %s -dev cpu|npu -p 0 -n 128 -r 5 -t 2 [--profile | --trace FILE] -o jsonl\n```\n' % model)
print('| dev | configuration | tg128 t/s, mean ± sd | median | repetitions |')
print('|---|---|---:|---:|---:|')
for d in devs:
    for n in NAMES:
        v = samples[(d, n)]
        print('| %s | %s | %.0f ± %.0f | %.0f | %d |' % (d, NAMES[n], mean[(d, n)], st.stdev(v), st.median(v), len(v)))

def ratio(d, a, b):
    """Ratio of the means; the median and quartiles of the per-round ratios: the noise to read it against
    (on a shared machine a round that another process slows is an outlier, which quartiles ignore)."""
    per = [rnd[(d, a, r)] / rnd[(d, b, r)] for r in range(int(rounds))]
    q1, med, q3 = st.quantiles(per, n=4, method='inclusive')
    verdict = 'within noise' if q1 <= 1 <= q3 else ('faster' if q1 > 1 else 'slower')
    return mean[(d, a)] / mean[(d, b)], med, q1, q3, verdict

print('\nRatios of mean t/s; in brackets the median and the quartiles of the %s per-round ratios (within '
      'noise when 1 lies between the quartiles); and what each option adds per token (from the means):\n' % rounds)
print('| dev | new off / old | profile / off | trace / off | µs per token: profile, trace |')
print('|---|---:|---:|---:|---:|')
for d in devs:
    cells = ['%.3f (%.3f, %.2f – %.2f), %s' % ratio(d, a, b) for a, b in (('off', 'old'), ('profile', 'off'), ('trace', 'off'))]
    us = ['%+.1f' % (1e6 / mean[(d, n)] - 1e6 / mean[(d, 'off')]) for n in ('profile', 'trace')]
    print('| %s | %s | %s |' % (d, ' | '.join(cells), ', '.join(us)))
print('\nA trace holds %.0f events per decoded token (the last --trace run, -dev npu); stories260K decodes a '
      'token in ~%.0f µs, so a fixed cost per event weighs far more here than on real models.'
      % (per_token, 1e6 / mean[(devs[0], 'off')]))
if between.strip():
    print('\nCommits between old and new that touch src/ besides issue 13 (they move new / old too):\n')
    print('\n'.join('- ' + l for l in between.strip().splitlines()))
EOF
rm -f "$trace"
echo "make bench: wrote $OUT/profile_ab.md (${elapsed}s)" >&2
cat "$OUT/profile_ab.md"
