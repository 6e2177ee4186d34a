#!/usr/bin/env python3
"""The folders of src/ and tools/ and which include which, read from the #include lines.

Prints a Mermaid flowchart (the picture in src/README.md) with --mermaid, or checks the rules the
layout keeps with --check: no include climbs with "../", no two folders include each other, and the
picture in src/README.md is the one this script draws. Run from the repository root."""
import os
import re
import sys

ROOTS = ('src', 'tools')
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)
# The two pairs of folders that include each other on purpose: the core's device table creates the
# npu backend (src/backend.c), and the core's graph constructor and profile read the op table
# (src/ops/cpu/op_table.h), which names each op's cpu kernels. Any other pair is a mistake.
MUTUAL = {('src', 'src/npu'), ('src', 'src/ops/cpu')}


def sources():
    for root in ROOTS:
        for d, _, names in os.walk(root):
            for n in sorted(names):
                if n.endswith(('.c', '.h')):
                    yield os.path.join(d, n)


def resolve(inc, path):
    for base in (os.path.dirname(path), 'src'):
        p = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(p):
            return p
    return None


def edges():
    """(from folder, to folder) for every include across folders, and the includes that climb."""
    found, climbs = set(), []
    for path in sources():
        for inc in INCLUDE.findall(open(path, encoding='utf-8').read()):
            if inc.startswith('../'):
                climbs.append(f'{path}: "{inc}"')
            target = resolve(inc, path)
            if target and os.path.dirname(target) != os.path.dirname(path):
                found.add((os.path.dirname(path), os.path.dirname(target)))
    return sorted(found), climbs


def mermaid(found):
    ident = lambda d: d.replace('/', '_')
    lines = ['```mermaid', 'flowchart TD']
    for d in sorted({d for e in found for d in e}):
        lines.append(f'  {ident(d)}["{d}/"]')
    for a, b in found:
        lines.append(f'  {ident(a)} --> {ident(b)}')
    lines.append('```')
    return '\n'.join(lines)


def main():
    found, climbs = edges()
    if '--mermaid' in sys.argv:
        print(mermaid(found))
        return 0
    bad = [f'include climbs: {c}' for c in climbs]
    bad += [f'folders include each other: {a} <-> {b}' for a, b in found
            if (b, a) in found and a < b and (a, b) not in MUTUAL]
    readme = open('src/README.md', encoding='utf-8').read()
    if mermaid(found) not in readme:
        bad.append('src/README.md: the folder picture is stale; paste `python3 tests/folder_graph.py --mermaid`')
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
