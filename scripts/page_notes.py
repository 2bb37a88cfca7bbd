#!/usr/bin/env python3
"""page_notes.py: what a learner's page takes from an example's source, so that its prose and
its proofs have one source, the example itself.

    page_notes.py EXAMPLE.cpp OUT.hpp NAME REL_PATH

reads EXAMPLE.cpp and writes OUT.hpp (a C++ header, namespace qkv::page_notes::NAME) with
  - intro:  the file's leading comment block (without the "FILE.cpp: " prefix),
  - steps:  every "// Step N: ..." comment block (the line and the comment lines right after it),
            or numbered sections "// N. ..." after a "// -----" rule; in a file with neither, the
            comment blocks under its "// =====" rules (or, without those, its "// -----" rules),
            numbered 1, 2, ... in order,
  - proofs: every static_assert (file, line, its text as written, the comment lines right above
            it: the hand arithmetic),
  - QKV_EXAMPLE_HAS_PAGE: 1 when the example defines a page() function (examples/program/example.cpp).
meson runs it at build time (tools/meson.build), so a changed comment or proof shows on the page
at the next build. It reads C++ loosely: a static_assert ends at the ';' after its balanced
parentheses (strings and character literals are skipped).
"""
import re
import sys


def comment_text(line):
    s = line.strip()
    return s[2:].strip() if s.startswith('//') else None


def static_asserts(lines):
    out = []
    k = 0
    while k < len(lines):
        m = re.match(r'\s*static_assert\s*\(', lines[k])
        if not m:
            k += 1
            continue
        start = k
        depth, text, done = 0, [], False
        j = k
        while j < len(lines) and not done:
            line = lines[j]
            text.append(line.rstrip())
            p = 0
            while p < len(line):
                c = line[p]
                if c in '"\'':  # skip a literal
                    q = p + 1
                    while q < len(line) and line[q] != c:
                        q += 2 if line[q] == '\\' else 1
                    p = q + 1
                    continue
                if line.startswith('//', p):
                    break
                if c == '(':
                    depth += 1
                elif c == ')':
                    depth -= 1
                elif c == ';' and depth == 0:
                    done = True
                    break
                p += 1
            j += 1
        # the comment lines right above; when there are none, up to two constexpr declarations
        # above (a tolerance, an expected matrix) and the comment above them
        comment = []
        c = start - 1
        skipped = 0
        while c >= 0:
            if comment_text(lines[c]) is not None:
                comment.insert(0, lines[c].strip())
            elif not comment and skipped < 2 and re.match(r'\s*constexpr\b.*;\s*$', lines[c]):
                comment.insert(0, lines[c].strip())
                skipped += 1
            else:
                break
            c -= 1
        if comment and comment_text(comment[0]) is None:
            comment = []
        indent = min(len(t) - len(t.lstrip()) for t in text if t.strip())
        out.append((start + 1, '\n'.join(t[indent:] for t in text), '\n'.join(comment)))
        k = j
    return out


def steps(lines):
    out = []
    for k, line in enumerate(lines):
        t = comment_text(line)
        if t is None:
            continue
        # "Step 3: ...", "Steps 1-2: ...", or a numbered section "1. ..." right after a
        # "// -----" rule
        m = re.match(r'Steps? (\d+)(?:-\d+)?:\s*(.*)', t)
        if not m and k > 0 and re.match(r'-{5,}', comment_text(lines[k - 1]) or ''):
            m = re.match(r'(\d+)\.\s+(.*)', t)
        if not m:
            continue
        block = [t]
        j = k + 1
        while j < len(lines):
            u = comment_text(lines[j])
            if u is None or re.match(r'Steps? \d+', u) or re.match(r'-{5,}', u):
                break
            block.append(u)
            j += 1
        out.append((int(m.group(1)), '\n'.join(block), k + 1))
    if out:
        return out
    # no numbered steps: the sections under "// =====" rules, numbered 1, 2, ... in order; in a
    # file without those, the sections under "// -----" rules (03b, 07)
    for rule in (r'={5,}\s*$', r'-{5,}\s*$'):
        n = 0
        for k, line in enumerate(lines[:-1]):
            if re.match(rule, comment_text(line) or ''):
                block = []
                j = k + 1
                while j < len(lines) and comment_text(lines[j]) not in (None, ''):
                    block.append(comment_text(lines[j]))
                    j += 1
                if block:
                    n += 1
                    out.append((n, '\n'.join(block), k + 2))
        if out:
            return out
    return out


def intro(lines):
    block = []
    for line in lines:
        t = comment_text(line)
        if t is None:
            break
        block.append(t)
    if block:
        block[0] = re.sub(r'^\S+\.(cpp|hpp):\s*', '', block[0])
    return '\n'.join(block).strip()


def raw(s):
    assert ')qkv"' not in s
    return 'R"qkv(' + s + ')qkv"'


def main():
    src, out, name, rel = sys.argv[1:5]
    with open(src, encoding='utf-8') as f:
        text = f.read()
    lines = text.split('\n')
    has_page = re.search(r'^\s*(inline\s+)?void\s+page\s*\(', text, re.M) is not None
    o = ['// generated by scripts/page_notes.py from ' + rel + ': do not edit', '#pragma once', '',
         '#include <string_view>', '#include <vector>', '', '#include <qkv/io/page.hpp>', '',
         '#define QKV_EXAMPLE_HAS_PAGE ' + ('1' if has_page else '0'), '',
         'namespace qkv::page_notes::' + name + ' {', '',
         'inline constexpr std::string_view file = "' + rel + '";',
         'inline constexpr std::string_view intro = ' + raw(intro(lines)) + ';',
         'inline const std::vector<qkv::io::page_source_step> steps = {']
    for n, block, line in steps(lines):
        o.append('    {%d, %s, file, %d},' % (n, raw(block), line))
    o.append('};')
    o.append('inline const std::vector<qkv::io::page_source_proof> proofs = {')
    for line, t, comment in static_asserts(lines):
        o.append('    {file, %d, %s, %s},' % (line, raw(t), raw(comment)))
    o += ['};', '', '}  // namespace qkv::page_notes::' + name, '']
    new = '\n'.join(o)
    try:
        with open(out, encoding='utf-8') as f:
            if f.read() == new:
                return
    except OSError:
        pass
    with open(out, 'w', encoding='utf-8') as f:
        f.write(new)


if __name__ == '__main__':
    main()
