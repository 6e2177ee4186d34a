#!/usr/bin/env bash
# Fuzzes the GGUF parser: builds tests/fuzz/fuzz_gguf.c with libFuzzer + ASan + UBSan from only the
# sources the parser needs, seeds build/fuzz/corpus with small valid files and runs for a bounded
# time. Exits non-zero on any finding (the crashing input is kept in build/fuzz/artifacts/).
# Env: SHARED (fixtures, default ../shared), FUZZ_TIME (seconds, default 30).
set -u
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
TIME=${FUZZ_TIME:-30}
OUT=build/fuzz
# the parser needs only the error helpers and the core IR's type geometry (no kernels)
SRC=(src/model/gguf.c src/error.c src/type_info.c)
CFLAGS=(-std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -Isrc)

result() {
  echo "fuzz_gguf: $1 passed, $2 failed"
  if [ -n "${RESULTS:-}" ]; then echo "$1 $2" >"$RESULTS"; fi
}
die() { echo "fuzz_gguf: $*" >&2; result 0 1; exit 1; }

mkdir -p "$OUT/corpus" "$OUT/artifacts" || die "cannot create $OUT"
clang "${CFLAGS[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  tests/fuzz/fuzz_gguf.c "${SRC[@]}" -lm -ldl -o "$OUT/fuzz_gguf" || die "build failed"
clang "${CFLAGS[@]}" tests/fuzz/seed_gguf.c src/model/gguf_write.c "${SRC[@]}" -lm -ldl -o "$OUT/seed_gguf" \
  || die "seed helper build failed"

# Seeds: a tiny file with every value type, two small fixtures, and the first 64 KiB of a model
# (valid metadata, truncated data).
"$OUT/seed_gguf" "$OUT/corpus/seed-all-types.gguf" || die "seed helper failed"
for f in quant/Q8_0.gguf quant/Q4_K.gguf; do
  [ -r "$SHARED/models/$f" ] || die "missing fixture $SHARED/models/$f"
  rm -f "$OUT/corpus/seed-${f##*/}"
  cat "$SHARED/models/$f" > "$OUT/corpus/seed-${f##*/}"
done
head -c 65536 "$SHARED/models/stories260K-q4_0.gguf" > "$OUT/corpus/seed-stories260K-q4_0-64k.gguf" \
  || die "missing fixture stories260K-q4_0.gguf"

"$OUT/fuzz_gguf" -max_total_time="$TIME" -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix="$OUT/artifacts/" -print_final_stats=1 "$OUT/corpus" 2>"$OUT/fuzz.log"
rc=$?
grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ *DONE)' "$OUT/fuzz.log"
if [ "$rc" -ne 0 ]; then
  tail -n 60 "$OUT/fuzz.log"
  echo "fuzz_gguf: finding (exit $rc), see $OUT/fuzz.log and $OUT/artifacts/" >&2
  result 0 1
  exit 1
fi
result 1 0
