#!/usr/bin/env python3
"""attend_pages_test.py QKV CASES_DIR OUT_DIR: `qkv attend --html/--svg` for chapter two's
fields (issue 16), without a browser (tests/browser/page_test.py drives the same pages in chromium).

For each case: exit 0, nothing on stderr; the page's data (its qkv-data JSON) holds the tool's
numbers, read back from `qkv attend CASE --json` (with --arithmetic core for an editable page,
which is in the core's arithmetic: window.json), not recomputed:
  - the scaled, masked scores per head == --json's scaled_scores (the softmax's input, with the
    bias and ALiBi added and -inf where masked), the weights == --json's weights;
  - GQA: query head h's scores are the dot products with key/value head g = h / (heads / kv_heads)
    (how.bc = g d_k) and its context weighs that head's values (how.bc = g d_v);
  - RoPE: the queries and keys on the page are --json's rotated ones, explained by a rotation of
    "queries before RoPE" with the cos/sin tables (half_split/interleaved, rotary_dim);
  - ALiBi and bias: the added terms per head, by hand: alibi.json (1 head: slope 2^-8, the
    paper's rule for one head; scores 0 since wq = 0): added(i, j) = 2^-8 (j - i); bias.json: the
    case's bias;
  - the SVG heatmap hatches exactly the cells --json's mask masks, or that every head's
    scaled score is -inf (a -inf bias), in every head's panel (the page's hatching is checked in
    chromium by tests/browser/page_test.py);
and a bad case with --html still exits 2 naming the file and the field, writing nothing.
"""
import json
import os
import re
import struct
import subprocess
import sys
import xml.dom.minidom

QKV, CASES, OUT = sys.argv[1:4]
os.makedirs(OUT, exist_ok=True)
from checks import check, failures  # noqa: E402 (tests/cli/checks.py)


def run(*args):
    return subprocess.run([QKV, 'attend', *args], capture_output=True, text=True, timeout=60)


def f32(x):
    if isinstance(x, str):
        return {'-inf': float('-inf'), '-Infinity': float('-inf'), 'inf': float('inf'), 'Infinity': float('inf')}.get(x, float('nan'))
    return struct.unpack('<f', struct.pack('<f', x))[0]


def flat(rows):
    return [f32(v) for r in rows for v in r]


for case in ['chapter_two', 'rope', 'rope_interleaved', 'kv_heads', 'lower_right', 'window', 'alibi', 'bias']:
    path = os.path.join(CASES, case + '.json')
    spec = json.load(open(path))
    html, svg = os.path.join(OUT, case + '.html'), os.path.join(OUT, case + '.svg')
    p = run(path, '--html', html, '--svg', svg)
    check(p.returncode == 0 and p.stderr == '' and os.path.exists(html) and os.path.exists(svg),
          '%s: --html and --svg exit 0 and write both files (%d %s)' % (case, p.returncode, p.stderr))
    if p.returncode != 0:
        continue
    page = json.loads(re.search(r'<script type="application/json" id="qkv-data">(.*?)</script>', open(html).read(), re.S).group(1))
    # --json in the page's arithmetic: an editable page (window) is the core's (docs/pages.md)
    js = json.loads(run(path, '--json', '--arithmetic', page['edit'].get('arithmetic', 'runtime')).stdout)
    M = page['matrices']
    H, T, S = js['weights']['shape']
    HK = spec.get('kv_heads', H)
    dk = js['queries']['shape'][1] // H
    dvh = js['values']['shape'][1] // HK
    hs = (lambda h: '[%d]' % h) if H > 1 else (lambda h: '')
    for h in range(H):
        g = h // (H // HK)
        sc = M['scaled' + hs(h)]
        check([f32(v) for v in sc['data']] == flat(js['scaled_scores']['data'][h]),
              '%s: scaled%s on the page == --json scaled_scores[%d] (the runtime\'s softmax input)' % (case, hs(h), h))
        check([f32(v) for v in M['weights' + hs(h)]['data']] == flat(js['weights']['data'][h]),
              '%s: weights%s == --json weights[%d]' % (case, hs(h), h))
        how = M['scores' + hs(h)]['how']
        check(how['op'] == 'dot' and how['ac'] == h * dk and how['bc'] == g * dk and how['b'] == 'keys',
              '%s: scores%s are query head %d . key/value head %d (%s)' % (case, hs(h), h, g, how))
        how = M['context' + hs(h)]['how']
        check(how['op'] == 'matmul' and how['b'] == 'values' and how['bc'] == g * dvh,
              '%s: context%s weighs the values of key/value head %d (%s)' % (case, hs(h), g, how))
        if 'alibi' in spec or 'bias' in spec:
            check(M['scaled' + hs(h)]['how']['b'] == 'added' + hs(h), '%s: scaled%s adds added%s' % (case, hs(h), hs(h)))
    check([f32(v) for v in M['queries']['data']] == flat(js['queries']['data']) and
          [f32(v) for v in M['keys']['data']] == flat(js['keys']['data']), '%s: queries and keys on the page == --json\'s' % case)
    if 'rope' in spec:
        for mid in ('queries', 'keys'):
            how = M[mid]['how']
            r = spec['rope'].get('rotary_dim', 0) or dk
            check(how['op'] == 'rope' and how['a'] == mid + ' before RoPE' and how['n'] == dk and how['ac'] == r and
                  how['note'] == spec['rope'].get('layout', 'half_split'), '%s: %s are the rotation of %s before RoPE (%s)' % (case, mid, mid, how))
        # cos at the first query position by hand: rope.json's queries start at position 1: cos 1
        if case == 'rope':
            check(f32(M['cos (queries)']['data'][0]) == f32(0.5403023058681398), 'rope: cos (queries) at position 1 is cos 1 rounded to float')
    else:
        check('queries before RoPE' not in M and M['queries']['how']['op'] == 'dot', '%s: no rotation without rope' % case)
    if case == 'alibi':  # 1 head, slope 2^-8, scores 0 (wq = 0): added = 2^-8 (j - i), the scaled scores too
        want = [2 ** -8 * (j - i) for i in range(T) for j in range(S)]
        check([f32(v) for v in M['added']['data']] == want, 'alibi: added(i, j) = 2^-8 (j - i): %s' % M['added']['data'])
    if case == 'bias':
        check([f32(v) for v in M['added']['data']] == flat(spec['bias']), 'bias: added = the case\'s bias: %s' % M['added']['data'])
    if 'alibi' not in spec and 'bias' not in spec:
        check(not any(k.startswith('added') for k in M), '%s: no added terms without bias or ALiBi' % case)
    # the hatched cells: --json's mask, or -inf in every head's scaled scores
    want = sorted((i, j) for i in range(T) for j in range(S)
                  if js['mask']['data'][i][j] or all(js['scaled_scores']['data'][h][i][j] == '-Infinity' for h in range(H)))
    doc = xml.dom.minidom.parse(svg)
    # a heatmap cell has a <title> (its tooltip); the legend's hatched swatch has none
    rects = [r for r in doc.getElementsByTagName('rect') if r.getAttribute('fill').endswith('-masked)') and r.getElementsByTagName('title')]
    check(len(rects) == len(want) * H, '%s: the SVG hatches %d cells per head (%d heads), got %d' % (case, len(want), H, len(rects)))
    print('   ', case, 'masked cells', want)

# a bad case still fails before any page is made
bad = os.path.join(CASES, 'bad_window.json')
out = os.path.join(OUT, 'never.html')
p = run(bad, '--html', out)
check(p.returncode == 2 and p.stdout == '' and "bad_window.json: field 'window'" in p.stderr and not os.path.exists(out),
      '--html of a bad case: exit 2 naming the file and the field, nothing written (%s)' % p.stderr.strip())

if failures:
    print('\n%d checks failed' % len(failures))
    sys.exit(1)
print('all checks passed')
