#!/usr/bin/env python3
"""attend_backward_test.py QKV FIXTURES CASES OUT: `qkv attend` with `d_output` (docs/cli.md, "The
backward") against PyTorch 1.13 autograd, and its hand-derived case.

1. PyTorch: the "mha" cases of tests/data/backward/backward_torch.json (made by
   scripts/fixtures/torch_backward_fixtures.py: nn.MultiheadAttention(bias=True), self-attention,
   out.backward(d_output), float32 and float64, one with causal and key padding) written as
   `qkv attend` cases (out_in weights, biases, wo, bo, heads, causal, key_padding, d_output);
   every gradient of `--json` (d_x, d_wq, d_wk, d_wv, d_bq, d_bk, d_bv, d_wo, d_bo) must be
   within TWICE the first-order bound of tests/runtime/backward_reference.hpp of PyTorch's
   (both runs are within the bound of the exact value, so they are within twice it of each
   other; tests/runtime/backward_torch_test.cpp checks each against a long double truth).
   The bound is the header's, recomputed here from the inputs in double (magnitudes only:
   their own rounding is second order), term by term (see bound() below); its cancellation
   term (|dP| + |D|, not |dP - D|) is what makes float32's dQ hold.
   float64 cases: the inputs are the float32 draws, exactly (each 9-digit decimal rounded to
   float32 here, then written in full), as the fixture script gives them to autograd.
   Also --json's D = rowsum(d_context ∘ context) against rowsum(dP ∘ P) from its d_weights and
   weights, within the first-order bound of both sums (below).
   Each case runs twice: `--arithmetic runtime` (runtime/multihead_backward.hpp) and
   `--arithmetic core` (core/flat_attention_backward.hpp, the pages' WebAssembly module's
   backward; tests/wasm/module_test.py ties it to the core's templates bit for bit). The bound
   holds for both: it is first order for any evaluation whose sums are serial chains of at most
   the lengths it counts (the core's are single left-to-right chains, each as long as the
   runtime's or shorter) and whose exp is within the 2 ulp it allows (the core's qkv::exp,
   docs/numerics.md); the core's D is rowsum(dP ∘ P) itself, the second of D's two forms above.
2. The hand-derived case tests/cli/attend/backward_hand64.json (float64; its derivation is in
   tests/cli/attend/backward_hand.expect's "why"), in both arithmetics: every gradient against the closed forms in
   sigma = e / (1 + e), within 16 ulp of float64 (a handful of roundings each: exp, one
   division, sums of at most 2 terms; 16 u bounds them with room, and a wrong formula is off by
   0.07 or more).
Exit 1 on any failure."""
import json
import math
import os
import struct
import subprocess
import sys

from checks import flat  # tests/cli/checks.py (this script's folder is on the path)

QKV, FIXTURES, CASES, OUT = sys.argv[1:5]
os.makedirs(OUT, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        if len(failures) <= 30:
            print('FAIL:', what)


def f32(x):
    return struct.unpack('f', struct.pack('f', x))[0]


def run_json(case, name, arithmetic):
    path = os.path.join(OUT, name + '.json')
    with open(path, 'w') as f:
        json.dump(case, f)
    p = subprocess.run([QKV, 'attend', path, '--json', '--arithmetic', arithmetic], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        failures.append('%s: exit %d: %s' % (name, p.returncode, p.stderr.strip()))
        return None
    return json.loads(p.stdout)


def mat(flat, rows, cols):
    return [flat[i * cols:(i + 1) * cols] for i in range(rows)]


def flat_of(t):
    return [float(x) for x in flat(t)]


def bound(c, u, x, wq, wk, wv, bq, bk, bv, wo, bo, dy, padding):
    """the first-order bound of tests/runtime/backward_reference.hpp (its header comment), for a
    run in a type of unit roundoff u: each gradient's elementwise bound, from magnitudes"""
    T, E, H = c['T'], c['E'], c['heads']
    dh = E // H
    g = lambda n: n * u / (1 - n * u)  # noqa: E731  gamma(n), Higham 3.1
    causal = c['causal']
    allowed = lambda i, j: not padding[j] and (not causal or j <= i)  # noqa: E731
    # projections P = x Wᵀ + b (out_in): error gamma(E + 1) (|x| |W|ᵀ + |b|)
    proj, eproj = [], []
    for W, b in ((wq, bq), (wk, bk), (wv, bv)):
        p = [[sum(x[i][m] * W[j][m] for m in range(E)) + b[j] for j in range(E)] for i in range(T)]
        e = [[g(E + 1) * (sum(abs(x[i][m] * W[j][m]) for m in range(E)) + abs(b[j])) for j in range(E)] for i in range(T)]
        proj.append(p)
        eproj.append(e)
    q, k, v = proj
    eq, ek, ev = eproj
    # d_concat = dY Wo: gamma(E) |dY| |Wo|
    dO = [[sum(dy[i][m] * wo[m][j] for m in range(E)) for j in range(E)] for i in range(T)]
    eo = [[g(E) * sum(abs(dy[i][m] * wo[m][j]) for m in range(E)) for j in range(E)] for i in range(T)]
    scale = 1 / math.sqrt(dh)
    O = [[0.0] * E for _ in range(T)]
    eO = [[0.0] * E for _ in range(T)]
    dQ, edQ = [[0.0] * E for _ in range(T)], [[0.0] * E for _ in range(T)]
    dK, edK = [[0.0] * E for _ in range(T)], [[0.0] * E for _ in range(T)]
    dV, edV = [[0.0] * E for _ in range(T)], [[0.0] * E for _ in range(T)]
    blocks = (T + 127) // 128
    for h in range(H):
        cs = range(h * dh, (h + 1) * dh)
        for i in range(T):
            vis = [j for j in range(T) if allowed(i, j)]
            s = {j: scale * sum(q[i][c] * k[j][c] for c in cs) for j in vis}
            es = {j: scale * (g(dh + 1) * sum(abs(q[i][c] * k[j][c]) for c in cs) +
                              sum(eq[i][c] * abs(k[j][c]) + abs(q[i][c]) * ek[j][c] for c in cs)) + 4 * u * abs(s[j])
                  for j in vis}
            m = max(s.values())
            ex = {j: math.exp(s[j] - m) for j in vis}
            tot = sum(ex.values())
            P = {j: ex[j] / tot for j in vis}
            rho = 2 * max(es[j] + u * abs(s[j] - m) for j in vis) + g(T + 3 * blocks + 12)
            for c in cs:
                O[i][c] = sum(P[j] * v[j][c] for j in vis)
                eO[i][c] = (rho + g(T + 2)) * sum(P[j] * abs(v[j][c]) for j in vis) + sum(P[j] * ev[j][c] for j in vis)
            dP = {j: sum(dO[i][c] * v[j][c] for c in cs) for j in vis}
            edP = {j: g(dh) * sum(abs(dO[i][c] * v[j][c]) for c in cs) +
                   sum(eo[i][c] * abs(v[j][c]) + abs(dO[i][c]) * ev[j][c] for c in cs) for j in vis}
            D = sum(dO[i][c] * O[i][c] for c in cs)
            eD = max(g(dh) * sum(abs(dO[i][c] * O[i][c]) for c in cs) + sum(abs(dO[i][c]) * eO[i][c] + eo[i][c] * abs(O[i][c]) for c in cs),
                     g(T) * sum(abs(dP[j] * P[j]) for j in vis) + sum(abs(dP[j]) * P[j] * rho + P[j] * edP[j] for j in vis))
            dS = {j: scale * P[j] * (dP[j] - D) for j in vis}
            edS = {j: scale * P[j] * ((rho + 4 * u) * (abs(dP[j]) + abs(D)) + edP[j] + eD) for j in vis}
            for c in cs:
                dQ[i][c] = sum(dS[j] * k[j][c] for j in vis)
                edQ[i][c] = g(T + 4) * sum(abs(dS[j] * k[j][c]) for j in vis) + sum(edS[j] * abs(k[j][c]) + abs(dS[j]) * ek[j][c] for j in vis)
            for j in vis:
                for c in cs:
                    dK[j][c] += dS[j] * q[i][c]
                    edK[j][c] += g(T) * abs(dS[j] * q[i][c]) + edS[j] * abs(q[i][c]) + abs(dS[j]) * eq[i][c]
                    dV[j][c] += P[j] * dO[i][c]
                    edV[j][c] += (rho + g(T)) * P[j] * abs(dO[i][c]) + P[j] * eo[i][c]
    b = {}
    # weights: dW = dYᵀ input (out_in), dW(r, c) = sum_i dY(i, r) in(i, c): gamma(T) sum |dY in| + sum (edY |in| + |dY| ein)
    def wgrad(d, ed, inp, ein):
        return [[g(T) * sum(abs(d[i][r] * inp[i][cc]) for i in range(T)) +
                 sum(ed[i][r] * abs(inp[i][cc]) + abs(d[i][r]) * (ein[i][cc] if ein else 0) for i in range(T))
                 for cc in range(E)] for r in range(E)]

    def bgrad(d, ed):
        return [g(T) * sum(abs(d[i][r]) for i in range(T)) + sum(ed[i][r] for i in range(T)) for r in range(E)]
    zero = [[0.0] * E for _ in range(T)]
    b['d_wq'], b['d_wk'], b['d_wv'] = wgrad(dQ, edQ, x, None), wgrad(dK, edK, x, None), wgrad(dV, edV, x, None)
    b['d_bq'], b['d_bk'], b['d_bv'] = bgrad(dQ, edQ), bgrad(dK, edK), bgrad(dV, edV)
    b['d_wo'] = wgrad(dy, zero, O, eO)
    b['d_bo'] = bgrad(dy, zero)
    # d_x = dQ Wq + dK Wk + dV Wv, one chain of 3E terms: gamma(3E) sum |terms| + propagated
    b['d_x'] = [[g(3 * E) * sum(abs(d[i][m] * W[m][cc]) for d, W in ((dQ, wq), (dK, wk), (dV, wv)) for m in range(E)) +
                 sum(ed[i][m] * abs(W[m][cc]) for ed, W in ((edQ, wq), (edK, wk), (edV, wv)) for m in range(E))
                 for cc in range(E)] for i in range(T)]
    return b


def flatten(m):
    return [e for r in m for e in r] if m and isinstance(m[0], list) else list(m)


fixtures = json.load(open(FIXTURES))
names = {'d_x': 'd_x', 'd_wq': 'd_w_query', 'd_wk': 'd_w_key', 'd_wv': 'd_w_value', 'd_bq': 'd_b_query',
         'd_bk': 'd_b_key', 'd_bv': 'd_b_value', 'd_wo': 'd_w_output', 'd_bo': 'd_b_output'}
def check_case(c, case, inp, padding, name, arithmetic):
    """one fixture case in one arithmetic: every gradient within twice the bound of PyTorch's, D two ways"""
    T, E = c['T'], c['E']
    js = run_json(case, name + '_' + arithmetic, arithmetic)
    if js is None:
        return
    check(js.get('arithmetic', 'runtime') == arithmetic, '%s: --json names the arithmetic %r, asked %r'
          % (c['name'], js.get('arithmetic', 'runtime'), arithmetic))
    tag = '%s (--arithmetic %s)' % (c['name'], arithmetic)
    u = 2.0 ** -24 if c['dtype'] == 'float32' else 2.0 ** -53
    bd = bound(c, u, case['x'], case['wq'], case['wk'], case['wv'], inp['b_query'], inp['b_key'], inp['b_value'],
               case['wo'], inp['b_output'], case['d_output'], padding)
    for ours, theirs in names.items():
        got, want, b = flat_of(js[ours]), c[theirs], flatten(bd[ours])
        check(len(got) == len(want) == len(b), '%s: %s has %d numbers, PyTorch %d' % (tag, ours, len(got), len(want)))
        worst = 0.0
        for e, (x1, x2, bb) in enumerate(zip(got, want, b)):
            ok = abs(x1 - x2) <= 2 * bb
            worst = max(worst, abs(x1 - x2) / (2 * bb) if bb > 0 else (0 if x1 == x2 else math.inf))
            check(ok, '%s: %s[%d] = %r, PyTorch %r, %.3g apart, twice the bound %.3g' % (tag, ours, e, x1, x2, abs(x1 - x2), 2 * bb))
        print('%s: %s within %.3f of twice the bound' % (tag, ours, worst))
    # D two ways: --json's D = rowsum(d_context ∘ context) against rowsum(dP ∘ P) from --json's
    # d_weights and weights (equal in exact arithmetic when context = P values). Both from the
    # run's own floats: D's chain gamma(dh) sum |dO O|; the context's rounding (gamma(T + 2) sum_j
    # P |v|, the streaming sum and its division) times |dO|; dP's chain gamma(dh) sum |dO v| times
    # P; the weights' own rounding (gamma(T + 4) relative, the exps' 2 ulp and the sum) times |dP|;
    # rowsum(dP ∘ P) here in double (below u of float32; u of float64 is in the gammas' + 2)
    H, dh = c['heads'], E // c['heads']
    g = lambda n: n * u / (1 - n * u)  # noqa: E731
    V, dC, ctx = js['values']['data'], js['d_concat']['data'], js['context']['data']
    for h in range(H):
        for i in range(T):
            P, dP = [float(a) for a in js['weights']['data'][h][i]], [float(a) for a in js['d_weights']['data'][h][i]]
            dO = [float(dC[i][h * dh + cc]) for cc in range(dh)]
            O = [float(ctx[h][i][cc]) for cc in range(dh)]
            D = float(js['D']['data'][h][i])
            alt = sum(a * b for a, b in zip(P, dP))
            tol = (g(dh + 2) * sum(abs(a * b) for a, b in zip(dO, O)) +
                   g(T + 2) * sum(abs(dO[cc]) * sum(P[j] * abs(float(V[j][h * dh + cc])) for j in range(T)) for cc in range(dh)) +
                   g(dh + 2) * sum(P[j] * sum(abs(dO[cc] * float(V[j][h * dh + cc])) for cc in range(dh)) for j in range(T)) +
                   g(T + 4) * sum(abs(a * b) for a, b in zip(P, dP)))
            check(abs(alt - D) <= tol, '%s: D[%d][%d] = %r, rowsum(dP P) = %r, %.3g apart, the bound %.3g'
                  % (tag, h, i, D, alt, abs(alt - D), tol))
count = 0
for c in fixtures['cases']:
    if c['kind'] != 'mha':
        continue
    T, E = c['T'], c['E']
    inp = {k: [f32(v) for v in c[k]] for k in ('x', 'd_output', 'w_query', 'w_key', 'w_value', 'w_output',
                                              'b_query', 'b_key', 'b_value', 'b_output')}
    case = {'dtype': c['dtype'], 'x': mat(inp['x'], T, E), 'wq': mat(inp['w_query'], E, E), 'wk': mat(inp['w_key'], E, E),
            'wv': mat(inp['w_value'], E, E), 'bq': inp['b_query'], 'bk': inp['b_key'], 'bv': inp['b_value'],
            'wo': mat(inp['w_output'], E, E), 'bo': inp['b_output'], 'heads': c['heads'], 'causal': c['causal'],
            'd_output': mat(inp['d_output'], T, E)}
    padding = [j in c['padding'] for j in range(T)]
    if c['padding']:
        case['key_padding'] = padding
    name = c['name'].split(':')[0].replace(' ', '_') + '_%d' % count
    count += 1
    for arithmetic in ('runtime', 'core'):
        check_case(c, case, inp, padding, name, arithmetic)
check(count == 4, 'expected the 4 mha cases of the fixture, found %d' % count)

# --- the hand-derived case: identity weights, scale 1, two tokens, d_output = [[1, 0], [0, 0]]
s = math.e / (1 + math.e)
t = s * (1 - s)
hand = {
    'weights': [[[s, 1 - s], [1 - s, s]]],
    'd_weights': [[[1, 0], [0, 0]]],
    'D': [[s, 0]],
    'd_scaled_scores': [[[t, -t], [0, 0]]],
    'd_queries': [[t, -t], [0, 0]],
    'd_keys': [[t, 0], [-t, 0]],
    'd_values': [[s, 0], [1 - s, 0]],
    'd_wq': [[t, 0], [-t, 0]],
    'd_wk': [[t, -t], [0, 0]],
    'd_wv': [[s, 1 - s], [0, 0]],
    'd_x': [[2 * t + s, -t], [-t + 1 - s, 0]],
}
for arithmetic in ('runtime', 'core'):
    p = subprocess.run([QKV, 'attend', os.path.join(CASES, 'backward_hand64.json'), '--json', '--arithmetic', arithmetic],
                       capture_output=True, text=True)
    check(p.returncode == 0, 'backward_hand64.json: exit %d %s' % (p.returncode, p.stderr))
    if p.returncode != 0:
        continue
    js = json.loads(p.stdout)
    for k, want in hand.items():
        got = flat_of(js[k])
        w = []

        def walk(x):
            if isinstance(x, list):
                for e in x:
                    walk(e)
            else:
                w.append(float(x))
        walk(want)
        for e, (a, b) in enumerate(zip(got, w)):
            check(abs(a - b) <= 16 * 2.0 ** -53 * max(abs(b), 1.0),
                  'backward_hand64 (--arithmetic %s): %s[%d] = %r, derived %r' % (arithmetic, k, e, a, b))
        check(len(got) == len(w), 'backward_hand64: %s has %d numbers, expected %d' % (k, len(got), len(w)))
    print('backward_hand64 (--arithmetic %s): every gradient matches its closed form in sigma = e / (1 + e)'
          % arithmetic)

if failures:
    print('%d failures' % len(failures))
    sys.exit(1)
print('ok')
