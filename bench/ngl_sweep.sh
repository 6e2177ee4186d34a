#!/usr/bin/env bash
# make bench, after graph_ab.sh: partial offload on the emulated NPU. For the Qwen2.5-0.5B Q8_0 and
# Q4_K_M shapes (models/, made by `llm synth` when missing), one sitting of llm-bench -dev npu with
# -ngl 0,6,12,18,24,99 (24 layers + output): pp512 and tg128 with graph mode on, then tg128 with
# graph mode on and off at launch costs 0 and 20 µs. Writes bench/results/ngl.md (t/s, the
# schedule's splits and copy bytes per token, the host/device µs per token the npu counted; the
# table script is bench/ngl_report.py) and bench/results/ngl.png (gnuplot: tg128 t/s against
# -ngl). The jsonl stays in bench/results/tmp. NGL_QUICK=1: stories260K only, -r 1, in seconds.
set -euo pipefail
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
OUT=bench/results
TMP=$OUT/tmp
mkdir -p "$TMP"
# shellcheck source=bench/npu_common.sh
source "$(dirname "$0")/npu_common.sh"

q4km=$MODELS/qwen2-0.5b-q4_k_m.gguf
if [ "${NGL_QUICK:-}" != 1 ] && [ ! -s "$q4km" ]; then
  echo "make bench: generating $q4km (once)" >&2
  "$BIN/llm" synth --arch qwen2 --preset qwen2-0.5b --type Q4_K_M --seed 1 -o "$MODELS/qwen2-0.5b-q4_k_m.tmp.gguf"
  mv "$MODELS/qwen2-0.5b-q4_k_m.tmp.gguf" "$q4km"
fi

# file | label | -ngl list | repetitions
if [ "${NGL_QUICK:-}" = 1 ]; then
  specs=("$SHARED/models/stories260K.gguf|stories260K (F32)|0,3,99|1")
else
  specs=("$q8|qwen2 0.5B Q8_0|0,6,12,18,24,99|3" "$q4km|qwen2 0.5B Q4_K_M|0,6,12,18,24,99|3")
fi

# tag ROWS with the model's label and the run's kind, one json object a line
tag() { LABEL="$1" KIND="$2" python3 -c 'import json, os, sys
for line in sys.stdin:
    r = json.loads(line)
    r["label"], r["kind"] = os.environ["LABEL"], os.environ["KIND"]
    print(json.dumps(r))'; }

jsonl=$TMP/ngl.jsonl
: >"$jsonl"
start=$(date +%s)
for spec in "${specs[@]}"; do
  IFS='|' read -r file label ngl reps <<<"$spec"
  echo "make bench: -ngl $ngl on $label" >&2
  "$BIN/llm-bench" -m "$file" -dev npu -ngl "$ngl" -p 512 -n 128 -r "$reps" -t 2 -o jsonl | tag "$label" pp_tg >>"$jsonl"
  "$BIN/llm-bench" -m "$file" -dev npu -ngl "$ngl" -g on,off --npu-launch-us 0,20 -p 0 -n 128 -r "$reps" -t 2 \
    -o jsonl | tag "$label" ab >>"$jsonl"
done
python3 "$(dirname "$0")/ngl_report.py" "$jsonl" "$OUT" "$TMP" "$(($(date +%s) - start))" \
  "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
gnuplot "$TMP/ngl.gp"
echo "make bench: wrote $OUT/ngl.md and $OUT/ngl.png" >&2
