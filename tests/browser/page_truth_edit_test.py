#!/usr/bin/env python3
"""page_truth_edit_test.py: the error against the truth after a learner's edit (issue 30).

    page_truth_edit_test.py QKV SOURCE_ROOT OUT_DIR

A `qkv explain` page with the 50-digit truth carries the truth module (wasm/qkv_truth.cpp:
reference/step_truth.hpp, the C++ the page's truth was written with). After an edit, a cell's
explanation shows its error against the truth of the learner's inputs, recomputed in the page.
Here, on pages that between them have every kind of step the truth knows (products with a bias,
the weights times the values, a scale and a division with masked scores, softmax, a residual
sum, relu, LayerNorm, a transpose, blocks and concatenations, the softmax's backward; 16's
flash output, m, l, L, recomputed weights and backward sums; 17's
embeddings and their backward, cross entropy, column sums and SGD), a cell of
an input is edited in Chromium, and every shown cell of every matrix with a truth is hovered: its
truth line is checked against an oracle that shares no code with qkv, Python's `decimal` at 60
digits, following the page's steps (E.steps) from the page's own inputs after the edit:

- the truth's 20 digits: within 1e-18 of the oracle, relative (20 digits rounded: 5e-20 of the
  leading digit, so at most 5e-19 of the value; the oracle and the 50-digit truth differ by
  below 1e-44);
- its error in ulps: (value - truth) / ulp(truth) from the oracle within 1e-6 ulp (the page's
  number is a double of the 50-digit quotient: 1e-16 relative; the oracle's truth differs from
  the 50-digit one by far less than 1e-30 ulp);
- no line where the chain reaches a grey matrix; before any edit and after Reset the page's own
  truth lines are shown.
Exit 77 (skipped) without chromium, or when the tool was built without the truth module.
"""
import decimal
import os
import subprocess
import sys
import time

QKV, ROOT, OUT = sys.argv[1:4]
sys.path.insert(0, os.path.join(ROOT, 'tests', 'support'))
import browser  # noqa: E402
if browser.missing():
    print('SKIP: ' + browser.missing())
    sys.exit(77)

check = browser.check
browser.print_limit = 20
os.makedirs(OUT, exist_ok=True)
D = decimal.Decimal
ctx = decimal.Context(prec=60, Emin=-10**6, Emax=10**6)
decimal.setcontext(ctx)
NEG_INF = D('-Infinity')

# the pages: each edit sets cell (0, 0) of the page's first input (or EDITED's) to 1.75 times its value + 0.125
PAGES = [
    'illustrated',     # products, the scale, softmax, the weights times the values
    'masking',         # masked scores (-inf), a fully masked row
    'encoder_layer',   # biases, the residual sums, relu, LayerNorm
    'from_scratch',    # the division by float32(sqrt(24)), blocks, concatenations
    'flash_backward',  # the softmax's backward: D, dS; flash's m, l, O, L, P and its sums
    'one_training_step',  # embeddings and their backward, cross entropy, column sums, SGD, AdamW
]

# the input edited where the first is not the one that reaches the steps: 16's first input is x,
# which only d_W_query reads; its keys reach flash's m, l, O, L, weights and every gradient
EDITED = {'flash_backward': 'attn.keys'}


def dec(v):
    """a float's exact value"""
    return D(v) if v == v and abs(v) != float('inf') else (D('NaN') if v != v else (NEG_INF if v < 0 else D('Infinity')))


def oracle(kind, a, b, c, z, scalar, computed):
    """one step in 60 digits: core/flat_steps.hpp's kinds as reference/step_truth.hpp states them"""
    R, C, AS, BS, N, AC, BR, BC = z
    out = [D(0)] * (R * C)
    if kind in (1, 2, 3, 11):  # dot, matmul, attended, row_dot
        for i in range(R):
            for j in range(C):
                s = D(0)
                for t in range(N):
                    bk = j * BS + BC + t if kind == 1 else i * BS + BC + t if kind == 11 else (BR + t) * BS + BC + j
                    s += a[i * AS + AC + t] * b[bk]
                if c is not None and kind in (1, 2):
                    s += c[j]
                out[i * C + j] = s
    elif kind in (4, 5):  # scale, divide; -inf where the step masked
        for q in range(R * C):
            if computed[q] == float('-inf'):
                out[q] = NEG_INF
                continue
            out[q] = a[q] / D(scalar) if kind == 5 else D(scalar) * a[q]
            if c is not None and not out[q].is_infinite():
                out[q] += c[q]
    elif kind in (6, 14):  # softmax (the naive one: the same value)
        for i in range(R):
            row = a[i * C:(i + 1) * C]
            top = max(row)
            ex = [D(0) if x.is_infinite() else (x - top).exp() for x in row]
            tot = sum(ex, D(0))
            for j in range(C):
                out[i * C + j] = ex[j] / tot if tot > 0 else D(0)
    elif kind == 17:  # softmax_all: one softmax over every cell
        top = max(a)
        ex = [D(0) if x.is_infinite() else (x - top).exp() for x in a]
        tot = sum(ex, D(0))
        out = [e / tot if tot > 0 else D(0) for e in ex]
    elif kind == 12:  # softmax_backward
        for i in range(R):
            for j in range(C):
                p = a[i * C + j]
                out[i * C + j] = D(0) if p == 0 else p * (b[i * C + j] - c[i])
    elif kind == 15:  # block
        out = [a[(BR + i) * AS + BC + j] for i in range(R) for j in range(C)]
    elif kind == 13:  # hconcat
        out = [a[i * AS + j] if j < AS else b[i * BS + j - AS] for i in range(R) for j in range(C)]
    elif kind == 7:
        out = [x + y for x, y in zip(a, b)]
    elif kind == 8:
        out = [D(0) if x < 0 else x for x in a]
    elif kind == 10:  # transpose: a is (C, R)
        out = [a[j * R + i] for i in range(R) for j in range(C)]
    elif kind == 9:  # LayerNorm, the biased variance
        for i in range(R):
            row = a[i * C:(i + 1) * C]
            mean = sum(row, D(0)) / C
            var = sum(((x - mean) * (x - mean) for x in row), D(0)) / C
            inv = 1 / (var + D(scalar)).sqrt()
            for j in range(C):
                out[i * C + j] = (row[j] - mean) * inv * (b[j] if b is not None else 1) + (c[j] if c is not None else 0)
    elif kind in (40, 42):  # cast: the same number; sgd: w - lr g
        out = list(a) if kind == 40 else [w - D(scalar) * g for w, g in zip(a, b)]
    elif kind == 21:  # flash's output: the exact softmax of each row of a (AS keys) times b
        for i in range(R):
            row = a[i * AS:(i + 1) * AS]
            top = max(row)
            ex = [D(0) if x == NEG_INF else (x - top).exp() for x in row]
            tot = sum(ex, D(0))
            for j in range(C):
                s = sum((e * b[t * BS + j] for t, e in enumerate(ex) if row[t] != NEG_INF), D(0))
                out[i * C + j] = s / tot if tot > 0 else D(0)
    elif kind in (46, 47):  # flash's m and l: the row's maximum, sum e^(s - m) over it (AS keys)
        for i in range(R):
            row = a[i * AS:(i + 1) * AS]
            top = max(row)
            out[i] = top if kind == 46 else sum(((x - top).exp() for x in row if x != NEG_INF), D(0))
    elif kind in (48, 50):  # P = e^(s - m) / l (b = m, c = l), or e^(s - L) (b = L); 0 where masked
        for i in range(R):
            for j in range(C):
                x = a[i * C + j]
                dead = c[i] == 0 if kind == 48 else b[i] == NEG_INF
                out[i * C + j] = D(0) if dead or x == NEG_INF else (x - b[i]).exp() / (c[i] if kind == 48 else 1)
    elif kind == 49:  # L = m + log l
        out = [NEG_INF if lv == 0 else mv + lv.ln() for mv, lv in zip(a, b)]
    elif kind in (51, 52):  # flash's sums over the keys (dQ) or the queries (dK, dV), masked skipped
        for r in range(R):
            for j in range(C):
                at = [(r * AS + t) if kind == 51 else (t * AS + r) for t in range(N)]
                out[r * C + j] = sum((a[k] * b[t * BS + j] for t, k in enumerate(at) if c[k] != NEG_INF), D(0))
    elif kind == 41:  # column sums of a (N rows)
        out = [sum((a[i * C + j] for i in range(N)), D(0)) for j in range(C)]
    elif kind == 43:  # cross entropy: log(sum e^(l - m)) - (l_t - m), the logits (R, N)
        for i in range(R):
            row = a[i * N:(i + 1) * N]
            top = max(row)
            out[i] = sum(((x - top).exp() for x in row), D(0)).ln() - (row[int(b[i])] - top)
    elif kind == 45:  # embedding: table a's rows ids(k) (b)
        out = [a[int(b[t]) * C + j] for t in range(R) for j in range(C)]
    elif kind == 44:  # embedding_backward: 0, then row ids(t) += a's row t (N of them)
        for t in range(N):
            for j in range(C):
                out[int(b[t]) * C + j] += a[t * C + j]
    elif kind == 57:  # AdamW's first step: w decay + step_size m / (sqrt(v) / sqrt(bc2) + eps)
        for q in range(R * C):
            m, v = c[2] * b[q], c[4] * b[q] * b[q]
            out[q] = a[q] * c[0] + c[5] * m / (v.sqrt() / c[6] + c[7])
    else:
        return None
    return out


def truths(edit, data, stale):
    """every step's 60-digit truth from the page's current numbers, by id (None: none)"""
    steps = {s['id']: s for s in edit['steps']}
    memo = {}

    def of(mid):
        if not mid:
            return None
        if mid in memo:
            return memo[mid]
        memo[mid] = None
        if mid in stale:
            return None
        st = steps.get(mid)
        if st is None:
            memo[mid] = [dec(v) for v in data[mid]]
            return memo[mid]
        ops = [of(st[k]) if st[k] else None for k in ('a', 'b', 'c')]
        if any(st[k] and ops[n] is None for n, k in enumerate(('a', 'b', 'c'))):
            return None
        memo[mid] = oracle(st['kind'], ops[0], ops[1], ops[2], st['sizes'], D(st['scalar']), data[mid])
        return memo[mid]
    return of


def ulp(t, dtype):
    """the ulp of dtype at the truth t (a power of two, subnormal floor)"""
    digits, emin = (24, -126) if dtype == 'float32' else (53, -1022)
    e = int(abs(t).log10() / D(2).log10()) + 2  # an upper estimate of frexp's exponent, then down
    while e - 1 > emin and D(2) ** (e - 1) > abs(t):
        e -= 1
    e = max(e, emin + 1)
    return D(2) ** (e - digits)


DATA_JS = '''var M = window.qkvPage.data.matrices, out = {};
Object.keys(M).forEach(function (id) { var m = M[id]; if (m.data && (m.dtype === 'float32' || m.dtype === 'float64'))
  out[id] = m.data.map(function (v) { return v !== v ? 'nan' : v === Infinity ? 'inf' : v === -Infinity ? '-inf' : v; }); });
return out;'''


def page_data(driver):
    num = {'nan': float('nan'), 'inf': float('inf'), '-inf': float('-inf')}
    return {k: [num.get(v, v) if isinstance(v, str) else float(v) for v in vs]
            for k, vs in driver.execute_script(DATA_JS).items()}


def truth_lines(driver, cells):
    """per cell: (truth text, data-ulps) of its truth line, or None"""
    out = []
    for tip in driver.execute_script('return window.qkvPage.tips(arguments[0]);', cells):
        line = [t for cls, t in tip if 'x-truth' in cls]
        out.append(line[0] if line else None)
    return out


def main():
    driver = browser.start(logs=True)
    counts = {'cells': 0, 'none': 0}
    for name in PAGES:
        html = os.path.join(OUT, 'truth_%s.html' % name)
        r = subprocess.run([QKV, 'explain', name, '--html', html], capture_output=True, text=True)
        if not check(r.returncode == 0, '%s: qkv explain --html: %s' % (name, r.stderr)):
            continue
        browser.open_page(driver, html, logs=True)
        t0 = time.time()
        browser.wait_editable(driver, 20)
        edit = driver.execute_script('return window.qkvPage.data.edit;')
        if driver.execute_script('return document.documentElement.getAttribute("data-qkv-editable")') != '1':
            print('SKIP: %s is not editable: %s' % (name, edit.get('why')))
            return 77
        if not edit.get('truth_module'):
            print('SKIP: the tool was built without the truth module')
            return 77
        print('%s: truth module %d bytes; page %d bytes' % (name, edit['truth_module_bytes'], os.path.getsize(html)))
        while time.time() - t0 < 20 and not driver.execute_script('return window.qkvPage.editor().truth && true;'):
            time.sleep(0.05)
        M = driver.execute_script('var M = window.qkvPage.data.matrices, o = {}; Object.keys(M).forEach(function (id) {'
                                  ' o[id] = {rows: M[id].rows, cols: M[id].cols, dtype: M[id].dtype, truth: !!M[id].truth}; }); return o;')
        stale = {s['id'] for s in edit['stale']}
        shown = driver.execute_script('return [].map.call(document.querySelectorAll("td[data-m]"), function (td) {'
                                      ' return [td.getAttribute("data-m"), +td.getAttribute("data-i"), +td.getAttribute("data-j")]; });')
        cells = [c for c in shown if M[c[0]]['truth'] and c[0] not in stale]
        before = truth_lines(driver, cells[:40])
        check(all(b is not None for b in before), '%s: before an edit, the page\'s own truth lines' % name)
        mid, i, j = EDITED.get(name, edit['inputs'][0]), 0, 0
        v = driver.execute_script('return window.qkvPage.data.matrices[arguments[0]].data[0];', mid) * 1.75 + 0.125
        driver.execute_script('window.qkvPage.editor().set(arguments[0], arguments[1], arguments[2], arguments[3]);',
                              mid, i, j, v)
        # the truth module compiles beside the editor: wait until it answers
        t1 = time.time()
        while time.time() - t1 < 20 and not driver.execute_script(
                'var e = window.qkvPage.editor(); return e.truth(arguments[0], arguments[1], arguments[2]) !== undefined;',
                cells[0][0], cells[0][1], cells[0][2]):
            time.sleep(0.05)
        data = page_data(driver)
        of = truths(edit, data, stale)
        t2 = time.time()
        lines = truth_lines(driver, cells)
        hover_s = time.time() - t2
        for (cid, ci, cj), line in zip(cells, lines):
            t = of(cid)
            where = '%s: %s(%d, %d) after %s(%d, %d) = %r' % (name, cid, ci, cj, mid, i, j, v)
            if t is None:
                counts['none'] += 1
                check(line is None, where + ': no truth (its chain reaches a grey matrix), the page shows %r' % line)
                continue
            k = ci * M[cid]['cols'] + cj
            tv, val = t[k], data[cid][k]
            if line is None:
                check(False, where + ': no truth line; the oracle has one (%s)' % tv)
                continue
            text = line.split(' = ', 1)[1].split(')')[0]
            ulps_shown = line.split('): ', 1)[1].split(' ulp')[0].replace('\u2212', '-')
            counts['cells'] += 1
            if tv.is_infinite() or tv.is_nan():
                check(text in ('inf', '-inf', 'nan'), where + ': truth %s, the page %s' % (tv, text))
                continue
            got = D(text)
            check(abs(got - tv) <= abs(tv) * D('1e-18') or (tv == 0 and got == 0),
                  where + ': the truth %s, the oracle %s' % (text, tv))
            if val != val or abs(val) == float('inf') or tv == 0:
                continue
            want = (dec(val) - tv) / ulp(tv, M[cid]['dtype'])
            ulps = driver.execute_script(
                'var e = window.qkvPage.editor(); return e.truth(arguments[0], arguments[1], arguments[2]).ulps;', cid, ci, cj)
            check(abs(D(ulps) - want) <= D('1e-6') * max(1, abs(want)),
                  where + ': %s ulp (shown %s), the oracle %s' % (ulps, ulps_shown, want))
        print('  %d cells of %d matrices hovered after %s(%d, %d) = %r in %.2f s' % (
            len(cells), len({c[0] for c in cells}), mid, i, j, v, hover_s))
        driver.execute_script('window.qkvPage.editor().reset();')
        check(truth_lines(driver, cells[:40]) == before, '%s: Reset brings back the page\'s own truth lines' % name)
        errors, requests, _ = browser.page_logs(driver, html)
        check(not errors and not requests, '%s: no console message or network request: %s %s' % (name, errors, requests))
    print('%d truth lines checked against the 60-digit oracle, %d cells without a truth' % (counts['cells'], counts['none']))
    browser.finish()
    return 0


if __name__ == '__main__':
    sys.exit(main())
