#!/usr/bin/env bash
# bench/graph_ab.sh's last section, on stdout: what a capture costs. Graph mode captures once per
# 256-cell window, so a decode from an empty context captures at steps 0, 256, 512, ...: one long
# decode per model in graph mode without the warm-up (which would capture first), each step timed
# (--token-times); bench/capture_report.py compares each capturing step with the replayed steps
# after it.
set -euo pipefail
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
TMP=bench/results/tmp
mkdir -p "$TMP"
# shellcheck source=bench/npu_common.sh
source "$(dirname "$0")/npu_common.sh"

jsonl=$TMP/capture.jsonl
: >"$jsonl"
for spec in "$SHARED/models/stories260K.gguf 600" "$q8 300"; do
  read -r file n <<<"$spec"
  echo "make bench: capture cost, tg$n in graph mode, $file" >&2
  "$BIN/llm-bench" -m "$file" -dev npu -g on -p 0 -n "$n" -r 1 -t 2 --no-warmup --token-times -o jsonl >>"$jsonl"
done
python3 "$(dirname "$0")/capture_report.py" "$jsonl"
