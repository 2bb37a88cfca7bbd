#!/usr/bin/env python3
"""page_options_edit_test.py: a `qkv explain` page's options, changed in a real browser (issue 30).

    page_options_edit_test.py QKV PAGE_STEPS_NATIVE SOURCE_ROOT OUT_DIR

"Scale by 1 instead of 1/sqrt(d_k)", "mask a token": on the pages whose steps scale or divide the
scores, the editor's panel has a field per distinct factor (heads share theirs) and a scaled score
or its weight is masked with Alt+click (M on a focused cell). In headless Chromium, from file://:

- 13 alibi (its scale, 1/sqrt(d), with ALiBi's bias added), 02 from_scratch (a division by
  float32(sqrt(24)), in 4 steps sharing the field), each typed into the field as a learner does: 1,
  then NaN; and 06 masking (its masks): after each change every step's numbers
  equal, bit for bit, page_steps_native's (the same C++ built natively) on the page's inputs with
  the steps' scalars and masks as the page now has them; the scaled scores the change reaches turn
  orange, the field shows the new factor, the hover names it;
- a mask: Alt+click on a weight masks its score (-inf, weight 0, "you masked it" in the
  explanation), again unmasks it; masking every key of a row gives weights 0 (docs/numerics.md);
  unmasking a score the example masked (example 06's causal mask) lets the query see that key;
- Reset brings back every number's bits, the factors and the masks; no console message, no
  network request.
Exit 77 (skipped) without chromium, or when the tool was built without the module.
"""
import os
import subprocess
import sys
import tempfile
import time

QKV, NATIVE, ROOT, OUT = sys.argv[1:5]
sys.path.insert(0, os.path.join(ROOT, 'tests', 'support'))
import browser  # noqa: E402
if browser.missing():
    print('SKIP: ' + browser.missing())
    sys.exit(77)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

check = browser.check
os.makedirs(OUT, exist_ok=True)


def editor_call(driver, js, *args):
    return driver.execute_script('var e = window.qkvPage.editor(); ' + js, *args)


def verify(driver, name, what, tmp):
    """every step's numbers against page_steps_native on the page's inputs, scalars and masks"""
    edit = driver.execute_script('return window.qkvPage.data.edit;')
    bits = browser.page_bits(driver)
    want = browser.steps_native(NATIVE, edit, bits, tmp)
    bad = [s for s in want if not browser.same_numbers(bits[s][0], bits[s][1], want[s])]
    check(not bad, '%s, %s: the steps the module recomputed differ from native: %s' % (name, what, bad))
    return edit, bits


def open_editable(driver, name):
    html = os.path.join(OUT, 'options_%s.html' % name)
    r = subprocess.run([QKV, 'explain', name, '--html', html], capture_output=True, text=True)
    if not check(r.returncode == 0, '%s: qkv explain --html: %s' % (name, r.stderr)):
        return None
    browser.open_page(driver, html, logs=True)
    if browser.wait_editable(driver, 20) != '1':
        return 'skip'
    return html


def main():
    tmp = tempfile.mkdtemp(prefix='qkv_options_')
    driver = browser.start(logs=True)
    for name in ('alibi', 'from_scratch', 'masking'):
        html = open_editable(driver, name)
        if html is None:
            continue
        if html == 'skip':
            print('SKIP: %s is not editable (the tool was built without the module?)' % name)
            return 77
        orig = browser.page_bits(driver)
        scales = editor_call(driver, 'return e.scales();')
        print('%s: %d scale fields: %s' % (name, len(scales), ['%s %s of %s' % (s['kind'], s['value'], ', '.join(s['ids'])) for s in scales]))
        check(len(scales) >= 1, '%s: a field for its scale' % name)
        if name in ('alibi', 'from_scratch'):
            g = scales[0]
            # typed into the field as a learner does, Enter: 1 (alibi's is 1 already: 0.5 there)
            typed = 0.5 if g['example'] == 1 else 1
            field = driver.find_element(By.ID, 'edit-scale-0')
            field.clear()
            field.send_keys(str(typed), Keys.ENTER)
            time.sleep(0.2)
            now = editor_call(driver, 'return e.scales()[0].value;')
            check(now == typed, '%s: the field set the factor to %r (%r)' % (name, typed, now))
            edit, bits = verify(driver, name, '%s by %r' % (g['kind'], typed), tmp)
            step = g['ids'][0]
            changed = driver.execute_script('return document.querySelectorAll(\'td.changed[data-m="\' + arguments[0] + \'"]\').length;', step)
            check(changed > 0, '%s: the scaled scores turn orange after the factor changed (%d)' % (name, changed))
            tip = driver.execute_script('return window.qkvPage.tips([[arguments[0], 0, 0]])[0];', step)
            formula = [t for c, t in tip if c == 'x-formula'][0]
            check((' / 1 ' in formula) if g['kind'] == 'divide' else formula.startswith('= 0.5 \u00d7'),
                  '%s: the hover states the new factor: %r' % (name, formula))
            check(any('x-truth' in c for c, t in tip) or not driver.execute_script(
                'return !!window.qkvPage.data.matrices[arguments[0]].truth;', step),
                '%s: the scaled score keeps a truth line after the factor changed' % name)
            # NaN is a factor (JSON has no NaN for page_steps_native): NaN x s = s / NaN = NaN in
            # every scaled score that is not masked
            check(editor_call(driver, 'return e.setScale(0, "nan");'), '%s: NaN is a factor' % name)
            for sid in g['ids']:
                vals = driver.execute_script('return window.qkvPage.data.matrices[arguments[0]].data.map(String);', sid)
                check(all(v in ('NaN', '-Infinity') for v in vals), '%s: %s by NaN is NaN: %r' % (name, sid, vals[:4]))
            check(not editor_call(driver, 'return e.setScale(0, "abc");'), '%s: "abc" is refused' % name)
        if name == 'masking':
            ids = [s['ids'] for s in scales]
            step = ids[0][0]
            edit = driver.execute_script('return window.qkvPage.data.edit;')
            st = [s for s in edit['steps'] if s['id'] == step][0]
            weights = [s['id'] for s in edit['steps'] if s['a'] == step and s['kind'] in (6, 14)][0]
            R, C = st['sizes'][0], st['sizes'][1]
            # unmask a score the example masked (the causal mask's (0, 1)), Alt+click on its weight
            example_mask = st['masked']
            k0 = example_mask.index('1')
            i0, j0 = k0 // C, k0 % C
            td = driver.find_element(By.CSS_SELECTOR, 'td[data-m="%s"][data-i="%d"][data-j="%d"]' % (weights, i0, j0))
            driver.execute_script('arguments[0].scrollIntoView({block: "center"});', td)
            browser.actions(driver).key_down(Keys.ALT).click(td).key_up(Keys.ALT).perform()
            time.sleep(0.2)
            edit, bits = verify(driver, name, 'unmasked (%d, %d)' % (i0, j0), tmp)
            st = [s for s in edit['steps'] if s['id'] == step][0]
            check(st['masked'] != example_mask, 'masking: Alt+click unmasked (%d, %d)' % (i0, j0))
            w = driver.execute_script('return window.qkvPage.data.matrices[arguments[0]].data[arguments[1]];', weights, k0)
            check(w > 0, 'masking: the unmasked key has a weight now (%r)' % w)
            # mask every key of the last row (M on each focused scaled score): weights 0
            for j in range(C):
                k = (R - 1) * C + j
                if (st['masked'] or '0' * (R * C))[k] != '1':
                    cell = driver.find_element(By.CSS_SELECTOR, 'td[data-m="%s"][data-i="%d"][data-j="%d"]' % (step, R - 1, j))
                    driver.execute_script('arguments[0].focus();', cell)
                    cell.send_keys('m')
            time.sleep(0.2)
            edit, bits = verify(driver, name, 'row %d fully masked' % R, tmp)
            row = driver.execute_script('return window.qkvPage.data.matrices[arguments[0]].data.slice(arguments[1], arguments[2]);',
                                        weights, (R - 1) * C, R * C)
            check(row == [0] * C, 'masking: a fully masked row has weights 0 (%r)' % row)
            tip = driver.execute_script('return window.qkvPage.tips([[arguments[0], arguments[1], 0]])[0];', step, R - 1)
            check(any('you masked it' in t for c, t in tip), 'masking: the hover says you masked it: %r' % tip[:2])
        driver.find_element(By.ID, 'edit-reset').click()
        back = browser.page_bits(driver)
        check(all(back[k] == orig[k] for k in orig), '%s: Reset brings back every number' % name)
        now = editor_call(driver, 'return e.scales();')
        check([s['value'] for s in now] == [s['example'] for s in now], '%s: Reset brings back the factors' % name)
        edit = driver.execute_script('return window.qkvPage.data.edit;')
        verify(driver, name, 'after Reset', tmp)
        shot = os.path.join(OUT, 'options_%s.png' % name)
        driver.save_screenshot(shot)
        errors, requests, _ = browser.page_logs(driver, html)
        check(not errors and not requests, '%s: no console message or network request: %s %s' % (name, errors, requests))
    browser.finish()
    return 0


if __name__ == '__main__':
    sys.exit(main())
