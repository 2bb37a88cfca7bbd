#!/usr/bin/env python3
"""decode_test.py QKV FIXTURE OUT_DIR: `qkv decode` against PyTorch and against its own claims.

FIXTURE is tests/data/decoder/decoder_torch.json (scripts/fixtures/torch_decoder_fixtures.py, PyTorch 1.13):
its "decode" case is 130 tokens' q, k, v (2 query heads on 1 key/value head of 8), with PyTorch's
float64 causal attention on the keys and values as stored in float32, bfloat16 and float16
(rounded by torch's .to()). For each storage and both kernels, with a prompt of 1 and of 37 tokens:
  - exit 0, "holds": the tool's own check of the runtime's relation (attend: bit for bit with full
    causal attention; decode_attend: within twice the float bound, the prompt bit for bit);
  - kernel attend: "bit_for_bit" and outputs == full_causal exactly;
  - the outputs against PyTorch's float64 within bound(float) + bound(double). The tool gives
    bound(float) per element (--json "bound", decode_attend; the derivation is
    tests/runtime/decoder_torch_test.cpp's); every term of it is u times a quantity of the inputs
    (gamma(n) = n u / (1 - n u) grows slightly faster than u), so bound(double) <= 2^-29 bound(float)
    and the tolerance bound * (1 + 2^-28) covers both. For kernel attend the bound is that of the
    same case run with decode_attend (the bound depends on the inputs only).
Then the bad inputs: exit 2, nothing on stdout, stderr naming the file and the field; the cache
limit refused before allocation. No torch needed.
"""
import json
import os
import subprocess
import sys

QKV, FIXTURE, OUT = sys.argv[1:4]
os.makedirs(OUT, exist_ok=True)
fx = json.load(open(FIXTURE))['decode']
from checks import check, failures, write_case  # noqa: E402 (tests/cli/checks.py)


def write(name, case):
    return write_case(OUT, name, case)


def run(*args):
    return subprocess.run([QKV, 'decode', *args], capture_output=True, text=True, timeout=120)


base = {'q': fx['q'], 'k': fx['k'], 'v': fx['v'], 'heads': fx['heads'], 'kv_heads': fx['kv_heads']}
T, HD = len(fx['q']), fx['heads'] * fx['d_head']
for storage, key in (('float32', 'output'), ('bfloat16', 'output_bfloat16'), ('float16', 'output_float16')):
    torch_out = fx[key]
    for prompt in (1, 37):
        bound = None
        for kernel in ('decode_attend', 'attend'):
            name = 'decode_%s_%s_prompt%d' % (storage, kernel, prompt)
            path = write(name, dict(base, storage=storage, kernel=kernel, prompt=prompt))
            p = run(path, '--json')
            check(p.returncode == 0 and p.stderr == '', '%s: exit 0, nothing on stderr (%d: %s)' % (name, p.returncode, p.stderr))
            if p.returncode != 0:
                continue
            j = json.loads(p.stdout)
            out, full = j['outputs']['data'], j['full_causal']['data']
            check(j['holds'] is True, name + ': the runtime\'s relation holds')
            check(len(out) == T and len(out[0]) == HD, name + ': %d rows of %d' % (T, HD))
            check(j['cache_bytes'] == fx['kv_heads'] * T * 2 * fx['d_head'] * (4 if storage == 'float32' else 2),
                  name + ': cache bytes = kv_heads x T x (d_k + d_v) x element size, got %d' % j['cache_bytes'])
            if kernel == 'attend':
                check(j['bit_for_bit'] is True and out == full, name + ': every row bit for bit with full causal attention')
            else:
                bound = j['bound']['data']
                # the prompt's rows come from attend: bit for bit
                check(out[:prompt] == full[:prompt], name + ': the prompt\'s rows bit for bit')
            worst = 0.0
            for i in range(T):
                for c in range(HD):
                    tol = bound[i][c] * (1 + 2 ** -28)
                    d = abs(out[i][c] - torch_out[i][c])
                    worst = max(worst, d / tol if tol > 0 else (0 if d == 0 else float('inf')))
            check(worst <= 1, '%s: every output within bound(float) + bound(double) of PyTorch\'s float64 (worst ratio %.3g)' % (name, worst))

# the text output: every token's row and the statement of the relation
p = run(write('decode_text', dict(base, storage='bfloat16', prompt=3)))
check(p.returncode == 0 and 'token 129 (cache length 130): output = tensor([[' in p.stdout and
      'Prompt: tokens 0..2 appended' in p.stdout and ': holds, worst |difference| / (2 bound) = ' in p.stdout,
      'the trace prints each step\'s row and says the relation holds')
p = run(write('decode_text_attend', dict(base, kernel='attend', window=5, alibi=True)))
check(p.returncode == 0 and 'bit for bit (every row' in p.stdout and 'window 5, ALiBi on' in p.stdout,
      'kernel attend with a window and ALiBi: bit for bit, said so')
p = run(write('decode_window_alibi', dict(base, window=17, alibi=True, storage='float16', prompt=20)), '--json')
check(p.returncode == 0 and json.loads(p.stdout)['holds'] is True, 'decode_attend with window 17 and ALiBi: the relation holds')

# bad input: exit 2, nothing on stdout, the file and the field named
small = {'q': [[1, 0], [0, 1]], 'k': [[1, 0], [0, 1]], 'v': [[1, 2], [3, 4]]}
bad = [
    ('unknown', dict(small, kv=1), "field 'kv': unknown field"),
    ('missing_v', {'q': small['q'], 'k': small['k']}, "field 'v': missing"),
    ('k_rows', dict(small, k=[[1, 0]]), "field 'k': expected 2x2"),
    ('q_heads', dict(small, heads=3), "field 'q': expected heads x d_k columns (3 heads)"),
    ('kv_heads', dict(small, heads=2, kv_heads=3, k=[[1], [0]]), "field 'kv_heads': expected a positive whole number that divides heads = 2"),
    ('prompt', dict(small, prompt=3), "field 'prompt': expected a whole number from 1 to the 2 tokens"),
    ('prompt_zero', dict(small, prompt=0), "field 'prompt'"),
    ('capacity', dict(small, capacity=1), "field 'capacity': expected a whole number of cache positions, at least the 2 tokens"),
    ('storage', dict(small, storage='int8'), "field 'storage': expected \"float32\", \"bfloat16\" or \"float16\""),
    ('kernel', dict(small, kernel='flash'), "field 'kernel'"),
    ('window', dict(small, window=-1), "field 'window'"),
    ('alibi', dict(small, alibi=1), "field 'alibi': expected true or false"),
    ('scale', dict(small, scale='big'), "field 'scale': expected a finite number"),
    # 1 head x 2^31 positions x (2 + 2) x 4 bytes = 2^35 bytes: refused before the cache exists
    ('huge_capacity', dict(small, capacity=2 ** 31), "field 'capacity': the cache would take 1 heads x 2147483648 positions x (2 + 2) x 4 bytes = 34359738368 bytes, above the limit of 1073741824"),
]
for name, case, text in bad:
    path = write('bad_' + name, case)
    p = run(path)
    check(p.returncode == 2 and p.stdout == '' and text in p.stderr and os.path.basename(path) in p.stderr,
          'bad %s: exit 2, nothing on stdout, stderr names the file and says %r (got %d: %s)' % (name, text, p.returncode, p.stderr.strip()))
p = run(write('limit', dict(small, capacity=1000)), '--max-cache-bytes', '100')
check(p.returncode == 2 and p.stdout == '' and '1000 positions x (2 + 2) x 4 bytes = 16000 bytes, above the limit of 100' in p.stderr,
      '--max-cache-bytes is the limit: %s' % p.stderr.strip())
p = run(write('limit_ok', small), '--max-cache-bytes', '32')  # 1 x 2 x (2 + 2) x 4 = 32 bytes: exactly the limit
check(p.returncode == 0, 'a cache of exactly --max-cache-bytes is accepted: %s' % p.stderr.strip())
p = run(write('limit_elements', small), '--max-elements', '7')  # outputs: 3 x (2 x 2) = 12 numbers > 7 (and the file fits 7 x 64 bytes)
check(p.returncode == 2 and p.stdout == '' and '--max-elements' in p.stderr, '--max-elements bounds the outputs: %s' % p.stderr.strip())
p = run(os.path.join(OUT, 'no_such_case.json'))
check(p.returncode == 2 and p.stdout == '' and 'no_such_case.json' in p.stderr, 'a missing case file: exit 2 naming it')
p = subprocess.run([QKV, 'decode', '--help'], capture_output=True, text=True)
check(p.returncode == 0 and p.stdout.startswith('usage: qkv decode CASE.json'), 'qkv decode --help')

if failures:
    print('\n%d checks failed' % len(failures))
    sys.exit(1)
print('all checks passed')
