#!/usr/bin/env bash
# make bench, last: the quantized KV cache. t/s of pp and tg at two context depths with the cache
# types f16, q8_0 and q4_0 (K and V alike, flash attention on), and the KV bytes of one cell, for
# our llm-bench and, with LLAMA_BENCH, llama.cpp's llama-bench on the same file and settings, in
# alternating order (ours first for f16, theirs first for q8_0, ...). Model: the Qwen2.5-0.5B Q8_0
# shape (head dim 64, made once by llm synth). Writes bench/results/kvq.md (bench/kvq_report.py).
# Knobs: KVQ_DEPTHS (default "4096 16384"), KVQ_PP (512), KVQ_TG (128), KVQ_REPS (2), KVQ_TYPES
# ("f16 q8_0 q4_0"). Each repetition refills its depth untimed, so the 16384 rows take most of the
# run (an hour or more on 2 cores). KVQ_QUICK=1: llama-k256 (head dim 32), depth 256, pp32/tg8, one
# repetition, seconds: a smoke test of the script, not a measurement. KVQ_FILE/KVQ_LABEL measure
# another file at the full settings (llama-k256's layers have the 0.5B's K/V row width, 4 x 32 = 2 x 64,
# in 2 layers instead of 24, so depth 16384 takes minutes instead of hours).
set -euo pipefail
BIN=${BIN:-bin} SHARED=${SHARED:-../shared} LLAMA_BENCH=${LLAMA_BENCH:-}
OUT=bench/results TMP=bench/results/tmp
mkdir -p "$TMP"

if [ "${KVQ_QUICK:-}" = 1 ]; then
  file=$SHARED/models/llama-k256-f32.gguf label="llama-k256 (F32, head dim 32)"
  depths="256" pp=32 tg=8 reps=1
else
  # shellcheck source=bench/npu_common.sh
  source "$(dirname "$0")/npu_common.sh" # the 0.5B Q8_0 shape, made once: $q8
  file=${KVQ_FILE:-$q8} label=${KVQ_LABEL:-"qwen2 0.5B Q8_0 (head dim 64)"}
  depths=${KVQ_DEPTHS:-4096 16384} pp=${KVQ_PP:-512} tg=${KVQ_TG:-128} reps=${KVQ_REPS:-2}
fi
types=${KVQ_TYPES:-f16 q8_0 q4_0}
ours=$TMP/kvq_ours.jsonl theirs=$TMP/kvq_llama.jsonl cells=$TMP/kvq_cells.txt
: >"$ours"
: >"$theirs"
: >"$cells"
dlist=$(echo "$depths" | tr ' ' ',')

run_ours() {
  "$BIN/llm-bench" -m "$file" -ctk "$1" -ctv "$1" -fa 1 -d "$dlist" -p "$pp" -n "$tg" -r "$reps" -t 2 -o jsonl >>"$ours"
}
first_depth=${depths%% *}
run_theirs() {
  "$LLAMA_BENCH" -m "$file" -ctk "$1" -ctv "$1" -fa 1 -d "$dlist" -p "$pp" -n "$tg" -r "$reps" -t 2 -o jsonl >>"$theirs"
  # the bytes of a cell from llama.cpp's log (-v, a run of its own so the timed runs log nothing):
  # "llama_kv_cache: size = X MiB (N cells, ...", at the first depth so N is large enough for the
  # MiB's two decimals
  "$LLAMA_BENCH" -m "$file" -ctk "$1" -ctv "$1" -fa 1 -d "$first_depth" -p 1 -n 0 -r 1 --no-warmup -t 2 -v \
    >/dev/null 2>"$TMP/kvq_llama_$1.log"
  sed -n 's/.*llama_kv_cache: size = *\([0-9.]*\) MiB ( *\([0-9]*\) cells.*/\1 \2/p' "$TMP/kvq_llama_$1.log" | head -1 |
    awk -v t="$1" '{ printf "llama %s %.1f\n", t, $1 * 1048576 / $2 }' >>"$cells"
}

i=0
for t in $types; do
  # our bytes of a cell, from the context (llm-run -v)
  "$BIN/llm-run" -m "$file" -p hi -n 1 -c 16 -ctk "$t" -ctv "$t" -v 2>&1 >/dev/null |
    sed -n "s/.* \([0-9]*\) bytes a cell.*/ours $t \1/p" >>"$cells"
  echo "make bench: kvq $t, depths $depths, pp$pp tg$tg x $reps ($label)" >&2
  if [ -n "$LLAMA_BENCH" ] && [ $((i % 2)) = 1 ]; then run_theirs "$t"; fi
  run_ours "$t"
  if [ -n "$LLAMA_BENCH" ] && [ $((i % 2)) = 0 ]; then run_theirs "$t"; fi
  i=$((i + 1))
done
python3 "$(dirname "$0")/kvq_report.py" "$ours" "$theirs" "$cells" "$OUT/kvq.md" "$label" \
  "$(awk -F': ' '/^model name/ && !n { n = $2 } /^cpu family/ && !f { f = $2 } /^model\t/ && !m { m = $2 }
            END { printf "%s (family %s model %s)", n, f, m }' /proc/cpuinfo)" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "$(uptime | sed 's/.*load average: //')"
echo "make bench: wrote $OUT/kvq.md" >&2
