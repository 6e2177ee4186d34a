#!/usr/bin/env bash
# `make run`: generate a story with the default model: ../shared/models/stories260K.gguf when it
# exists, else a small model made by `llm synth` (random weights: the text is noise).
set -euo pipefail
bin=${1:-bin}; shared=${2:-../shared}
model="$shared/models/stories260K.gguf"
if [ ! -f "$model" ]; then
  model=models/synth-tiny-llama-f32.gguf
  [ -f "$model" ] || "$bin/llm" synth --arch llama --preset tiny --type F32 --seed 1 -o "$model"
fi
exec "$bin/llm-run" -m "$model" -p "Once upon a time" -n 200 --temp 0
