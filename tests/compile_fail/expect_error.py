#!/usr/bin/env python3
"""expect_error.py FILE PATTERN... -- COMPILER ARGS...

Compiles FILE and passes when the compiler refuses it *and* its message contains every PATTERN
(plain substrings): the proof that a bad shape does not compile, and that the message
names the shapes involved.

A PATTERN @doc:PATH#NAME stands for the lines of the fenced code block that follows the line
`<!-- compiler output: NAME -->` in the Markdown file PATH: each of them must be a line the
compiler printed, once the "file:line:col: " in front of it is taken off (and g++'s ‘’ quotes
read as ''). So the output a page quotes is the output the compiler prints today."""
import re
import subprocess
import sys

def normal(line):
    line = line.replace('\u2018', "'").replace('\u2019', "'").rstrip()
    # a location: path:line:col: (a note's), or path: (g++'s "In instantiation of")
    return re.sub(r'^[^\s:]+(:\d+)+: |^[^\s:]+\.[ch]pp: ', '', line).strip()

def doc_block(spec):
    path, name = spec[len('@doc:'):].split('#', 1)
    lines = open(path, encoding='utf-8').read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip() == f'<!-- compiler output: {name} -->')
    assert lines[start + 1].startswith('```'), f'{path}: no code block after the {name} marker'
    end = next(i for i in range(start + 2, len(lines)) if lines[i].startswith('```'))
    return [l for l in lines[start + 2:end] if l.strip() and l.strip() != '...']

def main() -> int:
    sep = sys.argv.index('--')
    source, patterns = sys.argv[1], sys.argv[2:sep]
    command = sys.argv[sep + 1:] + [source]
    run = subprocess.run(command, capture_output=True, text=True)
    message = run.stdout + run.stderr
    if run.returncode == 0:
        print(f'FAIL: {source} compiled, but it must not')
        return 1
    printed = {normal(l) for l in message.splitlines()}
    for pattern in patterns:
        if pattern.startswith('@doc:'):
            for line in doc_block(pattern):
                if normal(line) not in printed:
                    print(f'FAIL: {source}: the compiler no longer prints this line that '
                          f'{pattern[5:]} quotes:\n{line}\n--- message ---\n{message}')
                    return 1
            continue
        if pattern not in message:
            print(f'FAIL: {source} was refused, but the message lacks: {pattern}\n--- message ---\n{message}')
            return 1
    first = next((l for l in message.splitlines() if 'error' in l), message.splitlines()[0])
    print(f'ok: {source} refused: {first.strip()}')
    return 0

if __name__ == '__main__':
    sys.exit(main())
