#!/usr/bin/env python3
"""check_links.py ROOT [--self-test]

The docs stand alone: every reference in README.md and docs/**/*.md resolves inside the
repository ROOT. Checked, in every such file (found at run time, so a new page is covered
without a change here):

  1. markdown links [text](target) and images ![alt](target): a relative target must exist
     (relative to the page), must not leave the repository, and a #fragment must name a heading
     of the target page (GitHub's anchors: lower case, punctuation dropped, spaces to '-');
     http(s) and mailto links are left alone (no network in the tests);
  2. file references in the text or in `code`: a path that starts with a folder of the
     repository (include/, tests/, docs/, examples/, scripts/, tools/, bench/, fuzz/, cmake/,
     data/, .ci/), a path that starts with ../ (relative to the page; it must stay inside the
     repository), and a bare name ending in .md (DESIGN.md, numerics.md: looked up beside the
     page, at the root and in docs/). A path with a wildcard (* or NN) or a placeholder in
     capitals (examples/NAME.cpp, fuzz/corpus/TARGET) must match something;
  3. header paths relative to include/qkv/ (core/torch.hpp, runtime/, io/json.hpp: with a file
     extension or a final /, so prose like "the core/runtime split" is left alone) count as
     found when they exist there.

Inside code blocks (fenced, or indented by 4 spaces after a blank line) only paths that start
with a repository folder are checked, and only those with a file extension or a final /: shell
examples also name build folders, build targets (bench/qkv_bench) and install paths.
A line may opt out with the comment <!-- links: not checked --> (say why beside it).

--self-test checks the checker on a small tree it writes: a good page passes, and each kind of
broken reference is reported."""
import pathlib
import re
import sys
import tempfile

REPO_DIRS = ('include', 'tests', 'docs', 'examples', 'scripts', 'tools', 'bench', 'fuzz', 'cmake',
             'data', '.ci')
HEADER_DIRS = ('core', 'runtime', 'io', 'exact', 'reference')
OPT_OUT = '<!-- links: not checked -->'

LINK = re.compile(r'!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
# a path-like token: not preceded by a path character (so <prefix>/include/... is not one)
PATH_CHARS = r'[\w.*/<>$@{}~+-]'
PATH = re.compile(r'(?<!' + PATH_CHARS + r')((?:\.\./)+[\w.*-][\w.*/-]*|(?:\.ci|[a-z_]+)/[\w.*/-]*)')
BARE_MD = re.compile(r'(?<!' + PATH_CHARS + r')([\w.-]+\.md)\b')


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r'`|\*\*|__|~~', '', heading.strip())
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)  # a link in a heading: its text
    text = text.lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def anchors(page: pathlib.Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in page.read_text(encoding='utf-8').splitlines():
        if line.lstrip().startswith(('```', '~~~')):
            fenced = not fenced
            continue
        m = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
        if m and not fenced:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f'{s}-{n}')
        for a in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
            out.add(a)
    return out


def inside(root: pathlib.Path, path: pathlib.Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def exists(root: pathlib.Path, path: pathlib.Path) -> bool:
    """path (maybe with a wildcard) exists and is inside root"""
    text = path.as_posix()
    # a placeholder segment in capitals (NAME, TARGET, DIR) stands for any name
    text = '/'.join(re.sub(r'^[A-Z][A-Z_]{2,}(?=\.|$)', '*', part) for part in text.split('/'))
    if '*' in text or 'NN' in text:
        pattern = text.replace('NN', '[0-9][0-9]')
        rel = pathlib.Path(pattern)
        if rel.is_absolute():
            try:
                rel = rel.relative_to(root)
            except ValueError:
                return False
        return any(inside(root, p) for p in root.glob(rel.as_posix().rstrip('/')))
    return path.exists() and inside(root, path)


def check_page(root: pathlib.Path, page: pathlib.Path) -> list[str]:
    problems = []
    rel_page = page.relative_to(root).as_posix()
    fenced = False      # inside a ``` block
    indented = False    # inside an indented code block (4 spaces after a blank line)
    previous_blank = True
    for n, line in enumerate(page.read_text(encoding='utf-8').splitlines(), 1):
        where = f'{rel_page}:{n}'
        if line.lstrip().startswith(('```', '~~~')):
            fenced = not fenced
            previous_blank = False
            continue
        if not fenced:
            if line.startswith(('    ', '\t')) and line.strip():
                indented = indented or previous_blank
            elif line.strip():
                indented = False
            previous_blank = not line.strip()
        code = fenced or indented
        if OPT_OUT in line:
            continue
        spans = []  # (start, end) of links, so their targets are not checked twice
        if not code:
            for m in LINK.finditer(line):
                spans.append(m.span())
                target = m.group(1)
                if re.match(r'[a-z][a-z0-9+.-]*:', target):  # http:, https:, mailto:
                    continue
                path_part, _, fragment = target.partition('#')
                dest = (page.parent / path_part) if path_part else page
                if not exists(root, dest):
                    problems.append(f'{where}: link to {target}: '
                                    + ('leaves the repository' if not inside(root, dest)
                                       else 'no such file'))
                    continue
                if fragment and dest.is_file() and dest.suffix == '.md' and fragment not in anchors(dest):
                    problems.append(f'{where}: link to {target}: {dest.relative_to(root).as_posix()} '
                                    f'has no heading with the anchor #{fragment}')

        def in_link(pos: int) -> bool:
            return any(a <= pos < b for a, b in spans)

        for m in PATH.finditer(line):
            if in_link(m.start()):
                continue
            token = m.group(1).rstrip('.,;:')
            first = token.split('/')[0]
            if token.startswith('../'):
                if code:
                    continue
                dest = page.parent / token
                if not inside(root, dest):
                    problems.append(f'{where}: {token} leaves the repository')
                elif not exists(root, dest):
                    problems.append(f'{where}: {token}: no such file')
            elif first in REPO_DIRS:
                # in code, a path without an extension may be a build target (bench/qkv_bench)
                if code and not (token.endswith('/') or '.' in token.split('/')[-1]):
                    continue
                if not exists(root, root / token):
                    problems.append(f'{where}: {token}: no such file in the repository')
            elif first in HEADER_DIRS and not code:
                # core/torch.hpp or runtime/, not prose such as "the core/runtime split"
                if not (token.endswith('/') or '.' in token.split('/')[-1]):
                    continue
                if not (exists(root, root / 'include' / 'qkv' / token) or exists(root, root / token)
                        or exists(root, page.parent / token)):
                    problems.append(f'{where}: {token}: not in include/qkv/ nor the repository')
        if code:
            continue
        for m in BARE_MD.finditer(line):
            if in_link(m.start()):
                continue
            name = m.group(1)
            if not any((d / name).is_file() for d in (page.parent, root, root / 'docs')):
                problems.append(f'{where}: {name}: no such page beside it, at the root or in docs/')
    return problems


def pages(root: pathlib.Path) -> list[pathlib.Path]:
    found = [root / 'README.md'] if (root / 'README.md').is_file() else []
    return found + sorted((root / 'docs').rglob('*.md'))


def check(root: pathlib.Path) -> list[str]:
    problems = []
    for page in pages(root):
        problems += check_page(root, page)
    return problems


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp) / 'repo'
        (root / 'docs' / 'examples').mkdir(parents=True)
        (root / 'include' / 'qkv' / 'core').mkdir(parents=True)
        (root / 'include' / 'qkv' / 'core' / 'torch.hpp').write_text('')
        (root / 'include' / 'qkv' / 'runtime').mkdir()
        (root / 'include' / 'qkv' / 'io').mkdir()
        (root / 'include' / 'qkv' / 'io' / 'json.hpp').write_text('')
        (root / 'docs' / 'design.md').write_text('# Design\n\n## The FMA policy\n\nText.\n')
        good = ('# Good\n\nSee [the policy](design.md#the-fma-policy), `include/qkv/core/torch.hpp`,\n'
                'core/torch.hpp, [up](../README.md), design.md and https://example.org/x/y.md.\n'
                '```\nmeson setup build && ls build/qkv.hpp <prefix>/share/qkv bench/qkv_bench\n```\n'
                '\n    ./build/bench/generator_bench && meson compile bench/generator_bench\n\n'
                'The core/runtime split, runtime/ and io/json.hpp.\n'
                'Pages: `docs/examples/NN_*.md`, 1/sqrt(d) and/or <prefix>/include/qkv/.\n'
                'A header: `include/qkv/core/NAME.hpp`.\n')
        (root / 'README.md').write_text('# Readme\n\n[design](docs/design.md)\n')
        (root / 'docs' / 'examples' / '01_a.md').write_text(good.replace('design.md', '../design.md')
                                                              .replace('../README.md', '../../README.md'))
        (root / 'docs' / 'good.md').write_text(good)
        problems = check(root)
        if problems:
            print('FAIL (self-test): a good tree was refused:\n  ' + '\n  '.join(problems))
            return 1
        bad = {
            'a link to a missing page': ('[x](missing.md)', 'no such file'),
            'a link that leaves the repository': ('[x](../../outside.md)', 'leaves the repository'),
            'a missing anchor': ('[x](design.md#no-such-heading)', 'no heading with the anchor'),
            'a missing header': ('`include/qkv/core/nope.hpp`', 'no such file in the repository'),
            'a ../ path out of the repository': ('`../../shared/docs/x.md`', 'leaves the repository'),
            'a ../ path to nothing': ('`../shared/reference/004`', 'no such file'),
            'a placeholder that matches nothing': ('`fuzz/corpus/TARGET`', 'no such file in the repository'),
            'a bare page name that is nowhere': ('(DESIGN.md)', 'no such page'),
            'a header path relative to include/qkv/': ('core/nope.hpp', 'not in include/qkv/'),
            'a wildcard that matches nothing': ('`tests/NN_*.cpp`', 'no such file in the repository'),
            'a missing script in a code block': ('```\npython3 scripts/nope.py\n```', 'no such file in the repository'),
            'a missing script in an indented block': ('\n    python3 scripts/nope.py', 'no such file in the repository'),
        }
        failed = 0
        for what, (text, expect) in bad.items():
            (root / 'docs' / 'bad.md').write_text(f'# Bad\n\n{text}\n')
            problems = check(root)
            if not any(expect in p for p in problems):
                print(f'FAIL (self-test): {what} ({text}) was not reported as "{expect}": {problems}')
                failed += 1
        (root / 'docs' / 'bad.md').write_text(f'# Bad\n\n`../shared/x.md` {OPT_OUT} (a quoted path)\n')
        if check(root):
            print('FAIL (self-test): the opt-out comment was not honoured')
            failed += 1
        if failed:
            return 1
        print(f'ok: self-test: a good tree passes and {len(bad)} kinds of broken reference are reported')
        return 0


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if '--self-test' in sys.argv[2:]:
        return self_test()
    root = pathlib.Path(sys.argv[1]).resolve()
    problems = check(root)
    if problems:
        print(f'FAIL: {len(problems)} references in the docs do not resolve inside the repository:')
        for p in problems:
            print('  ' + p)
        return 1
    print(f'ok: every link and file reference of {len(pages(root))} pages resolves inside the repository')
    return 0


if __name__ == '__main__':
    sys.exit(main())
