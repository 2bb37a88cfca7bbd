#!/usr/bin/env python3
"""tokenize_attend_test.py: `qkv tokenize --json` feeds `qkv attend` end to end.

    tokenize_attend_test.py QKV OUT_DIR

docs/cli.md says a line of `qkv tokenize --json` gives a case's `tokens` and `key_padding` as
they are. This takes them from the tool's own output ("let's go", padded to 8 with
--padding max_length: two [PAD] keys), builds a case around them (x = the bits of each token's
id, identity projections, scale 1, float64, so every score is a small integer by hand), and runs
`qkv attend` on it:
  - the trace lists the tokens and labels the scores' rows and columns with them;
  - --json's mask is the key_padding flags, on every row;
  - the weights of the [PAD] keys are exactly 0 and the others are softmax over the unpadded
    keys of the integer scores, computed here in double;
  - --html labels the page's rows with the tokens.
"""
import json
import math
import os
import re
import subprocess
import sys

QKV, OUT = sys.argv[1:3]
os.makedirs(OUT, exist_ok=True)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, failures  # noqa: E402 (tests/cli/checks.py)


def run(*args):
    r = subprocess.run([QKV, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit('qkv %s failed (%d): %s' % (' '.join(args), r.returncode, r.stderr))
    return r.stdout


tok = json.loads(run('tokenize', '--json', '--max-length', '8', '--padding', 'max_length', "let's go"))
tokens, padding, ids = tok['tokens'], tok['key_padding'], tok['ids']
check(tokens == ['[CLS]', 'let', "'", 's', 'go', '[SEP]', '[PAD]', '[PAD]'], 'the tokens of "let\'s go": %s' % tokens)
check(padding == [False] * 6 + [True] * 2, 'the two [PAD] are padding: %s' % padding)
T, d = len(tokens), 4
x = [[float((ids[i] >> k) & 1) for k in range(d)] for i in range(T)]  # the id's low 4 bits
eye = [[1.0 if i == j else 0.0 for j in range(d)] for i in range(d)]
case = {'dtype': 'float64', 'x': x, 'wq': eye, 'wk': eye, 'wv': eye, 'scale': 1,
        'tokens': tokens, 'key_padding': padding}  # the two fields exactly as tokenize wrote them
path = os.path.join(OUT, 'tokenized_case.json')
with open(path, 'w') as f:
    json.dump(case, f)

# the trace names the tokens
trace = run('attend', path)
# (the trace quotes the apostrophe token as ''' where Python would write "'": the check takes
# the tokens around it)
line = [l for l in trace.split('\n') if l.startswith('tokens (the rows of x) = ')]
check(bool(line) and line[0].startswith("tokens (the rows of x) = ['[CLS]', 'let', ") and
      line[0].endswith("'s', 'go', '[SEP]', '[PAD]', '[PAD]']"),
      'the trace lists the tokens of tokenize: %s' % [l for l in trace.split('\n') if 'tokens' in l])
check("columns: keys ['[CLS]', 'let'" in trace, 'the trace labels the scores\' columns with the tokens')

js = json.loads(run('attend', path, '--json'))
check(js['mask']['data'] == [padding] * T, '--json mask is key_padding on every row: %s' % js['mask'])
W = js['weights']['data'][0]
# by hand: q = k = x (identity projections), scores x_i . x_j are integers 0..4, scale 1.
# softmax in double: each e^s within 1 ulp (qkv's exp and Python's), a sum of at most 6 terms
# (gamma_6), a division (u): relative error below (2 + 6 + 1) u plus Python's own (2 u), u = 2^-53;
# 1e-15 relative covers it with room (11 u = 1.2e-15 would do).
for i in range(T):
    s = [sum(a * b for a, b in zip(x[i], x[j])) for j in range(T)]
    keep = [j for j in range(T) if not padding[j]]
    m = max(s[j] for j in keep)
    tot = sum(math.exp(s[j] - m) for j in keep)
    for j in range(T):
        if padding[j]:
            check(W[i][j] == 0, 'weight (%s, %s) of a [PAD] key is 0, got %r' % (tokens[i], tokens[j], W[i][j]))
        else:
            want = math.exp(s[j] - m) / tot
            check(abs(W[i][j] - want) <= 1.5e-15 * want,
                  'weight (%s, %s) is softmax over the unpadded keys: %r vs %r' % (tokens[i], tokens[j], W[i][j], want))
    check(abs(sum(W[i]) - 1) <= 1e-15 * T, 'row %s sums to 1' % tokens[i])

# the page's rows are the tokens
html = os.path.join(OUT, 'tokenized_case.html')
run('attend', path, '--html', html)
with open(html, encoding='utf-8') as f:
    page = f.read()
data = json.loads(re.search(r'<script type="application/json" id="qkv-data">(.*?)</script>', page, re.S).group(1))
labelled = [k for k, m in data['matrices'].items() if m.get('row_labels') and
            [m['row_labels'][str(i)] if isinstance(m['row_labels'], dict) else m['row_labels'][i] for i in range(T)] == tokens]
check('x' in labelled and any(k.startswith('weights') for k in labelled),
      'the page labels x and the weights with the tokens (labelled: %s)' % labelled)

if failures:
    print('%d checks failed' % len(failures))
    sys.exit(1)
print('all checks passed')
