#!/usr/bin/env python3
"""train_test.py QKV OUT_DIR: `qkv train` as a learner runs it (docs/training.md, docs/cli.md).

The reverse task from seed 0 (the defaults: 1 layer, 2 heads, 600 steps; about a second at -O2):
  - exit 0; the summary on stdout says 100% of the held-out inputs, and names every file written
    (the page with its file:// address);
  - the checkpoint is safetensors (an 8-byte little-endian header length, a JSON header, the data
    right after it: every tensor's offsets inside the file, its shape times 4 bytes long) with
    nn.TransformerEncoderLayer's state_dict names;
  - the trace has the format tag the page reads, a snapshot at step 0 and one at the last step,
    every answer right; the page is the training page of that trace (its title, no network);
  - at 2 threads the checkpoint and the trace's numbers are the same bytes (training does not
    depend on the thread count: runtime/trainer.hpp's fixed chunks; timing fields excepted).
Then the bad inputs: exit 2, nothing on stdout, stderr naming the option or the file.
"""
import json
import os
import struct
import subprocess
import sys

QKV, OUT = sys.argv[1:3]
os.makedirs(OUT, exist_ok=True)
from checks import check, failures  # noqa: E402 (tests/cli/checks.py)


def train(*args):
    return subprocess.run([QKV, 'train', *args], capture_output=True, text=True, timeout=600)


def path(name):
    return os.path.join(OUT, name)


def read_safetensors(file):
    data = open(file, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    header = json.loads(data[8:8 + n])
    return data, n, header


runs = {}
for threads in (1, 2):
    t = str(threads)
    p = train('reverse', '--quiet', '--threads', t, '--out', path('reverse%s.safetensors' % t),
              '--trace', path('reverse%s.json' % t), '--html', path('reverse%s.html' % t))
    runs[threads] = p
    check(p.returncode == 0 and p.stderr == '', 'qkv train reverse --threads %s exits 0: %s' % (t, p.stderr.strip()))
    check('held-out accuracy 100% of' in p.stdout, 'reverse is solved at %s thread(s): %s' % (t, p.stdout.splitlines()[2:3]))
    check('wrote %s\n' % path('reverse%s.safetensors' % t) in p.stdout and
          'wrote %s (open file://' % path('reverse%s.html' % t) in p.stdout, 'the summary names the files written')

data, n, header = read_safetensors(path('reverse1.safetensors'))
names = sorted(k for k in header if k != '__metadata__')
check('layers.0.self_attn.in_proj_weight' in names and 'token_embedding.weight' in names and 'head.weight' in names,
      'the checkpoint has PyTorch state_dict names: %s' % names[:4])
ok = True
for k in names:
    lo, hi = header[k]['data_offsets']
    size = 4
    for d in header[k]['shape']:
        size *= d
    ok = ok and header[k]['dtype'] == 'F32' and hi - lo == size and 8 + n + hi <= len(data)
check(ok, 'every tensor of the checkpoint is float32, its offsets inside the file, its length its shape x 4 bytes')

trace = json.load(open(path('reverse1.json')))
steps = [s['step'] for s in trace['snapshots']]
check(trace['format'] == 'qkv-training-trace-1' and steps[0] == 0 and steps[-1] == 600,
      'the trace: format tag, snapshots from step 0 to 600 (%d saved)' % len(steps))
check(all(a['correct'] and a['output'] == a['input'][::-1] for a in trace['answers']),
      'every held-out answer in the trace is its input reversed')
page = open(path('reverse1.html')).read()
loads = [w + q + 'http' for w in ('src=', 'href=') for q in '"\''] + ['url(http', 'import(']
check('<title>' in page and 'reverse' in page and not any(x in page for x in loads),
      'the page is one offline file (nothing loaded from an address; the xmlns names are no loads)')

check(open(path('reverse1.safetensors'), 'rb').read() == open(path('reverse2.safetensors'), 'rb').read(),
      'the checkpoint at 2 threads is the same bytes as at 1')
trace2 = json.load(open(path('reverse2.json')))
for k in ('loss', 'accuracy', 'snapshots', 'answers'):
    check(trace[k] == trace2[k], 'the trace\'s %s at 2 threads equals those at 1' % k)

for args, says, what in [
        (['nope'], "unknown task 'nope'", 'an unknown task'),
        ([], 'no task', 'no task'),
        (['reverse', '--steps', '0'], '--steps', 'zero steps'),
        (['reverse', '--heads', '3'], 'does not divide', 'heads that do not divide d_model'),
        (['reverse', '--html', path('no_such_folder/page.html')], 'no_such_folder', 'a page in a missing folder'),
        (['reverse', '--frobnicate'], "unknown option '--frobnicate'", 'an unknown option')]:
    p = train(*args)
    check(p.returncode == 2 and p.stdout == '' and says in p.stderr,
          '%s: exit 2, nothing on stdout, stderr says "%s": %s' % (what, says, p.stderr.strip().splitlines()[:1]))

if failures:
    print('\n%d checks failed' % len(failures))
    sys.exit(1)
print('all checks passed')
