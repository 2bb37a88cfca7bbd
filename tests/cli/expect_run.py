#!/usr/bin/env python3
"""expect_run.py STATUS STREAM PATTERN -- COMMAND ARGS...

Runs COMMAND and passes when it exits with STATUS and STREAM ('stdout' or 'stderr') contains
PATTERN (a plain substring). When STATUS is not 0, stdout must also be empty: a failed qkv
command prints nothing on stdout (docs/cli.md)."""
import subprocess
import sys

def main() -> int:
    sep = sys.argv.index('--')
    status, stream, pattern = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    run = subprocess.run(sys.argv[sep + 1:], capture_output=True, text=True)
    text = run.stdout if stream == 'stdout' else run.stderr
    if run.returncode != status:
        print(f'FAIL: exit status {run.returncode}, expected {status}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}')
        return 1
    if pattern not in text:
        print(f'FAIL: {stream} lacks {pattern!r}\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}')
        return 1
    if status != 0 and run.stdout:
        print(f'FAIL: a failing command printed on stdout:\n{run.stdout}')
        return 1
    print(f'ok: exit {status}, {stream} has {pattern!r}')
    return 0

if __name__ == '__main__':
    sys.exit(main())
