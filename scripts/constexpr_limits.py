#!/usr/bin/env python3
"""constexpr_limits.py [--budget SECONDS] [--compilers g++,clang++-16] [--sizes 8x16,16x16,...]

How large a constexpr self-attention can be (docs/proofs.md, "How large a proof can be"): for
each size T x d it writes a translation unit that computes qkv::self_attention of T tokens of
width d (float, in_out weights d x d, all of it in one constexpr) and static_asserts that the
first row of the weights sums to 1 within 1e-5, then compiles it with -std=c++20 -fsyntax-only,
once at each compiler's default constexpr limits and once with them raised
(g++: -fconstexpr-ops-limit=2147483647 -fconstexpr-loop-limit=2147483647;
clang: -fconstexpr-steps=2147483647). A size passes when it compiles within the budget of CPU
time (user + system of the compiler, default 10 s; a run is stopped after 6x the budget of wall
time). The result, per compiler and limit, is the largest size that passes and what stopped
the next one. The machine's load average is printed with the results."""
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

SOURCE = '''#include <qkv/core/attention.hpp>
#include <qkv/core/check.hpp>
constexpr std::size_t T = {T}, D = {D};
template <std::size_t R, std::size_t C>
constexpr qkv::matrix<float, R, C> pattern(unsigned seed) {{
  qkv::matrix<float, R, C> m;  // values in [-0.5, 0.5], a different pattern per seed
  for (std::size_t k = 0; k < R * C; ++k) m.v[k] = float((k * 37 + seed * 101) % 17) / 16.0f - 0.5f;
  return m;
}}
constexpr auto r = qkv::self_attention(pattern<T, D>(1), pattern<D, D>(2), pattern<D, D>(3),
                                       pattern<D, D>(4), qkv::in_out);
static_assert(qkv::proven<qkv::check::near(qkv::row_sums(r.weights)(0, 0), 1.0f, 1e-5f)>);
'''

RAISED = {'g++': ['-fconstexpr-ops-limit=2147483647', '-fconstexpr-loop-limit=2147483647'],
          'clang': ['-fconstexpr-steps=2147483647']}

def family(compiler):
    return 'clang' if 'clang' in compiler else 'g++'

def compile_once(compiler, flags, t, d, budget):
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / f'attention_{t}x{d}.cpp'
        src.write_text(SOURCE.format(T=t, D=d))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        try:
            run = subprocess.run([compiler, '-std=c++20', '-fsyntax-only', '-I', str(ROOT / 'include')]
                                 + flags + [str(src)], capture_output=True, text=True,
                                 timeout=6 * budget)
            message, ok = run.stderr, run.returncode == 0
        except subprocess.TimeoutExpired:
            message, ok = f'stopped after {6 * budget:.0f} s of wall time', False
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        why = ''
        if not ok:
            for line in message.splitlines():
                if 'limit' in line or 'exceeded' in line or 'stopped' in line or 'memory' in line:
                    why = line.split('error: ')[-1].split('note: ')[-1].strip()
                    break
            why = why or (message.splitlines() or ['failed'])[0]
        elif cpu > budget:
            ok, why = False, f'compiled, but took {cpu:.1f} s of CPU'
        return ok, cpu, wall, why

def main():
    args = sys.argv[1:]
    budget, compilers = 10.0, ['g++', 'clang++-16']
    sizes = [(8, 16), (16, 16), (16, 64), (32, 32), (32, 64), (48, 64), (64, 64), (96, 64), (128, 64)]
    if '--budget' in args:
        budget = float(args[args.index('--budget') + 1])
    if '--compilers' in args:
        compilers = args[args.index('--compilers') + 1].split(',')
    if '--sizes' in args:
        sizes = [tuple(int(v) for v in s.split('x')) for s in args[args.index('--sizes') + 1].split(',')]
    print(f'load average before: {os.getloadavg()[0]:.2f} (1 min), {os.getloadavg()[1]:.2f} (5 min)')
    for compiler in compilers:
        for limits in ('default', 'raised'):
            flags = [] if limits == 'default' else RAISED[family(compiler)]
            largest, stopped = None, ''
            for t, d in sizes:
                ok, cpu, wall, why = compile_once(compiler, flags, t, d, budget)
                print(f'{compiler:11} {limits:7} T={t:4} d={d:4}  {"ok  " if ok else "FAIL"} '
                      f'cpu {cpu:6.2f} s  wall {wall:6.2f} s  load {os.getloadavg()[0]:.1f}  {why}',
                      flush=True)
                if not ok:
                    stopped = f'{t}x{d}: {why}'
                    break
                largest = (t, d, cpu)
            print(f'=> {compiler} {limits} limits: largest {largest[0]}x{largest[1]} '
                  f'({largest[2]:.1f} s CPU); next: {stopped or "none tried"}' if largest else
                  f'=> {compiler} {limits}: nothing passed; {stopped}', flush=True)
    print(f'load average after: {os.getloadavg()[0]:.2f} (1 min), {os.getloadavg()[1]:.2f} (5 min)')
    return 0

if __name__ == '__main__':
    sys.exit(main())
