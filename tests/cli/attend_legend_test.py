#!/usr/bin/env python3
"""attend_legend_test.py QKV ATTEND_DIR OUT_DIR: the --svg heatmap's legend shows the hatched
"masked" swatch exactly when some weight is masked (tools/cmd_attend.hpp, make_page_data: no mask
is passed when nothing is masked). lower_right.json: causal, one query over three keys aligned
lower_right: it sees every key, nothing masked, no swatch; causal.json: causal with T = S, the
keys after each query masked: the swatch and hatched cells."""
import os
import subprocess
import sys

QKV, CASES, OUT = sys.argv[1:4]
os.makedirs(OUT, exist_ok=True)
failures = 0
for case, masked in [('lower_right', False), ('causal', True), ('illustrated', False), ('key_padding', True)]:
    svg = os.path.join(OUT, case + '.svg')
    r = subprocess.run([QKV, 'attend', os.path.join(CASES, case + '.json'), '--svg', svg], capture_output=True, text=True)
    text = open(svg).read() if r.returncode == 0 else ''
    swatch = '>masked</text>' in text
    ok = r.returncode == 0 and swatch == masked
    failures += not ok
    print('ok:' if ok else 'FAIL:', case, 'masked swatch' if masked else 'no masked swatch', '(exit %d)' % r.returncode)
sys.exit(1 if failures else 0)
