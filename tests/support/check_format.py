#!/usr/bin/env python3
"""check_format.py ROOT: the C++ code follows ROOT/.clang-format (clang-format-16; the plain
clang-format here is 14, whose output differs). Folders with a .clang-format of their own that
says DisableFormat (examples/, tests/static/, tests/compile_fail/, tests/data/, the generated
tables) keep their hand layout. Prints each file clang-format would change and how many lines,
and the command that formats them; exits 1 if any; exits 77 (skipped) without clang-format-16."""
import pathlib
import shutil
import subprocess
import sys

root = pathlib.Path(sys.argv[1])
exe = shutil.which('clang-format-16')
if exe is None:
    print('SKIP: clang-format-16 is missing (scripts/setup.sh installs it)')
    sys.exit(77)
files = subprocess.run(['git', 'ls-files', '*.cpp', '*.hpp'], cwd=root, capture_output=True, text=True).stdout.split()
if not files:  # not a git checkout (a source tarball): every C++ file below ROOT
    files = [str(p.relative_to(root)) for p in root.rglob('*.[ch]pp') if 'build' not in p.parts[0]]
bad = []
for f in files:
    path = root / f
    if not path.is_file():
        continue
    want = subprocess.run([exe, '--style=file', str(path)], capture_output=True, text=True, check=True).stdout
    have = path.read_text(encoding='utf-8')
    if want != have:
        changed = sum(1 for a, b in zip(have.splitlines(), want.splitlines()) if a != b) + \
            abs(len(have.splitlines()) - len(want.splitlines()))
        bad.append((f, changed))
for f, n in bad:
    print('%s: %d lines differ from .clang-format' % (f, n))
if bad:
    print('format them: clang-format-16 -i ' + ' '.join(f for f, _ in bad))
    sys.exit(1)
print('ok: %d C++ files follow .clang-format' % len(files))
