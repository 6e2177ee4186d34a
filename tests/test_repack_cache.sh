#!/usr/bin/env bash
# The repack cache (src/model/repack_cache.h): a load writes the repacked weights once and later loads
# map them; text and logits are the same bits with the cache off, on a miss and on a hit, on the cpu
# and the npu; an entry of another version of the file, another layout, a damaged or foreign entry
# is a miss that is written again; stale entries and old temporary files go; the read-into-memory
# load modes and an unusable directory leave the cache alone and still run.
set -u
LLM=$(cd "$(dirname "${LLM:-bin/llm}")" && pwd)/$(basename "${LLM:-bin/llm}")
S=${SHARED:-../shared}/models
passed=0; failed=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
C=$tmp/cache
entries() { find "$C" -maxdepth 1 -name '*.rpk' 2>/dev/null | wc -l; }

# gen NAME MODEL [ARGS...]: greedy text to $tmp/NAME.txt, logits to $tmp/NAME.f32, -v lines to
# $tmp/NAME.err
gen() {
  local name=$1 model=$2
  shift 2
  "$LLM" run -m "$model" -p "Once upon a time" -n 24 --temp 0 -v --dump-logits "$tmp/$name.f32" "$@" \
    >"$tmp/$name.txt" 2>"$tmp/$name.err" || fail "$name: exit $?: $(tail -3 "$tmp/$name.err")"
}
same() { # same A B WHAT
  cmp -s "$tmp/$1.txt" "$tmp/$2.txt" && cmp -s "$tmp/$1.f32" "$tmp/$2.f32" && [ -s "$tmp/$1.txt" ] && ok \
    || fail "$3: text or logits differ ($1 against $2)"
}
said() { # said NAME PATTERN WHAT
  grep -q "$2" "$tmp/$1.err" && ok || fail "$3: no '$2' in: $(grep 'repack cache' "$tmp/$1.err")"
}

# Q4_K / Q6_K repack on every AVX2 CPU; LLM_REPACK=all repacks Q8_0 on every one too.
for m in llama-k256-q4_k_m stories260K-q8_0; do
  cp "$S/$m.gguf" "$tmp/$m.gguf"
  M=$tmp/$m.gguf
  export LLM_REPACK=all
  LLM_REPACK_CACHE=off gen off "$M"
  LLM_REPACK_CACHE=$C gen miss "$M"; said miss "repack cache: .* written" "$m first load"
  LLM_REPACK_CACHE=$C gen hit "$M"; said hit "repack cache: .* mapped" "$m second load"
  same off miss "$m: miss"; same off hit "$m: hit"
  for opts in "-dev npu" "-dev npu -t 1 --no-warmup" "-dev cpu -t 1 -ub 2" "--mlock -dev npu -ngl 1"; do
    # shellcheck disable=SC2086
    { LLM_REPACK_CACHE=off gen off2 "$M" $opts; LLM_REPACK_CACHE=$C gen hit2 "$M" $opts; }
    said hit2 "mapped" "$m $opts"; same off2 hit2 "$m $opts"
  done
  # the read-into-memory modes take no entry and write none
  LLM_REPACK_CACHE=$C gen none "$M" --no-mmap
  ! grep -q "repack cache" "$tmp/none.err" && ok || fail "$m --no-mmap used the cache"
  same off none "$m --no-mmap"
  unset LLM_REPACK
done
[ "$(entries)" = 2 ] && ok || fail "two models: $(entries) entries"

M=$tmp/llama-k256-q4_k_m.gguf
LLM_REPACK_CACHE=off gen ref "$M"
# another layout (LLM_REPACK=0 repacks nothing; the default may differ from all on AVX-512 CPUs):
# no entry of all's is taken for it
LLM_REPACK=0 LLM_REPACK_CACHE=$C gen norepack "$M"
! grep -q "repack cache" "$tmp/norepack.err" && ok || fail "LLM_REPACK=0 used the cache"
same ref norepack "LLM_REPACK=0"

# the default and LLM_REPACK=all: each maps its own entry (on AVX-512 and AVX-VNNI CPUs they
# repack different matrices; elsewhere they share one)
for mode in all default; do
  LLM_REPACK=$mode LLM_REPACK_CACHE=off gen "$mode-off" "$M"
  LLM_REPACK=$mode LLM_REPACK_CACHE=$C gen "$mode-1" "$M"
  LLM_REPACK=$mode LLM_REPACK_CACHE=$C gen "$mode-2" "$M"; said "$mode-2" "mapped" "LLM_REPACK=$mode"
  same "$mode-off" "$mode-2" "LLM_REPACK=$mode"
done

# a new version of the file (its modification time) is a miss, and its old entry goes
LLM_REPACK_CACHE=$C gen v1 "$M"; said v1 "mapped" "before touch"
old=$(grep -o "$C/[0-9a-f]*\.rpk" "$tmp/v1.err" | head -1); cp "$old" "$tmp/old.rpk"
touch -d '2001-01-01' "$M"
LLM_REPACK_CACHE=$C gen v2 "$M"; said v2 "written" "after touch"; same ref v2 "after touch"
[ "$(entries)" = 2 ] && ok || fail "after touch: $(entries) entries, the old one kept"
# the old entry under the new name, with the new key in its header: the file's identity in the
# header still tells them apart (a key is a hash; two may meet)
entry=$(grep -o "$C/[0-9a-f]*\.rpk" "$tmp/v2.err" | head -1)
python3 - "$tmp/old.rpk" "$entry" <<'PY'
import os, struct, sys
data = bytearray(open(sys.argv[1], 'rb').read())
struct.pack_into('<Q', data, 24, int(os.path.basename(sys.argv[2])[:16], 16))  # the key field
open(sys.argv[2], 'wb').write(data)
PY
chmod 600 "$entry"
LLM_REPACK_CACHE=$C gen v3 "$M"; said v3 "does not match" "the old entry renamed"; same ref v3 "the old entry renamed"

# damaged, foreign and unreadable entries: a miss, written again, the same bits
damage() { # damage WHAT COMMAND...
  local what=$1
  shift
  "$@"
  LLM_REPACK_CACHE=$C gen dmg "$M"
  said dmg "written" "$what"; same ref dmg "$what"
  LLM_REPACK_CACHE=$C gen dmg2 "$M"; said dmg2 "mapped" "$what, then"
}
damage "truncated entry" truncate -s -4096 "$entry"
damage "grown entry" truncate -s +4096 "$entry"
damage "bad magic" dd if=/dev/zero of="$entry" bs=1 count=4 conv=notrunc status=none
damage "short file" truncate -s 10 "$entry"
damage "empty file" truncate -s 0 "$entry"
damage "writable by others" chmod 666 "$entry"
flip_layout() { printf '\x01' | dd of="$entry" bs=1 seek=32 conv=notrunc status=none; } # the layout field
damage "another layout in the header" flip_layout

# an old temporary file (a process that died while writing) goes with the next save; a fresh one stays
touch -d '3 days ago' "$C/0000000000000000.rpk.tmp.1"
touch "$C/0000000000000000.rpk.tmp.2"
# a file whose source is gone goes too
cp "$M" "$tmp/gone.gguf"
LLM_REPACK_CACHE=$C gen gone "$tmp/gone.gguf"; said gone "written" "copy"
[ "$(entries)" = 3 ] && ok || fail "with the copy: $(entries) entries"
rm "$tmp/gone.gguf"
touch -d '2002-02-02' "$M"
LLM_REPACK_CACHE=$C gen after "$M"; said after "written" "save after the copy went"
[ "$(entries)" = 2 ] && ok || fail "the entry of a removed file stayed: $(entries) entries"
[ ! -e "$C/0000000000000000.rpk.tmp.1" ] && [ -e "$C/0000000000000000.rpk.tmp.2" ] && ok \
  || fail "temporary files: $(ls "$C")"

# the cache off, or a directory that cannot be made: no entry, the same text, no error
for dir in off 0 /dev/null/sub; do
  LLM_REPACK_CACHE=$dir gen nodir "$M"; same ref nodir "LLM_REPACK_CACHE=$dir"
  ! grep -q "mapped\|written" "$tmp/nodir.err" && ok || fail "LLM_REPACK_CACHE=$dir: $(grep 'repack cache' "$tmp/nodir.err")"
done
# the default place: $XDG_CACHE_HOME/llm/repack, else $HOME/.cache/llm/repack
env -u LLM_REPACK_CACHE XDG_CACHE_HOME="$tmp/xdg" "$LLM" run -m "$M" -p hi -n 2 --temp 0 >/dev/null 2>&1
[ "$(find "$tmp/xdg/llm/repack" -name '*.rpk' 2>/dev/null | wc -l)" = 1 ] && ok || fail "XDG_CACHE_HOME: no entry"
env -u LLM_REPACK_CACHE -u XDG_CACHE_HOME HOME="$tmp/home" "$LLM" run -m "$M" -p hi -n 2 --temp 0 >/dev/null 2>&1
[ "$(find "$tmp/home/.cache/llm/repack" -name '*.rpk' 2>/dev/null | wc -l)" = 1 ] && ok || fail "HOME: no entry"

echo "test_repack_cache: $passed passed, $failed failed"
[ $failed -eq 0 ]
