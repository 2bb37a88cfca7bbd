#!/usr/bin/env python3
"""encode_cases.py QKV FIXTURE_DIR

`qkv encode` end to end, without PyTorch (the fixtures carry PyTorch 1.13's numbers):
1. every fixture of tests/data/encoder/ with --json, float32 and float64: the output of every
   layer is there with the right shape, and agrees with PyTorch's float64 output within the
   largest difference the doctest suite proves within its derived bounds for the same path
   (tests/runtime/encoder_test.cpp; here only as a smoke check of the plumbing: 1e-5 for
   float32 and 1e-12 for float64, both far above those bounds' actual values of 4e-7 and 1e-15,
   far below any plumbing mistake such as a transposed or swapped tensor);
2. malformed cases made from a fixture: exit status 2, nothing on stdout, and a message on
   stderr naming the file, the field and the shapes;
3. malformed files that must not crash the tool (broken JSON, numbers beyond double's range,
   deep nesting, wrong types) and 400 random mutations of a fixture (fixed seed, so a failure
   reproduces): every run ends with exit 0 and nothing on stderr, or exit 2, a message and
   nothing on stdout; never a signal or another status."""
import copy
import json
import os
import random
import subprocess
import sys
import tempfile

from checks import flat  # tests/cli/checks.py (this script's folder is on the path)


def run(qkv, case, *args):
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
        f.write(case if isinstance(case, str) else json.dumps(case))
        path = f.name
    try:
        return subprocess.run([qkv, 'encode', path, *args], capture_output=True, text=True), path
    finally:
        pass



def mutations(qkv, base, count):
    """count random mutations of base (1 to 3 values replaced by odd ones, or removed; one in ten
    files cut short): exit 0 with stdout only, or exit 2 with stderr only"""
    rnd = random.Random(20261122)
    odd = [None, True, 0, -1, 2, 2 ** 64, 1e308, -0.5, '', 'x', [], {}, [[]], [[1]], [1, [2]],
           {'dtype': 'float32', 'shape': [2, 2], 'data': [1, 2, 3, 4]}, {'shape': [1e20], 'data': []},
           {'dtype': 'float32', 'shape': [-1], 'data': []}, {'dtype': 'float64', 'shape': [0, 8], 'data': []}]

    def paths(o, p=()):
        yield p
        items = o.items() if isinstance(o, dict) else enumerate(o[:3]) if isinstance(o, list) else ()
        for k, v in items:
            yield from paths(v, p + (k,))
    where = [p for p in paths(base) if p]
    bad = 0
    for n in range(count):
        c = copy.deepcopy(base)
        for _ in range(rnd.randint(1, 3)):
            p = rnd.choice(where)
            o = c
            try:
                for k in p[:-1]:
                    o = o[k]
                if rnd.random() < 0.2 and isinstance(o, dict):
                    o.pop(p[-1], None)
                else:
                    o[p[-1]] = copy.deepcopy(rnd.choice(odd))
            except (KeyError, IndexError, TypeError):
                pass  # an earlier change removed or replaced the parent
        text = json.dumps(c)
        if rnd.random() < 0.1:
            text = text[:rnd.randint(0, len(text))]
        r, path = run(qkv, text, *(['--json'] if n % 2 else []))
        os.unlink(path)
        if not ((r.returncode == 0 and r.stderr == '' and r.stdout) or
                (r.returncode == 2 and r.stdout == '' and 'qkv encode:' in r.stderr)):
            bad += 1
            print(f'FAIL mutation {n}: exit {r.returncode}, stderr {r.stderr.strip()[:300]!r}')
    print(f'{"ok  " if not bad else "FAIL"} {count} random mutations of a fixture: exit 0 or 2, never a crash')
    return bad


def retag(case, dtype):
    """every tensor of the case (x, each layer's) tagged `dtype`: the same decimal numbers, read as it"""
    for t in [case['x'], *(v for layer in case['layers'] for v in layer.values())]:
        if isinstance(t, dict) and 'dtype' in t:
            t['dtype'] = dtype


def main():
    qkv, fixtures = sys.argv[1], sys.argv[2]
    failures = 0
    names = sorted(n[:-5] for n in os.listdir(fixtures)
                   if n.endswith('.json') and n not in ('positional.json', 'example_08.json'))
    for name in names:
        case = json.load(open(os.path.join(fixtures, name + '.json')))
        want = flat(case['expected']['float64']['output'])
        for dtype, tol in (('float32', 1e-5), ('float64', 1e-12)):
            c = copy.deepcopy(case)
            del c['expected']
            c['dtype'] = dtype
            retag(c, dtype)  # the fixture's tensors are tagged float32; the tool refuses a disagreeing tag
            r, path = run(qkv, c, '--json')
            os.unlink(path)
            if r.returncode != 0:
                print(f'FAIL {name} {dtype}: exit {r.returncode}: {r.stderr}')
                failures += 1
                continue
            out = json.loads(r.stdout)
            got = flat(out['output'])
            worst = max(abs(a - b) for a, b in zip(got, want))
            ok = (len(out['layers']) == len(case['layers']) and len(got) == len(want) and worst <= tol and
                  out['output']['dtype'] == dtype and flat(out['layers'][-1]['output']) == got)
            print(f'{"ok  " if ok else "FAIL"} {name} {dtype}: {len(out["layers"])} layer(s), max |qkv - PyTorch float64| = {worst:.3g}')
            failures += not ok

    base = json.load(open(os.path.join(fixtures, 'post_norm_relu.json')))
    del base['expected']

    def variant(change):
        c = copy.deepcopy(base)
        change(c)
        return c

    def set_layer(key, value):
        return lambda c: c['layers'][0].__setitem__(key, value)

    without_x = json.dumps({k: v for k, v in base.items() if k != 'x'})
    bad = [
        ('missing layers', variant(lambda c: c.pop('layers')), ["field 'layers'", 'missing']),
        ('a linear1.weight of the wrong shape',
         variant(set_layer('linear1.weight', [[0.0] * 7] * 16)),
         ["field 'layers[0].linear1.weight'", 'dim_feedforward x d_model = 16x8', 'got 16x7']),
        ('a bias of the wrong length', variant(set_layer('norm2.bias', [0.0] * 7)),
         ["field 'layers[0].norm2.bias'", 'expected shape [8]', 'got shape [7]']),
        ('an unknown state_dict name', variant(set_layer('self_attn.in_proj_weights', [[0.0]])),
         ["field 'layers[0].self_attn.in_proj_weights'", 'unknown name']),
        ('a missing state_dict name', variant(lambda c: c['layers'][0].pop('linear2.bias')),
         ["field 'layers[0].linear2.bias'", 'missing']),
        ('x of the wrong width', variant(lambda c: c.__setitem__('x', [[0.0] * 6] * 5)),
         ["field 'x'", 'T x d_model = T x 8', 'got 5x6']),
        ('key_padding of the wrong length', variant(lambda c: c['config'].__setitem__('key_padding', [False] * 4)),
         ["field 'config.key_padding'", 'expected 5 booleans']),
        ('nhead that does not divide d_model', variant(lambda c: c['config'].__setitem__('nhead', 3)),
         ["field 'config.nhead'", '3 heads must divide d_model = 8']),
        ('an unknown activation', variant(lambda c: c['config'].__setitem__('activation', 'tanh')),
         ["field 'config.activation'", 'expected "relu" or "gelu", got "tanh"']),
        ('an empty layer list', variant(lambda c: c.__setitem__('layers', [])),
         ["field 'layers'", 'at least one layer']),
        ('an unknown top-level field', variant(lambda c: c.__setitem__('heads', 2)),
         ["field 'heads'", 'unknown field']),
        # a tensor's tag that disagrees with the case's arithmetic is refused, never read as another type
        ('a float32 x in a float64 case', variant(lambda c: c.__setitem__('dtype', 'float64')),
         ["field 'x'", 'tagged "float32" but the case reads its numbers as float64', "its \"dtype\": \"float64\""]),
        ('a float64 layer weight in a float32 case', variant(set_layer('linear1.weight', {
            'dtype': 'float64', 'shape': [16, 8], 'data': [0.0] * 128})),
         ["field 'layers[0].linear1.weight'", 'tagged "float64" but the case reads its numbers as float32',
          'no top-level "dtype", and float32 is the default']),
        ('a bad dtype', variant(lambda c: c.__setitem__('dtype', 'float16')),
         ["field 'dtype'", 'expected "float32" or "float64"']),
        # refused as qkv attend refuses unknown fields: the tool does not compare results
        ('the fixtures\' expected field', variant(lambda c: c.__setitem__('expected', {})),
         ["field 'expected'", 'unknown field']),
        ('an unknown config field', variant(lambda c: c['config'].__setitem__('norm_frist', True)),
         ["field 'config.norm_frist'", 'unknown field']),
        ('a config that is not an object', variant(lambda c: c.__setitem__('config', [8, 2, 16])),
         ["field 'config'", 'expected an object']),
        ('layers that are not a list', variant(lambda c: c.__setitem__('layers', c['layers'][0])),
         ["field 'layers'", 'expected a list']),
        ('a layer that is not an object', variant(lambda c: c['layers'].__setitem__(0, 3)),
         ["field 'layers[0]'", 'expected an object']),
        ('a key_padding flag that is not a boolean',
         variant(lambda c: c['config'].__setitem__('key_padding', [False, 0, False, False, False])),
         ["field 'config.key_padding'", 'element [1] must be true or false']),
        ('a norm_first that is not a boolean', variant(lambda c: c['config'].__setitem__('norm_first', 'yes')),
         ["field 'config.norm_first'", 'expected true or false']),
        ('a negative layer_norm_eps', variant(lambda c: c['config'].__setitem__('layer_norm_eps', -1)),
         ["field 'config.layer_norm_eps'", 'expected a finite number >= 0']),
        ('a fractional nhead', variant(lambda c: c['config'].__setitem__('nhead', 2.5)),
         ["field 'config.nhead'", 'expected a positive whole number, got 2.5']),
        ('a zero d_model', variant(lambda c: c['config'].__setitem__('d_model', 0)),
         ["field 'config.d_model'", 'expected a positive whole number, got 0']),
        ('an empty x', variant(lambda c: c.__setitem__('x', [])), ["field 'x'"]),
        ('a 3-d x', variant(lambda c: c.__setitem__('x', [c['x']])), ["field 'x'"]),
        ('a tensor whose data does not match its shape',
         variant(set_layer('norm1.weight', {'dtype': 'float32', 'shape': [8], 'data': [1.0] * 9})),
         ["field 'layers[0].norm1.weight'"]),
        ('a weight that is a string', variant(set_layer('linear2.weight', 'zeros')),
         ["field 'layers[0].linear2.weight'"]),
        ('broken JSON', json.dumps(base)[:500], ['not valid JSON']),
        ('an empty file', '', ['not valid JSON']),
        ('a top-level array', '[1, 2]', ['expected one JSON object']),
        ('a number beyond double\'s range', json.dumps(base).replace('"d_model": 8', '"d_model": 1e400', 1),
         ['not valid JSON', 'overflow']),
        ('arrays nested 5000 deep', without_x[:-1] + ', "x": ' + '[' * 5000 + ']' * 5000 + '}',
         ["field 'x'", 'nested deeper than']),
        # issue 14 (edges-tool): JSON that means one thing
        ('null in a weight', variant(set_layer('linear1.bias', [None] * 16)),
         ["field 'layers[0].linear1.bias'", 'element [0] is null, which this field does not take']),
        ('1e39 in a float32 x', variant(lambda c: c['x']['data'][0].__setitem__(0, 1e39)),
         ["field 'x'", 'element [0][0] = 1e+39 does not fit in float32']),
        ('a config key given twice', json.dumps(base).replace('"nhead": 2', '"nhead": 2, "nhead": 4', 1),
         ["field 'config.nhead'", 'the key appears twice in one object']),
        ('a state_dict name given twice',
         json.dumps(base).replace('"norm1.bias": ', '"norm1.bias": [0, 0, 0, 0, 0, 0, 0, 0], "norm1.bias": ', 1),
         ["field 'layers[0].norm1.bias'", 'the key appears twice in one object']),
        ('an infinity spelt "inf"', variant(lambda c: c['x']['data'][0].__setitem__(0, 'inf')),
         ["field 'x'", 'must be a number or "NaN", "Infinity", "-Infinity", got "inf"']),
        ('a null layer_norm_eps', variant(lambda c: c['config'].__setitem__('layer_norm_eps', None)),
         ["field 'config.layer_norm_eps'", 'expected a finite number >= 0, got null']),
        ('a null dtype', variant(lambda c: c.__setitem__('dtype', None)),
         ["field 'dtype'", 'expected "float32" or "float64", got null']),
    ]
    for what, case, needles in bad:
        r, path = run(qkv, case)
        os.unlink(path)
        ok = (r.returncode == 2 and r.stdout == '' and all(n in r.stderr for n in needles) and 'qkv encode:' in r.stderr
              and os.path.basename(path) in r.stderr)
        print(f'{"ok  " if ok else "FAIL"} {what}: exit {r.returncode}, stderr {r.stderr.strip()!r}')
        failures += not ok
    r = subprocess.run([qkv, 'encode', os.path.join(fixtures, 'no_such_case.json')], capture_output=True, text=True)
    ok = r.returncode == 2 and r.stdout == '' and 'no_such_case.json' in r.stderr
    print(f'{"ok  " if ok else "FAIL"} a missing file: exit {r.returncode}, stderr {r.stderr.strip()!r}')
    failures += not ok
    # issue 14 (edges-tool): a directory, the limits, --help
    long_case = {'x': [[0.5]] * 600, 'config': {'d_model': 1, 'nhead': 1, 'dim_feedforward': 1},
                 'layers': [{k: [[1.0]] if 'weight' in k else [0.0] for k in
                             ['self_attn.in_proj_weight', 'self_attn.in_proj_bias', 'self_attn.out_proj.weight',
                              'self_attn.out_proj.bias', 'linear1.weight', 'linear1.bias', 'linear2.weight',
                              'linear2.bias', 'norm1.weight', 'norm1.bias', 'norm2.weight', 'norm2.bias']}]}
    long_case['layers'][0]['self_attn.in_proj_weight'] = [[1.0]] * 3
    long_case['layers'][0]['self_attn.in_proj_bias'] = [0.0] * 3
    limit_cases = [
        ('a directory', [fixtures], None, [fixtures + ': is a directory, not a JSON file']),
        ('600 tokens past --max-elements 100000', ['--max-elements', '100000'], long_case,
         ["each layer's scores and weights kept for the trace (each nhead x T x T = 1 x 600 x 600) would be 360000 "
          'elements, above the limit of 100000 (raise it with --max-elements N)']),
        ('600 tokens --json past --max-elements 1000', ['--json', '--max-elements', '1000'], long_case, None),
        ('a case over the byte limit of --max-elements', ['--max-elements', '10'], base,
         ['the file is more than 640 bytes, the limit (raise it with --max-elements N)']),
        ('--max-elements 0', ['--max-elements', '0'], base, ["--max-elements: '0' is not a positive whole number"]),
    ]
    for what, args, case, needles in limit_cases:
        if case is None:
            r = subprocess.run([qkv, 'encode', *args], capture_output=True, text=True)
            path = None
        else:
            r, path = run(qkv, case, *args)
            os.unlink(path)
        if needles is None:  # the buffers fit (T x T = 360000 > 1000 is refused first): the first limit named
            needles = ["would be 360000 elements, above the limit of 1000"]
        ok = (r.returncode == 2 and r.stdout == '' and all(n in r.stderr for n in needles) and 'qkv encode:' in r.stderr
              and (path is None or what.startswith('--') or os.path.basename(path) in r.stderr))  # a usage error names no file
        print(f'{"ok  " if ok else "FAIL"} {what}: exit {r.returncode}, stderr {r.stderr.strip()!r}')
        failures += not ok
    r, path = run(qkv, long_case, '--max-elements', '360000', '--json')
    os.unlink(path)
    ok = r.returncode == 0 and r.stderr == '' and len(json.loads(r.stdout)['output']['data']) == 600
    print(f'{"ok  " if ok else "FAIL"} 600 tokens within a raised --max-elements: exit {r.returncode}')
    failures += not ok
    r = subprocess.run([qkv, 'encode', '--help'], capture_output=True, text=True)
    ok = r.returncode == 0 and r.stderr == '' and r.stdout.startswith('usage: qkv encode CASE.json')
    print(f'{"ok  " if ok else "FAIL"} --help: exit {r.returncode}, usage on stdout')
    failures += not ok
    for what, args, needle in [('no case file', [], 'usage: qkv encode CASE.json [--json]'),
                               ('an unknown option', ['case.json', '--bogus'], "unknown option '--bogus'"),
                               ('two case files', ['a.json', 'b.json'], 'one case file expected')]:
        r = subprocess.run([qkv, 'encode', *args], capture_output=True, text=True)
        ok = r.returncode == 2 and r.stdout == '' and needle in r.stderr
        print(f'{"ok  " if ok else "FAIL"} {what}: exit {r.returncode}, stderr {r.stderr.strip()!r}')
        failures += not ok
    failures += mutations(qkv, base, 400)
    print(f'{failures} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
