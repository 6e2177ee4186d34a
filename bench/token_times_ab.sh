#!/usr/bin/env bash
# What --token-times costs: stories260K tg128 (-r 10, -t 2) with and without it, on cpu and npu,
# ROUNDS alternating rounds in one sitting (default 8). Writes bench/results/token_times_ab.md:
# each setting's median t/s and the on/off ratio of each adjacent pair (median, min, max).
set -euo pipefail
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
ROUNDS=${ROUNDS:-8}
OUT=bench/results
TMP=$OUT/tmp
mkdir -p "$TMP"
raw=$TMP/token_times_ab.txt
: >"$raw"
for i in $(seq "$ROUNDS"); do
  for flag in off --token-times; do
    for dev in cpu npu; do
      ts=$("$BIN/llm-bench" -m "$SHARED/models/stories260K.gguf" -dev "$dev" -p 0 -n 128 -r 10 -t 2 \
             $([ "$flag" = off ] || echo "$flag") -o json 2>/dev/null |
           python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["avg_ts"])')
      echo "$i $flag $dev $ts" >>"$raw"
    done
  done
done
python3 - "$raw" "$OUT/token_times_ab.md" "$ROUNDS" "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" \
  "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'EOF'
import statistics, sys, time
raw, md, rounds, cpu, build = sys.argv[1:6]
rows = [line.split() for line in open(raw)]
out = ["# What `--token-times` costs", "",
       "`bench/token_times_ab.sh`, %s UTC, build %s, %s: stories260K tg128, `-r 10 -t 2`, with and without "
       "`--token-times`, %s alternating rounds in one sitting. A ratio above 1 means faster with the flag."
       % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), build, cpu, rounds), "",
       "| device | off: median t/s (min-max) | on: median t/s (min-max) | on/off per round: median (min-max) |",
       "|---|---:|---:|---:|"]
for dev in ("cpu", "npu"):
    off = [float(r[3]) for r in rows if r[2] == dev and r[1] == "off"]
    on = [float(r[3]) for r in rows if r[2] == dev and r[1] != "off"]
    ratio = [a / b for a, b in zip(on, off)]
    out.append("| %s | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %.3f (%.2f-%.2f) |" % (
        dev, statistics.median(off), min(off), max(off), statistics.median(on), min(on), max(on),
        statistics.median(ratio), min(ratio), max(ratio)))
out += ["", "The bookkeeping is one clock reading and one store per token into memory allocated before the "
        "tests. The per-round ratios spread by the machine's minute-to-minute noise: a cost would show as "
        "medians below 1 by more than that spread.", ""]
open(md, "w").write("\n".join(out))
EOF
echo "wrote $OUT/token_times_ab.md" >&2
