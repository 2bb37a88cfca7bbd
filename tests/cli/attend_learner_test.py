#!/usr/bin/env python3
"""attend_learner_test.py QKV FIXTURE OUTDIR: `qkv attend`'s learner fields (tokens,
context_tokens, key_padding) and its --json extras (scale, mask, scaled_scores), against
PyTorch's nn.MultiheadAttention with key_padding_mask (FIXTURE, made by
scripts/fixtures/key_padding_fixture.py; PyTorch is not needed here).

qkv's float32 and float64 outputs are compared with PyTorch's float64 ones within a bound
derived below in the standard model (Higham; core/bounds.hpp uses the same rules), never a
guessed tolerance. Plain Python: no numpy, no torch."""
import json
import math
import os
import struct
import subprocess
import sys
import xml.dom.minidom

qkv, fixture, outdir = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(outdir, exist_ok=True)
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def run(case, *args, name="case.json"):
    path = os.path.join(outdir, name)
    with open(path, "w") as f:
        json.dump(case, f)
    p = subprocess.run([qkv, "attend", path, *args], capture_output=True, text=True, timeout=60)
    return p, path


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


# ------------------------------------------------------------------------------------------
# The bound. u = 2^-24 (float32) or 2^-53 (float64); gamma(n) = n u / (1 - n u).
# Every input (x, context, weights, biases) is exact in both types (drawn in float32).
# - projections y = x Wᵀ + b: each element a sum of d products and the bias, d + 1 operations:
#   |dy| <= gamma(d + 1) (sum |x||w| + |b|)
# - raw scores q·k over the head's d_h columns, q and k off by dq, dk: the perturbed product
#   gamma(d_h) sum (|q| + dq)(|k| + dk) + sum (dq |k| + |q| dk + dq dk)
# - scaled: s = fl(raw * fl(1 / fl(sqrt(d_h)))): the scale is 1/sqrt(d_h) within gamma(2), the
#   product rounds once: |ds| <= dr scale (1 + gamma(3)) + gamma(3) |raw| scale
# - weights (core/bounds.hpp softmax_rows_error): 1.01 w_j (2 max_k ds_k + (2 (2 + range) + n) u),
#   n = the unmasked keys; a masked weight is exactly 0 in both
# - context = weights · v_h: the perturbed product over the S keys
# - output = concat Woᵀ + bo: the perturbed product over d_v, and the bias: gamma(d_v + 1)
# PyTorch's float64 run has the same bound with u = 2^-53 (its summation order differs, but
# every order is within the same gamma bound; it scales q before the product: one more rounding
# per product, u sum |q||k|, added to the scores' bound). qkv and PyTorch are within the sum.
def gamma(n, u):
    return n * u / (1 - n * u)


def linear(x, w, b):
    return [[sum(xi[k] * wr[k] for k in range(len(xi))) + (b[o] if b else 0.0) for o, wr in enumerate(w)] for xi in x]


def linear_bound(x, w, b, u):
    d = len(x[0])
    return [[gamma(d + 1, u) * (sum(abs(xi[k] * wr[k]) for k in range(d)) + (abs(b[o]) if b else 0.0))
             for o, wr in enumerate(w)] for xi in x]


def perturbed(a, da, b, db, u):
    """(R, K) x (K, C) with a, b off by da, db (elementwise): the bound per element"""
    K = len(b)
    out = []
    for i in range(len(a)):
        row = []
        for j in range(len(b[0])):
            g = sum((abs(a[i][k]) + da[i][k]) * (abs(b[k][j]) + db[k][j]) for k in range(K))
            p = sum(da[i][k] * abs(b[k][j]) + abs(a[i][k]) * db[k][j] + da[i][k] * db[k][j] for k in range(K))
            row.append(gamma(K, u) * g + p)
        out.append(row)
    return out


def transpose(m):
    return [list(r) for r in zip(*m)]


def cols(m, j0, n):
    return [r[j0:j0 + n] for r in m]


def attention_bound(case, u):
    """(weights bound per head (T, S), output bound (T, d_out)) for qkv's arithmetic in u"""
    x = case["x"]
    c = case.get("context", x)
    H = case["heads"]
    pad = case["key_padding"]
    q, k, v = linear(x, case["wq"], case["bq"]), linear(c, case["wk"], case["bk"]), linear(c, case["wv"], case["bv"])
    dq, dk, dv = (linear_bound(x, case["wq"], case["bq"], u), linear_bound(c, case["wk"], case["bk"], u),
                  linear_bound(c, case["wv"], case["bv"], u))
    E, Dv = len(q[0]), len(v[0])
    dh, dvh = E // H, Dv // H
    scale = 1 / math.sqrt(dh)
    T, S = len(x), len(c)
    concat, dconcat = [[0.0] * Dv for _ in range(T)], [[0.0] * Dv for _ in range(T)]
    weights_bounds = []
    for h in range(H):
        qh, kh, dqh, dkh = cols(q, h * dh, dh), cols(k, h * dh, dh), cols(dq, h * dh, dh), cols(dk, h * dh, dh)
        raw = [[sum(a * b for a, b in zip(qi, kj)) for kj in kh] for qi in qh]
        # one more rounding per term than the d_h of the sum: PyTorch scales q before the product
        # (q / sqrt(d_h), u per element), qkv after it (the gamma(3) below)
        draw = perturbed(qh, dqh, transpose(kh), transpose(dkh), u)
        draw = [[e + gamma(1, u) * sum(abs(a * b) for a, b in zip(qh[i], kh[j])) for j, e in enumerate(r)]
                for i, r in enumerate(draw)]
        ds = [[draw[i][j] * scale * (1 + gamma(3, u)) + gamma(3, u) * abs(raw[i][j]) * scale for j in range(S)]
              for i in range(T)]
        w, dw = [], []
        for i in range(T):
            s = [raw[i][j] * scale for j in range(S) if not pad[j]]
            m = max(s)
            e = [math.exp(raw[i][j] * scale - m) if not pad[j] else 0.0 for j in range(S)]
            tot = sum(e)
            wi = [ej / tot for ej in e]
            worst = max(ds[i][j] for j in range(S) if not pad[j])
            rounding = (2 * (2 + (m - min(s))) + len(s)) * u
            w.append(wi)
            dw.append([1.01 * wi[j] * (2 * worst + rounding) if not pad[j] else 0.0 for j in range(S)])
        assert max(max(r) for r in ds) < 1e-3, "the softmax bound needs ds < 1e-3"
        weights_bounds.append(dw)
        vh, dvhm = cols(v, h * dvh, dvh), cols(dv, h * dvh, dvh)
        ctx = [[sum(w[i][j] * vh[j][cc] for j in range(S)) for cc in range(dvh)] for i in range(T)]
        dctx = perturbed(w, dw, vh, dvhm, u)
        for i in range(T):
            for cc in range(dvh):
                concat[i][h * dvh + cc] = ctx[i][cc]
                dconcat[i][h * dvh + cc] = dctx[i][cc]
    wo, bo = case["wo"], case["bo"]
    dout = []
    for i in range(T):
        row = []
        for o in range(len(wo)):
            g = sum((abs(concat[i][kk]) + dconcat[i][kk]) * abs(wo[o][kk]) for kk in range(Dv)) + abs(bo[o])
            row.append(gamma(Dv + 1, u) * g + sum(dconcat[i][kk] * abs(wo[o][kk]) for kk in range(Dv)))
        dout.append(row)
    return weights_bounds, dout


def within(name, got, want, bound):
    worst = 0.0
    for i, (gr, wr, br) in enumerate(zip(got, want, bound)):
        for j, (g, w, b) in enumerate(zip(gr, wr, br)):
            if not abs(g - w) <= b:
                fail(f"{name}[{i}][{j}] = {g}, PyTorch {w}, bound {b}")
                return
            worst = max(worst, abs(g - w) / b if b else 0.0)
    print(f"ok: {name} within the derived bound (largest difference {worst:.2e} of it)")


def number(v):
    """a number of the tool's JSON: -inf is written as null (or as "-Infinity")"""
    if v is None or v == "-Infinity":
        return -math.inf
    return v


data = json.load(open(fixture))
for fx in data["cases"]:
    case, torch_out = fx["case"], fx["torch"]
    pad = case["key_padding"]
    H, T = case["heads"], len(case["x"])
    S = len(case.get("context", case["x"]))
    all_padded = all(pad)
    for dtype, u in (("float32", 2.0 ** -24), ("float64", 2.0 ** -53)):
        name = f"{fx['name']} ({dtype})"
        p, _ = run(dict(case, dtype=dtype), "--json")
        if p.returncode != 0:
            fail(f"{name}: exit {p.returncode}: {p.stderr}")
            continue
        j = json.loads(p.stdout)
        # the extras: the scale, the mask (true = masked, the padded keys), the scaled masked scores
        dh = len(case["wq"]) // H
        want_scale = f32(1 / f32(math.sqrt(dh))) if dtype == "float32" else 1 / math.sqrt(dh)
        if j["scale"] != want_scale:
            fail(f"{name}: scale {j['scale']}, expected {want_scale} = 1/sqrt({dh}) in {dtype}")
        mask = j["mask"]["data"]
        if mask != [[bool(pj) for pj in pad] for _ in range(T)]:
            fail(f"{name}: mask {mask}, expected the key_padding flags {pad} on every row")
        ss, raw = j["scaled_scores"], j["scores"]["data"]
        if ss["shape"] != [H, T, S]:
            fail(f"{name}: scaled_scores has shape {ss['shape']}, expected {[H, T, S]}")
        for h in range(H):
            for i in range(T):
                for k in range(S):
                    got = number(ss["data"][h][i][k])
                    want = -math.inf if pad[k] else (f32(raw[h][i][k] * j["scale"]) if dtype == "float32"
                                                     else raw[h][i][k] * j["scale"])
                    if got != want:
                        fail(f"{name}: scaled_scores[{h}][{i}][{k}] = {got}, expected {want} (scale * score, -inf if masked)")
        weights, output = j["weights"]["data"], j["output"]["data"]
        if all_padded:
            # PyTorch gives NaN; qkv gives weights 0 and output 0 (docs/cli.md)
            if not all(v == "NaN" for r in torch_out["output"] for v in r):
                fail(f"{name}: the fixture's PyTorch output is not NaN")
            # weights 0, each head's context 0, so the output is the output projection's bias alone
            # (0 · w summed is 0, plus bo: exact)
            concat = j["concat"]["data"]
            if any(v != 0 for hh in weights for r in hh for v in r) or any(v != 0 for r in concat for v in r):
                fail(f"{name}: a fully padded row must give weights 0 and context 0")
            elif output != [case["bo"] for _ in range(T)]:
                fail(f"{name}: a fully padded row's output must be bo (0 through wo), got {output[0]}")
            else:
                print(f"ok: {name}: every key padded: weights 0, context 0, output = bo (PyTorch: NaN)")
            continue
        wb, ob = attention_bound(case, u)
        _, ob64 = attention_bound(case, 2.0 ** -53)
        wb64, _ = attention_bound(case, 2.0 ** -53)
        for h in range(H):
            bound = [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(wb[h], wb64[h])]
            within(f"{name} weights of head {h}", weights[h], torch_out["weights"][h], bound)
            for i in range(T):
                for k in range(S):
                    if pad[k] and weights[h][i][k] != 0:
                        fail(f"{name}: padded key {k} has weight {weights[h][i][k]}, not 0")
        within(f"{name} output", output, torch_out["output"],
               [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(ob, ob64)])

# ------------------------------------------------------------------------------------------
# the labels: the trace and the SVG use the tokens
case = data["cases"][1]["case"]  # cross: tokens and context_tokens
svg_path = os.path.join(outdir, "learner.svg")
p, _ = run(case, "--svg", svg_path)
if p.returncode != 0:
    fail(f"labels: exit {p.returncode}: {p.stderr}")
else:
    if "tokens (the rows of x) = ['la', 'vie', 'est']" not in p.stdout:
        fail("the trace does not list the tokens")
    if "context_tokens (the rows of context) = ['life', 'is', '[PAD]', 'short', '!']" not in p.stdout:
        fail("the trace does not list the context tokens")
    if "key_padding (padded keys -inf: ['[PAD]'])" not in p.stdout:
        fail("the trace does not name the padded key")
    if "rows: queries ['la', 'vie', 'est'], columns: keys ['life', 'is', '[PAD]', 'short', '!']" not in p.stdout:
        fail("the trace does not label the scores' rows and columns")
    doc = xml.dom.minidom.parse(svg_path)
    texts = [t.firstChild.data for t in doc.getElementsByTagName("text") if t.firstChild]
    for tok in ["la", "vie", "est", "life", "is", "[PAD]", "short", "!"]:
        if tok not in texts:
            fail(f"the SVG has no label {tok!r}")
    print("ok: the trace and the SVG label rows and columns with the tokens")

# the SVG title is never clipped: a case file with a 120-character name
long_name = "a_case_file_whose_name_goes_on_and_on_" + "x" * 78 + ".json"
svg_path = os.path.join(outdir, "long_title.svg")
p, _ = run(data["cases"][0]["case"], "--svg", svg_path, name=long_name)
if p.returncode != 0:
    fail(f"long title: exit {p.returncode}: {p.stderr}")
else:
    doc = xml.dom.minidom.parse(svg_path)
    svg = doc.documentElement
    width = float(svg.getAttribute("width"))
    title = next(t for t in doc.getElementsByTagName("text") if t.getAttribute("font-size") == "15")
    text, x = title.firstChild.data, float(title.getAttribute("x"))
    # 15 px monospace: 0.6 em = 9 px per character
    if x + 9 * len(text) > width:
        fail(f"the title {text!r} ({len(text)} characters from x = {x}) does not fit the width {width}")
    if len(text) > len("attention weights, ") + 40 or "\u2026" not in text:
        fail(f"the title {text!r} is not shortened to 40 characters of the file name")
    else:
        print(f"ok: the title {text!r} fits ({x + 9 * len(text):.0f} of {width:.0f} px)")

# ... and where the name is short but the picture narrow (one token: a 1 x 1 heatmap), the
# picture widens to hold the title
tiny = {"x": [[1, 0]], "wq": [[1, 0], [0, 1]], "wk": [[1, 0], [0, 1]], "wv": [[1, 0], [0, 1]], "tokens": ["hi"]}
svg_path = os.path.join(outdir, "narrow.svg")
p, _ = run(tiny, "--svg", svg_path, name="a_name_of_forty_characters_exactly.json")
if p.returncode != 0:
    fail(f"narrow: exit {p.returncode}: {p.stderr}")
else:
    doc = xml.dom.minidom.parse(svg_path)
    width = float(doc.documentElement.getAttribute("width"))
    title = next(t for t in doc.getElementsByTagName("text") if t.getAttribute("font-size") == "15")
    text, x = title.firstChild.data, float(title.getAttribute("x"))
    if x + 9 * len(text) > width:
        fail(f"the title {text!r} ({len(text)} characters from x = {x}) does not fit the width {width}")
    else:
        print(f"ok: a one-token heatmap is {width:.0f} px wide, for its {len(text)}-character title")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
