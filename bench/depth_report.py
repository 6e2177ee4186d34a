#!/usr/bin/env python3
"""bench/depth.sh's report: bench/results/depth.md and the gnuplot script of depth.png.

Per setting (cpu, npu eager, npu graph) of one long decode with per-token times: the median t/s of
each 256-token range of depth, the depth where the rolling median (64 steps) first falls below 90 %
of its start (the bend), and the steps more than 2.5x their rolling median (the spikes: in graph
mode, the capture of each new 256-cell window's graph). With llama-bench's jsonl, its tg t/s per -d.

usage: depth_report.py JSONL LLAMA_JSONL OUT_DIR TMP_DIR LABEL CPU BUILD
"""
import json
import statistics
import sys
import time

from report_files import write_report

WINDOW = 64   # steps in the rolling median
SPIKE = 2.5   # a step this many times its rolling median is a spike


def rolling_median(ns):
    half = WINDOW // 2
    return [statistics.median(ns[max(0, i - half):i + half + 1]) for i in range(len(ns))]


def name(r):
    return "cpu" if r["devices"] == "cpu" else "npu, graph" if r["acl_graph"] else "npu, eager"


def main():
    src, llama_src, out_dir, tmp, label, cpu, build = sys.argv[1:8]
    rows = [json.loads(line) for line in open(src, encoding="utf-8")]
    llama = [json.loads(line) for line in open(llama_src, encoding="utf-8") if line.strip()]
    n = len(rows[0]["token_ns"][0])
    ranges = [(a, min(a + 256, n)) for a in range(0, n, 256)]
    md = ["# Speed against context depth", "",
          "`bench/depth.sh` (a step of `make bench`), %s UTC, build %s, %s: %s, one decode of %d tokens from an "
          "empty context (`llm-bench -p 0 -n %d -r 1 -t 2 --no-warmup --token-times`), each step's wall time. "
          "t/s = 1 / step time." % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), build, cpu, label, n, n), "",
          "| setting | " + " | ".join("depth %d-%d" % (a, b - 1) for a, b in ranges) + " | bend (90 %) | spikes: depth, µs |",
          "|---|" + "---:|" * len(ranges) + "---:|---|"]
    plots = []
    for k, r in enumerate(rows):
        ns = r["token_ns"][0]
        med = rolling_median(ns)
        start = med[WINDOW // 2]
        bend = next((i for i, m in enumerate(med) if m > start / 0.9), None)
        spikes = [(i, ns[i]) for i in range(n) if ns[i] > SPIKE * med[i]]
        md.append("| %s | %s | %s | %s |" % (
            name(r), " | ".join("%.1f" % (1e9 / statistics.median(ns[a:b])) for a, b in ranges),
            "-" if bend is None else str(bend),
            ", ".join("%d: %.0f" % (i, t / 1e3) for i, t in spikes[:12]) + (" …" if len(spikes) > 12 else "")))
        with open("%s/depth%d.dat" % (tmp, k), "w", encoding="utf-8") as dat:
            for i in range(n):
                dat.write("%d %f %s\n" % (i, 1e9 / med[i], "%f" % (1e9 / ns[i]) if ns[i] > SPIKE * med[i] else "NaN"))
        plots += ['"%s/depth%d.dat" using 1:2 with lines lc %d title "%s"' % (tmp, k, k + 1, name(r)),
                  '"%s/depth%d.dat" using 1:3 with points lc %d pt 7 ps 0.6 notitle' % (tmp, k, k + 1)]
    md.append("")
    if llama:
        cpu = next((r["token_ns"][0] for r in rows if name(r) == "cpu"), None)
        md += ["llama.cpp's llama-bench on the same file, same sitting (`-p 0 -n 128 -d 0,512,1024,2048 -r 3 -t 2`), "
               "against our cpu's steps over the same depths (the 128 steps from d: 1 / their median time):", "",
               "| depth | llama.cpp tg128 t/s | ours, cpu t/s | ours / llama.cpp |", "|---:|---:|---:|---:|"]
        for r in llama:
            d, n_gen = r["n_depth"], r["n_gen"]
            a = min(d, len(cpu) - n_gen) if cpu else 0  # past our decode's end: its last steps
            ours = 1e9 / statistics.median(cpu[a:a + n_gen]) if cpu and a >= 0 else None
            md.append("| %d%s | %.1f | %s | %s |" % (d, "" if a == d else " (ours: %d-%d)" % (a, a + n_gen - 1),
                                                     r["avg_ts"], "%.1f" % ours if ours else "-",
                                                     "%.2f" % (ours / r["avg_ts"]) if ours else "-"))
        md.append("")
    else:
        md += ["llama.cpp's figures at `-d 0,512,1024,2048` need `LLAMA_BENCH` (built by "
               "`../shared/tools/llama-anchor.sh`); this run had none.", ""]
    md += ["In graph mode the first step of each new 256-cell window captures that window's decode graph (it "
           "records the launches, then replays them); the other steps replay. On a model whose steps take tens "
           "of µs (stories260K) that step is several replayed steps (test_bench.sh checks it is more than 2.5x "
           "the median); where a step takes tens of ms the capture's launches hide in it. The spikes listed are "
           "every step above 2.5x its rolling median, the machine's own hiccups included. Attention reads the "
           "whole window, so t/s falls with depth once attention's share of a step grows.", ""]
    write_report(out_dir, tmp, "depth", md,
                 "%s: t/s against depth (rolling median of %d steps; points: steps > %.1fx it)" % (label, WINDOW, SPIKE),
                 "depth (tokens in the context)", "top right", plots, width=900)

if __name__ == "__main__":
    main()
