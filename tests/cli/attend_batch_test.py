#!/usr/bin/env python3
"""attend_batch_test.py QKV FIXTURE ATTEND_DIR OUT_DIR: `qkv attend`'s batch form (x [B, T, d] with
lengths or key_padding [B, S]) against PyTorch and against each sequence run alone.

FIXTURE is tests/data/rope_batch/batch.json (scripts/fixtures/torch_rope_batch_fixtures.py, PyTorch 1.13):
nn.MultiheadAttention(8, 2 heads, batch_first=True) over x [4, 5, 8] with key_padding_mask for the
lengths [5, 3, 1, 0], in float64 from float32-drawn inputs (so the case's numbers are exact in
float32), with the output [4, 5, 8] and the per-head weights [4, 2, 5, 5]. No torch needed here.

1. PyTorch: the case is the fixture's x, weights, heads and lengths (and again with its
   key_padding: the same --json, byte for byte). Every output and weight of the float32 run is
   within `bound` of PyTorch's float64, padded query rows included (PyTorch masks keys, not
   queries, and so does qkv). `bound` is the chain of tests/runtime/rope_batch_test.cpp (the
   runtime's own test of this fixture), ported: each projection gamma(8) sum |x w| + 2u (|y| +
   |b|); per head the scores gamma(4) sum (|q| + dq)(|k| + dk) + the propagated errors, the scale
   3u, the softmax's relative error 1.01 (2 max ds + (2 (4 + range) + n) u), the context
   gamma(S + 2) sum (w + dw)(|v| + dv) + propagated; the output projection the same way (u =
   2^-24, gamma(n) = n u / (1 - n u); the standard model holds for any summation order, so it
   covers qkv's kernels). PyTorch's float64 result is itself within the same chain with u = 2^-53,
   i.e. 2^-29 of it, so the tolerance is bound * (1 + 2^-28). The length-0 sequence: PyTorch
   gives NaN (softmax over no keys); qkv's stated behaviour is weights 0, context 0 and output bo
   exactly (bo as float32), which is asserted.
2. Each sequence alone: sequence b's --json object and its part of the trace equal `qkv attend`
   of the case with x[b] as x (context[b] as context) and its padding as key_padding, byte for
   byte (numbers are written in shortest round-trip form, so the same text is the same bits; the
   trace up to the file name in its first line). Why it holds: runtime::batch_attention runs
   each sequence as one attention() call with the padding as a T x S `allowed` mask, the very call
   and mask the one-sequence case makes (apply_key_padding), and attention() gives the same bits
   on any thread count (runtime/batch.hpp). Checked for the fixture (float32 and float64) and for
   tests/cli/attend/batch_cross_gqa.json (cross-attention, GQA, RoPE, lower_right, ALiBi,
   bfloat16) and batch_lengths.json (a length-0 sequence).
"""
import json
import math
import os
import subprocess
import sys

QKV, FIXTURE, ATTEND_DIR, OUT = sys.argv[1:5]
os.makedirs(OUT, exist_ok=True)
from checks import check, failures, write_case  # noqa: E402 (tests/cli/checks.py)


def write(name, case):
    return write_case(OUT, name, case)


def run(*args):
    r = subprocess.run([QKV, 'attend', *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit('qkv attend %s exited %d: %s' % (' '.join(args), r.returncode, r.stderr))
    return r.stdout


def data(t):
    return t['data'] if isinstance(t, dict) else t


fx = json.load(open(FIXTURE))
case = {k: fx[k] for k in ['heads', 'x', 'wq', 'wk', 'wv', 'bq', 'bk', 'bv', 'wo', 'bo']}
case['lengths'] = fx['lengths']
by_lengths = write('torch_lengths', case)
padded = dict(case)
del padded['lengths']
padded['key_padding'] = fx['key_padding']
by_padding = write('torch_key_padding', padded)

# --- 1. PyTorch -----------------------------------------------------------------------------------
out_json = run(by_lengths, '--json')
check(out_json == run(by_padding, '--json'), 'lengths [5, 3, 1, 0] and key_padding [4, 5] give the same --json')
res = json.loads(out_json)
check(res['batch'] == 4 and res['lengths'] == [5, 3, 1, 0], 'the --json names the batch and the lengths')

U = 2.0 ** -24


def gamma(n):
    return n * U / (1 - n * U)


def linear(x, w, b):
    """y = x w^T + b in double, and the bound of a float32 run"""
    y, dy = [], []
    for row in x:
        yr, dr = [], []
        for j, wr in enumerate(w):
            acc = sum(a * c for a, c in zip(row, wr))
            mag = sum(abs(a * c) for a, c in zip(row, wr))
            yr.append(acc + b[j])
            dr.append(gamma(len(row)) * mag + U * (abs(acc) + abs(b[j])) * 2)
        y.append(yr)
        dy.append(dr)
    return y, dy


def head_attention(q, dq, k, dk, v, dv, scale, ok):
    """reference_attention::compute of tests/support/runtime.hpp, ported"""
    T, S, d, D = len(q), len(k), len(q[0]), len(v[0])
    W = [[0.0] * S for _ in range(T)]
    dW = [[0.0] * S for _ in range(T)]
    O = [[0.0] * D for _ in range(T)]
    dO = [[0.0] * D for _ in range(T)]
    for i in range(T):
        s, ds = [], []
        for j in range(S):
            acc = sum(q[i][c] * k[j][c] for c in range(d))
            mag = sum((abs(q[i][c]) + dq[i][c]) * (abs(k[j][c]) + dk[j][c]) for c in range(d))
            prop = sum(dq[i][c] * abs(k[j][c]) + abs(q[i][c]) * dk[j][c] + dq[i][c] * dk[j][c] for c in range(d))
            sb = gamma(d) * mag + prop
            s.append(acc * scale)
            ds.append(abs(scale) * sb + 3 * U * abs(acc * scale))
        live = [j for j in range(S) if ok[j]]
        if not live:
            continue
        m, lo = max(s[j] for j in live), min(s[j] for j in live)
        total = sum(math.exp(s[j] - m) for j in live)
        rel = 1.01 * (2 * max(ds[j] for j in live) + (2 * (4 + (m - lo)) + len(live)) * U)
        for j in live:
            W[i][j] = math.exp(s[j] - m) / total
            dW[i][j] = W[i][j] * rel
        for c in range(D):
            acc = sum(W[i][j] * v[j][c] for j in range(S))
            mag = sum((W[i][j] + dW[i][j]) * (abs(v[j][c]) + dv[j][c]) for j in range(S))
            prop = sum(dW[i][j] * abs(v[j][c]) + W[i][j] * dv[j][c] + dW[i][j] * dv[j][c] for j in range(S))
            O[i][c] = acc
            dO[i][c] = gamma(S + 2) * mag + prop
    return W, dW, O, dO


H = fx['heads']
X = data(fx['x'])
B, L, E = len(X), len(X[0]), len(X[0][0])
hd = E // H
wq, wk, wv, wo = (data(fx[n]) for n in ['wq', 'wk', 'wv', 'wo'])
bq, bk, bv, bo = (data(fx[n]) for n in ['bq', 'bk', 'bv', 'bo'])
t_out, t_w = data(fx['output']), data(fx['weights'])
f32 = lambda v: __import__('struct').unpack('<f', __import__('struct').pack('<f', v))[0]
worst = 0.0
for b in range(B):
    seq = res['sequences'][b]
    got_out, got_w = seq['output']['data'], seq['weights']['data']
    ok = [not f for f in fx['key_padding'][b]]
    if not any(ok):  # length 0: PyTorch NaN; qkv weights 0, output bo
        check(all(isinstance(v, str) or math.isnan(v) for r in t_out[b] for v in r), 'sequence %d: PyTorch gives NaN' % b)
        check(all(v == 0 for hm in got_w for r in hm for v in r), 'sequence %d (length 0): weights 0' % b)
        check(all(got_out[i][o] == f32(bo[o]) for i in range(L) for o in range(E)), 'sequence %d (length 0): output == bo' % b)
        continue
    q, dq = linear(X[b], wq, bq)
    k, dk = linear(X[b], wk, bk)
    v, dv = linear(X[b], wv, bv)
    concat = [[0.0] * E for _ in range(L)]
    dconcat = [[0.0] * E for _ in range(L)]
    bad_w = 0
    for h in range(H):
        cols = lambda m: [r[h * hd:(h + 1) * hd] for r in m]
        W, dW, O, dO = head_attention(cols(q), cols(dq), cols(k), cols(dk), cols(v), cols(dv), 1 / math.sqrt(hd), ok)
        for i in range(L):
            for j in range(L):
                tol = dW[i][j] * (1 + 2.0 ** -28)
                diff = abs(got_w[h][i][j] - t_w[b][h][i][j])
                bad_w += diff > tol
                if tol > 0:
                    worst = max(worst, diff / tol)
            for c in range(hd):
                concat[i][h * hd + c] = O[i][c]
                dconcat[i][h * hd + c] = dO[i][c]
    bad_o = 0
    for i in range(L):
        for o in range(E):
            acc = sum(concat[i][c] * wo[o][c] for c in range(E))
            mag = sum((abs(concat[i][c]) + dconcat[i][c]) * abs(wo[o][c]) for c in range(E))
            prop = sum(dconcat[i][c] * abs(wo[o][c]) for c in range(E))
            bound = gamma(E) * mag + prop + 2 * U * (abs(acc) + abs(bo[o]) + prop)
            diff = abs(got_out[i][o] - t_out[b][i][o])
            bad_o += diff > bound * (1 + 2.0 ** -28)
            worst = max(worst, diff / bound)
    n_pad = L - sum(ok)
    check(bad_w == 0, 'sequence %d (length %d): every weight within the bound of PyTorch float64' % (b, sum(ok)))
    check(bad_o == 0, 'sequence %d (length %d): every output within the bound, its %d padded query rows included' % (b, sum(ok), n_pad))
print('worst |qkv - torch| / bound: %.4f' % worst)
check(worst > 0, 'the comparison is not empty (some difference is nonzero)')


# --- 2. each sequence alone -----------------------------------------------------------------------
def sections(text, n):
    """the trace of each sequence, without its first line (which names the file)"""
    parts = text.split('\n=== sequence ')[1:]
    check(len(parts) == n, '%d sequence sections in the trace' % n)
    return [p.split('\n', 2)[2] for p in parts]


def alone(name, batch_case):
    path = write(name, batch_case)
    text, js_text = run(path), run(path, '--json')
    xs = data(batch_case['x'])
    n = len(xs)
    S = len(data(batch_case['context'])[0]) if 'context' in batch_case else len(xs[0])
    if 'lengths' in batch_case:
        pads = [[j >= ln for j in range(S)] for ln in batch_case['lengths']]
    else:
        pads = batch_case.get('key_padding')
    traces = sections(text, n)
    same_text = 0
    singles, real = [], []
    for b in range(n):
        one = {k: v for k, v in batch_case.items() if k not in ('x', 'context', 'lengths', 'key_padding')}
        one['x'] = xs[b]
        if 'context' in batch_case:
            one['context'] = data(batch_case['context'])[b]
        if pads is not None:
            one['key_padding'] = pads[b]
        real.append(S - sum(bool(f) for f in pads[b]) if pads is not None else S)
        p1 = write('%s_seq%d' % (name, b), one)
        singles.append(run(p1, '--json').rstrip('\n'))
        same_text += run(p1).split('\n', 1)[1] == traces[b]
    # byte for byte: every number as written (shortest round trip: the same text is the same bits)
    want = '{"batch": %d,\n "lengths": [%s],\n "sequences": [%s]}\n' % (n, ', '.join(map(str, real)), ',\n  '.join(singles))
    check(js_text == want, '%s: the --json is each of the %d sequences\' --json alone, byte for byte' % (name, n))
    check(same_text == n, '%s: each of the %d sequences\' trace == the sequence alone' % (name, n))


alone('torch_float32', case)
def retagged(c, dtype):
    """c with its top-level dtype and every float tensor's tag set to dtype (qkv attend refuses a
    tensor whose tag disagrees with the case's type; the fixture's numbers are exact in float32,
    so the same decimals are the same values in float64)"""
    out = {k: (dict(v, dtype=dtype) if isinstance(v, dict) and v.get('dtype') in ('float32', 'float64') else v)
           for k, v in c.items()}
    out['dtype'] = dtype
    return out


alone('torch_float64', retagged(case, 'float64'))
alone('torch_key_padding', padded)
for f in ['batch_cross_gqa', 'batch_lengths']:
    alone(f, json.load(open(os.path.join(ATTEND_DIR, f + '.json'))))

if failures:
    print('%d failures' % len(failures))
    sys.exit(1)
print('all checks passed')
