#!/usr/bin/env bash
# make bench, after graph_ab.sh: operator fusion's A/B on the emulated NPU (GGML_CANN_OPERATOR_FUSION).
# For stories260K and the Qwen2.5-0.5B Q8_0 shape (models/, as graph_ab.sh), llm-bench tg128 -t 2 with
# -g on,off x --npu-launch-us 0,20, fusion off and on, in two rounds of opposite order (fusion off
# first, then on first; each setting's better round is reported); the kernel launches per decode token
# with and without fusion come from -v's "operator fusion" line, with the layout pass's report.
# BENCH_ROUNDS (default 2): rounds of opposite order. Writes bench/results/fusion_ab.md.
set -euo pipefail
# shellcheck source=bench/npu_common.sh
source "$(dirname "$0")/npu_common.sh"

jsonl=$TMP/fusion_ab.jsonl
launches=$TMP/fusion_ab.launches
: >"$jsonl"
: >"$launches"
for spec in "${NPU_AB_MODELS[@]}"; do
  IFS='|' read -r file label reps <<<"$spec"
  for ((round = 0; round < ${BENCH_ROUNDS:-2}; round++)); do
    order="off on"
    [ "$round" = 1 ] && order="on off"
    for fusion in $order; do
      GGML_CANN_OPERATOR_FUSION=$fusion "$BIN/llm-bench" -m "$file" -dev npu -g on,off --npu-launch-us 0,20 \
        -p 0 -n 128 -t 2 -r "$reps" -o jsonl -v 2>"$TMP/fusion_ab.err" |
        python3 -c 'import json,sys; [print(json.dumps(dict(json.loads(l), label=sys.argv[1], fusion=sys.argv[2], round=int(sys.argv[3])))) for l in sys.stdin]' \
          "$label" "$fusion" "$round" >>"$jsonl"
      line=$(grep -o "a 1-token graph launches [0-9]* kernels, [0-9]* unfused.*" "$TMP/fusion_ab.err" | tail -1)
      echo "{\"label\": \"$label\", \"fusion\": \"$fusion\", \"launches\": \"$line\"}" >>"$launches"
    done
  done
done

python3 - "$jsonl" "$launches" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" >"$OUT/fusion_ab.md" <<'PY'
import json, re, sys, time
rows = [json.loads(l) for l in open(sys.argv[1])]
launch, layout = {}, {}
for l in open(sys.argv[2]):
    d = json.loads(l)
    m = re.search(r"launches (\d+) kernels, (\d+) unfused", d["launches"])
    if m:
        launch[(d["label"], d["fusion"])] = (int(m.group(1)), int(m.group(2)))
    m = re.search(r"layout align: (\d+) CHANNEL_NORM nodes, (\d+) by a naive pass, (\d+) bytes of "
                  r"padding, (\d+) us", d["launches"])
    if m:
        layout.setdefault((d["label"], d["fusion"]), []).append(tuple(int(v) for v in m.groups()))
best = {}
for r in rows:
    k = (r["label"], r["fusion"], r["acl_graph"], r["npu_launch_us"])
    if k not in best or r["avg_ts"] > best[k]["avg_ts"]:
        best[k] = r
print("# Operator fusion A/B (emulated NPU, GGML_CANN_OPERATOR_FUSION)\n")
rounds = 1 + max(r["round"] for r in rows)
order = "one round, fusion off first" if rounds == 1 else "each setting's better round of %d, fusion off first, then on first" % rounds
print("bench/fusion_ab.sh, build %s, %s UTC: llm-bench -dev npu -p 0 -n 128 -t 2 (%s)."
      % (sys.argv[3], time.strftime("%Y-%m-%d %H:%M", time.gmtime()), order) + " Kernel launches per decode token from -v (RoPE table fills aside)."
      " Load average at the end: %s (the benchmark's own threads count in it); compare within a row.\n"
      % " ".join(open("/proc/loadavg").read().split()[:3]))
print("| model | launch µs | mode | launches/token off | on | tg128 t/s fusion off | fusion on | on / off |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
for label in dict.fromkeys(r["label"] for r in rows):
    for us in sorted({r["npu_launch_us"] for r in rows}):
        for g in (0, 1):
            off, on = best.get((label, "off", g, us)), best.get((label, "on", g, us))
            if not off or not on:
                continue
            lo = launch.get((label, "off"), (0, 0))[0]
            ln = launch.get((label, "on"), (0, 0))[0]
            print("| %s | %g | %s | %d | %d | %.0f ± %.0f | %.0f ± %.0f | %.2f |" % (
                label, us, "graph" if g else "eager", lo, ln, off["avg_ts"], off["stddev_ts"], on["avg_ts"],
                on["stddev_ts"], on["avg_ts"] / off["avg_ts"]))
print("\nThe layout pass (LLM_NPU_LAYOUT_ALIGN) on the same decode graph: CHANNEL_NORM nodes it"
      " needs, a naive pass's count, padding bytes (ALIGN results and the weights they read) and its time per graph"
      " (the fastest of the runs, µs):\n")
print("| model | fusion | CHANNEL_NORM | naive | padding bytes | pass µs |")
print("|---|---|---:|---:|---:|---:|")
for (label, fusion), v in layout.items():
    print("| %s | %s | %d | %d | %d | %d |" % (label, fusion, v[0][0], v[0][1], v[0][2], min(x[3] for x in v)))
PY
echo "make bench: wrote $OUT/fusion_ab.md" >&2
