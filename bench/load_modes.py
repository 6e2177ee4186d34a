#!/usr/bin/env python3
"""Load time of each -lm mode (issue 28): llm-bench -lm MODE -p 0 -n 1 -r 1 --no-warmup -v on a
private copy of MODEL, ROUNDS rounds with the modes in rotating order, with the copy in the page
cache (warm) and dropped from it first (cold, posix_fadvise DONTNEED). Per mode: the model load
(llm-bench -v's "loaded ... in X ms") and the one timed decode step (with mmap it pays the page
faults the load did not). Writes bench/results/load_modes.md.

Env: BIN (bin), MODEL (models/qwen2-0.5b-q8_0.gguf), ROUNDS (5)."""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

BIN = os.environ.get("BIN", "bin")
MODEL = os.environ.get("MODEL", "models/qwen2-0.5b-q8_0.gguf")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
MODES = ["mmap", "none", "mlock", "mmap+mlock", "dio"]
OUT = "bench/results"
COPY = os.path.join(OUT, "tmp", "load_copy.gguf")


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def one(mode, cold):
    if cold:
        drop_cache(COPY)
    p = subprocess.run([os.path.join(BIN, "llm-bench"), "-m", COPY, "-lm", mode, "-p", "0", "-n", "1", "-r", "1",
                        "--no-warmup", "-v", "-t", "2", "-o", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("llm-bench -lm %s failed: %s" % (mode, p.stderr[-400:]))
    load = float(re.search(r"loaded .* in ([\d.]+) ms", p.stderr).group(1))
    locked = ", locked)" in p.stderr or "locked) in" in p.stderr
    warned = "cannot lock" in p.stderr
    tg1 = json.loads(p.stdout)[0]["avg_ns"] / 1e6
    return load, tg1, locked, warned


def main():
    os.makedirs(os.path.dirname(COPY), exist_ok=True)
    shutil.copyfile(MODEL, COPY)
    res = {(m, c): [] for m in MODES for c in (False, True)}
    notes = {}
    for r in range(ROUNDS):
        order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
        for cold in (False, True):
            for m in order:
                load, tg1, locked, warned = one(m, cold)
                res[(m, cold)].append((load, tg1))
                if warned:
                    notes[m] = "mlock refused (RLIMIT_MEMLOCK): ran unlocked"
                elif locked:
                    notes[m] = "locked"
    os.remove(COPY)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    build = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    size = os.path.getsize(MODEL) / 2**20
    lines = ["# Model load time per -lm mode", "",
             "`bench/load_modes.py`, %s UTC, build %s, %s (2 cores shared with other work: timings are noisy), "
             "ulimit -l %s KiB (as root, CAP_IPC_LOCK lets mlock pass it). Model: %s (%.0f MiB), copied privately so that its page-cache state is ours to set. "
             "`llm-bench -lm MODE -p 0 -n 1 -r 1 --no-warmup -v -t 2`, %d rounds, modes in rotating order; "
             "warm = the copy in the page cache, cold = dropped from it before each run (posix_fadvise DONTNEED). "
             "Medians (min-max) in ms." % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), build or "unknown", cpu,
                                            subprocess.run(["sh", "-c", "ulimit -l"], capture_output=True,
                                                           text=True).stdout.strip(),
                                            os.path.basename(MODEL), size, ROUNDS), "",
             "| mode | cache | load | first decode step | load + step | note |", "|---|---|---:|---:|---:|---|"]
    fmt = lambda v: "%.1f (%.1f-%.1f)" % (statistics.median(v), min(v), max(v))
    for cold in (False, True):
        for m in MODES:
            v = res[(m, cold)]
            lines.append("| %s | %s | %s | %s | %s | %s |" % (m, "cold" if cold else "warm", fmt([x[0] for x in v]),
                                                            fmt([x[1] for x in v]), fmt([x[0] + x[1] for x in v]),
                                                            notes.get(m, "")))
    lines += ["", "Reading: mmap loads in the time the header takes to parse, and its first decode step pays the "
              "page faults (seconds when cold). none and mlock read the whole file at load through the page "
              "cache; dio reads it with O_DIRECT past the page cache, so warm and cold cost about the same and the "
              "cache is left as it was. mmap+mlock walks every page at load: its cold first step should then cost "
              "what a warm one does (compare with the table).", ""]
    with open(os.path.join(OUT, "load_modes.md"), "w") as f:
        f.write("\n".join(lines))
    print("wrote %s/load_modes.md" % OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
