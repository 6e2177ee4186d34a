#!/usr/bin/env bash
# make bench, after the -ngl sweep: speed against context depth. One long decode of the
# Qwen2.5-0.5B Q8_0 shape (llm-bench -p 0 -n DEPTH_TOKENS -r 1 --token-times --no-warmup, default
# 2048 tokens) on the cpu, the npu eagerly and the npu in graph mode; with LLAMA_BENCH, llama.cpp's
# llama-bench on the same file at -n 128 -d 0,512,1024,2048 for comparison. Writes
# bench/results/depth.md (t/s by depth range, where each curve bends, the capture spike of each
# 256-cell window) and depth.png (gnuplot: a rolling median of t/s against depth, the slow steps
# as points); bench/depth_report.py makes both. DEPTH_QUICK=1: stories260K, 600 tokens, seconds.
set -euo pipefail
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
LLAMA_BENCH=${LLAMA_BENCH:-}
OUT=bench/results
TMP=$OUT/tmp
mkdir -p "$TMP"
# shellcheck source=bench/npu_common.sh
source "$(dirname "$0")/npu_common.sh"

if [ "${DEPTH_QUICK:-}" = 1 ]; then
  file=$SHARED/models/stories260K.gguf label="stories260K (F32)" n=600
else
  file=$q8 label="qwen2 0.5B Q8_0" n=${DEPTH_TOKENS:-2048}
fi
jsonl=$TMP/depth.jsonl
: >"$jsonl"
for setting in "cpu on" "npu off" "npu on"; do
  read -r dev graph <<<"$setting"
  echo "make bench: tg$n with per-token times on $dev (graph $graph), $label" >&2
  "$BIN/llm-bench" -m "$file" -dev "$dev" -g "$graph" -p 0 -n "$n" -r 1 -t 2 --no-warmup --token-times -o jsonl >>"$jsonl"
done
llama=$TMP/depth_llama.jsonl
: >"$llama"
if [ -n "$LLAMA_BENCH" ]; then
  "$LLAMA_BENCH" -m "$file" -p 0 -n 128 -d 0,512,1024,2048 -r 3 -t 2 -o jsonl >"$llama"
fi
python3 "$(dirname "$0")/depth_report.py" "$jsonl" "$llama" "$OUT" "$TMP" "$label" \
  "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
gnuplot "$TMP/depth.gp"
echo "make bench: wrote $OUT/depth.md and $OUT/depth.png" >&2
