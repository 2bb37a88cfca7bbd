#!/usr/bin/env python3
"""page_explain_edit_test.py: editing a `qkv explain` page in a real browser (issue 30).

    page_explain_edit_test.py QKV PAGE_STEPS_NATIVE SOURCE_ROOT OUT_DIR

For every example page, `qkv explain NAME --html` is written and opened in headless chromium from
file:// (no server, no network). The pages of the examples that mark their inputs (with_truth():
01, 02, 03, 05 to 14, 16, 17) must be editable, with exactly the matrices listed in STALE below not
recomputed (io/page_recompute.hpp decides, when the tool writes the page, which steps the module
recomputes: each is run natively and must give the example's own numbers bit for bit first); the
others must say why they are not. On each editable page, edits are made one after the other as a
learner makes them: a cell of the first input typed in (double-click, type, Enter: the real UI),
NaN into a cell of the second input, inf and -inf into the first. After each edit, every step's
numbers in the page's data are compared bit for bit (a NaN as a NaN: which NaN a sum of two keeps
is the compiler's choice of operand order) with the same C++ built natively
(`page_steps_native`, core/flat_steps.hpp) on the page's own inputs; the matrices not recomputed
must keep the example's numbers and turn grey, with why in their explanation; a changed cell's
explanation says it was recomputed. Reset brings back every number's bits. The module's time and
the page's redraw are printed for each edit, not asserted. The exact pages (EXACT: 01b, 15) are
edited with fractions, decimals and exponents (3/2, 0.9, -1.5e-3) and every step's fractions are
compared with page_steps_native's (flat::exact_step natively); a zero denominator, malformed
fractions and a value whose products overflow 64-bit integers must be refused with the message the
native build gives, the page unchanged and still editable. Screenshots in OUT_DIR.
Exit 77 (skipped) without chromium, or when the tool was built without the module.
"""
import json
import os
import subprocess
import sys
import tempfile

QKV, NATIVE, ROOT, OUT = sys.argv[1:5]
sys.path.insert(0, os.path.join(ROOT, 'tests', 'support'))
import browser  # noqa: E402
if browser.missing():
    print('SKIP: ' + browser.missing())
    sys.exit(77)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

os.makedirs(OUT, exist_ok=True)
check = browser.check

# the editable pages and the matrices each does not recompute (why: io/page_recompute.hpp says it
# in the page; here, what the example computes outside the steps a page describes)
STALE = {
    # the numpy cell's softmax_all is a step, over the scores as double: a float32 -> float64 cast
    # the steps do not make yet (derived())
    'illustrated': set(),
    'from_scratch': set(),
    'the_math': set(),
    # 03b: its steps mix types (float32, the inputs cast to double, their exact values: kind 40,
    # flat::cast); the exact scores w_T_2 (denominators near 2^104) overflow the module's 64-bit
    # rationals: a wide step, over 128-bit ones in the wide module (page_steps_native: io/page_wide.hpp)
    'the_math_exact': set(),
    'statquest': set(),
    'masking': set(),
    'encoder_layer': set(),
    # chapter two: the float64 decoding loop is recomputed (the embedding and the weights cast to double)
    'kv_cache': set(),
    'grouped_query': set(),
    # the padding masks from the lengths (inputs), the float64 run, the multi-head and
    # cross-attention batches (in double, from their inputs and weights on the page) are recomputed
    'batches': set(),
    'alibi': set(),
    'rope': {'lengths'},  # a check (the sums of squares of step 4), not a step
    'positional_encoding': set(),
    # flash's blocks and output are the online softmax's steps; its bound is a check, not a step
    'flash': {'bound'},
    # chapter three and four: the materialised backward and flash's (m, l, O, L, the weights its
    # loop recomputes, its sums: kinds 21, 46-52) are recomputed; PyTorch's numbers are not
    'flash_backward': {'PyTorch float64 d_queries'},
    # 17: tok[ids] (the embedding), its losses (cross entropy), d_b_head (column sums), d_x, d_tok
    # (the embedding's backward), d_pos, the SGD steps and the forward after them, and W_q after
    # AdamW (kind 57, from its scalars, an input of the page) are recomputed
    'one_training_step': set(),
    # summarised: query, key and value are its inputs (W_q, W_k, W_v are not on the page); the
    # output projection's W_o is not either
    'bert': {'output'},
}
# the exact pages (E.exact "q64": their steps over qkv::exact::rational<long long> in the module)
# and the matrices each does not recompute: none. 15's keys, querys, values (x @ w, the weights
# inputs of the page), d_x, the drawn dO's steps, the true softmax in float32 and double (x, the
# weights and dO cast from the rationals to the nearest float), tutorial 004's module (forward,
# both backwards, MSE, SGD) and tutorial 002's gradients (float32 steps from their inputs, on the
# page) are recomputed
EXACT = {
    'illustrated_exact': set(),
    'how_attention_learns': set(),
}
# the pages that say why they are not editable: none (the exact pages and BERT's are editable)
NOT_EDITABLE = []

page_bits = browser.page_bits  # {id: (dtype, bytes)}


def words(dtype, b):
    """the numbers' bits as integers (little-endian), NaN as one pattern"""
    size = 4 if dtype == 'float32' else 8
    out = []
    for k in range(0, len(b), size):
        u = int.from_bytes(b[k:k + size], 'little')
        exp_mask = 0x7f800000 if size == 4 else 0x7ff0000000000000
        frac = u & ((1 << (23 if size == 4 else 52)) - 1)
        out.append('nan' if (u & exp_mask) == exp_mask and frac else u)
    return out


def native(edit, bits, tmp, texts=None):
    """page_steps_native on the page's current numbers: every step's bits, by id; on a page whose
    steps mix types (03b), an exact operand's fractions from `texts` and an exact step's fractions"""
    return browser.steps_native(NATIVE, edit, bits, tmp, texts)

def row_labels(driver, mid):
    return driver.execute_script(
        'var t = document.querySelector(\'td[data-m="\' + arguments[0] + \'"]\').closest("table");'
        ' return [...t.querySelectorAll("th[scope=row]")].map(h => h.textContent);', mid)


def own_sentence(driver, name, edit, orig, verify):
    """example 02's own sentence: the tutorial's dictionary rule (distinct words sorted by code
    point, commas dropped) picks rows of nn.Embedding(6, 16)'s table for the tokens; the words
    label the rows; every step recomputed; a sentence of the wrong length refused"""
    S = driver.execute_script('return window.qkvPage.data.sentence;')
    example_words = row_labels(driver, S['x'])
    why = driver.execute_script('return window.qkvPage.editor().sentence("too short");')
    check(why.startswith('A sentence of 6 words'), '%s: a 2-word sentence is refused: %r' % (name, why))
    check(page_bits(driver) == orig, '%s: a refused sentence changes nothing' % name)
    text = 'eat dessert, eat cake first now'
    words = text.replace(',', '').split()
    dictionary = sorted(set(words))  # Python's sort: by code point, as the tutorial's sorted()
    inp = driver.find_element(By.ID, 'edit-sentence')
    inp.clear()
    inp.send_keys(text)
    driver.find_element(By.ID, 'edit-sentence-go').click()
    bits = verify('the sentence %r' % text)
    dt, table = bits[S['table']]
    size = 4 if dt == 'float32' else 8
    cols = len(bits[S['x']][1]) // size // len(words)
    want = b''.join(table[dictionary.index(w) * cols * size:(dictionary.index(w) + 1) * cols * size] for w in words)
    check(bits[S['x']][1] == want, '%s: each word\'s row is its dictionary row of %s' % (name, S['table']))
    check(row_labels(driver, S['x']) == words, '%s: the rows are labelled with the words: %r' % (name, row_labels(driver, S['x'])))
    note = driver.find_element(By.ID, 'edit-sentence-note').text
    check(all("'%s': %d" % (w, k) in note.replace('\u2018', "'").replace('\u2019', "'") for k, w in enumerate(dictionary)),
          '%s: the page shows the dictionary: %r' % (name, note))
    driver.execute_script('window.qkvPage.editor().reset();')
    check(page_bits(driver) == orig and row_labels(driver, S['x']) == example_words,
          '%s: Reset brings back the example\'s sentence, numbers and labels' % name)


def exact_texts(driver):
    """every exact matrix of the open page's data: {id: [fraction text, row-major]}"""
    return driver.execute_script(
        'var M = window.qkvPage.data.matrices, out = {}; Object.keys(M).forEach(function (id) { var m = M[id];'
        ' if (m.dtype !== "exact") return; var v = []; for (var i = 0; i < m.rows; ++i) for (var j = 0; j < m.cols; ++j)'
        ' v.push(m.exact[i + "," + j]); out[id] = v; }); return out;')


def native_exact(edit, texts, tmp, typed=None, bits=None):
    """page_steps_native on the page's fractions (with `typed` = (id, k, text) put in first, as a
    learner types it) and, for its float steps (15's tutorial-004 module), the float operands'
    bits (page_bits()): every step's fractions (a float step's bits as hex) by id, or the error
    message it stops with"""
    ops = {s[k] for s in edit['steps'] for k in ('a', 'b', 'c') if s[k]}
    steps = {s['id'] for s in edit['steps']}
    doc = {'steps': edit['steps'], 'matrices': {i: {'dtype': 'exact', 'exact': list(texts[i])} for i in ops - steps
                                                if i in texts}}
    for i in ops - steps - set(texts):
        dt, b = bits[i]
        size = 4 if dt == 'float32' else 8
        doc['matrices'][i] = {'dtype': dt, 'bits': ['%x' % int.from_bytes(b[k:k + size], 'little')
                                                    for k in range(0, len(b), size)]}
    if typed:
        doc['matrices'][typed[0]]['exact'][typed[1]] = typed[2]
    path = os.path.join(tmp, 'in_exact.json')
    with open(path, 'w') as f:
        json.dump(doc, f)
    r = subprocess.run([NATIVE, path], capture_output=True, text=True)
    if r.returncode:
        prefix = 'page_steps_native: '
        if not r.stderr.startswith(prefix):
            raise SystemExit('page_steps_native failed: ' + r.stderr)
        return r.stderr[len(prefix):].strip()
    return json.loads(r.stdout)


PADDING = "key_padding_mask: a length is not a whole number from 0 to the sequences' padded length"


def lengths_edits(driver, name, verify):
    """example 14: a sequence's length is an input; its key padding mask (kind 53) and every step
    masked by it (kind 54) follow, bit for bit the native build; a length that is not a whole
    number from 0 to the padded length is refused with the step's own message, nothing changed"""
    def row(mid, b):
        m = driver.execute_script('return window.qkvPage.data.matrices[arguments[0]];', mid)
        return m['data'][b * m['cols']:(b + 1) * m['cols']]

    for (mid, j, text, mask, b, want) in (('lengths', 1, '5', 'key_padding_mask', 1, [0, 0, 0, 0, 0, 1]),
                                          ('lengths', 2, '2', 'key_padding_mask', 2, [0, 0, 1, 1, 1, 1]),
                                          ('mh_lengths', 1, '1', 'mh_padding', 1, [0, 1, 1, 1, 1]),
                                          ('cross_lengths', 2, '5', 'cross_padding', 2, [0, 0, 0, 0, 0])):
        r = driver.execute_script('return window.qkvPage.editor().set(arguments[0], 0, arguments[1], arguments[2]);',
                                  mid, j, text)
        check(r is True, '%s: %s(1, %d) = %s is taken (%r)' % (name, mid, j + 1, text, r))
        verify('%s(1, %d) = %s' % (mid, j + 1, text))
        check(row(mask, b) == want, '%s: %s row %d follows the length: %r' % (name, mask, b, row(mask, b)))
    for text in ('7', '2.5', '-1', 'NaN'):
        before = page_bits(driver)
        r = driver.execute_script('return window.qkvPage.editor().set("lengths", 0, 0, arguments[0]);', text)
        check(r == PADDING, '%s: lengths(1, 1) = %s refused with the step\'s message (%r)' % (name, text, r))
        check(page_bits(driver) == before, '%s: after %s refused, every number is as it was' % (name, text))
        print('  %-36s refused: %s' % ('lengths(1, 1) = ' + text, r))
    verify('after the refusals')


def exact_page(driver, name, edit, tmp):
    """an exact page: typed fractions, decimals and exponents recomputed exactly, fraction for
    fraction the native build; a zero denominator, malformed text and an overflow refused with the
    native message, the page unchanged and still editable; Reset"""
    stale = {s['id'] for s in edit['stale']}
    check(stale == EXACT[name], '%s: not recomputed: %s, expected %s (%s)' % (
        name, sorted(stale), sorted(EXACT[name]), [s['why'] for s in edit['stale']]))
    check(edit.get('exact') == 'q64', '%s: the steps are exact (q64): %r' % (name, edit.get('exact')))
    orig, orig_bits = exact_texts(driver), page_bits(driver)
    steps, inputs = [s['id'] for s in edit['steps']], edit['inputs']
    print('  %d exact steps recomputed from %d editable inputs (%s)' % (len(steps), len(inputs), ', '.join(inputs)))

    def verify(what, float_edit=False):  # float_edit: the float input just edited
        texts, fbits = exact_texts(driver), page_bits(driver)
        now = native_exact(edit, texts, tmp, bits=fbits)
        if not check(isinstance(now, dict), '%s, %s: native steps fail: %s' % (name, what, now)):
            return texts
        bad = [s for s in steps if s in texts and now[s] != texts[s]]
        # a float step (15's tutorial-004 module): its bits, NaN as one pattern
        bad += [s for s in steps if s not in texts and words(fbits[s][0], b''.join(
            int(h, 16).to_bytes(4 if fbits[s][0] == 'float32' else 8, 'little') for h in now[s])) !=
            words(*fbits[s])]
        check(not bad, '%s, %s: the page differs from the native steps in %s' % (name, what, bad))
        kept = [s for s in stale if s in texts and texts[s] != orig[s]]
        check(not kept, '%s, %s: matrices not recomputed changed: %s' % (name, what, kept))
        fixed = [k for k in fbits if k not in steps and (float_edit is False or k != float_edit)]
        check(all(fbits[k] == orig_bits[k] for k in fixed), '%s, %s: the float matrices that are not steps keep '
              'their bits' % (name, what))
        reached = sum(1 for s in steps if s in texts for a, b in zip(now[s], orig[s]) if a != b)
        last = driver.execute_script('return window.qkvPage.editor().last;')
        print('  %-40s %s: %3d of %3d cells recomputed, every step fraction for fraction the native build; '
              'module %.2f ms, with the page redrawn %.1f ms' % (what, 'ok' if not bad else 'DIFFERS', reached,
                                                                  sum(len(now[s]) for s in steps if s in texts),
                                                                  last['compute_ms'], last['total_ms']))
        return texts

    verify('as written (the module run on load)')
    a0, a1 = inputs[0], inputs[1]
    # 1. the real UI: double-click, type a fraction, Enter
    td = driver.find_element(By.CSS_SELECTOR, 'td[data-m="%s"][data-i="0"][data-j="0"]' % a0)
    browser.actions(driver).double_click(td).perform()
    inp = driver.find_element(By.CSS_SELECTOR, 'td[data-m="%s"][data-i="0"][data-j="0"] input' % a0)
    check(inp.get_attribute('value') == orig[a0][0], '%s: the field opens with the cell\'s fraction (%r)' % (
        name, inp.get_attribute('value')))
    inp.send_keys(Keys.CONTROL, 'a')
    inp.send_keys('3/2', Keys.ENTER)
    texts = verify('%s(1, 1) = 3/2 typed in' % a0)
    check(texts[a0][0] == '3/2' and td.text == '3/2', '%s: the cell shows 3/2 (%r)' % (name, td.text))
    changed = driver.execute_script(
        'var e = window.qkvPage.editor(); for (var s of e.steps) { var m = window.qkvPage.data.matrices[s];'
        ' for (var i = 0; i < m.rows; ++i) for (var j = 0; j < m.cols; ++j) if (e.changed(s, i, j)) return [s, i, j]; } return null;')
    if check(changed is not None, '%s: an edit changes some step' % name):
        tip = driver.execute_script('return window.qkvPage.tips([arguments[0]])[0];', changed)
        check(any('recomputed for yours, exactly' in l[1] for l in tip), '%s: a changed cell\'s explanation says so' % name)
    for s in stale:
        cls = driver.execute_script('var td = document.querySelector(\'td[data-m="\' + arguments[0] + \'"]\'); return td ? td.className : null;', s)
        if cls is not None:
            check('stale' in cls, '%s: %s is grey after an edit (%r)' % (name, s, cls))
    driver.save_screenshot(os.path.join(OUT, 'explain_edit_%s.png' % name))
    # 2. a decimal and an exponent, each its exact value (9/10, -3/2000)
    for (mid, i, j, text, want) in ((a1, 0, 1, '0.9', '9/10'), (a0, 1, 0, '-1.5e-3', '-3/2000')):
        r = driver.execute_script('return window.qkvPage.editor().set(arguments[0], arguments[1], arguments[2], arguments[3]);',
                                  mid, i, j, text)
        check(r == '', '%s: %s(%d, %d) = %s is taken (%r)' % (name, mid, i + 1, j + 1, text, r))
        texts = verify('%s(%d, %d) = %s' % (mid, i + 1, j + 1, text))
        mcols = driver.execute_script('return window.qkvPage.data.matrices[arguments[0]].cols;', mid)
        check(texts[mid][i * mcols + j] == want, '%s: %s is %s exactly (%r)' % (name, text, want, texts[mid][i * mcols + j]))
    # 3. refused, with the native tool's message, the page unchanged and still editable: a zero
    # denominator, malformed fractions, a value whose products overflow 64-bit integers
    cols = driver.execute_script('return window.qkvPage.data.matrices[arguments[0]].cols;', a0)
    for text in ('1/0', '1/2/3', '2/', 'abc', '9223372036854775807'):
        before = exact_texts(driver)
        want = native_exact(edit, before, tmp, (a0, cols + 1, text), page_bits(driver))
        r = driver.execute_script('return window.qkvPage.editor().set(arguments[0], 1, 1, arguments[1]);', a0, text)
        check(isinstance(want, str) and r == want, '%s: %s refused with the native message %r (the page: %r)' % (name, text, want, r))
        check(exact_texts(driver) == before, '%s: after %s refused, every number is as it was' % (name, text))
        err = driver.execute_script('var td = document.querySelector(\'td[data-m="\' + arguments[0] + \'"][data-i="1"][data-j="1"]\');'
                                    ' return [td.className, td.title, document.getElementById("edit-status").textContent];', a0)
        check('edit-error' in err[0] and err[1] == want and want in err[2],
              '%s: %s: the cell and the status line show the message (%r)' % (name, text, err))
        print('  %-40s refused: %s' % ('%s(2, 2) = %s' % (a0, text), r))
    check(driver.execute_script('return window.qkvPage.editor().set(arguments[0], 1, 1, "7/3");', a0) == '',
          '%s: the page is still editable after the errors' % name)
    verify('%s(2, 2) = 7/3 after the errors' % a0)
    # a float input (15's tutorial-004 module): its float32 steps recomputed, bit for bit native
    for f0 in [i for i in inputs if i in orig_bits][:1]:
        r = driver.execute_script('return window.qkvPage.editor().set(arguments[0], 0, 0, "0.5");', f0)
        check(r == '', '%s: %s(1, 1) = 0.5 is taken (%r)' % (name, f0, r))
        verify('%s(1, 1) = 0.5 (float32)' % f0, float_edit=f0)
        check(page_bits(driver) != orig_bits, '%s: the edit of %s changes its float steps' % (name, f0))
    driver.execute_script('window.qkvPage.editor().reset();')
    check(exact_texts(driver) == orig and page_bits(driver) == orig_bits, '%s: Reset brings back every fraction' % name)


def main():
    tmp = tempfile.mkdtemp(prefix='qkv_explain_edit_')
    driver = browser.start(logs=True)
    try:
        for name in sorted(STALE) + sorted(EXACT) + NOT_EDITABLE:
            html = os.path.join(OUT, 'explain_%s.html' % name)
            r = subprocess.run([QKV, 'explain', name, '--html', html], capture_output=True, text=True)
            if not check(r.returncode == 0, '%s: qkv explain --html: %s' % (name, r.stderr)):
                continue
            size = os.path.getsize(html)
            print('%s: page %d bytes (%.0f KB)' % (name, size, size / 1024))
            browser.open_page(driver, html, logs=True)
            editable = browser.wait_editable(driver, 20)
            status = driver.find_element(By.ID, 'edit-status').text
            if name not in STALE and name not in EXACT:
                check(editable == '0' and status.startswith('This page is not editable: '),
                      '%s: the page says why it is not editable (%r)' % (name, status))
                print('  not editable, as expected: ' + status)
                continue
            if editable != '1':
                if 'qkv was' in status:  # wasm/meson.build's reasons: the tool was built without the module
                    print('SKIP: the tool was built without the WebAssembly module: ' + status)
                    return 77
                check(False, '%s: the page is not editable: %s' % (name, status))
                continue
            check(size <= 1 << 20, '%s: the page is at most 1 MB (issue 30)' % name)
            edit = driver.execute_script('return window.qkvPage.data.edit;')
            if name in EXACT:
                exact_page(driver, name, edit, tmp)
                errors, requests, _ = browser.page_logs(driver, html)
                check(not errors and not requests, '%s: no console message or network request: %s %s' % (name, errors, requests))
                continue
            stale = {s['id'] for s in edit['stale']}
            check(stale == STALE[name], '%s: not recomputed: %s, expected %s (%s)' % (
                name, sorted(stale), sorted(STALE[name]), [s['why'] for s in edit['stale']]))
            orig, orig_exact = page_bits(driver), exact_texts(driver)
            steps = [s['id'] for s in edit['steps']]
            inputs = edit['inputs']
            print('  %d steps recomputed from %d editable inputs (%s)' % (len(steps), len(inputs), ', '.join(inputs)))

            def verify(what):
                bits = page_bits(driver)
                ex = exact_texts(driver)  # a stale exact matrix (03b's) keeps its fractions; a mixed page's exact steps
                now = native(edit, bits, tmp, ex)
                fl = [s for s in steps if s not in ex]
                bad = [s for s in fl if words(bits[s][0], now[s]) != words(bits[s][0], bits[s][1])]
                bad += [s for s in steps if s in ex and now[s] != ex[s]]
                check(not bad, '%s, %s: the page differs from the native steps in %s' % (name, what, bad))
                kept = [s for s in stale if (s in bits and bits[s] != orig[s]) or (s in ex and ex[s] != orig_exact[s])]
                check(not kept, '%s, %s: matrices not recomputed changed: %s' % (name, what, kept))
                reached = sum(1 for s in fl for a, b in zip(words(bits[s][0], now[s]), words(bits[s][0], orig[s][1]))
                              if a != b) + sum(1 for s in steps if s in ex for a, b in zip(now[s], orig_exact[s]) if a != b)
                cells = sum(len(words(bits[s][0], now[s])) for s in fl) + sum(len(now[s]) for s in steps if s in ex)
                last = driver.execute_script('return window.qkvPage.editor().last;')
                print('  %-36s %s: %4d of %4d cells recomputed, every step bit for bit the native build; module %.2f ms, '
                      'with the page redrawn %.1f ms' % (what, 'ok' if not bad else 'DIFFERS', reached, cells,
                                                         last['compute_ms'], last['total_ms']))
                return bits

            verify('as written (the module run on load)')
            a0 = inputs[0]
            svg0 = driver.execute_script('return window.qkvPage.svgText(0);') if name == 'bert' else None
            # 1. the real UI: double-click the first input's cell (1, 1), type, Enter
            td = driver.find_element(By.CSS_SELECTOR, 'td[data-m="%s"][data-i="0"][data-j="0"]' % a0)
            browser.actions(driver).double_click(td).perform()
            inp = driver.find_element(By.CSS_SELECTOR, 'td[data-m="%s"][data-i="0"][data-j="0"] input' % a0)
            inp.send_keys(Keys.CONTROL, 'a')
            inp.send_keys('2.5', Keys.ENTER)
            verify('%s(1, 1) = 2.5 typed in' % a0)
            if name == 'bert':  # issue 30: a 9-token, 12-head recompute within one frame (reported, not asserted)
                last = driver.execute_script('return window.qkvPage.editor().last;')
                print('  bert: %d steps (12 heads of 9 tokens) in %.2f ms, %.1f ms with the page redrawn: within one '
                      'frame (16 ms): %s (load average %.1f)' % (len(steps), last['compute_ms'], last['total_ms'],
                                                                 'yes' if last['total_ms'] < 16 else 'NO',
                                                                 os.getloadavg()[0]))
                cut = driver.find_element(By.ID, 'edit-cut').text
                check(all(('%s is an input here: its operand W_%s (768 x 768, 2359296 bytes in float32) is not on this page'
                           % (m, m[0])) in cut for m in ('query', 'key', 'value')),
                      'bert: the page says why query, key and value are its inputs: %r' % cut)
                check(driver.execute_script('return window.qkvPage.svgText(0);') != svg0,
                      'bert: the heatmap of head 0 is redrawn with the recomputed weights')
                why = {st['id']: st['why'] for st in edit['stale']}['output']
                check(why.startswith('its operand W_o (768 x 768, 2359296 bytes in float32) is not on this page') and
                      why.endswith('cannot recompute output from att_concat without it'), 'bert: why output is not recomputed: %r' % why)
            changed = driver.execute_script(
                'var e = window.qkvPage.editor(); for (var s of e.steps) { var m = window.qkvPage.data.matrices[s];'
                ' for (var i = 0; i < m.rows; ++i) for (var j = 0; j < m.cols; ++j) if (e.changed(s, i, j)) return [s, i, j]; } return null;')
            if check(changed is not None, '%s: an edit changes some step' % name):
                tip = driver.execute_script('return window.qkvPage.tips([arguments[0]])[0];', changed)
                check(any('recomputed for yours' in l[1] for l in tip), '%s: a changed cell\'s explanation says so' % name)
            for s in stale:
                cls = driver.execute_script('var td = document.querySelector(\'td[data-m="\' + arguments[0] + \'"]\'); return td ? td.className : null;', s)
                if cls is None:
                    continue  # a hidden matrix (data only, drawn in a heatmap): no cell to grey
                check('stale' in cls, '%s: %s is grey after an edit (%r)' % (name, s, cls))
                tip = driver.execute_script('return window.qkvPage.tips([[arguments[0], 0, 0]])[0];', s)
                check(any('Not recomputed for your inputs' in l[1] for l in tip), '%s: %s says why it is not recomputed' % (name, s))
            driver.save_screenshot(os.path.join(OUT, 'explain_edit_%s.png' % name))
            if name == 'flash_backward':
                # its first input is x (read by d_W_query = dQᵀ x alone): edit what flash's steps
                # read, then mask keys (Alt+click's toggleMask) so that its loop skips them, a
                # whole row of query 4 included (m = -inf, l = 0, L = -inf, every gradient 0)
                for (mid, i, j, text) in (('d_context', 2, 3, '1.5'), ('attn.keys', 1, 2, '-0.75')):
                    driver.execute_script('window.qkvPage.editor().set(arguments[0], arguments[1], arguments[2], arguments[3]);',
                                          mid, i, j, text)
                    verify('%s(%d, %d) = %s' % (mid, i + 1, j + 1, text))
                for (i, j) in [(0, 1), (5, 2)] + [(3, k) for k in range(6)]:
                    check(driver.execute_script('return window.qkvPage.editor().toggleMask("attn.scaled_scores", arguments[0], arguments[1]);', i, j),
                          'flash_backward: attn.scaled_scores(%d, %d) can be masked' % (i + 1, j + 1))
                edit = driver.execute_script('return window.qkvPage.data.edit;')  # the steps' masks as they are now
                verify('keys masked, query 4 fully')
                L = page_bits(driver)['L']
                check(words(L[0], L[1])[3] == 0xff800000, 'flash_backward: a fully masked query\'s L is -inf')
                for k in range(6):
                    driver.execute_script('window.qkvPage.editor().toggleMask("attn.scaled_scores", 3, arguments[0]);', k)
                edit = driver.execute_script('return window.qkvPage.data.edit;')
            # 2. NaN into the second input, inf and -inf into the first
            a1 = inputs[1] if len(inputs) > 1 else a0
            for (mid, i, j, text) in ((a1, 0, 1, 'NaN'), (a0, 1, 0, 'inf'), (a0, 1, 1, '-inf')):
                before = (page_bits(driver), exact_texts(driver))
                r = driver.execute_script('return window.qkvPage.editor().set(arguments[0], arguments[1], arguments[2], arguments[3]);',
                                          mid, i, j, text)
                if edit.get('exact'):
                    # a page whose steps mix types: an input cast to an exact rational (03b's X, W_q,
                    # W_k) has no NaN or infinity; refused with the native message, nothing changed
                    check(r == 'qkv::exact::rational: NaN and infinity have no exact value',
                          '%s: %s(%d, %d) = %s refused with the native message (%r)' % (name, mid, i + 1, j + 1, text, r))
                    check((page_bits(driver), exact_texts(driver)) == before,
                          '%s: after %s refused, every number is as it was' % (name, text))
                    print('  %-36s refused: %s' % ('%s(%d, %d) = %s' % (mid, i + 1, j + 1, text), r))
                    continue
                verify('%s(%d, %d) = %s' % (mid, i + 1, j + 1, text))
            if edit.get('exact'):  # the same cell, a number: taken again, every step recomputed
                r = driver.execute_script('return window.qkvPage.editor().set(arguments[0], 1, 1, "-0.75");', a0)
                check(r == '', '%s: the page is still editable after the refusals (%r)' % (name, r))
                verify('%s(2, 2) = -0.75 after the refusals' % a0)
            if name == 'batches':
                lengths_edits(driver, name, verify)
            driver.execute_script('window.qkvPage.editor().reset();')
            check(page_bits(driver) == orig and exact_texts(driver) == orig_exact,
                  '%s: Reset brings back every number\'s bits' % name)
            if svg0 is not None:
                check(driver.execute_script('return window.qkvPage.svgText(0);') == svg0,
                      '%s: Reset brings back the heatmap' % name)
            if driver.execute_script('return window.qkvPage.data.sentence || null;'):
                own_sentence(driver, name, edit, orig, verify)
            errors, requests, _ = browser.page_logs(driver, html)
            check(not errors and not requests, '%s: no console message or network request: %s %s' % (name, errors, requests))
    finally:
        browser.stop()
    browser.finish('every editable explain page recomputed bit for bit natively')
    return 0


sys.exit(main())
