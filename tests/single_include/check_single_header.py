#!/usr/bin/env python3
"""check_single_header.py ROOT HEADER -- COMPILER...

The single header (scripts/amalgamate.py) is what a learner pastes into Compiler Explorer, so:
  1. HEADER (the build's build/single_include/qkv/qkv.hpp) is what the script makes from ROOT now;
  2. it includes no other file of qkv: no quoted include, and no <qkv/...>;
  3. tests/single_include/proof.cpp, copied into an empty folder beside a copy of the header and
     nothing else, compiles with COMPILER -std=c++20 -Wall -Wextra -Wpedantic -Werror
     -ffp-contract=off (its static_asserts are the proof) and runs, printing its result.
CPATH and CPLUS_INCLUDE_PATH are cleared, so the compiler cannot reach qkv's include/."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile


def main() -> int:
    sep = sys.argv.index('--')
    root, header = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    compiler = sys.argv[sep + 1:]
    sys.path.insert(0, str(root / 'scripts'))
    import amalgamate  # noqa: E402 (the script beside the sources)

    text = header.read_text(encoding='utf-8')
    if text != amalgamate.amalgamate(root):
        print(f'FAIL: {header} differs from what scripts/amalgamate.py makes now (rebuild)')
        return 1
    for n, line in enumerate(text.splitlines(), 1):
        if re.match(r'\s*#\s*include\s*"', line) or re.match(r'\s*#\s*include\s*<qkv/', line):
            print(f'FAIL: {header}:{n} includes another file of qkv: {line.strip()}')
            return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        shutil.copy(header, work / 'qkv.hpp')
        shutil.copy(root / 'tests' / 'single_include' / 'proof.cpp', work / 'proof.cpp')
        env = {k: v for k, v in os.environ.items() if k not in ('CPATH', 'CPLUS_INCLUDE_PATH')}
        command = compiler + ['-std=c++20', '-Wall', '-Wextra', '-Wpedantic', '-Werror',
                              '-ffp-contract=off', '-O1', 'proof.cpp', '-o', 'proof']
        build = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
        if build.returncode != 0:
            print(f'FAIL: {" ".join(command)} in a folder with qkv.hpp alone:\n{build.stdout}{build.stderr}')
            return 1
        run = subprocess.run([str(work / 'proof')], capture_output=True, text=True)
        if run.returncode != 0 or 'proven at compile time' not in run.stdout:
            print(f'FAIL: the proof ran with status {run.returncode}:\n{run.stdout}{run.stderr}')
            return 1
    print(f'ok: {header.name} ({len(text.splitlines())} lines, no other qkv file) compiled the proof '
          f'alone with {compiler[-1]}: {run.stdout.strip()}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
