#!/usr/bin/env python3
"""attend_arithmetic_test.py QKV CASES_DIR OUT_DIR: `qkv attend --arithmetic core` (docs/cli.md)
and the arithmetic of the learner's pages (docs/pages.md, "Editing a page").

1. Tutorial 000 (tests/cli/attend/illustrated.json): `qkv attend --arithmetic core --json` gives,
   bit for bit, the numbers of the core's fixed-size templates, read from the page of
   `qkv explain illustrated` (examples/01_illustrated_self_attention.cpp computes them at compile
   time and static_asserts them: querys, keys, values, attn_scores, attn_scores_softmax and
   outputs_exact_softmax, the context of qkv::self_attention). The run-time loops themselves are
   checked against the templates by `qkv_wasm_check core` (tests/wasm/module_test.py); this ties
   the tool to them. How many cells the runtime path (`--json` alone) gives the same bits is
   printed, not asserted.
2. An editable case's `--html` page is in the core's arithmetic (its data's edit.arithmetic, its
   intro says so) and every number of its steps is `--arithmetic core --json`'s, bit for bit (NaN
   as NaN: non_finite.json); `--json --html` together give the page's arithmetic. With
   `--arithmetic runtime` the page is the runtime's numbers (`--json`'s) and says why it is not
   editable. Chapter two's cases (rope, alibi, bias, kv_heads, chapter_two: RoPE, ALiBi, a bias,
   grouped-query heads, cross-attention) and a float16 case are editable pages in the core's
   arithmetic too. When the
   tool was built without the WebAssembly module, no page is editable and every page is the
   runtime's (checked as such).
3. The backward (a case with d_output: backward_hand, backward_hand64, backward_heads,
   backward_nan, backward_sum): `--arithmetic runtime` prints what the default prints; `--arithmetic
   core --json` has the runtime's gradients by name and shape, its forward is the core's without
   d_output, bit for bit, and its D and d_scaled_scores are the core's sums of its own d_weights and
   weights (core/softmax_backward.hpp's order), bit for bit. Its gradients against PyTorch's are in
   attend_backward_test.py (within the derived bound), and against the module's and the core's
   templates in tests/wasm/module_test.py (bit for bit). backward_heads.json's page is editable
   (with the module), its edit object names d_output and a view per gradient matrix, and its
   gradients are --arithmetic core --json's, bit for bit.
4. The terms added to the scores (alibi, bias, chapter_two, kv_heads): --arithmetic core's scaled
   scores are its raw scores times the scale, plus the bias, plus ALiBi's slope (j - p), masked,
   one rounding per operation, derived here bit for bit; the cells the runtime path shares are
   printed, not asserted (its scores are fma chains: they differ in the last bits).
5. Already-projected q, k, v (the tool's q/k/v form) in the core's arithmetic: a case of the
   queries, keys and values --arithmetic core computed for an x-and-weights case (before RoPE, from
   its page) gives that case's steps after the projections, bit for bit.
The refusals (exit 2 naming the field) are in tests/cli/attend/arithmetic.expect.
"""
import json
import math
import os
import re
import struct
import subprocess
import sys

QKV, CASES, OUT = sys.argv[1:4]
os.makedirs(OUT, exist_ok=True)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, failures  # noqa: E402 (tests/cli/checks.py)


def run(*args):
    p = subprocess.run([QKV, *args], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise SystemExit('qkv %s: exit %d: %s' % (' '.join(args), p.returncode, p.stderr))
    return p.stdout


def page_data(path):
    text = open(path, encoding='utf-8').read()
    return json.loads(re.search(r'<script type="application/json" id="qkv-data">(.*?)</script>', text, re.S).group(1))


def number(v):
    if isinstance(v, str):
        return {'NaN': math.nan, 'Infinity': math.inf, '-Infinity': -math.inf,
                'inf': math.inf, '-inf': -math.inf, 'nan': math.nan}[v]
    return float(v)


def flat(v):
    if isinstance(v, dict):
        return flat(v['data'])
    if isinstance(v, list):
        return [y for e in v for y in flat(e)]
    return [number(v)]


def bits(values, dtype):
    """each number's bits in dtype; a NaN as one class (docs/numerics.md: NaN is NaN, no payload)"""
    fmt = '<f' if dtype == 'float32' else '<d'
    return [b'NaN' if v != v else struct.pack(fmt, v) for v in values]


def same(a, b, dtype):
    return bits(a, dtype) == bits(b, dtype)


def share(a, b, dtype):
    x, y = bits(a, dtype), bits(b, dtype)
    return sum(p == q for p, q in zip(x, y)), len(x)


# --- 1. tutorial 000: --arithmetic core == the core's templates (the explain page's numbers)
ill = os.path.join(CASES, 'illustrated.json')
explain = os.path.join(OUT, 'explain_illustrated.html')
run('explain', 'illustrated', '--html', explain)
M = page_data(explain)['matrices']
core = json.loads(run('attend', ill, '--arithmetic', 'core', '--json'))
runtime = json.loads(run('attend', ill, '--json'))
case = json.load(open(ill))
check(flat(case['x']) == flat(M['x']['data']) and flat(case['wq']) == flat(M['w_query']['data']) and
      flat(case['wk']) == flat(M['w_key']['data']) and flat(case['wv']) == flat(M['w_value']['data']),
      'illustrated.json is tutorial 000\'s x and weights (the explain page\'s)')
check(core['arithmetic'] == 'core' and 'arithmetic' not in runtime, '--json says "arithmetic": "core" only with it')
pairs = [('queries', 'querys'), ('keys', 'keys'), ('values', 'values'), ('scores', 'attn_scores'),
         ('scaled_scores', 'attn_scores'), ('weights', 'attn_scores_softmax'), ('context', 'outputs_exact_softmax'),
         ('concat', 'outputs_exact_softmax'), ('output', 'outputs_exact_softmax')]
tally = []
for mine, theirs in pairs:  # tutorial 000 is unscaled (scale 1) and has one head, no output projection
    a, b = flat(core[mine]), [number(v) for v in M[theirs]['data']]
    check(same(a, b, 'float32'), 'tutorial 000: --arithmetic core %s == the core template\'s %s, bit for bit' % (mine, theirs))
    n, total = share(flat(runtime[mine]), b, 'float32')
    tally.append('%s %d/%d' % (mine, n, total))
print('tutorial 000, the runtime path (--json) against the core\'s templates, cells with the same bits: ' + ', '.join(tally))

# --- 2. the pages' arithmetic
STEPS = ['queries', 'keys', 'values', 'scores', 'scaled', 'weights', 'context', 'concat', 'output']


def page_steps(d, H):
    """the page's numbers of each step, as --json's names and order (per head flattened in order)"""
    M = d['matrices']
    hs = (lambda h: '[%d]' % h) if H > 1 else (lambda h: '')
    out = {}
    for s in STEPS:
        key = {'scaled': 'scaled_scores'}.get(s, s)
        if s in ('scores', 'scaled', 'weights', 'context'):
            out[key] = [number(v) for h in range(H) for v in M[s + hs(h)]['data']]
        elif s in M:
            out[key] = [number(v) for v in M[s]['data']]
    if 'concat' not in out:  # one head: concat is the context
        out['concat'] = out['context']
    return out


def compare(name, d, js, what):
    dtype = js['queries']['dtype']
    H = js['scores']['shape'][0]
    shown = page_steps(d, H)
    bad = [k for k, v in shown.items() if k in js and not same(v, flat(js[k]), dtype)]
    check(not bad, '%s: every number of the page == %s, bit for bit (differs: %s)' % (name, what, bad))


module = None
for name in ['illustrated', 'causal', 'window', 'key_padding', 'non_finite', 'statquest']:
    path = os.path.join(CASES, name + '.json')
    html = os.path.join(OUT, name + '.html')
    js_html = json.loads(run('attend', path, '--json', '--html', html))
    d = page_data(html)
    edit = d.get('edit', {})
    if module is None:
        module = 'qkv was' not in edit.get('why', '')
        print('the tool was built %s the pages\' WebAssembly module' % ('with' if module else 'without'))
    arith = 'core' if module else 'runtime'
    check(edit.get('arithmetic') == arith and ('module' in edit) == module,
          '%s: --html is %s, in the %s\'s arithmetic (edit: arithmetic %r, why %r)'
          % (name, 'editable' if module else 'not editable', arith, edit.get('arithmetic'), edit.get('why')))
    check(('in the core\'s arithmetic' in d['intro']) == module and ('runtime path\'s' in d['intro']) != module,
          '%s: the page says which arithmetic its numbers are in: %r' % (name, d['intro'].split('\n')[-1]))
    ref = json.loads(run('attend', path, '--json', '--arithmetic', arith))
    compare(name, d, ref, '--arithmetic %s --json' % arith)
    check(js_html.get('arithmetic', 'runtime') == arith and js_html == ref,
          '%s: --json with --html is the page\'s arithmetic (%s)' % (name, arith))
    if module:  # the runtime's page on request: its numbers, not editable, and it says why
        html = os.path.join(OUT, name + '_runtime.html')
        run('attend', path, '--html', html, '--arithmetic', 'runtime')
        d = page_data(html)
        check(d['edit'].get('arithmetic') == 'runtime' and 'module' not in d['edit'] and
              '--arithmetic runtime' in d['edit'].get('why', ''),
              '%s: --arithmetic runtime --html is the runtime\'s page, not editable, saying why: %r' % (name, d['edit']))
        compare(name + ' (--arithmetic runtime)', d, json.loads(run('attend', path, '--json')), '--json (the runtime)')
        rt = json.loads(run('attend', path, '--json'))
        cells = [share(flat(rt[k]), flat(ref[k]), ref['queries']['dtype']) for k in
                 ['queries', 'keys', 'values', 'scores', 'weights', 'context', 'output']]
        print('  %-12s the runtime path and the core\'s arithmetic share the bits of %d of %d cells' % (
            name, sum(c[0] for c in cells), sum(c[1] for c in cells)))

# chapter two's cases (RoPE, ALiBi, a bias, grouped-query heads, cross-attention): their pages are
# editable too (with the module), in the core's arithmetic, every number --arithmetic core --json's
# (and a float16 case: its page rounds a typed number to float16, the module's qkv_round_float16)
for name in ['rope', 'alibi', 'bias', 'kv_heads', 'chapter_two', 'arithmetic_half']:
    path = os.path.join(CASES, name + '.json')
    html = os.path.join(OUT, name + '.html')
    run('attend', path, '--html', html)
    d = page_data(html)
    arith = 'core' if module else 'runtime'
    if module:
        check(d['edit'].get('round') == ('float16' if name == 'arithmetic_half' else ''),
              '%s: the page says what a typed number is rounded to: %r' % (name, d['edit'].get('round')))
    check(d['edit'].get('arithmetic') == arith and ('module' in d['edit']) == module,
          '%s: the page is %s, in the %s\'s arithmetic: %r' % (name, 'editable' if module else 'not editable', arith,
                                                              d['edit'].get('why')))
    compare(name, d, json.loads(run('attend', path, '--json', '--arithmetic', arith)), '--arithmetic %s --json' % arith)

# --- 3. the backward in the core's arithmetic (docs/cli.md, "The backward")
GRADS = ['d_output', 'd_wo', 'd_bo', 'd_concat', 'd_weights', 'D', 'd_scaled_scores', 'd_queries', 'd_keys',
         'd_values', 'd_wq', 'd_bq', 'd_wk', 'd_bk', 'd_wv', 'd_bv', 'd_x']
FORWARD = ['scale', 'mask', 'queries', 'keys', 'values', 'scores', 'scaled_scores', 'weights', 'context', 'concat',
           'output']


def rounded(dtype):
    """one operation's result rounded to dtype: a float32 sum or product computed in double and
    rounded once is the float32 operation's (53 >= 2 * 24 + 2: double rounding is innocuous)"""
    return (lambda v: struct.unpack('<f', struct.pack('<f', v))[0]) if dtype == 'float32' else (lambda v: v)


for name in ['backward_hand', 'backward_hand64', 'backward_heads', 'backward_nan', 'backward_sum']:
    path = os.path.join(CASES, name + '.json')
    # the runtime path is the default, unchanged by --arithmetic runtime (its numbers are checked
    # by tests/cli/attend/backward_*.expect and attend_backward_test.py)
    check(run('attend', path, '--json') == run('attend', path, '--json', '--arithmetic', 'runtime') and
          run('attend', path) == run('attend', path, '--arithmetic', 'runtime'),
          '%s: --arithmetic runtime prints what the default does' % name)
    rt = json.loads(run('attend', path, '--json'))
    js = json.loads(run('attend', path, '--json', '--arithmetic', 'core'))
    dtype = js['queries']['dtype']
    check(js['arithmetic'] == 'core' and [k for k in GRADS if k in js] == [k for k in GRADS if k in rt] and
          all(js[k]['shape'] == rt[k]['shape'] for k in GRADS if k in rt),
          '%s: --arithmetic core --json has the runtime\'s gradients, with their shapes' % name)
    # the forward is the one the core computes without d_output, bit for bit
    case = json.load(open(path))
    del case['d_output']
    fwd_path = os.path.join(OUT, name + '_forward.json')
    json.dump(case, open(fwd_path, 'w'))
    fwd = json.loads(run('attend', fwd_path, '--json', '--arithmetic', 'core'))
    check(all(same(flat(js[k]), flat(fwd[k]), dtype) for k in FORWARD),
          '%s: with d_output the core\'s forward is the one without it, bit for bit' % name)
    # D and dS from the run's own dP and P, in the core's order (core/softmax_backward.hpp): D =
    # dP P summed left to right over the keys whose weight is not 0; dS = P (dP - D), 0 where P is
    # 0 or the scaled score -inf; each operation rounded to the case's type
    rd = rounded(dtype)
    H, T = js['weights']['shape'][0], js['weights']['shape'][1]
    P, dP = js['weights']['data'], js['d_weights']['data']
    ss, Dj, dSj = js['scaled_scores']['data'], js['D']['data'], js['d_scaled_scores']['data']
    want_D, want_dS, got_D, got_dS = [], [], [], []
    for h in range(H):
        for i in range(T):
            p, dp = [number(v) for v in P[h][i]], [number(v) for v in dP[h][i]]
            terms = [rd(a * b) for a, b in zip(dp, p) if b != 0]
            D = terms[0] if terms else 0.0
            for e in terms[1:]:
                D = rd(D + e)
            want_D.append(D)
            got_D.append(number(Dj[h][i]))
            for j in range(T):
                masked = p[j] == 0 or number(ss[h][i][j]) == -math.inf
                want_dS.append(0.0 if masked else rd(p[j] * rd(dp[j] - D)))
                got_dS.append(number(dSj[h][i][j]))
    check(same(got_D, want_D, dtype) and same(got_dS, want_dS, dtype),
          '%s: --arithmetic core\'s D and d_scaled_scores are the core\'s sums of its d_weights and weights, '
          'bit for bit' % name)
    n, total = share([v for k in GRADS if k in rt for v in flat(rt[k])],
                     [v for k in GRADS if k in rt for v in flat(js[k])], dtype)
    print('  %-16s --arithmetic core\'s gradients share the runtime\'s bits in %d of %d cells' % (name, n, total))

# the page of a case with d_output: editable (with the module), its gradients the core's, bit for bit
path = os.path.join(CASES, 'backward_heads.json')
html = os.path.join(OUT, 'backward_heads.html')
run('attend', path, '--html', html)
d = page_data(html)
arith = 'core' if module else 'runtime'
js = json.loads(run('attend', path, '--json', '--arithmetic', arith))
M, H = d['matrices'], js['weights']['shape'][0]
check(d['edit'].get('arithmetic') == arith and (d['edit'].get('grad_input') == 'd_output') == module and
      all(v[0] in M for v in d['edit'].get('grad_outputs', [])),
      'backward_heads: the page with gradients is %s, d_output an input and every gradient view a page matrix (%r)'
      % ('editable' if module else 'not editable', d['edit'].get('why')))
dtype = js['queries']['dtype']
shown = {'d_wo': flat(js['d_wo']), 'd_bo': flat(js['d_bo']), 'd_concat': flat(js['d_concat']), 'd_x': flat(js['d_x'])}
for k in ['d_wq', 'd_bq', 'd_wv', 'd_bv', 'd_wk']:
    shown[k] = flat(js[k])
for h in range(H):
    for k in ['d_weights', 'D', 'd_scaled_scores']:
        shown['%s[%d]' % (k, h)] = flat(js[k]['data'][h])
bad = [k for k, v in shown.items() if not same([number(e) for e in M[k]['data']], v, dtype)]
check(not bad, 'backward_heads: every gradient of the page == --arithmetic %s --json\'s, bit for bit (differs: %s)'
      % (arith, bad))

# --- 4. the terms added to the scores, in the core's arithmetic: --arithmetic core's scaled scores
# from its own raw scores, derived here one operation at a time as runtime/attention.hpp's
# mask_scores adds them (and core/flat_attention.hpp's scale_and_mask): scale * score rounded, then
# + the bias (a -inf there masks), then + ALiBi's slope * (j - p) (slope rounded to the case's
# type, as --json's alibi_slopes prints it; p = i, or i + S - T aligned lower_right), each rounded
# once, then -inf where the mask says so. Bit for bit; a NaN as a NaN.
for name in ['alibi', 'bias', 'chapter_two', 'kv_heads']:
    path = os.path.join(CASES, name + '.json')
    case = json.load(open(path))
    js = json.loads(run('attend', path, '--json', '--arithmetic', 'core'))
    dtype = js['queries']['dtype']
    rd = rounded(dtype)
    H, T, S = js['scores']['shape']
    off = S - T if case.get('causal_alignment') == 'lower_right' else 0
    scale, mask = number(js['scale']), js['mask']['data'] if isinstance(js['mask'], dict) else js['mask']
    bias = [[number(v) for v in row] for row in case['bias']] if 'bias' in case else None
    slopes = [number(v) for v in flat(js['alibi_slopes'])] if case.get('alibi') else None
    want, got = [], []
    for h in range(H):
        for i in range(T):
            for j in range(S):
                v = rd(scale * number(js['scores']['data'][h][i][j]))
                if bias is not None:
                    b = bias[(h * T if len(bias) == H * T else 0) + i][j]
                    v = -math.inf if b == -math.inf else rd(v + b)
                if slopes is not None and v != -math.inf:
                    v = rd(v + rd(slopes[h] * (j - (i + off))))
                if mask[i][j]:
                    v = -math.inf
                want.append(v)
                got.append(number(js['scaled_scores']['data'][h][i][j]))
    check(same(got, want, dtype), '%s: --arithmetic core\'s scaled scores are scale * score + bias + ALiBi, '
          'masked, one rounding each, bit for bit' % name)
    rt = json.loads(run('attend', path, '--json'))
    cells = [share(flat(rt[k]), flat(js[k]), dtype) for k in
             ['queries', 'keys', 'values', 'scores', 'scaled_scores', 'weights', 'context', 'output']]
    print('  %-12s --arithmetic core and the runtime path share the bits of %d of %d cells' % (
        name, sum(c[0] for c in cells), sum(c[1] for c in cells)))

# --- 5. already-projected q, k, v in the core's arithmetic (flat::attend's q, k, v): a case of the
# queries, keys and values --arithmetic core computed for an x-and-weights case (before RoPE: its
# page's "queries before RoPE", "keys before RoPE", which the module rotates) gives, bit for bit,
# that case's scores, scaled scores, weights, context and concat: the steps after the projections
# are the same loops on the same numbers. A summarised page's editor computes from them
# (docs/pages.md, "The summarised attend page"). NaN as NaN (non_finite.json).
DROP = ['x', 'context', 'wq', 'wk', 'wv', 'bq', 'bk', 'bv', 'wo', 'bo', 'weight_layout', 'd_output', 'lengths']
for name in ['illustrated', 'causal', 'window', 'key_padding', 'non_finite', 'rope', 'alibi', 'bias', 'kv_heads',
             'chapter_two']:
    path = os.path.join(CASES, name + '.json')
    with open(path) as f:
        case = json.load(f)
    ref = json.loads(run('attend', path, '--json', '--arithmetic', 'core'))
    H = ref['scores']['shape'][0]
    q, k = ref['queries']['data'], ref['keys']['data']
    if 'rope' in case:  # the projections before the rotation: the page's (written in the core's arithmetic)
        if not module:
            continue
        html = os.path.join(OUT, name + '_projected.html')
        run('attend', path, '--html', html)
        M = page_data(html)['matrices']

        def rows(m):
            return [m['data'][i * m['cols']:(i + 1) * m['cols']] for i in range(m['rows'])]
        q, k = rows(M['queries before RoPE']), rows(M['keys before RoPE'])
    pcase = {key: v for key, v in case.items() if key not in DROP}
    pcase.update({'q': q, 'k': k, 'v': ref['values']['data'], 'dtype': ref['queries']['dtype'],
                  'scale': ref['scale']})
    if 'context_tokens' not in case and 'tokens' in case and len(k) != len(q):
        pcase.pop('tokens')
    ppath = os.path.join(OUT, name + '_projected.json')
    with open(ppath, 'w') as f:
        json.dump(pcase, f)
    got = json.loads(run('attend', ppath, '--json', '--arithmetic', 'core'))
    dtype = ref['queries']['dtype']
    bad = [key for key in ['queries', 'keys', 'values', 'scores', 'scaled_scores', 'weights', 'context', 'concat']
           if not same(flat(got[key]), flat(ref[key]), dtype)]
    check(got.get('arithmetic') == 'core' and not bad,
          '%s: --arithmetic core on its own q, k, v (already projected%s) == its steps after the projections, bit for '
          'bit (differs: %s)' % (name, ', before RoPE' if 'rope' in case else '', bad))

print('%d failure(s)' % len(failures) if failures else 'ok: --arithmetic core and the pages\' arithmetic')
sys.exit(1 if failures else 0)
