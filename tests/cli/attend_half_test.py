#!/usr/bin/env python3
"""attend_half_test.py QKV FIXTURE CASES_DIR OUT_DIR: `qkv attend` with "dtype": "bfloat16" or
"float16" (the inputs are that type, the arithmetic float32). No torch needed.

1. The rounding is PyTorch's: FIXTURE is tests/data/decoder/decoder_torch.json
   (scripts/fixtures/torch_decoder_fixtures.py), whose "conversions" are 214 float32 values (ties, 65504,
   65519, 65520, subnormals, 3.39e38, -0.0) and the bits torch's .to(torch.bfloat16) and
   .to(torch.float16) give them. A case whose x is those values (one column) and whose wq, wk, wv
   are [[1]] has queries = x as the tool rounded it (0 + 1 * x: exact, but for a zero's sign);
   they must be torch's values (float16's 65520 -> infinity included, zeros by value).
2. The arithmetic is float32 on the rounded values, bit for bit: every case of CASES_DIR that runs
   in float32 (chapter two's among them), given "dtype": "bfloat16" / "float16", prints exactly the
   --json of the same case in float32 with its numbers rounded beforehand here (bfloat16: round to
   nearest even on the float32 bits; float16: Python's struct 'e', round half to even). The float32
   path itself is checked against PyTorch by the other tests (attend_learner_test.py, the runtime's).
3. The trace says so, and a bad dtype names the four.
"""
import json
import math
import os
import random
import struct
import subprocess
import sys

QKV, FIXTURE, CASES, OUT = sys.argv[1:5]
os.makedirs(OUT, exist_ok=True)
from checks import check, failures  # noqa: E402 (tests/cli/checks.py)


def run(*args):
    return subprocess.run([QKV, 'attend', *args], capture_output=True, text=True, timeout=60)


def tool_json(v):
    """NaN and the infinities as the tool reads them: the strings NaN, Infinity, -Infinity"""
    if isinstance(v, float) and not math.isfinite(v):
        return 'NaN' if v != v else ('Infinity' if v > 0 else '-Infinity')
    if isinstance(v, list):
        return [tool_json(e) for e in v]
    if isinstance(v, dict):
        return {k: tool_json(e) for k, e in v.items()}
    return v


def write(name, case):
    path = os.path.join(OUT, name + '.json')
    with open(path, 'w') as f:
        json.dump(tool_json(case), f, allow_nan=False)
    return path


def f32_bits(x):
    return struct.unpack('<I', struct.pack('<f', x))[0]


def bf16(x):
    """x (a float32 value) rounded to bfloat16, to nearest even, as a float (NaN stays NaN)"""
    if x != x:
        return x
    b = f32_bits(x)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return struct.unpack('<f', struct.pack('<I', b))[0]


def f16(x):
    if x != x or abs(x) == math.inf:
        return x
    try:
        return struct.unpack('<e', struct.pack('<e', x))[0]
    except OverflowError:  # past 65520 (float16's largest finite 65504 plus half an ulp): infinity
        return math.copysign(math.inf, x)


def number(v):
    return {'Infinity': math.inf, '-Infinity': -math.inf, 'NaN': math.nan}.get(v, v) if isinstance(v, str) else v


def from_bits16(bits, kind):
    if kind == 'bfloat16':
        return struct.unpack('<f', struct.pack('<I', bits << 16))[0]
    return struct.unpack('<e', struct.pack('<H', bits))[0]


# 1. the rounding, against torch's bits
conv = json.load(open(FIXTURE))['conversions']
vals = conv['float32']
for kind in ('bfloat16', 'float16'):
    case = {'dtype': kind, 'x': [[v] for v in vals], 'wq': [[1]], 'wk': [[1]], 'wv': [[1]]}
    p = run(write('conversions_' + kind, case), '--json')
    check(p.returncode == 0, '%s: the conversion case runs (%s)' % (kind, p.stderr.strip()))
    if p.returncode != 0:
        continue
    q = [number(r[0]) for r in json.loads(p.stdout)['queries']['data']]
    want = [from_bits16(b, kind) for b in conv[kind + '_bits']]
    # a zero's sign does not survive the projection (its sum starts at +0: +0 + -0 = +0), so zeros
    # are compared by value; every other value by its bits (== on floats: the same float)
    bad = [(v, g, w) for v, g, w in zip(vals, q, want) if not (g == w or (g != g and w != w))]
    check(len(q) == len(want) == len(vals) >= 200 and not bad,
          '%s: %d values rounded as torch\'s .to(torch.%s), bit for bit (mismatches: %s)' % (kind, len(vals), kind, bad[:5]))
    # and our own Python rounding agrees with torch (so part 2 compares against the right values)
    mine = [bf16(v) if kind == 'bfloat16' else f16(v) for v in vals]
    check(all(a == b and math.copysign(1, a) == math.copysign(1, b) for a, b in zip(mine, want)),
          '%s: this test\'s rounding is torch\'s too' % kind)

# 2. float32 arithmetic on the rounded values, bit for bit with the float32 case rounded here
ROUNDED = ['x', 'context', 'wq', 'wk', 'wv', 'bq', 'bk', 'bv', 'wo', 'bo', 'bias']


def rounded(case, fn):
    def r(v):  # numbers (and "NaN"/"Infinity" strings) rounded, nested lists and {"shape", "data"} tensors walked
        if isinstance(v, list):
            return [r(e) for e in v]
        if isinstance(v, dict):
            return {k: (r(e) if k == 'data' else e) for k, e in v.items()}
        if isinstance(v, bool):
            return v
        return fn(float(number(v)))
    return {k: (r(v) if k in ROUNDED else v) for k, v in case.items()}


ran = 0
differ = {'bfloat16': 0, 'float16': 0}  # cases whose result the rounding changes
rnd = random.Random(16)


def mat(r, c):  # values with more bits than 16-bit types hold, so the rounding changes them
    return [[rnd.uniform(-1.5, 1.5) for _ in range(c)] for _ in range(r)]


# generated cases (the directory's are mostly small integers, exact in 16 bits): chapter two's fields
generated = {
    'gen_mha': {'x': mat(5, 8), 'wq': mat(8, 8), 'wk': mat(8, 8), 'wv': mat(8, 8), 'bq': mat(1, 8)[0], 'heads': 2,
                'wo': mat(4, 8), 'bo': mat(1, 4)[0], 'causal': True},
    'gen_gqa_rope_alibi': {'x': mat(4, 6), 'context': mat(7, 6), 'wq': mat(8, 6), 'wk': mat(4, 6), 'wv': mat(2, 6),
                           'heads': 4, 'kv_heads': 2, 'causal': True, 'causal_alignment': 'lower_right', 'window': 4,
                           'alibi': True, 'rope': {'layout': 'interleaved', 'position_offset': 3, 'key_position_offset': 0}},
    'gen_bias_padding': {'x': mat(3, 4), 'wq': mat(4, 4), 'wk': mat(4, 4), 'wv': mat(4, 4), 'bias': mat(3, 3),
                         'key_padding': [False, True, False]},
}
cases = []
for name in sorted(os.listdir(CASES)):
    if not name.endswith('.json'):
        continue
    try:
        case = json.load(open(os.path.join(CASES, name)))
    except (ValueError, RecursionError):  # the malformed cases (deep.json nests past Python's limit)
        continue
    cases.append((name, case, os.path.join(CASES, name)))
for name, case in generated.items():
    case = rounded(case, lambda v: struct.unpack('<f', struct.pack('<f', v))[0])  # float32 numbers
    cases.append((name + '.json', case, write(name, case)))
for name, case, path in cases:
    if not isinstance(case, dict) or case.get('dtype', 'float32') != 'float32':
        continue
    base = run(path, '--json')
    if base.returncode != 0:
        continue  # the malformed cases: their errors are the other tests'
    for kind, fn in (('bfloat16', bf16), ('float16', f16)):
        half = run(write('%s_%s' % (name[:-5], kind), dict(case, dtype=kind)), '--json')
        ref = run(write('%s_%s_rounded_float32' % (name[:-5], kind), dict(rounded(case, fn), dtype='float32')), '--json')
        check(half.returncode == 0 and ref.returncode == 0 and half.stdout == ref.stdout,
              '%s as %s: the same --json as float32 on the values rounded to %s, bit for bit' % (name, kind, kind))
        ran += 1
        differ[kind] += half.stdout != base.stdout
check(all(n >= 4 for n in differ.values()), 'the rounding changes the result of several cases (%s), so the comparison is not vacuous' % differ)
check(ran >= 20, 'the 16-bit cases ran over the good cases of tests/cli/attend (%d runs)' % ran)

# 3. the trace, and a bad dtype
p = run(write('trace_bf16', {'dtype': 'bfloat16', 'x': [[1.00390625, 0], [0, 1]], 'wq': [[1, 0], [0, 1]],
                             'wk': [[1, 0], [0, 1]], 'wv': [[1, 0], [0, 1]], 'scale': 1}))
# 1 + 2^-8 is a tie between bfloat16's 1 and 1 + 2^-7: to even, 1
check(p.returncode == 0 and p.stdout.startswith('qkv attend ') and
      'bfloat16 inputs (each number rounded to bfloat16, to nearest even) with float32 arithmetic' in p.stdout.split('\n')[0] and
      'tensor([[1., 0.],' in p.stdout, 'the trace names the 16-bit inputs and shows x rounded (1 + 2^-8 -> 1)')
p = run(write('bad_dtype16', {'dtype': 'half', 'x': [[1]], 'wq': [[1]], 'wk': [[1]], 'wv': [[1]]}))
check(p.returncode == 2 and p.stdout == '' and
      'bad_dtype16.json: field \'dtype\': expected "float32", "float64", "bfloat16" or "float16", got "half"' in p.stderr,
      'a bad dtype: exit 2 naming the file, the field and the four types (%s)' % p.stderr.strip())

if failures:
    print('\n%d checks failed' % len(failures))
    sys.exit(1)
print('all checks passed')
