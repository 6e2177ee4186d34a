# Sourced by the npu benches (graph_ab.sh, fusion_ab.sh, timeline.sh, ...): BIN, SHARED, OUT and TMP
# (made) when the caller has not set them, gnuplot (installed when missing, for make bench only, not
# make deps) and the Qwen2.5-0.5B Q8_0 shape in models/ (made once by llm synth). Sets q8 and
# NPU_AB_MODELS, the A/Bs' two models as "file|label|tg128 repetitions" (stories260K's take ~10 ms,
# so it gets 10 of them against one slow start).
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
OUT=${OUT:-bench/results}
TMP=${TMP:-$OUT/tmp}
mkdir -p "$TMP"
MODELS=models
BENCH_PKGS="gnuplot-nox"
mkdir -p "$MODELS"

missing=""
for p in $BENCH_PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "make bench: installing:$missing" >&2
  # shellcheck disable=SC2086 # a list of names
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

q8=$MODELS/qwen2-0.5b-q8_0.gguf
if [ ! -s "$q8" ]; then
  echo "make bench: generating $q8 (once)" >&2
  "$BIN/llm" synth --arch qwen2 --preset qwen2-0.5b --type Q8_0 --seed 1 -o "$MODELS/qwen2-0.5b-q8_0.tmp.gguf"
  mv "$MODELS/qwen2-0.5b-q8_0.tmp.gguf" "$q8"
fi
# shellcheck disable=SC2034 # read by the scripts that source this one
NPU_AB_MODELS=(
  "$SHARED/models/stories260K.gguf|stories260K (F32)|10"
  "$q8|qwen2 0.5B Q8_0 (synthetic shape)|3"
)
