#!/usr/bin/env bash
# The documentation stays true to the tree (issue 30): every relative link of every Markdown file
# reaches a file, and a #anchor a heading of it; every repository path a README names in backticks
# exists; README.md stays a user's guide of at most 150 lines; and no comment in src/ or tools/
# cites a file outside the repository (../shared, its spec and seeds, DESIGN.md) or carries a
# one-machine figure (t/s, GB/s, "this VM"): the facts live in the folder READMEs, the figures in
# bench/results.
set -u
cd "$(dirname "$0")/.." || exit 1
python3 - <<'EOF'
import os, re, subprocess, sys

results = []  # (ok, what) of every check
def check(ok, what):
    results.append((bool(ok), what))

SKIP_DIRS = {'.git', 'build', 'bin', 'tmp'}
def walk(exts):
    for dp, dn, fn in os.walk('.'):
        dn[:] = [d for d in dn if d not in SKIP_DIRS]
        for f in fn:
            if f.endswith(exts):
                yield os.path.normpath(os.path.join(dp, f))

def anchors(path):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in open(path, encoding='utf-8'):
        m = re.match(r'#+\s+(.*)', line)
        if m:
            out.add(re.sub(r'[^\w\- ]', '', m.group(1).strip().lower()).replace(' ', '-'))
    return out

for md in sorted(walk(('.md',))):
    text = open(md, encoding='utf-8').read()
    for link in re.findall(r'\]\(([^)\s]+)\)', text):
        if re.match(r'[a-z]+:', link):
            continue
        target, _, anchor = link.partition('#')
        path = os.path.normpath(os.path.join(os.path.dirname(md), target)) if target else md
        if not os.path.exists(path):
            check(False, f'{md}: link {link}: no such file')
        elif anchor and path.endswith('.md'):
            check(anchor in anchors(path), f'{md}: link {link}: no such heading')
        else:
            check(True, '')
    if os.path.basename(md) == 'README.md':
        for path in re.findall(r'`((?:src|tools|tests|bench|models)/[\w./-]+\.(?:c|h|py|sh|md|png))`', text):
            check(os.path.exists(path), f'{md}: names {path}, which does not exist')

check(sum(1 for _ in open('README.md', encoding='utf-8')) <= 150, 'README.md is longer than 150 lines')

# Comments only: string literals are blanked first, so messages may say t/s.
OUTSIDE = re.compile(r'\.\./shared|DESIGN\.md|spec(/| §)|\bseeds? 0\d\d|ref/README')
FIGURE = re.compile(r'\d ?(t/s|GB/s|GFLOP/s)\b|\bthis (paravirtualized )?VM\b|\b2-core (target|Zen|machine)|\bthe Zen \d')
for src in sorted(walk(('.c', '.h'))):
    if not src.startswith(('src/', 'tools/')):
        continue
    in_comment = False
    for n, line in enumerate(open(src, encoding='utf-8'), 1):
        code = re.sub(r'"(\\.|[^"\\])*"', '""', line)
        start = code.find('/*')
        comment = code if in_comment else (code[start:] if start >= 0 else '')
        if '//' in code and not in_comment and start < 0:
            comment = code[code.find('//'):]
        if comment:
            check(not OUTSIDE.search(comment), f'{src}:{n}: a comment cites a file outside the repository: {line.strip()}')
            check(not FIGURE.search(comment), f'{src}:{n}: a comment carries a one-machine figure: {line.strip()}')
        if in_comment or start >= 0:
            in_comment = '*/' not in code[(start if not in_comment else 0):]

# The folder picture in src/README.md is current, no include climbs, no two folders include each other.
graph = subprocess.run([sys.executable, 'tests/folder_graph.py', '--check'], capture_output=True, text=True)
check(graph.returncode == 0, 'tests/folder_graph.py --check: ' + (graph.stdout.strip() or graph.stderr.strip()))

failed = [what for ok, what in results if not ok]
for what in failed:
    print(f'FAIL: {what}')
print(f'test_docs: {len(results) - len(failed)} passed, {len(failed)} failed')
sys.exit(1 if failed else 0)
EOF
