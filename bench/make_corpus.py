#!/usr/bin/env python3
"""make_corpus.py ROOT BYTES: the benchmark text for scripts/bench_tokenizer.sh.

The prose of the repository's Markdown files (README.md, docs/), one paragraph per line,
repeated until the text has at least BYTES bytes. Deterministic: the same tree gives the same text.
"""
import pathlib
import sys

root, want = pathlib.Path(sys.argv[1]), int(sys.argv[2])
paragraphs = []
for path in sorted([root / "README.md", *root.glob("docs/**/*.md")]):
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        text = " ".join(block.split())
        if text and not text.startswith("```"):
            paragraphs.append(text)
out, size = [], 0
while size < want:
    for p in paragraphs:
        out.append(p)
        size += len(p.encode("utf-8")) + 1
        if size >= want:
            break
sys.stdout.write("\n".join(out) + "\n")
