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
   editable. A page the core does not compute (rope.json) keeps the runtime's numbers. When the
   tool was built without the WebAssembly module, no page is editable and every page is the
   runtime's (checked as such).
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

# a page the core does not compute keeps the runtime's numbers, and its arithmetic says so
html = os.path.join(OUT, 'rope.html')
run('attend', os.path.join(CASES, 'rope.json'), '--html', html)
d = page_data(html)
check(d['edit'].get('arithmetic') == 'runtime' and 'RoPE' in d['edit'].get('why', ''),
      'rope: the page is the runtime\'s and says why it is not editable: %r' % d['edit'])
compare('rope', d, json.loads(run('attend', os.path.join(CASES, 'rope.json'), '--json')), '--json (the runtime)')

print('%d failure(s)' % len(failures) if failures else 'ok: --arithmetic core and the pages\' arithmetic')
sys.exit(1 if failures else 0)
