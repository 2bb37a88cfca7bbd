#!/usr/bin/env python3
"""check_snippets.py ROOT DOC...

The docs quote the examples; this keeps the quotes honest. In a Markdown file, a fenced code
block right after a line `<!-- from: PATH -->` must appear verbatim, as consecutive lines, in
the file PATH (relative to ROOT). If an example changes, its page must change with it."""
import pathlib
import re
import sys

def blocks(text):
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r'\s*<!--\s*from:\s*(\S+)\s*-->', line)
        if not m:
            continue
        j = i + 1
        if j >= len(lines) or not lines[j].startswith('```'):
            yield m.group(1), None, i + 1
            continue
        k = j + 1
        while k < len(lines) and not lines[k].startswith('```'):
            k += 1
        yield m.group(1), lines[j + 1:k], i + 1

def main() -> int:
    root = pathlib.Path(sys.argv[1])
    failures = checked = 0
    for doc in sys.argv[2:]:
        text = pathlib.Path(doc).read_text(encoding='utf-8')
        for path, block, line in blocks(text):
            checked += 1
            source = (root / path)
            if block is None or not source.exists():
                print(f'{doc}:{line}: no code block, or no file {path}')
                failures += 1
                continue
            src = source.read_text(encoding='utf-8').splitlines()
            n = len(block)
            if not any(src[s:s + n] == block for s in range(len(src) - n + 1)):
                print(f'{doc}:{line}: the quoted block is not in {path} (the example changed?)')
                failures += 1
    print(f'{checked} quoted blocks checked, {failures} out of date')
    return 1 if failures or checked == 0 else 0

if __name__ == '__main__':
    sys.exit(main())
