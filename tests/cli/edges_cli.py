#!/usr/bin/env python3
"""edges_cli.py QKV ATTEND_CASES: the tool's manners and its files (issue 14).

1. `qkv` alone: the usage on stderr, exit 2, nothing on stdout; `qkv --help`, `qkv -h` and
   `qkv COMMAND --help` for every command: the usage on stdout, exit 0, nothing on stderr.
2. Nothing is written where the user did not name: `qkv explain positional_encoding` run in an
   empty directory leaves it empty.
3. Files are written whole or not at all: a failing --html after a good --svg leaves no SVG (and
   an SVG already there untouched); a limit past leaves no file; a success leaves exactly the
   files named, no temporary beside them.
4. JSON round trip: `qkv attend --json` on a case holding NaN and infinities writes them as
   "NaN", "Infinity", "-Infinity"; its queries, given back to `qkv attend` as x, read back as
   themselves (the new queries, through an identity wq, are the same text).
Every failure: exit 2, nothing on stdout, a message on stderr."""
import json
import os
import subprocess
import sys
import tempfile

failures = 0


def check(what, ok, r=None):
    global failures
    detail = f': exit {r.returncode}, stdout {r.stdout[:200]!r}, stderr {r.stderr.strip()[:300]!r}' if r is not None else ''
    print(f'{"ok  " if ok else "FAIL"} {what}{detail if not ok else ""}')
    failures += not ok


def run(cmd, cwd=None):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=120)


def error(r, *needles):
    return r.returncode == 2 and r.stdout == '' and all(n in r.stderr for n in needles)


def main():
    qkv, cases = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    case = os.path.join(cases, 'cross_multihead.json')

    # 1. manners
    r = run([qkv])
    check('qkv alone: usage on stderr, exit 2, nothing on stdout', error(r, 'usage:', 'qkv attend CASE.json'), r)
    for flag in ('--help', '-h'):
        r = run([qkv, flag])
        check(f'qkv {flag}: usage on stdout, exit 0', r.returncode == 0 and 'usage:' in r.stdout and r.stderr == '', r)
    for command in ('explain', 'tokenize', 'torch', 'attend', 'encode'):
        r = run([qkv, command, '--help'])
        check(f'qkv {command} --help: its usage on stdout, exit 0',
              r.returncode == 0 and r.stdout.startswith('usage: qkv ' + command) and r.stderr == '', r)
    r = run([qkv, 'attend', case, '--json', '--help'])
    check('qkv attend CASE --json --help: the usage, nothing run', r.returncode == 0 and r.stdout.startswith('usage:'), r)
    r = run([qkv, '--version'])
    check('qkv --version: on stdout, exit 0', r.returncode == 0 and r.stdout.startswith('qkv ') and r.stderr == '', r)
    r = run([qkv, 'attend'])
    check('qkv attend alone: a usage error', error(r, 'usage: qkv attend CASE.json'), r)

    with tempfile.TemporaryDirectory() as d:
        # 2. nothing written where not named
        r = run([qkv, 'explain', 'positional_encoding'], cwd=d)
        check('qkv explain positional_encoding writes nothing into the current directory',
              r.returncode == 0 and os.listdir(d) == [], r)

        # 3. whole or nothing
        svg, html = os.path.join(d, 'w.svg'), os.path.join(d, 'w.html')
        r = run([qkv, 'attend', case, '--svg', svg, '--html', os.path.join(d, 'no_such_dir', 'w.html')])
        check('a failing --html after --svg: exit 2, and no SVG left behind',
              error(r, 'cannot create', 'w.html') and os.listdir(d) == [], r)
        with open(svg, 'w') as f:
            f.write('old')
        r = run([qkv, 'attend', case, '--svg', svg, '--html', d])
        check('--html naming a directory: exit 2, the SVG already there untouched',
              error(r, 'is a directory') and open(svg).read() == 'old' and sorted(os.listdir(d)) == ['w.svg'], r)
        r = run([qkv, 'attend', case, '--svg', svg, '--html', html, '--max-cells', '4'])
        check('a heatmap past --max-cells: exit 2, no file written, the old one untouched',
              error(r, 'above the limit of 4 (raise it with --max-cells N)') and open(svg).read() == 'old'
              and sorted(os.listdir(d)) == ['w.svg'], r)
        r = run([qkv, 'attend', case, '--svg', svg, '--html', html])
        check('a success: both files, whole, and nothing else (no temporary)',
              r.returncode == 0 and sorted(os.listdir(d)) == ['w.html', 'w.svg']
              and open(svg).read().rstrip().endswith('</svg>') and open(html).read().rstrip().endswith('</html>'), r)

        # 4. the JSON round trip
        first = run([qkv, 'attend', os.path.join(cases, 'non_finite.json'), '--json'])
        out = json.loads(first.stdout) if first.returncode == 0 else {}
        q = out.get('queries', {})
        check('--json writes NaN and the infinities as strings',
              q.get('data') == [[1], ['NaN'], ['Infinity'], ['-Infinity']] and 'null' not in first.stdout, first)
        again = os.path.join(d, 'again.json')
        with open(again, 'w') as f:
            json.dump({'x': q, 'wq': [[1]], 'wk': [[1]], 'wv': [[1]]}, f)
        second = run([qkv, 'attend', again, '--json'])
        q2 = json.loads(second.stdout).get('queries') if second.returncode == 0 else None
        check('the --json output read back as a case gives the same tensors', q2 == q, second)

    print(f'{failures} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
