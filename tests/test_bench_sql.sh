#!/usr/bin/env bash
# llm-bench -o sql and llama-bench's own -o sql (../shared/ref/llama-bench/*.sql) in one SQLite
# database, as llama.cpp's compare-llama-bench.py users keep them: either tool first, no error;
# llama_bench keeps llama-bench's columns and both tools' rows; our fields sit in llm_bench_extra
# (whose columns never change) and the tables linked through it (llm_bench_splits, llm_bench_load)
# and join back to our rows only. SQLite is python3's sqlite3 module (stdlib); statements run one by
# one and go on after an error, as the sqlite3 CLI does; the CLI itself is tried too when installed.
set -u
LLM=$(cd "$(dirname "${LLM:-bin/llm}")" && pwd)/$(basename "${LLM:-bin/llm}")
SHARED=$(cd "${SHARED:-../shared}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bench() { (cd "$SHARED/models" && "$LLM" bench "$@"); }

# Two runs of ours: the npu with ACL graphs on and off (tg4 x 2: the warm-up token captures the
# decode graph, the 8 timed tokens hit it), and a cpu pp8 (-g on whatever GGML_CANN_ACL_GRAPH says).
if ! bench -m stories260K.gguf -dev npu -g on,off -p 0 -n 4 -r 2 -t 1 -o sql >"$tmp/npu.sql" 2>"$tmp/err" ||
   ! bench -m stories260K.gguf -g on -p 8 -n 0 -r 1 -t 1 -o sql >"$tmp/cpu.sql" 2>>"$tmp/err" ||
   ! bench -m stories260K.gguf -p 4 -n 3 -pg 4,3 -d 0,2 -r 2 -t 1 -o sql --token-times --profile >"$tmp/tok.sql" 2>>"$tmp/err" ||
   ! bench -m stories260K.gguf -lm auto,none -p 16 -n 8 -r 1 -t 1 -o sql >"$tmp/lm.sql" 2>>"$tmp/err" ||
   ! GGML_CANN_OPERATOR_FUSION=on bench -m stories260K.gguf -dev npu -g on,off -p 0 -n 4 -r 1 -t 1 -o sql >"$tmp/fused.sql" 2>>"$tmp/err"; then
  echo "FAIL: llm bench -o sql: $(head -c 300 "$tmp/err")" >&2
  echo "test_bench_sql: 0 passed, 1 failed"
  exit 1
fi

python3 - "$tmp" "$SHARED/ref/llama-bench" <<'EOF'
import glob, os, shutil, sqlite3, subprocess, sys
tmp, ref_dir = sys.argv[1:3]
passed = failed = 0
def check(cond, what):
    global passed, failed
    if cond: passed += 1
    else:
        failed += 1
        print('FAIL: ' + what, file=sys.stderr)

read = lambda p: open(p, encoding='utf-8').read()
REFS = sorted(glob.glob(os.path.join(ref_dir, '*.sql')))
REF = ''.join(read(p) for p in REFS)
N_REF = REF.count('INSERT INTO llama_bench')
NPU, CPU = read(os.path.join(tmp, 'npu.sql')), read(os.path.join(tmp, 'cpu.sql'))
check(REFS and N_REF > 0, 'no llama-bench sql reference in ' + ref_dir)

def run(db, text):
    """Statement by statement, going on after an error like the sqlite3 CLI; returns the errors."""
    errors, stmt = [], ''
    for line in text.splitlines(keepends=True):
        stmt += line
        if sqlite3.complete_statement(stmt):
            try: db.execute(stmt)
            except sqlite3.Error as e: errors.append(str(e))
            stmt = ''
    db.commit()
    return errors

def load(*texts):
    db = sqlite3.connect(':memory:')
    errors = [e for t in texts for e in run(db, t)]
    return db, errors

# The join the README documents: the rowid link, checked against the row's test_time and avg_ns.
JOIN = ('FROM llama_bench AS b JOIN llm_bench_extra AS e ON e.llama_bench_rowid = b.rowid '
        'AND e.test_time = b.test_time AND e.avg_ns = b.avg_ns')
COLS = ('b.rowid, b.devices, b.n_prompt, b.n_gen, e.acl_graph, e.graph_captures, e.graph_hits, '
        'e.graph_misses, e.graph_replays, e.eager_launches > 0')
NPU_ON, NPU_OFF = ('npu', 0, 4, 1, 1, 8, 1, 9, 1), ('npu', 0, 4, 0, 0, 0, 0, 0, 1)
CPU_PP8 = ('auto', 8, 0, 1, 0, 0, 0, 0, 0)

def joined(db):
    return [r[1:] for r in db.execute('SELECT %s %s ORDER BY b.rowid' % (COLS, JOIN))]

def columns(db, table):
    return [(r[1], r[2]) for r in db.execute('PRAGMA table_info(%s)' % table)]

def rows_without_extra(db):
    return [r[0] for r in db.execute('SELECT b.rowid FROM llama_bench AS b LEFT JOIN llm_bench_extra AS e '
                                     'ON e.llama_bench_rowid = b.rowid WHERE e.rowid IS NULL ORDER BY b.rowid')]

# llama-bench's table exactly as llama-bench creates it.
lb, errors = load(REF)
LB_COLUMNS = columns(lb, 'llama_bench')
for first in ('ref', 'ours'):
    db, errors = load(*((REF, NPU) if first == 'ref' else (NPU, REF)))
    check(errors == [], '%s first: errors %r' % (first, errors[:3]))
    check(columns(db, 'llama_bench') == LB_COLUMNS, '%s first: llama_bench columns %r' % (first, columns(db, 'llama_bench')))
    n = db.execute('SELECT count(*) FROM llama_bench').fetchone()[0]
    check(n == N_REF + 2, '%s first: %d llama_bench rows' % (first, n))
    # ours: the graph-on row captured once and hit 8 times, the graph-off row launched eagerly
    got = joined(db)
    check(got == [NPU_ON, NPU_OFF], '%s first: joined %r' % (first, got))
    ours = [1, 2] if first == 'ours' else [N_REF + 1, N_REF + 2]
    mine = [r[0] for r in db.execute('SELECT b.rowid %s ORDER BY b.rowid' % JOIN)]
    check(mine == ours, '%s first: extra rows join rows %r, not ours %r' % (first, mine, ours))
    # llama-bench's rows have no extra row
    theirs = sorted(set(range(1, N_REF + 3)) - set(ours))
    check(rows_without_extra(db) == theirs, '%s first: rows without extras %r' % (first, rows_without_extra(db)))
    n = db.execute('SELECT count(*) FROM llm_bench_extra').fetchone()[0]
    check(n == 2, '%s first: %d extra rows' % (first, n))

# Two runs of ours with llama-bench's between: each extra row joins its own row, and the bare
# rowid link agrees with the checked one.
db, errors = load(NPU, REF, CPU)
check(errors == [], 'two runs: errors %r' % errors[:3])
got = joined(db)
check(got == [NPU_ON, NPU_OFF, CPU_PP8], 'two runs: joined %r' % got)
bare = db.execute('SELECT count(*) FROM llama_bench AS b JOIN llm_bench_extra AS e '
                  'ON e.llama_bench_rowid = b.rowid').fetchone()[0]
check(bare == 3, 'two runs: %d rows by rowid alone' % bare)
check(rows_without_extra(db) == list(range(3, 3 + N_REF)), 'two runs: rows without extras %r' % rows_without_extra(db))

# VACUUM may renumber rowids once a row is deleted (llama_bench has no INTEGER PRIMARY KEY): the
# checked join then drops links rather than pairing wrong rows, and test_time + avg_ns relink them.
db, errors = load(REF, NPU, CPU)
db.execute('DELETE FROM llama_bench WHERE rowid = 1')
db.commit()
db.execute('VACUUM')
got = joined(db)
check(all(r in (NPU_ON, NPU_OFF, CPU_PP8) for r in got), 'after VACUUM: wrong pairs %r' % got)
db.execute('UPDATE llm_bench_extra SET llama_bench_rowid = (SELECT max(b.rowid) FROM llama_bench AS b '
           'WHERE b.test_time = llm_bench_extra.test_time AND b.avg_ns = llm_bench_extra.avg_ns)')
got = joined(db)
check(got == [NPU_ON, NPU_OFF, CPU_PP8], 'relinked after VACUUM: %r' % got)

# A llama_bench table that lacks a column of ours (an older llama-bench's): our INSERTs fail there
# (llama-bench's own would too), and no extra row attaches to an earlier row.
db, errors = load(REF)
names = [c for c, _ in LB_COLUMNS if c != 'fit_min_ctx']
db.executescript('ALTER TABLE llama_bench RENAME TO t; CREATE TABLE llama_bench AS SELECT %s FROM t; '
                 'DROP TABLE t;' % ', '.join(names))
errors = run(db, NPU)
check(len(errors) == 2 and all('fit_min_ctx' in e for e in errors), 'older table: errors %r' % errors)
n = db.execute('SELECT count(*) FROM llm_bench_extra').fetchone()[0]
check(n == 0, 'older table: %d extra rows attached to earlier rows' % n)

# The sqlite3 CLI, when installed: `llm-bench -o sql | sqlite3 db` after and before llama-bench's.
cli = shutil.which('sqlite3')
for first in ('ref', 'ours') if cli else ():
    path = os.path.join(tmp, first + '.sqlite')
    errs = ''
    for text in (REF, NPU) if first == 'ref' else (NPU, REF):
        p = subprocess.run([cli, path], input=text, capture_output=True, text=True)
        errs += p.stderr + ('' if p.returncode == 0 else 'exit %d\n' % p.returncode)
    check(errs == '', 'sqlite3 CLI, %s first: %s' % (first, errs[:300]))
    db = sqlite3.connect(path)
    got = joined(db)
    check(got == [NPU_ON, NPU_OFF], 'sqlite3 CLI, %s first: joined %r' % (first, got))
    db.close()

# --token-times: llm_bench_tokens rows join back to their test like llm_bench_extra's, after
# llama-bench's rows and another run of ours (so rowids of the tables differ): per repetition the
# prompt entry then each decode step, depth = KV cells in use before it, ns adding up to the
# repetition (avg_ns is the mean of the repetitions). --profile rows link the same way.
TOK = read(os.path.join(tmp, 'tok.sql'))
TJOIN = ('FROM llama_bench AS b JOIN llm_bench_tokens AS k ON k.llama_bench_rowid = b.rowid '
         'AND k.test_time = b.test_time AND k.avg_ns = b.avg_ns')
for texts in ((TOK,), (REF, NPU, TOK)):
    db, errors = load(*texts)
    what = 'tokens after %d files' % (len(texts) - 1)
    check(errors == [], '%s: errors %r' % (what, errors[:3]))
    n_tok = db.execute('SELECT count(*) FROM llm_bench_tokens').fetchone()[0]
    rows = db.execute('SELECT b.rowid, b.n_prompt, b.n_gen, b.n_depth, b.avg_ns, k.repetition, k.token_index, k.ns, '
                      'k.depth %s ORDER BY b.rowid, k.repetition, k.token_index' % TJOIN).fetchall()
    check(len(rows) == n_tok == 2 * (1 + 3 + 4) * 2, '%s: %d joined of %d' % (what, len(rows), n_tok))
    tests = {}
    for rowid, p, g, d, avg, rep, idx, ns, depth in rows:
        tests.setdefault((rowid, p, g, d, avg), {}).setdefault(rep, []).append((idx, ns, depth))
    check(len(tests) == 6, '%s: %d tests' % (what, len(tests)))
    for (rowid, p, g, d, avg), reps in tests.items():
        check(sorted(reps) == [0, 1], '%s: repetitions %r' % (what, sorted(reps)))
        want = [(i, d + (p if i and p else 0) + (i - (p > 0) if i >= (p > 0) and g else 0)) for i in range((p > 0) + g)]
        for rep, toks in reps.items():
            check([(i, dp) for i, _, dp in toks] == want, '%s: rowid %d indices/depths %r' % (what, rowid, toks))
        total = sum(ns for toks in reps.values() for _, ns, _ in toks)
        check(abs(total / 2 - avg) <= 0.01 * avg, '%s: rowid %d ns sum %d vs avg_ns %d' % (what, rowid, total, avg))
    ours = [r[0] for r in db.execute('SELECT rowid FROM llama_bench WHERE n_gen IN (0, 3) AND n_prompt IN (0, 4) ORDER BY rowid')]
    check(sorted(k[0] for k in tests) == ours[-6:], '%s: joined rows %r' % (what, sorted(k[0] for k in tests)))
    n_prof = db.execute('SELECT count(*) FROM llama_bench AS b JOIN llm_bench_profile AS p ON p.llama_bench_rowid = '
                        'b.rowid AND p.test_time = b.test_time AND p.avg_ns = b.avg_ns').fetchone()[0]
    check(n_prof == 6, '%s: %d profile rows join' % (what, n_prof))
if cli:
    path = os.path.join(tmp, 'tok.sqlite')
    p = subprocess.run([cli, path], input=REF + NPU + TOK, capture_output=True, text=True)
    check(p.returncode == 0 and p.stderr == '', 'sqlite3 CLI, tokens: %s' % p.stderr[:300])
    n = sqlite3.connect(path).execute('SELECT count(*) %s' % TJOIN).fetchone()[0]
    check(n == 32, 'sqlite3 CLI, tokens: %d rows join' % n)

# compare-llama-bench.py pairs a row of each build on equal settings: every llama_bench column but
# the build, cpu, time and result ones. Our -lm auto rows pair with llama-bench's (the reference ran
# with its default, auto); -lm none, recorded as such, pairs with none of them.
SETTINGS = [c for c, _ in LB_COLUMNS if c not in ('build_commit', 'build_number', 'cpu_info', 'gpu_info', 'test_time',
                                                 'avg_ns', 'stddev_ns', 'avg_ts', 'stddev_ts')]
db, errors = load(REF, read(os.path.join(tmp, 'lm.sql')))
check(errors == [], 'pairing: errors %r' % errors[:3])
pairs = db.execute('SELECT a.load_mode, a.n_prompt, a.n_gen FROM llama_bench AS a JOIN llama_bench AS b ON %s '
                   'AND a.build_commit != b.build_commit JOIN llm_bench_extra AS e ON e.llama_bench_rowid = a.rowid '
                   'ORDER BY a.rowid' % ' AND '.join('a.%s = b.%s' % (c, c) for c in SETTINGS)).fetchall()
check(sorted(pairs) == sorted([('auto', 16, 0), ('auto', 0, 8)] * (N_REF // 2)), 'pairing on load_mode: %r' % pairs)
loads = db.execute('SELECT b.load_mode, l.use_mmap FROM llama_bench AS b JOIN llm_bench_load AS l ON '
                   'l.llama_bench_rowid = b.rowid AND l.test_time = b.test_time AND l.avg_ns = b.avg_ns '
                   'ORDER BY b.rowid').fetchall()
check(loads == [('auto', 1), ('auto', 1), ('none', 0), ('none', 0)], 'llm_bench_load: %r' % loads)

# llm_bench_fusion: the npu's kernels per decode token with operator fusion off and on, replayed and
# eager; the same graphs unfused either way (stories260K: 98 nodes and one RoPE table per token,
# 26 absorbed; the layout pass needs no CHANNEL_NORM there).
db, errors = load(REF, NPU, read(os.path.join(tmp, 'fused.sql')))
check(errors == [], 'fusion: errors %r' % errors[:3])
fusion = db.execute('SELECT f.operator_fusion, f.launches_per_token, f.launches_per_token_unfused FROM llama_bench AS b '
                    'JOIN llm_bench_fusion AS f ON f.llama_bench_rowid = b.rowid AND f.test_time = b.test_time AND '
                    'f.avg_ns = b.avg_ns ORDER BY b.rowid').fetchall()
check(fusion == [(0, 99.0, 99.0)] * 2 + [(1, 73.0, 99.0)] * 2, 'llm_bench_fusion: %r' % fusion)
# llm_bench_extra's columns never change: the fields added since live in llm_bench_splits (the
# schedule's splits and copies, the MPI ranks), linked through the extra row like llm_bench_load.
# A database whose llm_bench_extra was made while those fields sat in it (they were, for a while)
# takes our rows without an error, their old columns left NULL.
EXTRA_COLUMNS = ['llama_bench_rowid', 'test_time', 'avg_ns', 'acl_graph', 'graph_captures', 'graph_replays',
                 'graph_hits', 'graph_misses', 'graph_evictions', 'eager_launches', 'npu_launch_us', 'ops_replayed',
                 'host_launch_us_per_token', 'host_match_us_per_token', 'host_serial_us_per_token',
                 'device_us_per_token', 'host_waits', 'host_waits_shared_cpu']
SPLITS = ('SELECT b.devices, s.n_splits, s.n_ranks, s.ranks_split FROM llama_bench AS b JOIN llm_bench_splits AS s '
          'ON s.llama_bench_rowid = b.rowid AND s.test_time = b.test_time AND s.avg_ns = b.avg_ns ORDER BY b.rowid')
db, errors = load(REF, NPU, CPU)
check([c for c, _ in columns(db, 'llm_bench_extra')] == EXTRA_COLUMNS, 'llm_bench_extra columns changed: %r'
      % [c for c, _ in columns(db, 'llm_bench_extra')])
check(columns(db, 'llm_bench_splits')[3:] == [('n_splits', 'INTEGER'), ('copy_bytes_per_token', 'REAL'),
                                             ('n_ranks', 'INTEGER'), ('ranks_split', 'TEXT')],
      'llm_bench_splits columns %r' % columns(db, 'llm_bench_splits'))
got = db.execute(SPLITS).fetchall()
check(got == [('npu', 2, 1, '5'), ('npu', 2, 1, '5'), ('auto', 1, 1, '5')], 'llm_bench_splits joined %r' % got)
typed = ', '.join('%s %s' % c for c in columns(db, 'llm_bench_extra'))
db = sqlite3.connect(':memory:')
db.execute('CREATE TABLE llm_bench_extra (%s, n_splits INTEGER, copy_bytes_per_token REAL, n_ranks INTEGER, '
           'ranks_split TEXT)' % typed)
errors = run(db, NPU)
check(errors == [], 'llm_bench_extra with the moved columns: errors %r' % errors[:3])
got = db.execute(SPLITS).fetchall()
check(got == [('npu', 2, 1, '5'), ('npu', 2, 1, '5')], 'llm_bench_extra with the moved columns: splits %r' % got)
check(joined(db) == [NPU_ON, NPU_OFF], 'llm_bench_extra with the moved columns: joined %r' % joined(db))

print('test_bench_sql: %d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
EOF
