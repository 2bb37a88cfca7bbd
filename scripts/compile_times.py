#!/usr/bin/env python3
"""compile_times.py BUILD_DIR... [--runs N] [--write docs/proofs.md]

The compile-time budget of the examples (docs/proofs.md, "What the examples cost to compile"):
each example's translation unit is compiled with the exact command meson uses (from
BUILD_DIR/compile_commands.json, one build directory per compiler), N times (default 3), under
/usr/bin/time; the best wall time and the best user+system CPU time are kept. The budget is 2 s
per example per compiler at the compilers' default constexpr limits. The machine's load average
is recorded with the numbers: on a shared machine the wall time grows with the load, the CPU
time much less. With --write, the table replaces the one between the markers in the file."""
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
import time

BUDGET = 2.0

def compiler_name(command):
    out = subprocess.run([command[0], '--version'], capture_output=True, text=True).stdout
    first = out.splitlines()[0] if out else command[0]
    if 'clang version' in first:
        return 'clang++ ' + first.split('clang version')[1].split()[0]
    return 'g++ ' + first.split()[-1]

def time_once(command, cwd):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'o.o')
        # -MD -MQ x -MF y come in pairs; drop their arguments too
        clean, skip = [], False
        for c in command:
            if skip:
                skip = False
                continue
            if c in ('-MQ', '-MF'):
                skip = True
                continue
            if c == '-MD':
                continue
            clean.append(c)
        if '-o' in clean:
            clean[clean.index('-o') + 1] = out
        timefile = os.path.join(tmp, 't')
        run = subprocess.run(['/usr/bin/time', '-o', timefile, '-f', '%e %U %S %M'] + clean,
                             cwd=cwd, capture_output=True, text=True)
        if run.returncode != 0:
            return None, run.stderr[-2000:]
        e, u, s, m = open(timefile).read().split()[-4:]
        return (float(e), float(u) + float(s), int(m) // 1024), ''

def main():
    args = sys.argv[1:]
    runs, write = 3, None
    if '--runs' in args:
        i = args.index('--runs'); runs = int(args[i + 1]); del args[i:i + 2]
    if '--write' in args:
        i = args.index('--write'); write = args[i + 1]; del args[i:i + 2]
    rows = {}
    compilers = []
    load_before = os.getloadavg()
    started = time.strftime('%d %b %Y, %H:%M', time.gmtime())
    for build in args:
        entries = json.load(open(os.path.join(build, 'compile_commands.json')))
        # each example is one translation unit: examples/program/example.cpp with the example's
        # source (-DQKV_EXAMPLE_SOURCE="examples/NN_name.cpp"), its walkthrough and its page
        # (examples/meson.build), compiled into libexample_NAME.a, which its program and the tool link
        entries = [e for e in entries if re.search(r'libexample_\w+\.a\.p/program_example\.cpp\.o$', e['output'])]
        name = None

        def source_of(e):
            m = re.search(r'QKV_EXAMPLE_SOURCE=\\?"?([^" \\]+)', e.get('command') or ' '.join(e['arguments']))
            return m.group(1) if m else None
        # the proof as a learner compiles it: the example's own file (with its main), with the
        # flags meson gives that library (the walkthrough's and page's -D and -I dropped)
        entries = [e for e in entries if source_of(e)]
        for e in sorted(entries, key=source_of):
            full = e.get('arguments') or shlex.split(e['command'])
            command = [c for c in full if not c.startswith('-DQKV_EXAMPLE_') and c != e['file']] + [source_of(e)]
            name = name or compiler_name(command)
            example = pathlib.Path(source_of(e)).stem
            best_wall = best_cpu = peak = None
            for _ in range(runs):
                t, err = time_once(command, e['directory'])
                if t is None:
                    print(f'{example}: compile failed\n{err}', file=sys.stderr)
                    return 1
                best_wall = t[0] if best_wall is None else min(best_wall, t[0])
                best_cpu = t[1] if best_cpu is None else min(best_cpu, t[1])
                peak = t[2] if peak is None else max(peak, t[2])
            rows.setdefault(example, {})[name] = (best_wall, best_cpu, peak)
            print(f'{name:14} {example:40} wall {best_wall:6.2f} s  cpu {best_cpu:6.2f} s  {peak} MB', flush=True)
        compilers.append(name)
    load_after = os.getloadavg()
    flags = ' '.join(c for c in command if c.startswith('-O') or c.startswith('-std') or c == '-g')
    ended = time.strftime('%H:%M UTC', time.gmtime())
    lines = [f'Measured {started}-{ended} by `scripts/compile_times.py build-gcc build-clang --write docs/proofs.md`: '
             f'best of {runs} runs each, the command meson uses ({flags}, compiling to an object). '
             f'Load average {load_before[0]:.1f} before and {load_after[0]:.1f} after '
             f'(2 cores, shared): wall times include waiting for a core, CPU time (user + system) '
             f'is the budget\'s measure. Budget: {BUDGET:.0f} s.', '',
             '| example | ' + ' | '.join(f'{c} CPU s (wall s, MB)' for c in compilers) + ' | within budget |',
             '|---|' + '---|' * len(compilers) + '---|']
    for example in sorted(rows):
        cells, ok = [], True
        for c in compilers:
            w, cpu, m = rows[example][c]
            cells.append(f'{cpu:.2f} ({w:.2f}, {m})')
            ok = ok and cpu <= BUDGET
        lines.append(f'| {example} | ' + ' | '.join(cells) + f' | {"yes" if ok else "**no**"} |')
    table = '\n'.join(lines)
    print(table)
    if write:
        text = open(write, encoding='utf-8').read()
        begin, end = '<!-- compile-times: begin -->', '<!-- compile-times: end -->'
        if begin not in text:
            print(f'{write} has no {begin} marker', file=sys.stderr)
            return 1
        text = text[:text.index(begin) + len(begin)] + '\n' + table + '\n' + text[text.index(end):]
        open(write, 'w', encoding='utf-8').write(text)
    return 0

if __name__ == '__main__':
    sys.exit(main())
