#!/usr/bin/env python3
"""training_page_test.py: the training page (include/qkv/io/training_page.hpp) in headless
chromium (Debian's chromium, chromium-driver and python3-selenium; scripts/setup.sh).

    training_page_test.py WRITER SOURCE_ROOT OUT_DIR

WRITER is tests/browser/training_page_write (TRACE OUT.html), the page's function alone, until
`qkv train --html` calls it. On the page of tests/data/train/reverse_trace_torch.json (made by
scripts/fixtures/training_trace_torch.py in PyTorch 1.13) it checks, against the trace read
here with Python's json, not against the page:
  - it is well-formed XML; it loads from file:// with no console warning or error and no network request;
  - one heatmap per layer and head, each with the snapshot's tokens on both axes;
  - the slider (moved with the keyboard: Home, End, arrows) redraws every cell of every head with
    the colour of the snapshot's weight, the readout names the snapshot's step and its losses,
    and the loss chart's marker moves to that step;
  - hovering a cell (a real mouse move) shows its weight, equal as a double to the trace's;
  - the loss curve has one point per train loss and one per held-out loss that is not null, the
    accuracy curve one per accuracy point, at the right coordinates (step and value);
  - the answers table holds the trace's answers, right or wrong as the trace says;
  - at 420 px the page does not scroll sideways;
  - the malformed traces of the doctests are refused with exit 2 and nothing written.
Screenshots at 1280 and 420 px in OUT_DIR. Exit 77 (meson: skipped) when chromium is missing.
"""
import decimal
import json
import math
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

WRITER, ROOT, OUT = sys.argv[1:4]
sys.path.insert(0, os.path.join(ROOT, 'tests', 'support'))
import browser  # noqa: E402  (tests/support/browser.py)

os.makedirs(OUT, exist_ok=True)
check = browser.check
failures = browser.failures


# the page names its trace file (header and footer): written from a copy in a folder with a long
# name, so that 420 px checks that a long path wraps (a CI clone's path once did not)
FIXTURE = os.path.join(ROOT, 'tests', 'data', 'train', 'reverse_trace_torch.json')
long_folder = os.path.join(OUT, 'a_folder_with_the_long_name_a_learner_might_give_it_' * 2)
os.makedirs(long_folder, exist_ok=True)
TRACE = os.path.join(long_folder, 'reverse_trace_torch.json')
with open(FIXTURE, 'rb') as src, open(TRACE, 'wb') as dst:
    dst.write(src.read())
trace = json.load(open(TRACE))
PAGE = os.path.join(OUT, 'training_reverse.html')
r = subprocess.run([WRITER, TRACE, PAGE], capture_output=True, text=True)
if r.returncode != 0:
    raise SystemExit('training_page_write failed (%d): %s' % (r.returncode, r.stderr))
size = os.path.getsize(PAGE)
print('the training page of %s: %d bytes' % (os.path.basename(TRACE), size))
check(size < 200 * 1024, 'the page is under the 200 KB budget of a learner\'s page (%d bytes)' % size)

# well-formed XML, as the other pages (an XML parser reads it: tests/io/check_xml.py)
try:
    ET.parse(PAGE)
    well_formed = True
except ET.ParseError as e:
    well_formed = e
check(well_formed is True, 'the page is well-formed XML: %s' % well_formed)

# a bad trace: exit 2, the field named, nothing written (the tool's rule for bad input)
bad = dict(trace, format='qkv-training-trace-0')
bad_path, bad_page = os.path.join(OUT, 'bad_trace.json'), os.path.join(OUT, 'bad.html')
json.dump(bad, open(bad_path, 'w'))
if os.path.exists(bad_page):
    os.remove(bad_page)
r = subprocess.run([WRITER, bad_path, bad_page], capture_output=True, text=True)
check(r.returncode == 2 and "field 'format'" in r.stderr and not r.stdout and not os.path.exists(bad_page),
      'a bad trace: exit 2 naming the field, nothing written (%d, %r)' % (r.returncode, r.stderr))

if browser.missing():
    print('SKIP: ' + browser.missing())
    sys.exit(77 if not failures else 1)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

L, H = trace['model']['layers'], trace['model']['heads']
S = trace['snapshots']
BLUES = [[247, 251, 255], [222, 235, 247], [198, 219, 239], [158, 202, 225], [107, 174, 214], [66, 146, 198],
         [33, 113, 181], [8, 81, 156], [8, 48, 107]]


def colour(t):
    """the page's colour of a weight t (matplotlib's Blues, linear between its 9 anchors), rgb()"""
    t = min(1.0, max(0.0, t)) * 8
    i = min(7, math.floor(t))
    f = t - i
    # JavaScript's Math.round: halves go up (Python's round() goes to even)
    c = [math.floor(BLUES[i][k] + (BLUES[i + 1][k] - BLUES[i][k]) * f + 0.5) for k in range(3)]
    return '#%02x%02x%02x' % tuple(c)


driver = browser.start(logs=True)


def load(width):
    driver.set_window_size(width, 900)
    browser.open_page(driver, PAGE, logs=True)
    check(driver.execute_script('return !!(window.qkvTraining && window.qkvTraining.ready)'),
          '%d px: the script ran' % width)
    logs, requests, resources = browser.page_logs(driver, PAGE)
    check(not logs, '%d px: no console warning or error, got %s' % (width, logs))
    check(not requests, '%d px: no network request, got %s' % (width, requests))
    check(not resources, '%d px: no resource loaded, got %s' % (width, resources))


def screenshot(png, width):
    driver.execute_script('window.scrollTo(0, 0)')
    h = driver.execute_script('return Math.min(document.documentElement.scrollHeight, 7000)')
    driver.set_window_size(width, max(900, h))
    driver.save_screenshot(os.path.join(OUT, png))
    driver.set_window_size(width, 900)


load(1280)

# ---- the heatmaps: one per layer and head, the snapshot's tokens on both axes
figs = driver.find_elements(By.CSS_SELECTOR, '#heatmaps figure')
check(len(figs) == L * H, 'one heatmap per layer and head: %d, want %d' % (len(figs), L * H))


def shown():
    """{(l, h, i, j): fill} of every unmasked cell, and the slider's value"""
    cells = driver.execute_script(
        'return Array.from(document.querySelectorAll("#heatmaps rect.c")).map(r => '
        '[+r.dataset.l, +r.dataset.h, +r.dataset.i, +r.dataset.j, r.getAttribute("fill")])')
    return {tuple(c[:4]): c[4] for c in cells}


def number_after(text, prefix):
    """the number the page wrote after `prefix` (JavaScript's String(v): the shortest text that
    reads back to the double, a minus as U+2212), as a float; None when absent"""
    m = re.search(re.escape(prefix) + r'([\u2212\-]?[0-9.]+(?:e[+\-]?[0-9]+)?)', text)
    return float(m.group(1).replace('\u2212', '-')) if m else None


def check_snapshot(k, how):
    s = S[k]
    T = len(s['tokens'])
    cells = shown()
    check(len(cells) == L * H * T * T, '%s: %d cells, want %d' % (how, len(cells), L * H * T * T))
    wrong = []
    for l in range(L):
        for h in range(H):
            for i in range(T):
                for j in range(T):
                    want = colour(s['attention'][l][h][i][j]) if j <= i else 'url(#hatch-%d-%d)' % (l, h)
                    if cells.get((l, h, i, j)) != want:
                        wrong.append(((l, h, i, j), cells.get((l, h, i, j)), want))
    check(not wrong, '%s: every cell coloured by snapshot %d (step %d)\'s weight: %d differ, first %s'
          % (how, k, s['step'], len(wrong), wrong[:3]))
    # the values written in the cells (T <= 16): 2 decimals, as JavaScript's toFixed rounds the
    # exact value of the double (a tie goes up), "0" for 0
    texts = driver.execute_script(
        'var out = {}; document.querySelectorAll("#heatmaps rect.c").forEach(r => { var t = r.nextElementSibling;'
        ' if (t && t.tagName === "text" && t.getAttribute("pointer-events") === "none")'
        ' out[[r.dataset.l, r.dataset.h, r.dataset.i, r.dataset.j].join()] = t.textContent; }); return out')
    bad_text = []
    for l in range(L):
        for h in range(H):
            for i in range(T):
                for j in range(i + 1):
                    v = s['attention'][l][h][i][j]
                    want = '0' if v == 0 else str(decimal.Decimal(v).quantize(decimal.Decimal('0.01'), decimal.ROUND_HALF_UP))
                    if texts.get('%d,%d,%d,%d' % (l, h, i, j)) != want:
                        bad_text.append(((l, h, i, j), texts.get('%d,%d,%d,%d' % (l, h, i, j)), want))
    check(not bad_text, '%s: every visible cell writes its weight to 2 decimals: %d differ, first %s'
          % (how, len(bad_text), bad_text[:3]))
    labels = driver.execute_script(
        'return Array.from(document.querySelectorAll("#head-0-0 text.row")).map(t => t.textContent)')
    check(labels == ['%d %s' % (i + 1, t) for i, t in enumerate(s['tokens'])],
          '%s: the rows are labelled with the tokens: %s' % (how, labels))
    readout = driver.find_element(By.ID, 'readout').text
    check(readout.startswith('step %d (snapshot %d of %d)' % (s['step'], k + 1, len(S))),
          '%s: the readout names the step: %r' % (how, readout))
    loss = [p for p in trace['loss'] if p[0] == s['step']]
    if loss:
        check(number_after(readout, 'train loss ') == loss[0][1],
              '%s: the readout gives the train loss %r: %r' % (how, loss[0][1], readout))
        if loss[0][2] is not None:
            check(number_after(readout, 'held-out loss ') == loss[0][2],
                  '%s: the readout gives the held-out loss %r: %r' % (how, loss[0][2], readout))
    # the loss chart's marker at the step
    x0, x1, s0, s1, mx = driver.execute_script(
        'var c = document.getElementById("loss-chart"), m = c.querySelector("line.marker");'
        'return [+c.dataset.x0, +c.dataset.x1, +c.dataset.s0, +c.dataset.s1, +m.getAttribute("x1")]')
    want = x0 + (s['step'] - s0) / (s1 - s0) * (x1 - x0)
    check(abs(mx - want) <= 0.005, '%s: the marker at step %d: x %g, want %g' % (how, s['step'], mx, want))


check(int(driver.find_element(By.ID, 'step').get_attribute('value')) == len(S) - 1, 'the page opens at the last step')
check_snapshot(len(S) - 1, 'opened')
slider = driver.find_element(By.ID, 'step')
slider.send_keys(Keys.HOME)
check_snapshot(0, 'Home')
slider.send_keys(Keys.ARROW_RIGHT)
check_snapshot(1, 'arrow right')
for _ in range(len(S) // 2 - 1):
    slider.send_keys(Keys.ARROW_RIGHT)
check_snapshot(len(S) // 2, 'arrows to the middle')
# the snapshot changed the picture: the first and the last differ somewhere (training happened)
check(any(S[0]['attention'][l][h][i][j] != S[-1]['attention'][l][h][i][j]
          for l in range(L) for h in range(H) for i in range(8) for j in range(i + 1)), 'the weights changed')

# ---- hover: a cell's value equal to the trace's, at the snapshot the slider shows
k = len(S) // 2
s = S[k]
T = len(s['tokens'])
for (l, h, i, j) in [(L - 1, 0, T - 1, 0), (L - 1, H - 1, T // 2, T // 2 - 1), (0, 0, 0, 0), (0, H - 1, 2, 3)]:
    cell = driver.find_element(By.CSS_SELECTOR, 'rect.c[data-l="%d"][data-h="%d"][data-i="%d"][data-j="%d"]'
                               % (l, h, i, j))
    driver.execute_script('arguments[0].scrollIntoView({block: "center"})', cell)
    browser.actions(driver).move_to_element(cell).perform()
    tip = driver.find_element(By.ID, 'qkv-tip')
    text = tip.text
    want = s['attention'][l][h][i][j]
    got = None
    for line in text.splitlines():
        if line.startswith('weight = '):
            got = float(line[len('weight = '):].replace('\u2212', '-'))
    check(tip.is_displayed() and got == want,
          'hover layer %d head %d (%d, %d) at step %d: %r, want %r' % (l, h, i, j, s['step'], got, want))
    check('query %d \u201c%s\u201d, key %d \u201c%s\u201d' % (i + 1, s['tokens'][i], j + 1, s['tokens'][j]) in text,
          'hover names the query and key tokens: %r' % text)
    check((j > i) == ('masked' in text), 'hover says masked exactly above the diagonal: %r' % text)

# ---- keyboard focus shows the same
cell = driver.find_element(By.CSS_SELECTOR, 'rect.c[data-l="0"][data-h="0"][data-i="1"][data-j="0"]')
browser.actions(driver).move_to_element(driver.find_element(By.TAG_NAME, 'h1')).perform()
driver.execute_script('arguments[0].focus()', cell)
tip = driver.find_element(By.ID, 'qkv-tip')
check(tip.is_displayed() and number_after(tip.text, 'weight = ') == s['attention'][0][0][1][0],
      'keyboard focus shows the weight: %r' % tip.text)
driver.find_element(By.TAG_NAME, 'body').send_keys(Keys.ESCAPE)
check(not tip.is_displayed(), 'Escape hides it')

# ---- play: the slider advances by itself from the first snapshot
driver.find_element(By.ID, 'step').send_keys(Keys.END)
driver.find_element(By.ID, 'play').click()
time.sleep(1.6)
now = driver.execute_script('return window.qkvTraining.current()')
check(1 <= now <= 4, 'play went from the last snapshot to the first and on: at snapshot %d after 1.6 s' % now)
driver.find_element(By.ID, 'play').click()
check(driver.find_element(By.ID, 'play').text == 'Play', 'a second click pauses')
check_snapshot(driver.execute_script('return window.qkvTraining.current()'), 'paused')


# ---- the curves: the trace's points at the right coordinates
def points(css):
    p = driver.execute_script('var e = document.querySelector(arguments[0]); return e ? e.getAttribute("points") : ""', css)
    return [tuple(map(float, q.split(','))) for q in p.split()]


def axis(chart):
    return driver.execute_script(
        'var c = document.getElementById(arguments[0]); return [+c.dataset.x0, +c.dataset.x1, +c.dataset.s0, +c.dataset.s1]',
        chart)


train = [(p[0], p[1]) for p in trace['loss']]
held = [(p[0], p[2]) for p in trace['loss'] if p[2] is not None]
tp, hp = points('#loss-chart polyline.train'), points('#loss-chart polyline.heldout')
check(len(tp) == len(train), 'the train loss curve has %d points, want %d' % (len(tp), len(train)))
check(len(hp) == len(held), 'the held-out loss curve has %d points, want %d' % (len(hp), len(held)))
x0, x1, s0, s1 = axis('loss-chart')
check(s0 == train[0][0] and s1 == train[-1][0], 'the loss chart spans steps %g..%g' % (s0, s1))
# x: the step, y: the value (written with 2 decimals: within 0.005 px). The loss axis is log10
# from 10^floor(log10 min) to 10^ceil(log10 max) when the losses span two decades and never reach
# 0 (training_page.hpp), else linear from 0 to 1.05 max; the plot box is y 14 (top) to 222.
values = [v for _, v in train + held]
lo, hi = min(values), max(values)
log_y = lo > 0 and hi / lo >= 100
check(log_y, 'the fixture\'s losses (%g..%g) are drawn on a log axis' % (lo, hi))
ya, yb = math.floor(math.log10(lo)), math.ceil(math.log10(hi))


def y_of(v):
    return 14 + (yb - math.log10(v)) / (yb - ya) * (222 - 14)


for name, drawn, want in (('train', tp, train), ('held-out', hp, held)):
    bad = [(p, q) for p, q in zip(drawn, want)
           if abs(p[0] - (x0 + (q[0] - s0) / (s1 - s0) * (x1 - x0))) > 0.005 or abs(p[1] - y_of(q[1])) > 0.005]
    check(not bad, 'each %s loss point at its step and value: %d off, first %s' % (name, len(bad), bad[:2]))
ap = points('#accuracy-chart polyline.acc')
check(len(ap) == len(trace['accuracy']), 'the accuracy curve has %d points, want %d' % (len(ap), len(trace['accuracy'])))
# the accuracy axis is linear from 0 (bottom, y 222) to 1 (top, y 14): the chart's plot box
check(all(abs(p[1] - (14 + (1 - q[1]) * (270 - 48 - 14))) <= 0.005 for p, q in zip(ap, trace['accuracy'])),
      'each accuracy point at its value')

# ---- the answers
rows = driver.execute_script(
    'return Array.from(document.querySelectorAll("table.answers tbody tr")).map(r => '
    '[...Array.from(r.cells).map(c => c.textContent), r.className])')
check(len(rows) == len(trace['answers']), 'one row per answer: %d' % len(rows))
for row, a in zip(rows, trace['answers']):
    check(row[:3] == [a['input'], a['expected'], a['output']] and row[4] == ('right' if a['correct'] else 'wrong'),
          'answer %r as the trace has it: %r' % (a, row))
driver.find_element(By.ID, 'step').send_keys(Keys.END)  # the learned attention in the picture
screenshot('training_reverse_1280.png', 1280)

# ---- 420 px: no sideways scroll; the heatmaps still there
load(420)
wide = driver.execute_script('return [document.documentElement.scrollWidth, document.documentElement.clientWidth]')
check(wide[0] <= wide[1], '420 px: no horizontal scroll (scrollWidth %d, clientWidth %d)' % tuple(wide))
check_snapshot(len(S) - 1, '420 px')
screenshot('training_reverse_420.png', 420)

print('screenshots in', OUT)
browser.finish('all training page checks passed')
