#!/usr/bin/env bash
# Does op offload pay for prefill under partial offload? The Qwen2.5-0.5B Q8_0 shape (models/, made
# by `llm synth` when missing) on the emulated npu: llm-bench pp512 (-r 3, -t 2) at -ngl 0 and 12
# (of 24 layers + output) with -nopo 1 (batches over host weights stay on the cpu) and -nopo 0 (they
# run on the npu, each weight copied in per micro-batch), ROUNDS alternating rounds in one sitting
# (default 3). Writes bench/results/op_offload.md: median t/s per setting, the on/off ratio per
# round, and the load average before and after (figures taken above ~1.5 are noise).
set -euo pipefail
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
ROUNDS=${ROUNDS:-3}
OUT=bench/results
TMP=$OUT/tmp
mkdir -p "$TMP"
# shellcheck source=bench/npu_common.sh
source "$(dirname "$0")/npu_common.sh"
raw=$TMP/op_offload_ab.txt
load_before=$(cut -d' ' -f1 /proc/loadavg)
: >"$raw"
for i in $(seq "$ROUNDS"); do
  for ngl in 0 12; do
    for nopo in 1 0; do
      ts=$("$BIN/llm-bench" -m "$q8" -dev npu -ngl "$ngl" -nopo "$nopo" -p 512 -n 0 -r 3 -t 2 -o json 2>/dev/null |
           python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["avg_ts"])')
      echo "$i $ngl $nopo $ts" >>"$raw"
    done
  done
done
python3 - "$raw" "$OUT/op_offload.md" "$ROUNDS" "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" \
  "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$load_before" "$(cut -d' ' -f1 /proc/loadavg)" <<'EOF'
import statistics, sys, time
raw, md, rounds, cpu, build, load0, load1 = sys.argv[1:8]
rows = [line.split() for line in open(raw)]
out = ["# Op offload for prefill under partial offload", "",
       "`bench/op_offload_ab.sh`, %s UTC, build %s, %s, load average %s before and %s after: the Qwen2.5-0.5B "
       "Q8_0 shape, `llm-bench -dev npu -p 512 -n 0 -r 3 -t 2`, %s alternating rounds in one sitting. "
       "`-nopo 0` (the default) runs each prompt matmul over a host weight on the npu, the weight copied "
       "in per micro-batch; `-nopo 1` leaves it on the cpu. A ratio above 1 means op offload pays."
       % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), build, cpu, load0, load1, rounds), "",
       "| -ngl | -nopo 1: median pp512 t/s (min-max) | -nopo 0: median (min-max) | -nopo 0 / -nopo 1 per round: median (min-max) |",
       "|---:|---:|---:|---:|"]
for ngl in ("0", "12"):
    off = [float(r[3]) for r in rows if r[1] == ngl and r[2] == "1"]
    on = [float(r[3]) for r in rows if r[1] == ngl and r[2] == "0"]
    ratio = [a / b for a, b in zip(on, off)]
    out.append("| %s | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.3f (%.2f-%.2f) |" % (
        ngl, statistics.median(off), min(off), max(off), statistics.median(on), min(on), max(on),
        statistics.median(ratio), min(ratio), max(ratio)))
out += ["", "The emulated npu runs the cpu's kernels on the same cores, so no device is faster here: a "
        "ratio away from 1 is the copy of each host weight per micro-batch against how the two sides "
        "run the same kernels (the npu's device workers, its launches). On a real device the gain is "
        "the device's speed over the host's on the prompt, less the copy at the link's bandwidth.", ""]
open(md, "w").write("\n".join(out))
EOF
echo "wrote $OUT/op_offload.md" >&2
