#!/usr/bin/env python3
"""examples.py: the one list of worked examples (examples/examples.json) made into what the
build, the tool, the tests and the docs need, so that adding an example is one entry in the list
plus the example's file and its page.

    examples.py meson                      one line per example for meson.build (tab-separated:
                                           name, source, needs, explain_prints, run_test,
                                           run_args joined by \\x1f, page)
    examples.py header OUT [--have L]      the tool's C++ header: QKV_EXAMPLES(X), the examples
                                           built (those whose "needs" are all in L, comma-separated)
    examples.py docs ROOT [--check]        rewrite the tables of README.md and docs/cli.md between
                                           their <!-- examples: ... --> markers; --check exits 1
                                           (naming the file) when a table is not what the list makes
    examples.py names                      the names, one per line (for scripts and tests)

A list entry: name (what `qkv explain NAME` takes), source (in examples/), page (docs/examples/),
title (docs/cli.md's tutorial column), tutorial and proves (README's columns), explain_prints (a
line `qkv explain NAME` must print), and optionally needs ("boost", "runtime", "json": built only
when found), run_test and run_args (the example program's test: its name's end and arguments;
@SOURCE_ROOT@ is the source tree), has_page (false: no learner's page yet; the page tests check
that the tool refuses it).
"""
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
LIST = HERE.parent / 'examples' / 'examples.json'
FIELDS = ('name', 'source', 'page', 'title', 'tutorial', 'proves', 'explain_prints')


def load(path=LIST):
    data = json.loads(pathlib.Path(path).read_text(encoding='utf-8'))
    examples = data['examples']
    seen = set()
    for i, e in enumerate(examples):
        for f in FIELDS:
            if not isinstance(e.get(f), str) or not e[f]:
                raise SystemExit('%s: example %d: field \'%s\' missing or not a string' % (path, i, f))
        if e['name'] in seen:
            raise SystemExit('%s: example %d: the name \'%s\' is listed twice' % (path, i, e['name']))
        if not e['name'].isidentifier():
            raise SystemExit('%s: example %d: the name \'%s\' is not a C++ identifier' % (path, i, e['name']))
        seen.add(e['name'])
        for f in ('explain_prints', 'title', 'tutorial', 'proves', 'run_test'):
            if '\t' in e.get(f, '') or '\n' in e.get(f, ''):
                raise SystemExit('%s: example %s: field \'%s\' has a tab or a newline' % (path, e['name'], f))
    return examples


def with_page(examples=None):
    """the examples that have a learner's page (`qkv explain NAME --html`): all but those the list
    marks "has_page": false, which the tool refuses saying it has no page yet"""
    return [e for e in (examples if examples is not None else load()) if e.get('has_page', True)]


def stem(e):
    return e['source'][:-len('.cpp')]


def cmd_meson():
    for e in load():
        print('\t'.join([e['name'], e['source'], ','.join(e.get('needs', [])) or '-',
                         e['explain_prints'], e.get('run_test', 'runs'),
                         '\x1f'.join(e.get('run_args', [])) or '-', e['page']]))


def c_string(s):
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n') + '"'


def cmd_header(out, have):
    examples = [e for e in load() if all(n in have for n in e.get('needs', []))]
    lines = ['// examples_list.hpp: made by scripts/examples.py from examples/examples.json at build',
             '// time (do not edit). The worked examples this qkv was built with, in the list\'s order.',
             '#pragma once', '',
             '// X(name, program): `qkv explain name`, the example program examples/<program>',
             '#define QKV_EXAMPLES(X) \\']
    lines += ['  X(%s, %s) \\' % (e['name'], c_string('examples/' + e['source'])) for e in examples]
    lines += ['', '// the names, comma-separated and wrapped for `qkv explain --help`']
    text, line = [], ''
    for i, e in enumerate(examples):
        word = e['name'] + (', ' if i + 1 < len(examples) else '')
        if len(line) + len(word) > 78:
            text.append(line.rstrip() + '\n')
            line = ''
        line += word
    text.append(line + '\n')
    lines.append('#define QKV_EXAMPLE_NAMES_WRAPPED ' + ' '.join(c_string(t) for t in text))
    lines.append('#define QKV_EXAMPLE_COUNT %d' % len(examples))
    body = '\n'.join(lines) + '\n'
    p = pathlib.Path(out)
    if not p.exists() or p.read_text(encoding='utf-8') != body:
        p.write_text(body, encoding='utf-8')


def tables(examples):
    readme = ['| example | tutorial | what building it proves |', '|---|---|---|']
    readme += ['| [`examples/%s`](%s) | %s | %s |' % (e['source'], e['page'], e['tutorial'], e['proves'])
               for e in examples]
    cli = ['| EXAMPLE | program | tutorial |', '|---|---|---|']
    cli += ['| `%s` | `examples/%s` | %s |' % (e['name'], e['source'], e['title']) for e in examples]
    names = ', '.join(e['name'] for e in examples)
    return {'README.md': {'table': readme},
            'docs/cli.md': {'table': cli,
                            'unknown': ['    $ qkv explain nope',
                                        '    qkv explain: unknown example \'nope\'; the examples are: ' + names,
                                        '    $ echo $?', '    2']}}


def cmd_docs(root, check):
    root = pathlib.Path(root)
    stale = []
    for rel, parts in tables(load()).items():
        path = root / rel
        text = path.read_text(encoding='utf-8').split('\n')
        for key, rows in parts.items():
            begin, end = '<!-- examples: %s (made by scripts/examples.py docs) -->' % key, '<!-- examples: end -->'
            try:
                b = text.index(begin)
                e = text.index(end, b)
            except ValueError:
                raise SystemExit('%s: the markers of the examples\' %s are missing (%s ... %s)' % (rel, key, begin, end))
            if text[b + 1:e] != rows:
                stale.append('%s (%s)' % (rel, key))
                text[b + 1:e] = rows
        if not check:
            path.write_text('\n'.join(text), encoding='utf-8')
    if check and stale:
        print('the examples\' tables differ from examples/examples.json in: ' + ', '.join(stale) +
              '\nrun: python3 scripts/examples.py docs .', file=sys.stderr)
        return 1
    if not check and stale:
        print('rewrote: ' + ', '.join(stale))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == 'meson':
        cmd_meson()
    elif len(argv) >= 2 and argv[1] == 'names':
        for e in load():
            print(e['name'])
    elif len(argv) >= 3 and argv[1] == 'header':
        have = set()
        if len(argv) == 5 and argv[3] == '--have':
            have = set(x for x in argv[4].split(',') if x)
        cmd_header(argv[2], have)
    elif len(argv) >= 3 and argv[1] == 'docs':
        return cmd_docs(argv[2], '--check' in argv[3:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
