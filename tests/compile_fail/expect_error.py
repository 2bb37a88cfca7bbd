#!/usr/bin/env python3
"""expect_error.py FILE PATTERN... -- COMPILER ARGS...

Compiles FILE and passes when the compiler refuses it *and* its message contains every PATTERN
(plain substrings): the proof that a bad shape does not compile, and that the message
names the shapes involved."""
import subprocess
import sys

def main() -> int:
    sep = sys.argv.index('--')
    source, patterns = sys.argv[1], sys.argv[2:sep]
    command = sys.argv[sep + 1:] + [source]
    run = subprocess.run(command, capture_output=True, text=True)
    message = run.stdout + run.stderr
    if run.returncode == 0:
        print(f'FAIL: {source} compiled, but it must not')
        return 1
    for pattern in patterns:
        if pattern not in message:
            print(f'FAIL: {source} was refused, but the message lacks: {pattern}\n--- message ---\n{message}')
            return 1
    first = next((l for l in message.splitlines() if 'error' in l), message.splitlines()[0])
    print(f'ok: {source} refused: {first.strip()}')
    return 0

if __name__ == '__main__':
    sys.exit(main())
