#!/usr/bin/env bash
# Pipeline stages over MPI (issue 31), on loopback: `mpirun --oversubscribe -np 2` and `-np 3` print
# the same greedy text as one process (prompts in micro-batches too) for stories260K (5 layers),
# qwen2-tiny and llama-k256 (2 layers each, so one layer per rank), on cpu and npu ranks;
# --dump-logits is byte for byte the same (the same kernels run on every layer); sampled text is the
# same, drawn on the last rank, which sends back only the token id; --ranks-split 1/3
# splits unevenly; -v reports each rank's layers, resident memory and bubble (computing and waiting
# time); more ranks than layers, a bad split or a rank that cannot open its stage give one
# "llm: error:" line from rank 0 naming the cause (and the rank); a rank killed mid-run ends the
# job within seconds with rank 0's line naming the rank, with or without --enable-recovery, and so
# does a rank that ends during MPI's start-up under --enable-recovery (or one that does not join
# within LLM_MPI_TIMEOUT);
# llm-bench rows carry n_ranks and ranks_split in every format; the build without MPI runs one
# process and refuses mpirun with one line. Skipped, and
# said so, where mpirun is not installed.
set -u
LLM=${LLM:-bin/llm}
SHARED=${SHARED:-../shared}
M=$SHARED/models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0; failed=0; skipped=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
done_() { echo "test_mpi: $passed passed, $failed failed${skipped:+, $skipped skipped}" | sed "s/, 0 skipped//"; exit $((failed > 0)); }

# One process (no mpirun): --ranks-split has nothing to split, the text is the usual one.
args=(-m "$M/stories260K.gguf" -p "Once upon a time" -n 40 --temp 0)
"$LLM" run "${args[@]}" >"$tmp/plain" 2>/dev/null
"$LLM" run "${args[@]}" --ranks-split 1/3 >"$tmp/split" 2>/dev/null && [ -s "$tmp/plain" ] && cmp -s "$tmp/plain" "$tmp/split" \
  && ok || fail "--ranks-split outside mpirun changed the text"
if ! command -v mpirun >/dev/null; then
  skipped=1; echo "SKIP test_mpi: mpirun is not installed (make deps installs openmpi-bin)" >&2; done_
fi
# root may run Open MPI only when told so; Open MPI's own allocations are no leaks of ours
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
MPIRUN=(timeout -k 5 120 mpirun --oversubscribe)

one()  { "$LLM" run "$@" 2>"$tmp/err1"; }
many() { local np=$1; shift; "${MPIRUN[@]}" -np "$np" "$LLM" run "$@" 2>"$tmp/errk"; }

# The build without MPI (make links it beside the MPI one; or $LLM itself, built with HAVE_MPI=,
# which make test says with LLM_HAVE_MPI empty): one process runs as usual; under mpirun every
# process fails and rank 0 alone says why.
NO_MPI=${TEST_BUILD:-build}/no_mpi/llm
[ -n "${LLM_HAVE_MPI-1}" ] || NO_MPI=$LLM
if [ -x "$NO_MPI" ]; then
  args=(-m "$M/stories260K.gguf" -p "Once upon a time" -n 40 --temp 0)
  "$NO_MPI" run "${args[@]}" >"$tmp/nompi" 2>/dev/null && cmp -s "$tmp/plain" "$tmp/nompi" && ok || fail "no-MPI build: text differs"
  for np in 1 2 3; do
    "${MPIRUN[@]}" -np $np "$NO_MPI" run "${args[@]}" >/dev/null 2>"$tmp/errk"; rc=$?
    [ $rc -ne 0 ] && [ "$(grep -c '^llm: error: ' "$tmp/errk")" -eq 1 ] && \
      grep -q '^llm: error: started by mpirun, but this llm was built without MPI' "$tmp/errk" && ok \
      || fail "no-MPI build under mpirun -np $np: exit $rc: $(grep -v '^[-]' "$tmp/errk" | head -c 400)"
  done
else
  skipped=1; echo "SKIP test_mpi: no build without MPI at $NO_MPI (make all links it when mpicc is installed)" >&2
fi

if [ -z "${LLM_HAVE_MPI-1}" ]; then
  skipped=1; echo "SKIP test_mpi: $LLM was built without MPI (HAVE_MPI=)" >&2; done_
fi

# Greedy text: K ranks against one process.
for spec in "stories260K 2" "stories260K 3" "qwen2-tiny-q8_0 2" "llama-k256-q4_k_m 2"; do
  set -- $spec
  for dev in cpu npu; do
    args=(-m "$M/$1.gguf" -p "Once upon a time" -n 40 --temp 0 -dev "$dev")
    one "${args[@]}" >"$tmp/one" || fail "$1 $dev: one process failed: $(cat "$tmp/err1")"
    many "$2" "${args[@]}" >"$tmp/many"; rc=$?
    [ $rc -eq 0 ] && [ -s "$tmp/many" ] && cmp -s "$tmp/one" "$tmp/many" && ok \
      || fail "$1 $dev -np $2 (exit $rc): text differs: $(head -c 200 "$tmp/many") $(head -c 300 "$tmp/errk")"
  done
done

# Logits of every prompt position: bit-identical.
for spec in "stories260K 3 cpu" "qwen2-tiny-q8_0 2 npu" "llama-k256-q4_k_m 2 cpu"; do
  set -- $spec
  args=(-m "$M/$1.gguf" -p "The quick brown fox jumps over the lazy dog" -n 1 --temp 0 -dev "$3")
  one "${args[@]}" --dump-logits "$tmp/l1" >/dev/null
  many "$2" "${args[@]}" --dump-logits "$tmp/lk" >/dev/null; rc=$?
  [ $rc -eq 0 ] && [ -s "$tmp/l1" ] && cmp -s "$tmp/l1" "$tmp/lk" && ok || fail "$1 -np $2 $3: logits differ (exit $rc)"
done

# Sampling: the last rank draws (with the same seed, so the same text) and only the token id comes
# back, 4 bytes per decode, banned tokens (--ignore-eos) included; with a repeat penalty (its
# history is rank 0's) the logits row travels and rank 0 draws; --dump-logits brings the prompt's
# rows (5 x 512 floats) and the drawn token.
for spec in "generation 4 --temp 0.8 -s 7" "generation 4 --temp 0.8 -s 7 --ignore-eos -n 60" \
            "generation 2048 --temp 0.8 -s 7 --repeat-penalty 1.2" "prompt 10244 --temp 0 --dump-logits $tmp/dl"; do
  set -- $spec; phase=$1 back=$2; shift 2
  args=(-m "$M/stories260K.gguf" -p "Once upon a time" -n 40 "$@")
  one "${args[@]}" >"$tmp/one"
  many 3 "${args[@]}" -v >"$tmp/many"; rc=$?
  [ $rc -eq 0 ] && [ -s "$tmp/one" ] && cmp -s "$tmp/one" "$tmp/many" && ok || fail "-np 3 $* (exit $rc): text differs"
  grep -q "^llm-run:   $phase: $back bytes back from rank 2 per decode$" "$tmp/errk" && ok \
    || fail "-np 3 $*: bytes back: $(grep 'bytes back' "$tmp/errk")"
done

# Micro-batches (-ub 2 on a 5-token prompt) flow through the stages one after the other.
args=(-m "$M/stories260K.gguf" -p "Once upon a time" -n 40 --temp 0 -ub 2)
one "${args[@]}" >"$tmp/one"
many 3 "${args[@]}" >"$tmp/many"; rc=$?
[ $rc -eq 0 ] && cmp -s "$tmp/one" "$tmp/many" && ok || fail "-ub 2 -np 3 (exit $rc): $(head -c 300 "$tmp/errk")"

# Uneven split and one layer per rank: the text stays; -v names each rank's layers and memory.
args=(-m "$M/stories260K.gguf" -p "Once upon a time" -n 40 --temp 0)
one "${args[@]}" >"$tmp/one"
many 2 "${args[@]}" --ranks-split 1/3 -v >"$tmp/many"; rc=$?
[ $rc -eq 0 ] && cmp -s "$tmp/one" "$tmp/many" && ok || fail "--ranks-split 1/3 (exit $rc): $(head -c 300 "$tmp/errk")"
grep -q '^llm-run: rank 0 of 2: layers 0-0 + token embedding, resident [0-9.]* MiB$' "$tmp/errk" && \
  grep -q '^llm-run: rank 1 of 2: layers 1-4 + output, resident [0-9.]* MiB$' "$tmp/errk" && ok \
  || fail "-v rank lines: $(grep rank "$tmp/errk")"
[ "$(grep -c '^llm-run:   \(prompt\|generation\): computing [0-9.]* ms, waiting [0-9.]* ms (bubble [0-9]*%)$' "$tmp/errk")" -eq 4 ] && ok \
  || fail "-v: each rank's computing and waiting time: $(grep -A2 rank "$tmp/errk")"
args=(-m "$M/qwen2-tiny-q8_0.gguf" -p "Hello" -n 20 --temp 0)
one "${args[@]}" >"$tmp/one"
many 2 "${args[@]}" -v >"$tmp/many"; rc=$?
[ $rc -eq 0 ] && cmp -s "$tmp/one" "$tmp/many" && grep -q '^llm-run: rank 1 of 2: layers 1-1 + output' "$tmp/errk" && ok \
  || fail "one layer per rank (exit $rc): $(grep rank "$tmp/errk")"
# Each rank touches only its own tensors: the last rank reads the tied output matrix (10 MiB of this
# 16 MiB file), rank 0 a few of its rows as embeddings; a rank that repacked or copied the whole
# file at load would hold all of it.
rss() { sed -n "s/^llm-run: rank $1 of 2: .*, resident \([0-9.]*\) MiB$/\1/p" "$tmp/errk"; }
awk -v a="$(rss 0)" -v b="$(rss 1)" 'BEGIN { exit !(a > 0 && b - a >= 8) }' && ok \
  || fail "rank 0 holds more than its own tensors: resident $(rss 0) MiB against the last rank's $(rss 1)"

# llm-bench under mpirun: every format records the rank count and the layers of each rank.
bench=(-m "$M/stories260K.gguf" -p 8 -n 4 -r 1 --no-warmup)
for o in md csv json jsonl sql; do
  "${MPIRUN[@]}" -np 2 "$LLM" bench "${bench[@]}" -o $o >"$tmp/b.$o" 2>"$tmp/errk"; rc=$?
  [ $rc -eq 0 ] || fail "llm-bench -o $o under mpirun: exit $rc: $(head -c 300 "$tmp/errk")"
done
grep -q '| ranks    |' "$tmp/b.md" && [ "$(grep -c '| 3/2      |' "$tmp/b.md")" -eq 2 ] && ok || fail "md: $(cat "$tmp/b.md")"
[ "$(grep -c '"2","3/2","1","[01]","[0-9.]*","[0-9.]*"$' "$tmp/b.csv")" -eq 2 ] &&
  head -1 "$tmp/b.csv" | grep -q ',n_ranks,ranks_split,use_mmap,operator_fusion,launches_per_token,launches_per_token_unfused$' && ok \
  || fail "csv: $(cut -c 1-40 "$tmp/b.csv")"
[ "$(grep -c '"n_ranks": 2,$' "$tmp/b.json")" -eq 2 ] && [ "$(grep -c '"ranks_split": "3/2",$' "$tmp/b.json")" -eq 2 ] && ok \
  || fail "json: $(grep ranks "$tmp/b.json")"
[ "$(grep -c '"n_ranks": 2, "ranks_split": "3/2"' "$tmp/b.jsonl")" -eq 2 ] && ok || fail "jsonl"
grep -q 'CREATE TABLE IF NOT EXISTS llm_bench_splits' "$tmp/b.sql" && [ "$(grep -c "INSERT INTO llm_bench_splits.*n_ranks, ranks_split) SELECT.*'2', '3/2'" "$tmp/b.sql")" -eq 2 ] && ok \
  || fail "sql: $(grep -i 'llm_bench_splits' "$tmp/b.sql" | head -c 600)"

# expect_rank_error NAME PATTERN NP ARGS...: non-zero exit, exactly one "llm: error:" line, matching PATTERN.
expect_rank_error() {
  local name=$1 pat=$2 np=$3; shift 3
  many "$np" "$@" >/dev/null; local rc=$?
  local lines; lines=$(grep -c '^llm: error: ' "$tmp/errk")
  [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -q "^llm: error: $pat" "$tmp/errk" && ok \
    || fail "$name: exit $rc, $lines error lines: $(grep -v '^[-]' "$tmp/errk" | head -c 400)"
}
expect_rank_error "3 ranks, 2 layers" "3 ranks but the model has 2 layers" 3 -m "$M/qwen2-tiny-q8_0.gguf" -p Hi -n 1
expect_rank_error "split of 3 shares on 2 ranks" "--ranks-split '1/2/3' has more shares" 2 \
  -m "$M/stories260K.gguf" -p Hi -n 1 --ranks-split 1/2/3
expect_rank_error "a rank without a layer" "--ranks-split '0/1' leaves rank 0 without a layer" 2 \
  -m "$M/stories260K.gguf" -p Hi -n 1 --ranks-split 0/1
expect_rank_error "a rank that cannot open its stage" "rank 1: -ot: '(' is not a regular expression" 2 \
  -m "$M/stories260K.gguf" -p Hi -n 1 -ot "(=cpu"

# A rank killed mid-run ends the job within seconds (not LLM_MPI_TIMEOUT's 100) with one line from
# rank 0 naming it, whether mpirun ends the job itself (the default: it gives the others SIGTERM a
# second after the death) or lets rank 0 do it (--enable-recovery): the rank waiting for the dead
# one sees its process gone. SIGTERM to rank 0 (what mpirun sends when a rank on another machine
# dies) is one line too. Deadlines are generous (ASan, a loaded machine); the job's end is timed
# from the kill.
kill_rank() { # kill_rank SECONDS RANK SIGNAL: signal that rank of the job started below, SECONDS
  # after the job's text begins (past MPI's start-up, which a loaded machine or an ASan build may
  # take long over, and which a rank's death under --enable-recovery leaves hanging: mpirun's part)
  for _ in $(seq 1200); do
    if [ "$(stat -c %s "$tmp/text" 2>/dev/null || echo 0)" -gt 20 ]; then
      for p in $(pgrep -f -- "$LLM run -m $M/stories260K.gguf -p Hello -n -1"); do
        # this job's rank only (LLM_TEST_JOB: another run of this test may be going on beside it)
        env=$(tr '\0' '\n' </proc/"$p"/environ 2>/dev/null)
        if grep -qx "LLM_TEST_JOB=$tmp" <<<"$env" && [ "$(sed -n 's/^OMPI_COMM_WORLD_RANK=//p' <<<"$env")" = "$2" ]; then
          sleep "$1"
          kill -"$3" "$p"
          date +%s >"$tmp/killed_at"
          return
        fi
      done
    fi
    sleep 0.1
  done
}
long=(-m "$M/stories260K.gguf" -p Hello -n -1 --ignore-eos --temp 0 -c 50000)
for spec in "default 1 KILL rank 1 died" "recovery 1 KILL rank 1 died" "default 2 KILL rank 2 died" \
            "default 0 TERM mpirun ended the job (SIGTERM)"; do
  set -- $spec; mode=$1 rank=$2 sig=$3; shift 3; want="$*"
  extra=(); [ $mode = recovery ] && extra=(--enable-recovery)
  rm -f "$tmp/killed_at" "$tmp/text"
  kill_rank 0.5 "$rank" "$sig" &
  LLM_TEST_JOB=$tmp LLM_MPI_TIMEOUT=100 timeout -k 5 150 mpirun --oversubscribe "${extra[@]}" -x LLM_TEST_JOB -np 3 \
    "$LLM" run "${long[@]}" >"$tmp/text" 2>"$tmp/errk"
  wait
  took=$(($(date +%s) - $(cat "$tmp/killed_at" 2>/dev/null || echo 0)))
  [ $took -le 30 ] && ok || fail "SIG$sig to rank $rank ($mode): the job took $took s to end after the signal"
  [ "$(grep -c '^llm: error: ' "$tmp/errk")" -eq 1 ] && grep -q "^llm: error: .*$want" "$tmp/errk" && ok \
    || fail "SIG$sig to rank $rank ($mode): rank 0's line: $(grep -v '^[-]' "$tmp/errk" | head -c 400)"
done

# A rank that ends while MPI starts (before it has joined: here before it execs llm) leaves the others
# blocked in MPI_Init under --enable-recovery, where mpirun does not end the job: their start-up
# watch sees its process gone (or never sees it) and rank 0 names it. A rank that is alive but does
# not join (it sleeps first) runs into LLM_MPI_TIMEOUT, the limit for a rank on another machine.
cat >"$tmp/late.sh" <<EOF
#!/bin/sh
case "\$OMPI_COMM_WORLD_RANK" in "\$LATE_RANK") [ "\$LATE" = exit ] && exit 3; sleep "\$LATE" ;; esac
exec "$(readlink -f "$LLM")" run "\$@"
EOF
chmod +x "$tmp/late.sh"
for spec in "3 1 exit 100 rank 1 ended during MPI start-up" "3 2 exit 100 rank 2 ended during MPI start-up" \
            "2 1 8 2 MPI start-up did not finish in 2 s"; do
  set -- $spec; np=$1 late_rank=$2 late=$3 limit=$4; shift 4; want="$*"
  start=$(date +%s)
  LATE_RANK=$late_rank LATE=$late LLM_MPI_TIMEOUT=$limit timeout -k 5 90 mpirun --oversubscribe --enable-recovery \
    -x LATE_RANK -x LATE -np "$np" "$tmp/late.sh" -m "$M/stories260K.gguf" -p Hi -n 4 --temp 0 >/dev/null 2>"$tmp/errk"
  took=$(($(date +%s) - start))
  [ $took -le 40 ] && ok || fail "start-up, rank $late_rank $late (-np $np): the job took $took s to end"
  [ "$(grep -c '^llm: error: ' "$tmp/errk")" -eq 1 ] && grep -q "^llm: error: $want" "$tmp/errk" && ok \
    || fail "start-up, rank $late_rank $late (-np $np): rank 0's line: $(grep -v '^[-]' "$tmp/errk" | head -c 400)"
done
done_
