#!/usr/bin/env python3
"""module_test.py: the learner pages' WebAssembly module (wasm/qkv_wasm.cpp) gives the bits of
the same source built natively, and the native build gives the bits of the core's templates.

    module_test.py QKV_WASM_CHECK QKV_WASM.wasm [QKV_TOOL]

1. `qkv_wasm_check core`: the module's run-time loops against the core's fixed-size templates
   (multihead_attend_projected, output_projection) on a 4-token, 2-head case, float and double,
   finite, with a NaN in x, with a fully masked row: the same bits in every step.
   The same for the backward (core/flat_attention_backward.hpp) against output_projection_backward,
   multihead_backward and project_backward, for a d_output; the in_out layout (no biases, causal),
   forward and backward; and a constant-expression evaluation of backward_hand.json == run time.
2. For each case below, with a d_output, every step's and every gradient's bytes from the .wasm
   run by node (wasm/run_module.mjs) and from the native build (`qkv_wasm_check run`) are
   compared byte for byte (NaN payloads included): float32 and float64, both weight layouts, biases or none, an output projection or
   none, causal, mask cells, a fully masked row, NaN and infinity in x and in the values'
   weights, a 128-token 12-head case. The time node takes is printed, not asserted.
   attend()'s second form (qkv_attend_case_*, the chapter-two pages': grouped-query heads, a bias,
   ALiBi, cross-attention, RoPE, a NaN, a fully masked row; the gradients where the core has them)
   through node (run_module.mjs ... case) and `qkv_wasm_check run_case`: the same bytes.
3. With QKV_TOOL: the same cases through `qkv attend --arithmetic core --json` (the tool on the
   same source, include/qkv/core/flat_attention.hpp and flat_attention_backward.hpp) give the
   module's bits in every step and every gradient --json prints (a NaN as a NaN: JSON has no
   payload; d_scores is not in --json, a bias's gradient only with the bias). Through `qkv attend --json` (the runtime path: fma chains and
   its own vector exp, docs/numerics.md) the number of cells with the same bits is printed per
   step, not asserted: the runtime's arithmetic differs from the core's in the last bits.
Exit 77 (skipped) without node.
"""
import json
import math
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'support'))
from tensors import flat  # noqa: E402  (tests/support/tensors.py)

HERE = Path(__file__).resolve().parent
RUNNER = HERE.parent.parent / 'wasm' / 'run_module.mjs'


def make_case(seed, dtype, t, d, heads, dq, dv, dout, out_in, biases, causal, scale=None, edit=None):
    rnd = random.Random(seed)
    f32 = dtype == 'float32'

    def r(n):
        vals = [rnd.uniform(-1.5, 1.5) for _ in range(n)]
        return [struct.unpack('<f', struct.pack('<f', v))[0] for v in vals] if f32 else vals
    c = {'dtype': dtype, 't': t, 'd': d, 'heads': heads, 'dq': dq, 'dv': dv, 'dout': dout, 'out_in': out_in,
         'x': r(t * d), 'wq': r(dq * d), 'wk': r(dq * d), 'wv': r(dv * d),
         'bq': r(dq) if biases else None, 'bk': r(dq) if biases else None, 'bv': r(dv) if biases else None,
         'wo': r(dout * dv) if dout else None, 'bo': r(dout) if dout and biases else None,
         'scale': scale if scale is not None else 1 / math.sqrt(dq // heads),
         'mask': [1 if causal and j > i else 0 for i in range(t) for j in range(t)]}
    c['d_output'] = r(t * (dout if dout else dv))  # the upstream gradient: the backward too
    if f32:
        c['scale'] = struct.unpack('<f', struct.pack('<f', c['scale']))[0]
    if edit:
        edit(c)
    return c


def binary(c):
    fmt = '<f' if c['dtype'] == 'float32' else '<d'
    head = [4 if c['dtype'] == 'float32' else 8, c['t'], c['d'], c['dq'], c['dv'], c['dout'] if c['wo'] else 0,
            c['heads'], 1 if c['out_in'] else 0, c['bq'] is not None, c['bk'] is not None, c['bv'] is not None,
            c['wo'] is not None, c['bo'] is not None, 1, 1, 0]  # mask, d_output, one unused word
    out = struct.pack('<16I', *[int(h) for h in head]) + struct.pack(fmt, c['scale'])
    for k in ['x', 'wq', 'bq', 'wk', 'bk', 'wv', 'bv', 'wo', 'bo']:
        if c[k] is not None:
            out += b''.join(struct.pack(fmt, v) for v in c[k])
    return out + bytes(c['mask']) + b''.join(struct.pack(fmt, v) for v in c['d_output'])


def case_binary(seed, dtype, t, d, heads, kv_heads, dk, dvh, dout, context=None, bias_heads=0, alibi=False,
                rotary=0, interleaved=False, offset=0, causal=True, edit=None):
    """a case of attend()'s second form in `qkv_wasm_check run_case`'s binary form (a context of
    `context` = (s, dc), kv_heads, a bias, ALiBi slopes, RoPE tables: any numbers, the bytes are
    what is compared), with a d_output when it has no context and no RoPE (the backward's cases)"""
    rnd = random.Random(seed)
    f32 = dtype == 'float32'
    fmt = '<f' if f32 else '<d'

    def r(n, lo=-1.5, hi=1.5):
        return [rnd.uniform(lo, hi) for _ in range(n)]
    s, dc = context if context else (t, d)
    hk = kv_heads or heads
    dq, dv, dkv, dvkv = heads * dk, heads * dvh, hk * dk, hk * dvh
    c = {'x': r(t * d), 'context': r(s * dc) if context else None, 'wq': r(dq * d), 'bq': r(dq), 'wk': r(dkv * dc),
         'bk': r(dkv), 'wv': r(dvkv * dc), 'bv': r(dvkv), 'wo': r(dout * dv) if dout else None,
         'bo': r(dout) if dout else None, 'bias': r(bias_heads * t * s, -0.5, 0.5) if bias_heads else None,
         'slopes': [2.0 ** (-8 * (h + 1) / heads) for h in range(heads)] if alibi else None,
         'cos_q': r(t * rotary // 2, -1, 1) if rotary else None, 'sin_q': r(t * rotary // 2, -1, 1) if rotary else None,
         'cos_k': r(s * rotary // 2, -1, 1) if rotary else None, 'sin_k': r(s * rotary // 2, -1, 1) if rotary else None}
    if c['bias']:
        c['bias'][1] = -math.inf  # a -inf of the bias masks its key
    mask = [1 if causal and j > i + offset else 0 for i in range(t) for j in range(s)]
    grads = not context and not rotary
    d_output = r(t * (dout or dv)) if grads else []
    if edit:
        edit(c, mask)
    head = [4 if f32 else 8, t, d, s if context else t, dc if context else 0, dq, dv, heads, kv_heads, dout, 1,
            bias_heads, rotary, 1 if interleaved else 0, offset & 0xffffffff, bool(context), 1, 1, 1, bool(dout),
            bool(dout), alibi, 1, grads] + [0] * 8
    out = struct.pack('<32I', *[int(h) for h in head]) + struct.pack(fmt, 1 / math.sqrt(dk))
    for k in ['x', 'context', 'wq', 'bq', 'wk', 'bk', 'wv', 'bv', 'wo', 'bo', 'bias', 'slopes', 'cos_q', 'sin_q', 'cos_k',
              'sin_k']:
        if c[k] is not None:
            out += b''.join(struct.pack(fmt, v) for v in c[k])
    return out + bytes(mask) + b''.join(struct.pack(fmt, v) for v in d_output)


def weights_matrix(flat, rows, cols, out_in):
    """the module takes W as stored: out_in (out, in) or in_out (in, out); the case file too"""
    return [flat[i * cols:(i + 1) * cols] for i in range(rows)]


def as_case_json(c):
    """the same case as a `qkv attend` case file"""
    def num(v):
        return 'NaN' if v != v else 'Infinity' if v == math.inf else '-Infinity' if v == -math.inf else v
    t, d, dq, dv = c['t'], c['d'], c['dq'], c['dv']

    def mat(flat, rows, cols):
        return [[num(v) for v in flat[i * cols:(i + 1) * cols]] for i in range(rows)]
    w = (lambda f, o, i: mat(f, o, i)) if c['out_in'] else (lambda f, o, i: mat(f, i, o))
    j = {'dtype': c['dtype'], 'x': mat(c['x'], t, d), 'wq': w(c['wq'], dq, d), 'wk': w(c['wk'], dq, d),
         'wv': w(c['wv'], dv, d), 'heads': c['heads'], 'scale': num(c['scale']),
         'weight_layout': 'out_in' if c['out_in'] else 'in_out',
         'allowed': [[c['mask'][i * t + k] == 0 for k in range(t)] for i in range(t)]}
    for k in ['bq', 'bk', 'bv', 'bo']:
        if c[k] is not None:
            j[k] = [num(v) for v in c[k]]
    if c['wo'] is not None:
        j['wo'] = w(c['wo'], c['dout'], dv)
    j['d_output'] = mat(c['d_output'], t, c['dout'] if c['wo'] is not None else dv)
    return j


def steps(c, raw):
    """the module's output split into its steps (wasm/qkv_wasm.cpp's order)"""
    size = 4 if c['dtype'] == 'float32' else 8
    t, dq, dv, h = c['t'], c['dq'], c['dv'], c['heads']
    parts = [('queries', t * dq), ('keys', t * dq), ('values', t * dv)]
    for k in range(h):
        parts += [('scores', t * t, k), ('scaled_scores', t * t, k), ('weights', t * t, k), ('context', t * dv // h, k)]
    parts += [('concat', t * dv)]
    if c['wo'] is not None:
        parts += [('output', t * c['dout'])]
    # then the backward's (core/flat_attention_backward.hpp's gradients_layout)
    d, dout = c['d'], c['dout'] if c['wo'] is not None else 0
    parts += [('d_concat', t * dv), ('d_wo', dout * dv), ('d_bo', dout)]
    for k in range(h):
        parts += [('d_weights', t * t, k), ('D', t, k), ('d_scaled_scores', t * t, k), ('d_scores', t * t, k)]
    parts += [('d_queries', t * dq), ('d_keys', t * dq), ('d_values', t * dv), ('d_wq', dq * d), ('d_bq', dq),
              ('d_wk', dq * d), ('d_bk', dq), ('d_wv', dv * d), ('d_bv', dv), ('d_x', t * d)]
    out, at = [], 0
    for p in parts:
        out.append((p, raw[at * size:(at + p[1]) * size]))
        at += p[1]
    assert at * size == len(raw), (at * size, len(raw))
    return out


def tool_bits(c, j, name, head, fmt):
    """the values of one step from `qkv attend --json`, packed as the module's"""
    v = j[name]
    if head is not None and name in ('scores', 'scaled_scores', 'weights', 'context', 'd_weights', 'D',
                                     'd_scaled_scores'):
        v = v['data'][head]  # heads x T x ... (D: heads x T): head h's
    vals = flat(v)
    conv = [float('nan') if e == 'NaN' else math.inf if e == 'Infinity' else -math.inf if e == '-Infinity' else float(e)
            for e in vals]
    return b''.join(struct.pack(fmt, e) for e in conv)


def main():
    check, module = sys.argv[1], sys.argv[2]
    tool = sys.argv[3] if len(sys.argv) > 3 else None
    node = shutil.which('node') or shutil.which('nodejs')
    r = subprocess.run([check, 'core'], capture_output=True, text=True)
    print(r.stdout + r.stderr, end='')
    if r.returncode != 0:
        print('FAIL: the module\'s loops differ from the core\'s templates')
        return 1
    if not node:
        print('node not found: the .wasm is not run (skipped)')
        return 77

    def nan_x(c):
        c['x'][2 * c['d'] + 1] = float('nan')

    def inf_w(c):
        c['wv'][3] = math.inf
        c['x'][0] = -math.inf

    def masked_row(c):
        t = c['t']
        for j in range(t):
            c['mask'][3 * t + j] = 1
        c['mask'][1 * t + 0] = 1
    cases = [
        ('float32, 2 heads, out_in, biases, output projection, causal',
         make_case(1, 'float32', 5, 8, 2, 8, 8, 6, True, True, True)),
        ('float64, 2 heads, out_in, biases, output projection',
         make_case(2, 'float64', 5, 8, 2, 8, 8, 6, True, True, False)),
        ('float32, 1 head, in_out, no bias, no output projection, unscaled',
         make_case(3, 'float32', 4, 3, 1, 3, 3, 0, False, False, False, scale=1.0)),
        ('float32, NaN in x[2][1] (causal)', make_case(4, 'float32', 5, 8, 2, 8, 8, 6, True, True, True, edit=nan_x)),
        ('float32, +inf in wv, -inf in x[0][0]', make_case(5, 'float32', 5, 8, 2, 8, 8, 6, True, True, False, edit=inf_w)),
        ('float32, query 3 fully masked, key 0 masked for query 1',
         make_case(6, 'float32', 6, 8, 2, 8, 8, 6, True, True, False, edit=masked_row)),
        ('float64, NaN in x[2][1], query 3 fully masked',
         make_case(7, 'float64', 6, 8, 2, 8, 8, 6, True, True, True, edit=lambda c: (nan_x(c), masked_row(c)))),
        ('float32, 128 tokens, 12 heads, d 96, causal', make_case(8, 'float32', 128, 96, 12, 96, 96, 96, True, True, True)),
    ]
    failed = 0
    with tempfile.TemporaryDirectory(prefix='qkv-wasm-') as tmp:
        for name, c in cases:
            data = binary(c)
            native = subprocess.run([check, 'run'], input=data, capture_output=True)
            t0 = time.perf_counter()
            wasm = subprocess.run([node, str(RUNNER), module], input=data, capture_output=True)
            dt = time.perf_counter() - t0
            if native.returncode or wasm.returncode:
                print('FAIL %s: native exit %d, node exit %d: %s' % (name, native.returncode, wasm.returncode,
                                                                   wasm.stderr.decode()[-400:]))
                failed += 1
                continue
            same = native.stdout == wasm.stdout
            n = len(native.stdout) // (4 if c['dtype'] == 'float32' else 8)
            print('%s %s: %d numbers, wasm (node, %.0f ms with start-up) %s native' % (
                'ok  ' if same else 'FAIL', name, n, dt * 1000, '==' if same else '!=', ))
            failed += not same
            if tool:
                path = Path(tmp) / 'case.json'
                path.write_text(json.dumps(as_case_json(c)))
                fmt = '<f' if c['dtype'] == 'float32' else '<d'
                size = struct.calcsize(fmt)
                for arith in ('core', 'runtime'):
                    j = subprocess.run([tool, 'attend', str(path), '--json', '--arithmetic', arith],
                                       capture_output=True, text=True)
                    if j.returncode:
                        print('FAIL qkv attend --json --arithmetic %s: exit %d: %s' % (arith, j.returncode, j.stderr.strip()))
                        failed += 1
                        continue
                    doc = json.loads(j.stdout)
                    tally = {}
                    for p, raw in steps(c, wasm.stdout):
                        if p[0] not in doc or not raw:  # d_scores, and a bias's gradient without it
                            continue
                        ref = tool_bits(c, doc, p[0], p[2] if len(p) > 2 else None, fmt)
                        a = tally.setdefault(p[0], [0, 0])
                        a[1] += len(raw) // size
                        if len(ref) != len(raw):
                            continue
                        a[0] += sum(raw[k:k + size] == ref[k:k + size] or
                                    (struct.unpack(fmt, raw[k:k + size])[0] != struct.unpack(fmt, raw[k:k + size])[0] and
                                     struct.unpack(fmt, ref[k:k + size])[0] != struct.unpack(fmt, ref[k:k + size])[0])
                                    for k in range(0, len(raw), size))
                    cells = ', '.join('%s %d/%d' % (k, v[0], v[1]) for k, v in tally.items())
                    if arith == 'core':
                        bad = [k for k, v in tally.items() if v[0] != v[1]]
                        print('%s     qkv attend --arithmetic core --json: %s' % (
                            'FAIL' if bad else 'ok  ', 'every step the module\'s bits' if not bad else 'differs in ' + cells))
                        failed += bool(bad)
                    else:
                        print('     against qkv attend --json (the runtime path), cells with the same bits (NaN = NaN): ' + cells)
    # attend()'s second form (qkv_attend_case_*, the pages of chapter two's cases): the .wasm's
    # bytes against the native build's (`qkv_wasm_check run_case`), the gradients too where the
    # core has them (grouped-query heads; no context, no RoPE)

    def nan_context(c, mask):
        c['context'][3] = float('nan')

    def full_row(c, mask):
        s = len(mask) // 4
        for j in range(s):
            mask[2 * s + j] = 1
    second = [
        ('float32, 4 heads on 2 key/value heads, a bias per head, ALiBi, causal, gradients',
         case_binary(11, 'float32', 5, 6, 4, 2, 2, 3, 4, bias_heads=4, alibi=True)),
        ('float64, 2 heads on 1 key/value head, a shared bias, a fully masked row, gradients',
         case_binary(12, 'float64', 4, 6, 2, 1, 3, 2, 0, bias_heads=1, edit=full_row)),
        ('float32, cross-attention 3 over 5 keys, RoPE interleaved on 2 of 4, 2 heads on 1, lower_right',
         case_binary(13, 'float32', 3, 4, 2, 1, 4, 3, 4, context=(5, 6), rotary=2, interleaved=True, offset=2)),
        ('float64, cross-attention 4 over 2 keys, RoPE half_split, ALiBi, a NaN in the context',
         case_binary(14, 'float64', 4, 3, 2, 0, 2, 2, 3, context=(2, 5), rotary=2, alibi=True, edit=nan_context)),
    ]
    for name, data in second:
        native = subprocess.run([check, 'run_case'], input=data, capture_output=True)
        wasm = subprocess.run([node, str(RUNNER), module, 'case'], input=data, capture_output=True)
        if native.returncode or wasm.returncode:
            print('FAIL %s: native exit %d, node exit %d: %s' % (name, native.returncode, wasm.returncode,
                                                               wasm.stderr.decode()[-400:]))
            failed += 1
            continue
        same = native.stdout == wasm.stdout and len(native.stdout) > 0
        n = len(native.stdout) // (4 if data[0] == 4 else 8)
        print('%s %s: %d numbers, wasm (node) %s native' % ('ok  ' if same else 'FAIL', name, n, '==' if same else '!='))
        failed += not same
    print('%d case(s) differ' % failed if failed else 'every case: the .wasm and the native build give the same bytes')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
