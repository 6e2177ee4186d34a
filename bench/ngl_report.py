#!/usr/bin/env python3
"""bench/ngl_sweep.sh's report: bench/results/ngl.md (a table per model: -ngl, splits, copy bytes
per token, pp512 and tg128 t/s, graph/eager at 0 and 20 us, the npu's host and device us per token)
and the gnuplot script of ngl.png (tg128 t/s against -ngl; "all" is drawn at n_layer + 2).

usage: ngl_report.py JSONL OUT_DIR TMP_DIR SECONDS CPU BUILD
"""
import json
import sys
import time

from report_files import write_report


def pick(rows, label, kind, ngl, n_prompt, n_gen, graph=True, launch=0):
    for r in rows:
        if (r["label"], r["kind"], r["n_gpu_layers"], r["n_prompt"], r["n_gen"], r["acl_graph"],
                r["npu_launch_us"]) == (label, kind, ngl, n_prompt, n_gen, graph, launch):
            return r
    return None


def ts(r):
    return "%.1f" % r["avg_ts"] if r else "-"


def ratio(a, b):
    return "%.2f" % (a["avg_ts"] / b["avg_ts"]) if a and b and b["avg_ts"] else "-"


def main():
    src, out_dir, tmp, secs, cpu, build = sys.argv[1:7]
    rows = [json.loads(line) for line in open(src, encoding="utf-8")]
    labels = list(dict.fromkeys(r["label"] for r in rows))
    md = ["# Partial offload on the emulated NPU: t/s against -ngl", "",
          "`bench/ngl_sweep.sh` (the -ngl step of `make bench`), %s UTC, build %s, %s, `-t 2` (2 device "
          "workers beside the cpu's 2 threads), one sitting of %s s. t/s of `llm-bench -dev npu`; splits and copy "
          "bytes per token from the schedule of the tg128 test's last graph (a decode step); host launch and "
          "device µs per token from the npu's counters (tg128, graph mode on, 0 µs)."
          % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), build, cpu, secs), ""]
    plots = []
    for m, label in enumerate(labels):
        md += ["## " + label, "",
               "| -ngl | splits | copy B/token | pp512 | tg128 graph | tg128 eager | graph/eager | 20 µs: graph "
               "| 20 µs: eager | graph/eager | host launch / device µs |",
               "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        ngls = sorted({r["n_gpu_layers"] for r in rows if r["label"] == label})
        top = max(n for n in ngls if n < 99) + 2 if any(n < 99 for n in ngls) else 1
        with open("%s/ngl%d.dat" % (tmp, m), "w", encoding="utf-8") as dat:
            for ngl in ngls:
                pp, tg = pick(rows, label, "pp_tg", ngl, 512, 0), pick(rows, label, "pp_tg", ngl, 0, 128)
                g0, e0 = pick(rows, label, "ab", ngl, 0, 128, True, 0), pick(rows, label, "ab", ngl, 0, 128, False, 0)
                g20 = pick(rows, label, "ab", ngl, 0, 128, True, 20)
                e20 = pick(rows, label, "ab", ngl, 0, 128, False, 20)
                md.append("| %d | %d | %.0f | %s | %s | %s | %s | %s | %s | %s | %.0f / %.0f |" % (
                    ngl, tg["n_splits"], tg["copy_bytes_per_token"], ts(pp), ts(g0), ts(e0), ratio(g0, e0), ts(g20),
                    ts(e20), ratio(g20, e20), g0["host_launch_us_per_token"], g0["device_us_per_token"]))
                dat.write("%d %f %f\n" % (ngl if ngl < 99 else top, g0["avg_ts"], e0["avg_ts"]))
        md.append("")
        plots += ['"%s/ngl%d.dat" using 1:2 with linespoints title "%s, graph"' % (tmp, m, label),
                  '"%s/ngl%d.dat" using 1:3 with linespoints dashtype 2 title "%s, eager"' % (tmp, m, label)]
    md += ["## Reading the curves", "",
           "A token costs S + the sum over its splits of (the copies into the split + the split's own work): the "
           "host's serial work S (sampling, inputs), then, per npu split, its host launching H and device work D "
           "(overlapped when eager, H then D in graph mode) and, per cpu split, the cpu's work on the host thread. "
           "Splits run one after another, so offloading moves work rather than adding any: the emulated npu runs the "
           "cpu's kernels on the same cores. Each npu split's inputs are queued on its stream; each cpu split first "
           "waits for the npu (a synchronize) to read its results. A file whose every type CANN takes has two splits "
           "at any -ngl > 0 (the cpu's first layers, or only its token embedding, then the npu), a few KiB copied per "
           "token: its curve stays flat. A file with K-quant matmuls falls back to the cpu for each of them: "
           "about 9 splits per offloaded layer, each a synchronize and a copy of the activations each way, so host "
           "time grows with -ngl and graph mode, replaying many small splits, gains little.", ""]
    write_report(out_dir, tmp, "ngl", md, "tg128 on the emulated NPU against -ngl (0 us launch cost; the last point: all)",
                 "-ngl (layers on the npu, from the last; the output layer counts as one)", "top left", plots)

if __name__ == "__main__":
    main()
