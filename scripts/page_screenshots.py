#!/usr/bin/env python3
"""page_screenshots.py: the pictures of docs/pages.md (docs/images/page_*.png), small.

    /usr/bin/python3 scripts/page_screenshots.py BUILD/tools/qkv docs/images

Renders the learner's pages in headless chromium (Debian's chromium, chromium-driver and
python3-selenium) at 0.6 device pixels per CSS pixel, one viewport each: an example's page, a
cell's explanation, a multi-head attend page with its heatmap, the masks, a summarised
BERT-size page, example 04's BERT page (WordPiece tokens, a head chosen; and edited), a weight's
error against the 50-digit truth, a `qkv attend` page and an example's page edited, the summarised
BERT-size page edited. Run it after changing the pages' look; the browser test
(tests/browser/page_test.py) writes full-page screenshots to the build folder on every run.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

QKV, OUT = sys.argv[1:3]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
tmp = tempfile.mkdtemp(prefix='qkv-shots-')
os.makedirs(OUT, exist_ok=True)


def qkv(*args):
    subprocess.run([QKV, *args], check=True, capture_output=True)


opts = webdriver.ChromeOptions()
opts.binary_location = shutil.which('chromium')
for a in ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
          '--disable-background-networking', '--disable-component-update', '--disable-sync',
          '--force-device-scale-factor=0.6', '--hide-scrollbars', '--user-data-dir=' + tmp + '/profile',
          '--window-size=1200,950']:
    opts.add_argument(a)
driver = webdriver.Chrome(service=Service(shutil.which('chromedriver')), options=opts)


def shot(html, png, setup=None):
    driver.get('file://' + html)
    if setup:
        setup()
    driver.save_screenshot(os.path.join(OUT, png))
    print(png, os.path.getsize(os.path.join(OUT, png)), 'bytes')


def scroll_to(css):
    e = driver.find_element(By.CSS_SELECTOR, css)
    driver.execute_script('window.scrollTo(0, arguments[0].getBoundingClientRect().top + window.scrollY - 20)', e)
    return e


def hover(css):
    def f():
        e = driver.find_element(By.CSS_SELECTOR, css)
        driver.execute_script('window.scrollTo(0, arguments[0].getBoundingClientRect().top + window.scrollY - 260)', e)
        ActionChains(driver).move_to_element(e).perform()
    return f


p = os.path.join(tmp, 'illustrated.html')
qkv('explain', 'illustrated', '--html', p)
shot(p, 'page_example.png')
shot(p, 'page_explanation.png', hover('td[data-m="attn_scores_softmax"][data-i="1"][data-j="2"]'))
p = os.path.join(tmp, 'masking.html')
qkv('explain', 'masking', '--html', p)
shot(p, 'page_masks.png', lambda: scroll_to('#step-2'))
p = os.path.join(tmp, 'cross.html')
qkv('attend', os.path.join(ROOT, 'tests/cli/attend/cross_multihead.json'), '--html', p)
shot(p, 'page_attend_scores.png', hover('td[data-m="scores[1]"][data-i="0"][data-j="2"]'))
p = os.path.join(tmp, 'chapter_two.html')  # chapter two: GQA, lower_right, window, ALiBi, bias, padding, RoPE
qkv('attend', os.path.join(ROOT, 'tests/cli/attend/chapter_two.json'), '--html', p)
shot(p, 'page_attend_chapter_two.png', hover('td[data-m="scaled[1]"][data-i="1"][data-j="3"]'))
rng = random.Random(3)
T, D, H = 128, 768, 12
# a BERT-size case with some structure: each token mostly attends to its neighbours
x = [[round(rng.gauss(0, 1), 3) for _ in range(D)] for _ in range(T)]
w = [[round(rng.gauss(0, 0.05), 4) for _ in range(D)] for _ in range(D)]
case = os.path.join(tmp, 'bert_size.json')
with open(case, 'w') as f:
    json.dump({'x': x, 'wq': w, 'wk': w, 'wv': w, 'heads': H, 'causal': True}, f)
p = os.path.join(tmp, 'bert.html')
qkv('attend', case, '--html', p)


def wait_editable():
    for _ in range(400):
        if driver.execute_script('return document.documentElement.getAttribute("data-qkv-editable")') is not None:
            break
        time.sleep(0.05)


def bert():
    wait_editable()  # the heatmap is drawn from the weights its module computes on load
    Select(driver.find_element(By.CSS_SELECTOR, 'select.head-select')).select_by_value('3')
    scroll_to('figure.heatmap')


shot(p, 'page_summarised_heatmap.png', bert)
# example 04: BERT's WordPiece tokens on the axes, 12 heads under the head selector
p = os.path.join(tmp, 'bert_example.html')
qkv('explain', 'bert', '--html', p)


def bert_example():
    Select(driver.find_element(By.CSS_SELECTOR, 'select.head-select')).select_by_value('5')
    scroll_to('figure.heatmap')


shot(p, 'page_bert.png', bert_example)
# a weight's error against the 50-digit truth (example 05)
p = os.path.join(tmp, 'statquest.html')
qkv('explain', 'statquest', '--html', p)
shot(p, 'page_truth.png', hover('td[data-m="t.attention_percents"][data-i="0"][data-j="1"]'))
# an example's page edited (docs/pages.md, "Editing an example's page"): x(input 1, 1) = 2.5


def edit_example():
    for _ in range(100):
        if driver.execute_script('return document.documentElement.getAttribute("data-qkv-editable")') == '1':
            break
        time.sleep(0.05)
    driver.execute_script('window.qkvPage.editor().set("x", 0, 0, 2.5);')
    hover('td[data-m="attn_scores"][data-i="0"][data-j="1"]')()


p = os.path.join(tmp, 'illustrated_edit.html')
qkv('explain', 'illustrated', '--html', p)
shot(p, 'page_explain_edit.png', edit_example)
# example 04's page edited (docs/pages.md, "The BERT page"): key([CLS], 1..4) set to 10 times
# query([CLS], 1..4), so that in head 0 [CLS] attends to itself more; the heatmap redrawn


def bert_edit():
    for _ in range(200):
        if driver.execute_script('return document.documentElement.getAttribute("data-qkv-editable")') == '1':
            break
        time.sleep(0.05)
    for j in range(4):
        driver.execute_script('var e = window.qkvPage.editor(), q = window.qkvPage.data.matrices.query;'
                              'e.set("key", 0, arguments[0], 10 * q.data[arguments[0]]);', j)
    scroll_to('figure.heatmap')


p = os.path.join(tmp, 'bert_edit.html')
qkv('explain', 'bert', '--html', p)
shot(p, 'page_bert_edit.png', bert_edit)
# a `qkv attend` page edited (docs/pages.md, "Editing a page"): tutorial 000's case, x(q1, 1) = 2.5,
# and a score's explanation from the new numbers


def edit_attend():
    for _ in range(100):
        if driver.execute_script('return document.documentElement.getAttribute("data-qkv-editable")') == '1':
            break
        time.sleep(0.05)
    driver.execute_script('window.qkvPage.editor().set("x", 0, 0, 2.5);')
    hover('td[data-m="scores"][data-i="0"][data-j="1"]')()


p = os.path.join(tmp, 'attend_edit.html')
qkv('attend', os.path.join(ROOT, 'tests', 'cli', 'attend', 'illustrated.json'), '--html', p)
shot(p, 'page_edit.png', edit_attend)
# the summarised BERT-size page edited (docs/pages.md, "The summarised attend page"): the scale
# set from 1/8 to 0.01 in the panel, so that every query spreads its weight over the keys it may
# see; the heatmap redrawn from the weights the module recomputed


def summarised_edit():
    wait_editable()
    scale = driver.find_element(By.ID, 'edit-scale')
    scale.clear()
    scale.send_keys('0.01\n')
    Select(driver.find_element(By.CSS_SELECTOR, 'select.head-select')).select_by_value('0')
    scroll_to('figure.heatmap')


p = os.path.join(tmp, 'bert_summarised_edit.html')
qkv('attend', case, '--html', p)
shot(p, 'page_summarised_edit.png', summarised_edit)
driver.quit()
shutil.rmtree(tmp, ignore_errors=True)
