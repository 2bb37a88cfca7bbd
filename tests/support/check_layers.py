#!/usr/bin/env python3
"""check_layers.py ROOT: the tests are by layer (tests/meson.build). A doctest of tests/core/,
tests/exact/, tests/reference/ or tests/io/ that includes a header of include/qkv/runtime/ (or the
runtime helpers of tests/support/runtime.hpp) would be built without the runtime path's flags and
left out of suite 'runtime', which the TSan and native builds run: it belongs in tests/runtime/.
Prints each such file and exits 1; exits 0 when there is none."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
uses_runtime = re.compile(r'#\s*include\s*[<"](?:qkv/runtime/|\.\./support/runtime\.hpp)')
bad = []
for layer in ('core', 'exact', 'reference', 'io'):
    for f in sorted((root / 'tests' / layer).glob('*.[ch]pp')):
        for n, line in enumerate(f.read_text(encoding='utf-8').splitlines(), 1):
            if uses_runtime.search(line):
                bad.append('%s:%d: %s (move it to tests/runtime/)' % (f.relative_to(root), n, line.strip()))
for b in bad:
    print(b)
if not bad:
    print('ok: no doctest outside tests/runtime/ includes runtime/')
sys.exit(1 if bad else 0)
