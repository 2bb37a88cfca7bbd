#!/usr/bin/env python3
"""first_hour.py: a learner's first hour, replayed (issue 28).

    first_hour.py QKV SOURCE_ROOT OUT_DIR -- COMPILER [ARGS...]

COMPILER is this build's C++ compiler (meson's cpp.cmd_array(): g++ in build-gcc, clang++-16 in
build-clang; each plain build runs this with its own). In order, as a learner meets them:

1. docs/proofs.md, "Write your own proof": the page's code blocks, copied out of the page (not out
   of tests/static/first_proof_test.cpp), joined into one file and compiled: no output, exit 0.
2. The usual mistakes, each compiled, and the line the compiler must print to help:
   - static_assert(check::equal(...)) without proven<...>, failing: it does not fail quietly
     (g++ names the fix, proven; clang prints the position and numbers);
   - no -std=c++20 (Compiler Explorer's default): stops at once, a few lines, naming c++20;
   - square weights without a layout: names qkv::in_out / qkv::out_in;
   - a float proven equal to 0.3: the two numbers are told apart (g++: the float's whole value
     0.30000001192092896; clang: the digits of each, 30000001192092896e-17 and 3e-1);
   - a shape mismatch: names both shapes.
3. The tool: `qkv explain illustrated --htm x.html` is an unknown option; `--html` says where it
   wrote the page (a file:// address); a case on standard input (`-`); how each screen counts.
4. Every page (`qkv explain NAME --html` for every example, four `qkv attend --html` cases) in
   headless chromium at 1400 and 420 px wide: no sideways scroll
   (document.documentElement.scrollWidth <= innerWidth), and a tooltip opened on a cell near the
   bottom of the window stays inside it. Screenshots at 420 px: OUT_DIR/first_hour_*_420.png.
One browser session for all pages. Exit 77 (meson: skipped) when chromium or its driver is missing
(steps 1-3 have run by then and their failures still count).
"""
import os
import re
import subprocess
import sys
import time

argv = sys.argv[1:]
sep = argv.index('--')
QKV, ROOT, OUT = argv[:sep]
CXX = argv[sep + 1:]
os.makedirs(OUT, exist_ok=True)
INCLUDE = os.path.join(ROOT, 'include')
failures = []
t_start = time.time()


def check(cond, what):
    print(('ok:   ' if cond else 'FAIL: ') + what)
    if not cond:
        failures.append(what)
    return cond


def compile_text(name, text, std='-std=c++20'):
    path = os.path.join(OUT, name)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)
    r = subprocess.run(CXX + ([std] if std else []) + ['-fsyntax-only', '-I', INCLUDE, path],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


# which compiler it is, as it says itself (meson may put ccache in front of it)
version = subprocess.run(CXX + ['--version'], capture_output=True, text=True).stdout
compiler = 'clang' if 'clang' in version else 'g++'
print('compiler: %s (%s)' % (' '.join(CXX), compiler))

# --- 1. docs/proofs.md's first proof, as the page gives it ---------------------------------------
with open(os.path.join(ROOT, 'docs', 'proofs.md'), encoding='utf-8') as f:
    page = f.read()
blocks = re.findall(r'<!-- from: tests/static/first_proof_test.cpp -->\n```cpp\n(.*?)```', page, re.S)
check(len(blocks) >= 4, 'docs/proofs.md gives the first proof in %d code blocks' % len(blocks))
includes = [b for b in blocks if b.lstrip().startswith('#include')]
rest = [b for b in blocks if not b.lstrip().startswith('#include')]
# "(with `using qkv::matrix; using qkv::proven; namespace check = qkv::check;` above them)"
using = re.search(r'\(with `(using qkv::matrix;[^`]*)` above them\)', page)
check(using is not None, 'docs/proofs.md says which using-declarations go above the code')
text = ''.join(includes) + '\n' + (using.group(1) if using else '') + '\n\n' + '\n'.join(rest)
rc, out = compile_text('first_proof.cpp', text)
check(rc == 0 and out.strip() == '', 'the first proof of docs/proofs.md, pasted together, compiles with %s and prints '
      'nothing (exit %d%s)' % (compiler, rc, (': ' + out[:400]) if out.strip() else ''))

# --- 2. the mistakes, and what the compiler says ---------------------------------------------------
PRE = '#include <qkv/qkv.hpp>\nusing qkv::matrix;\nnamespace check = qkv::check;\n'
mistakes = [
    ('without_proven.cpp', 'static_assert(check::equal(...)) without proven<...>, failing',
     PRE + 'constexpr matrix<float, 1, 2> a{{{1, 2}}};\nstatic_assert(check::equal(a, matrix<float, 1, 2>{{{1, 3}}}));\n', '-std=c++20',
     {'g++': ['write_static_assert_qkv_proven_check_to_see_the_position_and_numbers'],
      'clang': ['failed_at_row_col_actual_expected(0, 1, 2.000000e+00, 3.000000e+00)']}),
    ('no_cxx20.cpp', 'compiled without -std=c++20 (C++17)',
     PRE + 'int main() {}\n', '-std=c++17',
     {'g++': ['qkv_needs_cxx20__compile_with_std_cxx20'], 'clang': ['qkv_needs_cxx20__compile_with_std_cxx20']}),
    ('square_weights.cpp', 'square weights without a layout',
     PRE + 'constexpr matrix<float, 2, 3> x{{{1, 0, 1}, {0, 2, 0}}};\nconstexpr matrix<float, 3, 3> w{};\n'
     'constexpr auto q = qkv::project(x, w);\n', '-std=c++20',
     {'g++': ['add_qkv_in_out_or_qkv_out_in_as_the_last_argument'],
      'clang': ['add_qkv_in_out_or_qkv_out_in_as_the_last_argument<3UL, 3UL>\' evaluated to false']}),
    ('float_vs_decimal.cpp', 'a float proven equal to 0.3',
     PRE + 'constexpr float x = 0.3f;\nstatic_assert(qkv::proven<check::equal(x, 0.3)>);\n', '-std=c++20',
     {'g++': ['actual 0.3 (0x1.333334p-2f) = 0.30000001192092896 != expected 0.3'],
      'clang': ['actual_is_digits_times_ten_to(30000001192092896, -17)', 'expected_is_digits_times_ten_to(3, -1,']}),
    ('shapes.cpp', 'a product of (3, 4) by (2, 5)',
     PRE + 'constexpr matrix<double, 3, 4> a{};\nconstexpr matrix<double, 2, 5> b{};\nconstexpr auto c = qkv::matrix_product(a, b);\n', '-std=c++20',
     {'g++': ['matrix<double, 3, 4>', 'matrix<double, 2, 5>'], 'clang': ['ARows = 3, ACols = 4, BRows = 2, BCols = 5']}),
]
for name, what, src, std, want in mistakes:
    rc, out = compile_text(name, src, std)
    lines = out.count('\n')
    with open(os.path.join(OUT, name + '.%s.txt' % compiler), 'w', encoding='utf-8') as f:
        f.write(out)
    missing = [w for w in want[compiler] if w not in out]
    check(rc != 0 and not missing, '%s: %s stops (%d lines) and prints %s%s'
          % (what, compiler, lines, want[compiler], ('; missing %s' % missing) if missing else ''))
    if name == 'no_cxx20.cpp':
        check(lines <= 6, 'without -std=c++20: at most 6 lines, got %d' % lines)

# --- 3. the tool -------------------------------------------------------------------------------------
r = subprocess.run([QKV, 'explain', 'illustrated', '--htm', os.path.join(OUT, 'x.html')], capture_output=True, text=True)
check(r.returncode == 2 and r.stdout == '' and "unknown option '--htm'" in r.stderr,
      'qkv explain illustrated --htm x.html: exit 2, "unknown option \'--htm\'" (%s)' % r.stderr.strip()[:120])
html = os.path.join(OUT, 'first_hour_illustrated.html')
r = subprocess.run([QKV, 'explain', 'illustrated', '--html', html], capture_output=True, text=True)
last = r.stdout.rstrip('\n').split('\n')[-1]
check(r.returncode == 0 and r.stderr == '' and last == 'wrote %s (open file://%s in a browser)' % (html, os.path.abspath(html)),
      'qkv explain --html ends with where it wrote the page: %r' % last)
check(r.stdout.startswith('(counting from 1'), 'qkv explain says how it counts, first: %r' % r.stdout[:60])
case = os.path.join(ROOT, 'tests', 'cli', 'attend', 'illustrated.json')
with open(case, encoding='utf-8') as f:
    r = subprocess.run([QKV, 'attend', '-'], stdin=f, capture_output=True, text=True)
direct = subprocess.run([QKV, 'attend', case], capture_output=True, text=True)
check(r.returncode == 0 and r.stdout.startswith('qkv attend standard input: ') and
      r.stdout.split('\n', 1)[1] == direct.stdout.split('\n', 1)[1],
      'qkv attend - reads the case from standard input, the same trace as from the file')
check('(this trace counts from 0' in direct.stdout, 'qkv attend\'s trace says how it counts')
r = subprocess.run([QKV, 'attend', '-'], input='{"x": [[1, 2]], "wq": "no"}', capture_output=True, text=True)
check(r.returncode == 2 and r.stdout == '' and r.stderr.startswith('qkv attend: standard input'),
      'a bad case on standard input: exit 2 naming "standard input" (%s)' % r.stderr.strip()[:100])
print('steps 1-3: %.1f s' % (time.time() - t_start))

# --- 4. every page at 1400 and 420 px ---------------------------------------------------------------
sys.path.insert(0, os.path.join(ROOT, 'tests', 'support'))
import browser  # noqa: E402  (tests/support/browser.py: headless chromium through selenium)
if browser.missing():
    print('SKIP (pages): ' + browser.missing())
    sys.exit(1 if failures else 77)
from selenium.webdriver.common.by import By  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, 'scripts'))
import examples  # noqa: E402  (scripts/examples.py: the one list of examples)
names = [e['name'] for e in examples.with_page()]  # every example with a learner's page
pages = []
for n in names:
    p = os.path.join(OUT, 'first_hour_%s.html' % n)
    r = subprocess.run([QKV, 'explain', n, '--html', p], capture_output=True, text=True)
    if check(r.returncode == 0, 'qkv explain %s --html' % n):
        pages.append((n, p))
for c in ['illustrated', 'statquest', 'causal', 'chapter_two']:
    p = os.path.join(OUT, 'first_hour_attend_%s.html' % c)
    r = subprocess.run([QKV, 'attend', os.path.join(ROOT, 'tests', 'cli', 'attend', c + '.json'), '--html', p], capture_output=True, text=True)
    if check(r.returncode == 0, 'qkv attend %s --html' % c):
        pages.append(('attend_' + c, p))

driver = browser.start(extra=['--hide-scrollbars'])
try:
    for width in (1400, 420):
        driver.set_window_size(width, 900)
        inner = driver.execute_script('return window.innerWidth')
        for name, path in pages:
            browser.open_page(driver, path)
            sw, iw = driver.execute_script('return [document.documentElement.scrollWidth, window.innerWidth]')
            check(sw <= iw, '%s at %d px (inner %d): no sideways scroll (scrollWidth %d)' % (name, width, inner, sw))
            check(driver.find_elements(By.ID, 'numbering') != [], '%s at %d px: the page says how it counts' % (name, width))
            if width == 420:
                # a cell near the bottom of the window: its tooltip opens where it is seen
                cells = driver.find_elements(By.CSS_SELECTOR, 'td[data-m]')
                if cells:
                    c = cells[len(cells) // 2]
                    driver.execute_script('arguments[0].scrollIntoView({block: "end"}); window.scrollBy(0, 40)', c)
                    browser.actions(driver).move_to_element(c).perform()
                    box = driver.execute_script('const t = document.getElementById("qkv-tip"), r = t.getBoundingClientRect(),'
                                                ' c = arguments[0].getBoundingClientRect();'
                                                'return [t.hidden, r.left, r.top, r.right, r.bottom, innerWidth, innerHeight, c.top, c.bottom]', c)
                    hidden, l, t, rr, b, w, h, ct, cb = box
                    # on screen, and not over its cell (the mouse would leave the cell and close it)
                    check(not hidden and l >= 0 and rr <= w and t >= 0 and b <= h and (b <= ct or t >= cb),
                          '%s at 420 px: a tooltip near the bottom stays on screen, off its cell: (%.0f, %.0f)-(%.0f, %.0f) '
                          'in %dx%d, the cell %.0f-%.0f' % (name, l, t, rr, b, w, h, ct, cb))
                    driver.execute_script('document.getElementById("qkv-tip").hidden = true; window.scrollTo(0, 0)')
                if name in ('illustrated', 'bert', 'from_scratch', 'masking', 'attend_chapter_two'):
                    driver.save_screenshot(os.path.join(OUT, 'first_hour_%s_420.png' % name))
finally:
    browser.stop()

print('first hour replayed in %.1f s' % (time.time() - t_start))
if failures:
    print('\n%d checks failed' % len(failures))
    sys.exit(1)
print('all checks passed')
