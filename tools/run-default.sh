#!/usr/bin/env bash
# `make run`: a 200-token greedy story from models/stories260K.gguf, the model the repository ships
# (karpathy's tinyllamas, MIT; see models/README.md), so a clone alone tells the same story.
set -euo pipefail
bin=${1:-bin}
exec "$bin/llm-run" -m models/stories260K.gguf -p "Once upon a time" -n 200 --temp 0
