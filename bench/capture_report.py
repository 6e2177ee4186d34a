#!/usr/bin/env python3
"""bench/capture_cost.sh's report (markdown on stdout): per model, each decode step that captured a
window's graph against the median of the 16 replayed steps after it.

usage: capture_report.py JSONL
"""
import json
import statistics
import sys

WINDOW = 256  # cells per attention window: graph mode captures once per window
AFTER = 16    # replayed steps the capture is compared with


def main():
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    out = ["", "## What a capture costs", "",
           "Graph mode captures a decode graph once per %d-cell window, so a decode from an empty context "
           "captures at steps 0, %d, %d, ...: one decode per model, graph on, no warm-up, every step timed "
           "(`llm-bench -dev npu -g on -p 0 -n N -r 1 --no-warmup --token-times`). The capture step records "
           "the window's launches and then replays them; its cost is that step less the median of the %d "
           "replayed steps after it. Step 0 also carries the decode's cold start (the first touch of the "
           "weights and buffers), so the later windows show the capture alone." % (WINDOW, WINDOW, 2 * WINDOW, AFTER), "",
           "| model | step (window) | capture step µs | replayed step µs (median of %d after) | capture cost µs | ratio |"
           % AFTER,
           "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        steps = r["token_ns"][0]
        name = r["model_filename"].split("/")[-1]
        for i in range(0, len(steps) - AFTER, WINDOW):
            after = statistics.median(steps[i + 1:i + 1 + AFTER])
            out.append("| %s | %d (%d cells) | %.0f | %.0f | %.0f | %.1fx |" % (
                name, i, i + WINDOW, steps[i] / 1e3, after / 1e3, (steps[i] - after) / 1e3, steps[i] / after))
        out.append("")
    out.append("Captures counted by the backend: %s." % ", ".join(
        "%s %d" % (r["model_filename"].split("/")[-1], r["graph_captures"]) for r in rows))
    print("\n".join(out))


if __name__ == "__main__":
    main()
