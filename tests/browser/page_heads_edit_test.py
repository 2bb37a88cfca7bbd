#!/usr/bin/env python3
"""page_heads_edit_test.py: the number of heads as an option of a `qkv attend --html` page (issue 30:
"scale, causal, mask cells, heads, window"; docs/pages.md, "Editing a page").

    page_heads_edit_test.py QKV QKV_WASM_CHECK SOURCE_ROOT OUT_DIR

In headless chromium, from file://, the learner types a number of heads H' into the panel's heads
field (the real UI: the field, Enter). The page recomputes the case with H' heads in its
WebAssembly module and draws its per-head steps again for H' heads; after each change every
number in the page's data (the queries, keys and values, each head's scores, scaled scores,
weights and context, the heads side by side, the output) must equal, bit for bit,
`qkv attend --json --arithmetic core` run natively on the case written with `"heads": H'` (and
kv_heads H' / G on a grouped-query case, G = heads / kv_heads of the case: wk and wv are written
for key/value heads that each serve G query heads), the page's inputs, mask cells, causal and
window, and no `scale` unless the case or the learner gave one: so the page's default scale for
H' heads (1/sqrt(d_q / H'), made in the page's script) is checked against the tool's own. The
page's tables and heatmap are checked for H' heads (each head's matrices on the page, their
columns, the heatmap's head selector, a score's explanation summing d_q / H' terms of head h's
columns). Cases: d = 8 with 2 heads -> 1, 4, 8 and back to 2 (the page's own bits again);
NaN and inf typed in at 4 heads; a scale typed in, kept across a change of heads; grouped-query
(4 heads on 2 key/value heads -> 2 on 1, 8 on 4; 1 refused: not a multiple of 2);
causal with a window, a masked cell (allowed) and a key masked with Alt+click, carried over;
a case that gives its scale (kept); two summarised pages (128 tokens over d_model 32, in full; 48
tokens over d_model 512 from its queries, keys and values, checked against the tool's q/k/v form);
after each change the page's steps and per-head matrices (titles, captions, labels, shown rows and
columns, how each cell is computed, the heatmap) are those of `qkv attend --html` on the case with
H' heads (but a summarised page from its queries, keys and values: --html refuses that form);
refused numbers (3 on d_q 8, "abc", 0: the field turns red
and says why); an ALiBi page (the field disabled, saying why); Reset (the page's heads and bits).
The time of each change (the module's, and with the page rebuilt and redrawn) is printed, not
asserted. Screenshots in OUT_DIR. Exit 77 (skipped) without chromium, or without the module.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import page_edit_test as pe  # noqa: E402  (its helpers: the case from the page's bits, the tool's --json)
import browser  # noqa: E402  (tests/support/, put on the path by page_edit_test)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

QKV, ROOT, OUT = pe.QKV, pe.ROOT, pe.OUT
check = browser.check


def cases():
    two = pe.random_case(51, 4, 8, 2, 8, 8, 5)  # d = 8, 2 heads, wo with biases
    gqa = pe.random_case(52, 4, 6, 4, 8, 8, 3, biases=False)  # 4 query heads on 2 key/value heads
    gqa['wk'], gqa['wv'], gqa['kv_heads'] = gqa['wk'][:4], gqa['wv'][:4], 2
    masked = pe.random_case(53, 5, 4, 2, 8, 4, 0, causal=True)  # causal, a window, a masked cell
    masked['window'] = 3
    masked['allowed'] = [[not (i == 4 and j == 2) for j in range(5)] for i in range(5)]
    given = pe.random_case(54, 3, 4, 1, 4, 4, 0, dtype='float64')  # one head, its scale given
    given['scale'] = 0.25
    alibi = pe.random_case(55, 3, 4, 2, 4, 4, 0, causal=True)
    alibi['alibi'] = True
    # summarised pages (above 65,536 numbers): 128 tokens over d_model 32, 4 heads (x and the weights
    # embedded whole: every step recomputed); 32 tokens over d_model 256, 8 heads (its inputs are
    # the queries, keys and values: x and the weights do not fit the page)
    full = pe.random_case(56, 128, 32, 4, 32, 32, 0, biases=False)
    projected = pe.random_case(57, 48, 512, 8, 512, 512, 0, causal=True, biases=False)
    return [('two_heads', two, [1, 4, 8, 2]), ('gqa', gqa, [2, 8, 4]), ('causal_window_masked', masked, [1, 4, 2]),
            ('scale_given', given, [2, 4, 1]), ('alibi', alibi, []), ('summarised_full', full, [8, 2]),
            ('summarised_projected', projected, [16, 4])]


def type_heads(driver, text):
    """the learner types `text` into the heads field and presses Enter"""
    f = driver.find_element(By.ID, 'edit-heads')
    f.send_keys(Keys.CONTROL, 'a')
    f.send_keys(str(text), Keys.ENTER)


def page_state(driver):
    return driver.execute_script('var s = window.qkvPage.editor().state; '
                                 'return [s.scale, s.causal, s.window, s.cells, s.heads, s.kv_heads, s.scaleTyped];')


def outputs_for(spec, n):
    """the module's steps the page shows for n heads, as edit_spec names them"""
    hid = (lambda b, h: '%s[%d]' % (b, h)) if n > 1 else (lambda b, h: b)
    o = ['queries', 'keys', 'values']
    for h in range(n):
        o += [hid('scores', h), hid('scaled', h), hid('weights', h), hid('context', h)]
    o += ['concat'] if n > 1 else []
    o += ['output'] if spec['inputs'].get('wo') else []
    return o


def page_view(data, n, typed):
    """what a page's steps and per-head matrices say, from its data (the script's D, or the tool's
    JSON), without what an edit makes stale: a Step 4 title's rows that sum to 1 or are NaN (the
    numbers' own), and a scale typed into the panel said as the learner's (the tool says the case's)"""
    def title(t):
        t = re.sub(r'\), (each row sums to 1|every row NaN).*$', ')', t)
        return re.sub(r'\(scale .*?, mask ', '(scale, mask ', t) if typed else t
    hid = (lambda b, h: '%s[%d]' % (b, h)) if n > 1 else (lambda b, h: b)
    ids = [hid(b, h) for h in range(n) for b in ('scores', 'added', 'scaled', 'weights', 'context')] + ['concat', 'output']
    mats = {}
    for i in ids:
        m = data['matrices'].get(i)
        if m is None or (i == 'concat' and n == 1):
            continue
        how = dict(m.get('how') or {})
        if typed:  # the page's own heads' explanations keep the case's scale after a scale is typed (about its inputs)
            how.pop('note', None)
            how.pop('scale', None)
        mats[i] = [m['rows'], m['cols'], m.get('caption'), m.get('row_labels'), m.get('col_labels'), m.get('shown_rows'),
                   m.get('shown_cols'), sorted(how.items())]
    steps = [[title(st['title']), st['prose'], st['where'],
              [[it['kind'], it['text'], it.get('ids'), it.get('names')] for it in st['items']]] for st in data['steps']]
    return steps, mats


def native_page_matches(case, n, typed):
    """(True, '') when the open page's steps and per-head matrices are those of `qkv attend --html`
    on `case` (with n heads), else (False, what differs)"""
    path = os.path.join(TMP, 'native_heads.json')
    with open(path, 'w') as f:
        json.dump(case, f)
    html = os.path.join(TMP, 'native_heads.html')
    r = subprocess.run([QKV, 'attend', path, '--html', html], capture_output=True, text=True)
    if r.returncode:
        return False, 'qkv attend --html failed: ' + r.stderr
    with open(html) as f:
        text = f.read()
    at = text.index('id="qkv-data">') + len('id="qkv-data">')
    native = page_view(json.loads(text[at:text.index('</script>', at)]), n, typed)
    ours = page_view(DRIVER[0].execute_script(
        'var D = window.qkvPage.data, M = {}; Object.keys(D.matrices).forEach(function (k) { var m = D.matrices[k]; '
        'M[k] = {rows: m.rows, cols: m.cols, caption: m.caption, row_labels: m.row_labels, col_labels: m.col_labels, '
        'shown_rows: m.shown_rows, shown_cols: m.shown_cols, how: m.how}; }); '
        'return {matrices: M, steps: D.steps.map(function (st) { return {title: st.title, prose: st.prose, where: st.where, '
        'items: st.items.map(function (it) { return {kind: it.kind, text: it.text, ids: it.ids, names: it.names}; })}; })};'), n, typed)
    if native[0] != ours[0]:
        bad = [(a, b) for a, b in zip(native[0], ours[0]) if a != b][:2]
        return False, 'the steps (%d, %d): %r' % (len(native[0]), len(ours[0]), bad)
    bad = [k for k in native[1] if native[1][k] != ours[1].get(k)]
    return (not bad, '' if not bad else 'matrices %s: %r != %r' % (bad, native[1][bad[0]], ours[1].get(bad[0])))


DRIVER = []
TMP = tempfile.mkdtemp(prefix='qkv-heads-native-')


def mat(b, rows, cols):
    """a matrix of float32 bits as the case file's rows"""
    v = [struct.unpack('<f', b[k:k + 4])[0] for k in range(0, len(b), 4)]
    return [v[i * cols:(i + 1) * cols] for i in range(rows)]


def sp_kv(sp):
    """the keys' and the values' columns (kv_heads heads)"""
    return pe.kv_sizes(sp)[1:]


def main():
    driver = browser.start(1280, 1000)
    driver.set_script_timeout(60)
    DRIVER.append(driver)
    tmp = tempfile.mkdtemp(prefix='qkv-heads-')
    times = []
    for name, case, plan in cases():
        path = os.path.join(tmp, name + '.json')
        with open(path, 'w') as f:
            json.dump(case, f)
        html = os.path.join(OUT, 'heads_%s.html' % name)
        r = subprocess.run([QKV, 'attend', path, '--html', html], capture_output=True, text=True)
        if not check(r.returncode == 0, '%s: qkv attend --html: %s' % (name, r.stderr)):
            continue
        check(os.path.getsize(html) <= 1 << 20, '%s: the page is at most 1 MB (%d bytes)' % (name, os.path.getsize(html)))
        driver.get('file://' + os.path.abspath(html))
        editable = browser.wait_editable(driver, 20)
        status = driver.find_element(By.ID, 'edit-status').text
        if editable != '1':
            if 'qkv was' in status:
                print('SKIP: the tool was built without the WebAssembly module: ' + status)
                return 77
            check(False, '%s: the page is not editable: %s' % (name, status))
            continue
        spec = driver.execute_script('return window.qkvPage.data.edit;')
        field = driver.find_element(By.ID, 'edit-heads')
        if not plan:  # ALiBi: the slopes are per head; the field is disabled and says why
            why = driver.find_element(By.ID, 'edit-heads-why').text
            check(not field.is_enabled() and 'ALiBi' in why and 'slopes' in why,
                  '%s: the heads field is disabled and says why (%r)' % (name, why))
            check(driver.execute_script('return window.qkvPage.editor().heads(1);').startswith('The heads cannot change'),
                  '%s: editor.heads refuses, saying why' % name)
            print('%s: heads fixed, the page says why: %s' % (name, why))
            continue
        f = spec['dtype'] == 'float32'
        size, fmt = (4, '<f') if f else (8, '<d')
        orig = pe.page_bits(driver)
        H0, HK0 = spec['heads'], spec.get('kv_heads') or spec['heads']
        G = H0 // HK0

        def verify(what):
            """every number of the page's steps == qkv attend --json --arithmetic core with the page's heads"""
            bits = pe.page_bits(driver)
            st = page_state(driver)
            n, nk = st[4], st[5]
            sp = dict(spec, heads=n, kv_heads=0 if nk == n else nk)
            if spec.get('projected'):  # a summarised page's inputs: its queries, keys and values (the tool's q/k/v form)
                c = {k: case[k] for k in ('dtype', 'causal', 'window', 'scale') if k in case}
                c.update(q=mat(bits['queries'], spec['t'], spec['dq']), k=mat(bits['keys'], spec['t'], sp_kv(sp)[0]),
                         v=mat(bits['values'], spec['t'], sp_kv(sp)[1]), scale=st[0], causal=st[1], window=st[2],
                         allowed=[[st[3][i * spec['t'] + j] == 0 for j in range(spec['t'])] for i in range(spec['t'])])
            else:
                c = pe.as_case(sp, bits, st, fmt, size, case)
            c['heads'] = n
            c.pop('kv_heads', None)
            if nk != n:
                c['kv_heads'] = nk
            if not any(st[3]) and 'allowed' not in case:  # no cell masked: no allowed (the trace's mask says none)
                c.pop('allowed')
            if not st[6] and 'scale' not in case:  # the page's default for n heads against the tool's
                c.pop('scale')
            doc = pe.tool_json(c, tmp)
            names = outputs_for(spec, n)
            if spec.get('projected'):  # the page's inputs; no output projection recomputed
                names = [x for x in names if x not in ('queries', 'keys', 'values', 'output')]
            missing = [x for x in names if x not in bits]
            off = [x for x in names if x in bits and not pe.same_bits(pe.tool_bits(sp, doc, x, fmt), bits[x], fmt, size)] if doc else names
            check(not missing and not off, '%s, %s: the page differs from qkv attend --json --arithmetic core (heads %d) in %s, '
                  'missing %s' % (name, what, n, off, missing))
            check(doc is not None and struct.pack(fmt, doc['scale']) == struct.pack(fmt, st[0]),
                  '%s, %s: the page\'s scale %r is the tool\'s %r' % (name, what, st[0], doc and doc['scale']))
            # the page's steps and matrices for n heads as the tool writes them: its own page of the
            # case with n heads (titles, captions, labels, shown rows and columns, how each cell is
            # computed, the heatmap), but for what the learner's edits make stale (a title's NaN rows)
            # (a projected page's case is the tool's q/k/v form, which has no page: --html refuses it)
            same, diff = native_page_matches(c, n, st[6]) if not spec.get('projected') else (True, '')
            check(same, '%s, %s: the page\'s steps for %d heads differ from qkv attend --html\'s in %s' % (name, what, n, diff))
            # the page as drawn: each head's tables, the heatmap's heads, a score explained from head h's columns
            dk = spec['dq'] // n
            drawn = driver.execute_script('''
var n = arguments[0], M = window.qkvPage.data.matrices, id = function (b, h) { return n > 1 ? b + '[' + h + ']' : b; }, out = {tables: [], ex: []};
for (var h = 0; h < n; ++h) ['scores', 'scaled', 'weights', 'context'].forEach(function (b) {
  if (document.getElementById('m-' + id(b, h)) && document.querySelector('td[data-m="' + id(b, h) + '"]')) out.tables.push(id(b, h)); });
var sel = document.querySelector('.heatmap select.head-select'); out.heads = sel ? sel.options.length : 1;
var last = id('scores', n - 1), x = window.qkvPage.explain(last, 0, 1);
out.ex = [x.terms ? x.terms.length : -1, x.formula, M[last].how.ac, M[id('context', n - 1)].cols];
out.caption = document.getElementById('m-' + id('context', n - 1)).querySelector('figcaption').textContent;
return out;''', n)
            check(len(drawn['tables']) == 4 * n and drawn['heads'] == n and drawn['ex'][0] == dk and drawn['ex'][2] == (n - 1) * dk
                  and drawn['ex'][3] == spec['dv'] // n,
                  '%s, %s: the page draws %d heads (tables %d, heatmap heads %d, head %d\'s score sums %d terms from column %d, '
                  'context %d columns)' % (name, what, n, len(drawn['tables']), drawn['heads'], n - 1, drawn['ex'][0],
                                           drawn['ex'][2], drawn['ex'][3]))
            last = driver.execute_script('return window.qkvPage.editor().last;')
            if last and 'rebuild_ms' in last:
                times.append(last['rebuild_ms'])
            print('  %-40s heads %d (kv_heads %d, scale %r): %d steps bit for bit = qkv attend --json --arithmetic core; '
                  'module %.2f ms, rebuilt and redrawn %.1f ms' % (what, n, nk, st[0], len(names), last['compute_ms'],
                                                                   last.get('rebuild_ms', last['total_ms'])))
            return bits

        print('%s: page %d bytes; heads %d, kv_heads %d' % (name, os.path.getsize(html), H0, HK0))
        for n in plan:
            type_heads(driver, n)
            verify('heads %d typed' % n)
            if n == 4 and name == 'two_heads':  # NaN and inf at 4 heads, then a scale typed and kept at 8
                driver.execute_script('window.qkvPage.editor().set("x", 1, 1, "NaN");')
                verify('x(2, 2) = NaN at 4 heads')
                driver.execute_script('window.qkvPage.editor().set("wv", 0, 1, "inf");')
                verify('wv(1, 2) = inf at 4 heads')
                tip = driver.execute_script('return window.qkvPage.tips([["weights[3]", 0, 0]])[0];')
                check(any('Recomputed for your 4 heads' in line[1] for line in tip),
                      '%s: a cell of a head made for the learner\'s heads says so (%r)' % (name, tip))
                driver.save_screenshot(os.path.join(OUT, 'heads_%s_4.png' % name))
                sc = driver.find_element(By.ID, 'edit-scale')
                sc.send_keys(Keys.CONTROL, 'a')
                sc.send_keys('0.125', Keys.ENTER)
                verify('scale 0.125 typed at 4 heads')
            if n == 4 and name == 'causal_window_masked':  # Alt+click a key of head 3's weights: carried to 2 heads
                cell = driver.find_element(By.CSS_SELECTOR, 'td[data-m="weights[3]"][data-i="3"][data-j="3"]')
                browser.actions(driver).key_down(Keys.ALT).click(cell).key_up(Keys.ALT).perform()
                verify('key 4 masked for query 4 at 4 heads')
                driver.save_screenshot(os.path.join(OUT, 'heads_%s_4.png' % name))
        st = page_state(driver)
        if name == 'two_heads':
            check(st[6] and st[0] == 0.125, '%s: the typed scale is kept across the heads (%r)' % (name, st[0]))
        if name == 'causal_window_masked':
            check(st[1] and st[2] == 3 and st[3][4 * 5 + 2] == 1 and st[3][3 * 5 + 3] == 1,
                  '%s: causal, the window and the masked cells carried over to %d heads' % (name, st[4]))
        # refused: not dividing d_q, not a number, 0; on the grouped-query case, not a multiple of G
        for bad, word in [(3, 'divide'), ('abc', 'not a number'), (0, 'not a number')] + ([(1, 'multiple')] if G > 1 else []):
            before = pe.page_bits(driver)
            type_heads(driver, bad)
            f_ = driver.find_element(By.ID, 'edit-heads')
            why = driver.find_element(By.ID, 'edit-heads-why').text
            check('bad' in f_.get_attribute('class') and word in why and pe.page_bits(driver) == before,
                  '%s: heads %r is refused, the field red, saying why (%r), nothing recomputed' % (name, bad, why))
        print('  refused: 3, "abc", 0%s: the field says why, e.g. %r' % (', 1' if G > 1 else '', why))
        # the heads the page has now, typed into the red field: taken (nothing to recompute), no longer red
        now = page_state(driver)[4]
        type_heads(driver, now)
        check('bad' not in driver.find_element(By.ID, 'edit-heads').get_attribute('class') and pe.page_bits(driver) == before,
              '%s: the current %d heads typed after a refusal clear the red field, nothing recomputed' % (name, now))
        driver.find_element(By.ID, 'edit-reset').click()
        st = page_state(driver)
        check(st[4] == H0 and pe.page_bits(driver) == orig and driver.find_element(By.ID, 'edit-heads').get_attribute('value') == str(H0),
              '%s: Reset brings back the page\'s %d heads and every number\'s bits' % (name, H0))
    browser.stop()
    if times:
        times.sort()
        print('a change of heads, rebuilt and redrawn (the module, the steps made again, every table drawn): median %.1f ms, '
              'max %.1f ms over %d changes (reported, not asserted)' % (times[len(times) // 2], times[-1], len(times)))
    browser.finish('the heads field: every number bit for bit qkv attend --json --arithmetic core with the heads typed')


if __name__ == '__main__':
    sys.exit(main())
