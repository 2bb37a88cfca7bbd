#!/usr/bin/env python3
"""decode_rope_test.py QKV FIXTURE OUT_DIR: `qkv decode` with `rope` against PyTorch and against
its own claims.

FIXTURE is tests/data/decode_rope/decode_rope.json (scripts/fixtures/torch_decode_rope_fixture.py, PyTorch
1.13): 24 tokens' q, k, v (4 query heads on 2 key/value heads of 8) and two rotations (half_split
at positions 0..23; interleaved, rotary_dim 4, base 500000, at positions 4090..4113), each with
PyTorch's float32 rotation of q and k and its float64 causal GQA attention on them, the keys and
values as each storage keeps them.
  1. The rotation: `qkv attend` with identity weights and the same `rope` rotates q and k into
     PyTorch's float32 numbers bit for bit (the same apply_rope the cache and rope_queries use),
     so the reference below starts from qkv's own rotated q and k.
  2. For each rotation, storage (float32, bfloat16, float16) and kernel, prompt 3: exit 0 and
     "holds" (the tool's own check: attend bit for bit with full causal attention with RoPE,
     decode_attend within twice the float bound), attend's outputs == full_causal exactly, and
     every output within bound(float) * (1 + 2^-28) of PyTorch's float64: the tool's bound is the
     standard-model bound of a float run from the rotated q and the stored k, v (exact inputs
     here, by 1.); PyTorch's float64 run is within the same bound with u = 2^-53, 2^-29 of it
     (the argument of tests/cli/decode_test.py). attend's bound is the decode_attend run's (the
     bound depends on the inputs only).
  3. Bad rope fields: exit 2, nothing on stdout, the file and the field named.
"""
import json
import os
import struct
import subprocess
import sys

QKV, FIXTURE, OUT = sys.argv[1:4]
os.makedirs(OUT, exist_ok=True)
fx = json.load(open(FIXTURE))
from checks import check, failures, write_case  # noqa: E402 (tests/cli/checks.py)


def write(name, case):
    return write_case(OUT, name, case)


def run(cmd, *args):
    return subprocess.run([QKV, cmd, *args], capture_output=True, text=True)


def f32bits(x):
    return struct.unpack('<I', struct.pack('<f', x))[0]


H, HK = fx['heads'], fx['kv_heads']
q, k, v = fx['q']['data'], fx['k']['data'], fx['v']['data']
T, DQ, DK = len(q), len(q[0]), len(k[0])
d = DQ // H


def identity(n):
    return [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]


worst = 0.0
for ci, case in enumerate(fx['cases']):
    rope = case['rope']
    name = '%s_%d' % (rope['layout'], rope['position_offset'])
    # 1. the rotation, through qkv attend's rotated queries (identity projections)
    same = True
    for m, heads, want in [(q, H, case['q_rotated']['data']), (k, HK, case['k_rotated']['data'])]:
        n = len(m[0])
        p = write('rotate_%s_%d' % (name, heads), {'x': m, 'wq': identity(n), 'wk': identity(n), 'wv': identity(n),
                                                   'heads': heads, 'rope': rope})
        r = run('attend', p, '--json')
        got = json.loads(r.stdout)['queries']['data']
        same = same and all(f32bits(got[i][c]) == f32bits(want[i][c]) for i in range(T) for c in range(n))
    check(same, '%s: qkv rotates q and k into PyTorch\'s float32 numbers bit for bit' % name)
    # 2. decoding with rope through the cache
    for storage in ['float32', 'bfloat16', 'float16']:
        torch_out = case['output_' + storage]['data']
        bound = None
        for kernel in ['decode_attend', 'attend']:
            p = write('decode_%s_%s_%s' % (name, storage, kernel),
                      {'q': q, 'k': k, 'v': v, 'heads': H, 'kv_heads': HK, 'prompt': 3, 'storage': storage,
                       'kernel': kernel, 'rope': rope})
            r = run('decode', p, '--json')
            what = '%s, %s storage, kernel %s' % (name, storage, kernel)
            if r.returncode != 0:
                check(False, '%s: exit %d: %s' % (what, r.returncode, r.stderr))
                continue
            j = json.loads(r.stdout)
            rows, full = j['outputs']['data'], j['full_causal']['data']
            check(j['holds'], '%s: holds (the tool\'s own check against full causal attention with RoPE)' % what)
            if kernel == 'decode_attend':
                bound = j['bound']['data']
            else:
                check(j['bit_for_bit'] and rows == full, '%s: bit for bit with full causal attention with RoPE' % what)
            bad = 0
            for i in range(T):
                for c in range(H * len(v[0]) // HK):
                    diff = abs(rows[i][c] - torch_out[i][c])
                    b = bound[i][c] * (1 + 2.0 ** -28)
                    bad += diff > b
                    if b > 0:
                        worst = max(worst, diff / b)
            check(bad == 0, '%s: every output within the derived bound of PyTorch float64' % what)
print('worst |qkv - torch| / bound: %.4f' % worst)
check(worst > 0, 'the comparison is not empty (some difference is nonzero)')

# 3. bad rope fields
base = {'q': q[:4], 'k': k[:4], 'v': v[:4], 'heads': H, 'kv_heads': HK}
for name, rope, text in [
        ('rope_key_offset', {'key_position_offset': 2}, "field 'rope.key_position_offset': a token's query and key sit at one position"),
        ('rope_layout', {'layout': 'halfsplit'}, "field 'rope.layout': expected \"half_split\" (LLaMA, GPT-NeoX) or \"interleaved\""),
        ('rope_rotary_dim', {'rotary_dim': 3}, "field 'rope.rotary_dim': expected an even whole number (columns are rotated in pairs) from 0 (the whole head) to the head's 8 columns, got 3"),
        ('rope_position', {'position_offset': 2 ** 24}, "field 'rope.position_offset': expected a whole number from 0 to 16777212"),
        ('rope_not_object', [1], "field 'rope': expected an object")]:
    p = write(name, dict(base, rope=rope))
    r = run('decode', p)
    check(r.returncode == 2 and r.stdout == '' and (p + ': ' + text) in r.stderr,
          '%s: exit 2, nothing on stdout, "%s"' % (name, text) + ('' if r.returncode == 2 else ' (exit %d: %s)' % (r.returncode, r.stderr)))

if failures:
    print('%d failures' % len(failures))
    sys.exit(1)
print('all checks passed')
