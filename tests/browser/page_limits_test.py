#!/usr/bin/env python3
"""page_limits_test.py: the size limits of `qkv attend --html/--svg` and `qkv explain --html`
(no browser needed).

    page_limits_test.py QKV

- beyond heads x T x S = 2^24 attention weights, --html and --svg exit 2 with a message naming
  the file, the sizes and the limit, print nothing and write nothing;
- above 65,536 numbers a page is summarised and says so; a large --svg is downsampled, says so
  in its title, and stays small; both are well-formed (the SVG parses as XML);
- qkv explain NAME --html for an example without a page exits 2 and writes nothing.
"""
import json
import os
import subprocess
import sys
import tempfile
import xml.dom.minidom

QKV = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print('FAIL:', what)


with tempfile.TemporaryDirectory() as d:
    # 4097 tokens of one feature: 4097^2 = 16785409 weights > 2^24 = 16777216
    big = os.path.join(d, 'big.json')
    with open(big, 'w') as f:
        json.dump({'x': [[float(i % 7)] for i in range(4097)], 'wq': [[1.0]], 'wk': [[1.0]], 'wv': [[1.0]]}, f)
    for opt in ['--html', '--svg']:
        out = os.path.join(d, 'out' + opt)
        r = subprocess.run([QKV, 'attend', big, opt, out], capture_output=True, text=True)
        check(r.returncode == 2, '%s beyond the limit exits 2, got %d' % (opt, r.returncode))
        check(r.stdout == '', '%s beyond the limit prints nothing on stdout' % opt)
        check(big in r.stderr and '1 x 4097 x 4097 = 16785409' in r.stderr and '16777216' in r.stderr and opt in r.stderr,
              '%s beyond the limit names the file, the sizes and the limit: %r' % (opt, r.stderr))
        check(not os.path.exists(out), '%s beyond the limit writes nothing' % opt)
    # the same without --html/--svg is not this limit's business (the trace is printed)

    # 300 tokens, 2 heads, d = 8: 300 x 300 x 2 weights alone are 180000 numbers > 65536
    mid = os.path.join(d, 'mid.json')
    x = [[((i * 7 + j * 3) % 11 - 5) / 5.0 for j in range(8)] for i in range(300)]
    eye = [[1.0 if i == j else 0.0 for j in range(8)] for i in range(8)]
    with open(mid, 'w') as f:
        json.dump({'x': x, 'wq': eye, 'wk': eye, 'wv': eye, 'heads': 2, 'causal': True}, f)
    page, svg = os.path.join(d, 'mid.html'), os.path.join(d, 'mid.svg')
    r = subprocess.run([QKV, 'attend', mid, '--html', page, '--svg', svg], capture_output=True, text=True)
    check(r.returncode == 0, 'a summarised case succeeds: %s' % r.stderr)
    html = open(page, encoding='utf-8').read()
    check('"summarised":true' in html, 'a page above 65536 numbers is summarised')
    check('"block":[5,5]' in html, 'its heatmap is downsampled to 60 x 60 blocks of 5 x 5')
    check(os.path.getsize(page) < 1_000_000, 'the summarised page is small: %d bytes' % os.path.getsize(page))
    text = open(svg, encoding='utf-8').read()
    doc = xml.dom.minidom.parseString(text.encode('utf-8'))
    title = doc.getElementsByTagName('text')[0].firstChild.data
    check('downsampled' in title and '5 x 5' in title, 'the --svg title says it is downsampled: %r' % title)
    check(len(doc.getElementsByTagName('rect')) < 2 * 60 * 60 + 20, 'the --svg draws 2 x 60 x 60 blocks')
    check('-masked' in text, 'the causal mask is hatched in the --svg')

    # every example has a page now (the refusal "has no page yet" stays for an example without a
    # page() function): encoder_layer's page is written whole, nothing on stdout but the walkthrough
    out = os.path.join(d, 'encoder_layer.html')
    r = subprocess.run([QKV, 'explain', 'encoder_layer', '--html', out], capture_output=True, text=True)
    check(r.returncode == 0 and os.path.exists(out) and open(out, encoding='utf-8').read().rstrip().endswith('</html>'),
          'qkv explain encoder_layer --html writes its page: %d %r' % (r.returncode, r.stderr))
    r = subprocess.run([QKV, 'explain', 'illustrated', '--html'], capture_output=True, text=True)
    check(r.returncode == 2 and '--html needs a file name' in r.stderr, 'explain --html without a file exits 2')

if failures:
    print('%d checks failed' % len(failures))
    sys.exit(1)
print('all checks passed')
