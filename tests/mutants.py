#!/usr/bin/env python3
"""Mutation check of the test suite (`make mutants`, issue 14): plants each bug listed in
tests/mutants.txt, one at a time, in a scratch copy of the working tree, rebuilds only the test
programs the bug names, runs them, and fails unless every planted bug is caught.

What it does
  1. Copies the working tree into a fresh scratch directory (default build/mutants/, or --scratch):
     the files git tracks plus the untracked files .gitignore does not exclude, so a pending change
     (edited or new files, committed or not) is what gets tested. Nothing in the working tree is
     modified.
  2. Builds, once, every test program the selected mutants name, and runs each on the unmutated copy:
     a test that fails there cannot judge a mutant, so the mutants naming it are reported BROKEN.
  3. For each mutant: checks that every `old` text occurs exactly once in its file (else BROKEN: the
     list must be kept in step with the code), replaces it by the `new` text, rebuilds the named
     programs (`make -j2 BUILD=build BIN=bin <targets>` in the copy), runs them with $SHARED and a
     time limit, and restores the file. KILLED: a named test failed (non-zero exit, "N failed" with
     N > 0, no summary line, a signal or the time limit); SURVIVED: every named test passed; BROKEN:
     the text did not match or the mutant did not compile.
  4. Prints one line per mutant and "mutants: N killed, N survived, N broken" (with the time taken);
     exits 1 when any mutant survived or is broken, 2 when it could not run at all.
  The whole list takes about 3 minutes on the 2-core target (37 s of it the baseline): each mutant
  recompiles one file and relinks only its tests, and most are caught in 1-3 s.

Usage
  python3 tests/mutants.py                  every mutant
  python3 tests/mutants.py rope sampler     mutants whose name contains "rope" or "sampler"
  python3 tests/mutants.py --list           names, files and tests, without building anything
  options: -j N (mutants in parallel, N scratch copies), --every (run every named test instead of
  stopping at the first that fails), --timeout S (per test program, default 300), --scratch DIR,
  --mutants FILE, -v (the first FAIL lines of each killing test).
  Environment: SHARED (default ../shared beside the checkout, as in the Makefile).
  Logs of each mutant's build and tests: <scratch>/logs/.

Adding a mutant: append a record to tests/mutants.txt:

    mutant: top-p keeps one token too few          (unique name; starts the record)
    file: src/model/sampler.c                       (path from the repository root)
    tests: test_core                                (programs under tests/, e.g. test_ops, or
                                                     scripts such as test_cli.sh; first listed
                                                     runs first, so put the fastest catcher first)
    note: optional free text (why it matters, which check catches it)
    <<<<
                    n = i + 1;                      (old text, verbatim, whole lines)
    ====
                    n = i > 0 ? i : 1;              (new text)
    >>>>

The text between the markers is taken verbatim, without the final newline; it may span several
lines, and a record may hold several <<<< ==== >>>> blocks (applied in order, each old text unique
in the file at the time). Lines outside blocks starting with '#' are comments. A mutant must be a
bug a test should catch: if it survives, fix the test, not the list.
"""

import argparse
import concurrent.futures
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY_RE = re.compile(r'^[a-z_0-9]+: ([0-9]+) passed, ([0-9]+) failed(, [0-9]+ skipped)?$', re.M)
# Variables a parent make passes down that would change what the sub-make builds or how.
MAKE_ENV_DROP = ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'MAKEOVERRIDES', 'BUILD', 'BIN')


@dataclass
class Mutant:
    name: str
    file: str = ''
    tests: list = field(default_factory=list)
    edits: list = field(default_factory=list)  # (old, new) pairs, applied in order
    note: str = ''
    line: int = 0  # where the record starts in the list file


class SetupError(Exception):
    """The run cannot start: no git checkout, or the unmutated copy does not build."""


@dataclass
class Outcome:
    status: str   # KILLED, SURVIVED or BROKEN
    detail: str
    seconds: float = 0.0


# ---- the list ------------------------------------------------------------------------------------

def parse_mutants(path):
    """The records of the list file; raises ValueError naming the line of a malformed record."""
    mutants, cur, block, mode = [], None, None, None
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    for no, line in enumerate(lines, 1):
        if mode is not None:  # inside <<<< ... ==== ... >>>>
            if line == '====' and mode == 'old':
                mode = 'new'
            elif line == '>>>>' and mode == 'new':
                cur.edits.append(('\n'.join(block['old']), '\n'.join(block['new'])))
                mode = None
            elif line in ('<<<<', '====', '>>>>'):
                raise ValueError(f'{path}:{no}: unexpected {line}')
            else:
                block[mode].append(line)
            continue
        if not line.strip() or line.startswith('#'):
            continue
        if line == '<<<<':
            if cur is None:
                raise ValueError(f'{path}:{no}: text block before any "mutant:" line')
            block, mode = {'old': [], 'new': []}, 'old'
            continue
        key, sep, value = line.partition(':')
        if not sep:
            raise ValueError(f'{path}:{no}: expected "key: value", got {line!r}')
        key, value = key.strip(), value.strip()
        if key == 'mutant':
            cur = Mutant(name=value, line=no)
            mutants.append(cur)
        elif cur is None:
            raise ValueError(f'{path}:{no}: "{key}:" before any "mutant:" line')
        elif key == 'file':
            cur.file = value
        elif key == 'tests':
            cur.tests = value.split()
        elif key == 'note':
            cur.note = (cur.note + ' ' + value).strip()
        else:
            raise ValueError(f'{path}:{no}: unknown key {key!r}')
    if mode is not None:
        raise ValueError(f'{path}: text block not closed at the end of the file')
    check_records(path, mutants)
    return mutants


def check_records(path, mutants):
    seen = set()
    for m in mutants:
        where = f'{path}:{m.line}: mutant {m.name!r}'
        if not m.name or m.name in seen:
            raise ValueError(f'{where}: empty or duplicate name')
        seen.add(m.name)
        if not m.file or not m.tests or not m.edits:
            raise ValueError(f'{where}: needs file:, tests: and at least one <<<< ==== >>>> block')
        if os.path.isabs(m.file) or '..' in m.file.split('/'):
            raise ValueError(f'{where}: file must be a path inside the repository')
        for t in m.tests:
            if not re.fullmatch(r'test_[a-z0-9_]+(\.sh)?', t):
                raise ValueError(f'{where}: test {t!r} is not a tests/test_*.c program or test_*.sh script')
        for old, new in m.edits:
            if not old or old == new:
                raise ValueError(f'{where}: empty old text, or new text equal to it')


def select(mutants, patterns):
    if not patterns:
        return mutants
    pats = [p.lower() for p in patterns]
    return [m for m in mutants if any(p in m.name.lower() for p in pats)]


def mutate(text, edits):
    """The mutated text, or (None, reason) when an old text does not occur exactly once."""
    for i, (old, new) in enumerate(edits):
        n = text.count(old)
        if n != 1:
            first = old.split('\n')[0].strip()
            return None, f'old text #{i + 1} ({first[:60]!r}...) occurs {n} times, not once'
        text = text.replace(old, new)
    return text, ''


# ---- the scratch copy ------------------------------------------------------------------------------

def source_files():
    """Tracked files plus untracked files not ignored, as they are in the working tree."""
    r = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                       cwd=ROOT, capture_output=True)
    if r.returncode:
        raise SetupError(f'git ls-files failed in {ROOT}: {r.stderr.decode().strip()}')
    out = r.stdout.decode()
    return sorted({p for p in out.split('\0') if p and os.path.lexists(os.path.join(ROOT, p))})


def copy_tree(dest):
    if os.path.exists(dest):
        shutil.rmtree(dest)
    for rel in source_files():
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, rel), target, follow_symlinks=False)


def make_env():
    return {k: v for k, v in os.environ.items() if k not in MAKE_ENV_DROP}


def targets_of(tests):
    """make targets for the named tests: build/tests/NAME, plus the programs for scripts."""
    targets = [f'build/tests/{t}' for t in tests if not t.endswith('.sh')]
    if any(t.endswith('.sh') for t in tests):
        targets += ['bin/llm', 'bin/llm-run', 'bin/llm-bench', 'bin/llm-roofline']
    return targets


def build(tree, tests, log):
    """Builds the programs tests need in tree; returns '' or the tail of the compiler's output."""
    r = subprocess.run(['make', '-j2', 'BUILD=build', 'BIN=bin'] + targets_of(tests), cwd=tree,
                       env=make_env(), capture_output=True, text=True)
    log.write(f'$ make {" ".join(targets_of(tests))}\n{r.stdout}{r.stderr}\n')
    if r.returncode == 0:
        return ''
    errors = [l for l in r.stderr.splitlines() if 'error' in l] or r.stderr.splitlines()
    return ' | '.join(errors[:3])[:300]


# ---- running tests -----------------------------------------------------------------------------------

def run_test(tree, test, shared, timeout, log):
    """(failed, summary) for one test program or script run in tree."""
    path = os.path.join(tree, 'tests', test) if test.endswith('.sh') else os.path.join(tree, 'build', 'tests', test)
    env = dict(os.environ, SHARED=shared, LLM=os.path.join(tree, 'bin', 'llm'))
    try:
        # a new session, so a timeout kills a script's children too
        p = subprocess.Popen([path], cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors='replace', start_new_session=True)
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        log.write(f'$ {test}\nTIMEOUT after {timeout} s\n')
        return True, f'{test}: timeout after {timeout} s', []
    log.write(f'$ {test}\n{out}\n')
    fails = [l for l in out.splitlines() if l.startswith('FAIL')]
    sums = SUMMARY_RE.findall(out)
    if not sums:
        return True, f'{test}: no summary line (exit {rc})', fails
    passed, failed = int(sums[-1][0]), int(sums[-1][1])
    if failed or rc:
        return True, f'{test}: {failed} failed' + (f', exit {rc}' if rc else ''), fails
    if passed == 0:
        return True, f'{test}: ran no checks', fails
    return False, f'{test}: {passed} passed', fails


def run_tests(tree, tests, opts, log):
    """(killed, detail, fail lines): the named tests in order, stopping at the first failure unless
    --every."""
    details, fail_lines, killed = [], [], False
    for t in tests:
        failed, summary, fails = run_test(tree, t, opts.shared, opts.timeout, log)
        details.append(summary)
        if failed:
            killed = True
            fail_lines += fails[:3]
            if not opts.every:
                break
    return killed, '; '.join(details), fail_lines


# ---- one mutant ------------------------------------------------------------------------------------

def run_mutant(m, tree, opts, baseline_failures):
    start = time.time()
    bad = [t for t in m.tests if t in baseline_failures]
    if bad:
        return Outcome('BROKEN', f'{", ".join(bad)} fails without the mutant')
    path = os.path.join(tree, m.file)
    if not os.path.isfile(path):
        return Outcome('BROKEN', f'no file {m.file}')
    with open(path, encoding='utf-8') as f:
        original = f.read()
    mutated, why = mutate(original, m.edits)
    if mutated is None:
        return Outcome('BROKEN', f'{m.file}: {why}')
    with open(os.path.join(opts.logs, slug(m.name) + '.log'), 'w') as log:
        try:
            with open(path, 'w', encoding='utf-8') as f:
                f.write(mutated)
            err = build(tree, m.tests, log)
            if err:
                return Outcome('BROKEN', f'does not compile: {err}', time.time() - start)
            killed, detail, fails = run_tests(tree, m.tests, opts, log)
        finally:
            with open(path, 'w', encoding='utf-8') as f:
                f.write(original)
    if opts.verbose and fails:
        detail += ''.join('\n        ' + l[:160] for l in fails)
    return Outcome('KILLED' if killed else 'SURVIVED', detail, time.time() - start)


def slug(name):
    return re.sub(r'[^A-Za-z0-9]+', '-', name).strip('-')[:80]


# ---- the run -------------------------------------------------------------------------------------------

def baseline(tree, tests, opts):
    """Builds every needed program once and runs it unmutated; returns the failing tests."""
    with open(os.path.join(opts.logs, 'baseline.log'), 'w') as log:
        err = build(tree, tests, log)
        if err:
            raise SetupError(f'the unmutated copy does not build: {err} (see {log.name})')
        failing = set()
        for t in tests:
            failed, summary, _ = run_test(tree, t, opts.shared, opts.timeout, log)
            if failed:
                print(f'mutants: baseline: {summary}: mutants naming it cannot be judged', flush=True)
                failing.add(t)
    return failing


def prepare_trees(opts, n):
    """Scratch copy 0, built and checked unmutated, then n-1 copies of it (built files included)."""
    first = os.path.join(opts.scratch, 'tree0')
    copy_tree(first)
    trees = [first]
    for i in range(1, n):
        dest = os.path.join(opts.scratch, f'tree{i}')
        if os.path.exists(dest):
            shutil.rmtree(dest)
        trees.append(dest)
    return trees


def run_all(mutants, opts):
    n = max(1, min(opts.jobs, len(mutants)))
    shutil.rmtree(opts.logs, ignore_errors=True)
    os.makedirs(opts.logs)
    trees = prepare_trees(opts, n)
    tests = list(dict.fromkeys(t for m in mutants for t in m.tests))
    t0 = time.time()
    failing = baseline(trees[0], tests, opts)
    print(f'mutants: baseline of {len(tests)} test programs in {time.time() - t0:.0f} s; '
          f'{len(mutants)} mutants, {n} at a time', flush=True)
    for dest in trees[1:]:
        shutil.copytree(trees[0], dest, symlinks=True)
    free = queue.Queue()
    for t in trees:
        free.put(t)
    lock = threading.Lock()
    width = max(len(m.name) for m in mutants)
    results = {}

    def one(i, m):
        tree = free.get()
        try:
            o = run_mutant(m, tree, opts, failing)
        finally:
            free.put(tree)
        with lock:
            results[i] = o
            print(f'{o.status:<8} {m.name:<{width}}  {o.seconds:5.1f} s  {o.detail}', flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as ex:
        for f in [ex.submit(one, i, m) for i, m in enumerate(mutants)]:
            f.result()
    return [results[i] for i in range(len(mutants))]


def parse_args(argv):
    ap = argparse.ArgumentParser(description='Plant the bugs of tests/mutants.txt one at a time and '
                                 'check that the named tests catch each.')
    ap.add_argument('patterns', nargs='*', help='run only mutants whose name contains one of these')
    ap.add_argument('--mutants', default=os.path.join(ROOT, 'tests', 'mutants.txt'))
    ap.add_argument('--scratch', default=os.path.join(ROOT, 'build', 'mutants'))
    ap.add_argument('-j', '--jobs', type=int, default=1, help='mutants in parallel (one scratch copy each)')
    ap.add_argument('--timeout', type=int, default=300, help='seconds per test program')
    ap.add_argument('--every', action='store_true', help='run every named test, not only up to the first failure')
    ap.add_argument('--list', action='store_true', help='list the mutants and exit')
    ap.add_argument('-v', '--verbose', action='store_true')
    opts = ap.parse_args(argv)
    opts.scratch = os.path.abspath(opts.scratch)
    opts.logs = os.path.join(opts.scratch, 'logs')
    opts.shared = os.path.abspath(os.environ.get('SHARED') or os.path.join(ROOT, '..', 'shared'))
    return opts


def main(argv):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `--list | head` ends quietly
    opts = parse_args(argv)
    try:
        mutants = select(parse_mutants(opts.mutants), opts.patterns)
    except (OSError, ValueError) as e:
        print(f'mutants: {e}', file=sys.stderr)
        return 2
    if not mutants:
        print('mutants: no mutant matches', file=sys.stderr)
        return 2
    if opts.list:
        for m in mutants:
            print(f'{m.name}  [{m.file}; {" ".join(m.tests)}]')
        return 0
    if not os.path.isfile(os.path.join(opts.shared, 'models', 'stories260K.gguf')):
        print(f'mutants: {opts.shared} has no shared fixtures (models/, ref/): set SHARED=/path/to/shared',
              file=sys.stderr)
        return 2
    start = time.time()
    try:
        outcomes = run_all(mutants, opts)
    except SetupError as e:
        print(f'mutants: {e}', file=sys.stderr)
        return 2
    count = {s: sum(o.status == s for o in outcomes) for s in ('KILLED', 'SURVIVED', 'BROKEN')}
    print(f'mutants: {count["KILLED"]} killed, {count["SURVIVED"]} survived, {count["BROKEN"]} broken '
          f'({time.time() - start:.0f} s; logs in {opts.logs})')
    return 1 if count['SURVIVED'] or count['BROKEN'] else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
