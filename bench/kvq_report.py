#!/usr/bin/env python3
"""bench/kvq.sh's report: t/s by cache type, depth and test for llm and llama.cpp side by side, the
ratio, and the KV bytes of a cell, as Markdown.

Usage: kvq_report.py OURS.jsonl LLAMA.jsonl CELLS.txt OUT.md LABEL CPU COMMIT LOAD
"""
import json
import sys


def rows(path):
    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    test = "pp%d" % r["n_prompt"] if r["n_prompt"] else "tg%d" % r["n_gen"]
                    out[(r["type_k"], r["n_depth"], test)] = (r["avg_ts"], r["stddev_ts"])
    except OSError:
        pass
    return out


def main():
    ours_path, llama_path, cells_path, out_path, label, cpu, commit, load = sys.argv[1:9]
    ours, llama = rows(ours_path), rows(llama_path)
    cells = {}
    with open(cells_path, encoding="utf-8") as f:
        for line in f:
            who, t, b = line.split()
            cells[(who, t)] = float(b)
    lines = ["# Quantized KV cache: t/s and bytes per cell", "",
             "%s, 2 threads, flash attention on, K and V of one type; llm-bench and llama-bench in "
             "alternating order per type. CPU: %s. Build %s. Load average at the end: %s." % (label, cpu, commit, load),
             ""]
    if not llama:
        lines += ["No LLAMA_BENCH: our figures only.", ""]
    lines += ["| cache | depth | test | llm t/s | llama.cpp t/s | llm / llama.cpp |",
              "|---|---:|---|---:|---:|---:|"]
    for key in sorted(ours, key=lambda k: (k[0] != "f16", k[0], k[1], k[2])):
        ts, sd = ours[key]
        theirs = llama.get(key)
        lines.append("| %s | %d | %s | %.2f ± %.2f | %s | %s |" % (
            key[0], key[1], key[2], ts, sd, "%.2f ± %.2f" % theirs if theirs else "–",
            "%.2f" % (ts / theirs[0]) if theirs and theirs[0] > 0 else "–"))
    lines += ["", "| cache | KV bytes a cell: llm | llama.cpp (its log: MiB / cells) |", "|---|---:|---:|"]
    for t in sorted({t for _, t in cells}, key=lambda t: (t != "f16", t)):
        ours_b, theirs_b = cells.get(("ours", t)), cells.get(("llama", t))
        lines.append("| %s | %s | %s |" % (t, "%d" % ours_b if ours_b else "–", "%.0f" % theirs_b if theirs_b else "–"))
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
