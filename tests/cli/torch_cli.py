#!/usr/bin/env python3
"""Test `qkv torch` against PyTorch's own numbers (tests/data/torch_cases.json) and its errors.

  torch_cli.py QKV_BINARY torch_cases.json

Every fixture case that is one `qkv torch` call is run; every tensor must carry PyTorch's bits
(float32 values parsed as double and rounded to float; float64 values parsed as double), except
on the C library's path (float64 normal values): there qkv's own log/sin/cos (core/math.hpp) may
differ from glibc's by a few ulps (the derivation is in tests/core/torch_test.cpp: <= 3 ulp).
Then the bad inputs: exit status 2, a message on stderr, nothing on stdout.
"""
import json
import struct
import subprocess
import sys


def fnv1a64(data: bytes) -> int:
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h


def flatten(d):
    if isinstance(d, list):
        out = []
        for e in d:
            out.extend(flatten(e))
        return out
    return [d]


def bits(x, dtype):
    if dtype == 'float32':
        return struct.unpack('<I', struct.pack('<f', x))[0]
    return struct.unpack('<Q', struct.pack('<d', x))[0]


def ulps(a, b, dtype):
    if (a < 0) != (b < 0):
        return 0 if a == b else 1 << 40
    return abs(bits(a, dtype) - bits(b, dtype))


def libm_path(op, dtype):
    kind = op.split(':')[0]
    return dtype == 'float64' and kind in ('randn', 'normal', 'embedding')


failures = 0


def fail(msg):
    global failures
    failures += 1
    print('FAIL:', msg)


def compare(actual, expected, where, tolerance_ulps):
    if actual['dtype'] != expected['dtype'] or actual['shape'] != expected['shape']:
        fail('%s: dtype/shape %s %s, expected %s %s' % (where, actual['dtype'], actual['shape'],
                                                       expected['dtype'], expected['shape']))
        return
    dtype = expected['dtype']
    got = flatten(actual['data'])
    if 'data' in expected:
        want = flatten(expected['data'])
        worst = max((ulps(g, w, dtype) for g, w in zip(got, want)), default=0)
        if len(got) != len(want) or worst > tolerance_ulps:
            fail('%s: %d ulp apart (allowed %d)' % (where, worst, tolerance_ulps))
        return
    stride = expected['sample_stride']
    worst = max(ulps(got[k * stride], w, dtype) for k, w in enumerate(expected['sample']))
    if worst > tolerance_ulps:
        fail('%s: sample %d ulp apart' % (where, worst))
    if tolerance_ulps == 0:
        fmt = '<f' if dtype == 'float32' else '<d'
        h = fnv1a64(b''.join(struct.pack(fmt, v) for v in got))
        if '%016x' % h != expected['fnv1a64']:
            fail('%s: FNV-1a hash differs' % where)


def run(qkv, args):
    return subprocess.run([qkv, 'torch'] + args, capture_output=True, text=True)


def main():
    qkv, fixture = sys.argv[1], sys.argv[2]
    cases = json.load(open(fixture))['cases']
    ran = 0
    for case in cases:
        if 'cli' not in case:
            continue
        r = run(qkv, case['cli'])
        if r.returncode != 0:
            fail('%s: exit %d: %s' % (case['name'], r.returncode, r.stderr))
            continue
        out = json.loads(r.stdout)
        if len(out) != len(case['ops']):
            fail('%s: %d results for %d ops' % (case['name'], len(out), len(case['ops'])))
            continue
        for got, want in zip(out, case['ops']):
            if got['op'] != want['op'] or sorted(got['tensors']) != sorted(want['tensors']):
                fail('%s: op %s gave tensors %s' % (case['name'], got['op'], sorted(got['tensors'])))
                continue
            tol = 3 if libm_path(want['op'], want['dtype']) else 0
            for name, t in want['tensors'].items():
                compare(got['tensors'][name], t, '%s / %s / %s' % (case['name'], want['op'], name), tol)
        ran += 1
    print('%d fixture cases run through qkv torch' % ran)
    if ran < 30:
        fail('only %d cases ran' % ran)

    # the text itself: float32 values are written as the shortest double of the float's value
    r = run(qkv, ['--seed', '123', 'rand:3'])
    if '[0.29611194133758545, 0.516562283039093, 0.2516707181930542]' not in r.stdout:
        fail('rand:3 seed 123 printed as %r' % r.stdout)

    # a normal_ whose values overflow the dtype writes them as "Infinity" / "-Infinity" (JSON has
    # no inf; the spelling of io/json.hpp, which Python's float() reads back)
    r = run(qkv, ['--seed', '1', 'normal:20:0:3e38'])
    if r.returncode != 0 or 'null' in r.stdout or not ('"Infinity"' in r.stdout or '"-Infinity"' in r.stdout):
        fail('normal:20:0:3e38: exit %d, %r' % (r.returncode, r.stdout[:100]))
    values = json.loads(r.stdout)[0]['tensors']['out']['data']
    if not any(isinstance(v, str) and abs(float(v)) == float('inf') for v in values):
        fail('normal:20:0:3e38: no infinity read back by float(): %r' % values)

    # bad input: exit 2, a message naming the problem on stderr, nothing on stdout
    bad = [
        (['rand:2'], '--seed'),                                  # no seed
        (['--seed', '12x', 'rand:2'], "'12x'"),                  # a bad seed
        (['--seed', '18446744073709551616', 'rand:2'], 'seed'),  # 2^64: too wide even for PyTorch
        (['--seed', '1'], 'no ops'),
        (['--seed', '1', '--dtype', 'float16', 'rand:2'], 'float16'),
        (['--seed', '1', '--dtype'], '--dtype'),
        (['--seed', '1', '--bogus', 'rand:2'], '--bogus'),
        (['--seed', '1', 'rand'], 'malformed'),
        (['--seed', '1', 'rand:'], 'not a whole number'),
        (['--seed', '1', 'rand:2,,3'], 'not a whole number'),
        (['--seed', '1', 'rand:0'], 'is 0'),
        (['--seed', '1', 'randn:3,-2'], 'negative'),
        (['--seed', '1', 'rand:2.5'], "'2.5'"),
        (['--seed', '1', 'rand:99999999999999999999'], 'not a whole number'),
        (['--seed', '1', 'rand:100000,100000'], 'too large'),
        (['--seed', '1', 'rand:4294967296,4294967296,4294967296'], 'too large'),
        (['--seed', '1', 'rand:16777216', 'rand:16777216', 'rand:2'], '2^25'),
        (['--seed', '1', 'uniform:3:1'], 'malformed'),
        (['--seed', '1', 'uniform:3:1:0'], 'LO'),
        (['--seed', '1', 'uniform:3:0:abc'], "'abc'"),
        (['--seed', '1', 'uniform:3:0:inf'], "'inf'"),
        (['--seed', '1', 'uniform:3:-3e38:3e38'], 'does not fit'),
        (['--seed', '1', 'normal:3:0:-1'], 'STD'),
        (['--seed', '1', 'normal:3:0:1e39'], 'fit in float32'),
        (['--seed', '1', 'uniform:3:-1e39:0'], 'fit in float32'),
        (['--seed', '1', 'normal:3:nan:1'], "'nan'"),
        (['--seed', '1', 'linear:3'], 'malformed'),
        (['--seed', '1', 'linear:3:0'], 'is 0'),
        (['--seed', '1', 'linear:3:4:bias'], 'nobias'),
        (['--seed', '1', 'embedding:4:3:4'], 'PAD'),
        (['--seed', '1', 'embedding:4:3:-5'], 'PAD'),
        (['--seed', '1', 'embedding:4:3:x'], "'x'"),
        (['--seed', '1', 'xavier:5'], '2 dimensions'),
        (['--seed', '1', 'mha:6:4'], 'divisible'),
        (['--seed', '1', 'mha:100000:1'], 'too large'),
        (['--seed', '1', 'seed:'], 'seed'),
        (['--seed', '1', 'softmax:3'], 'unknown op'),
        (['--seed', '1', 'rand:2', 'rand:0'], 'is 0'),  # a later bad op: nothing at all is printed
    ]
    for args, needle in bad:
        r = run(qkv, args)
        if r.returncode != 2 or r.stdout != '' or needle not in r.stderr:
            fail('%s: exit %d, stdout %r, stderr %r (wanted exit 2 and %r)' %
                 (args, r.returncode, r.stdout[:80], r.stderr, needle))
    print('%d bad inputs refused' % len(bad))
    if failures:
        print('%d failures' % failures)
        sys.exit(1)


if __name__ == '__main__':
    main()
