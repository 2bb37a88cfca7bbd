"""browser.py: headless chromium through selenium, for the tests that look at pages as a learner
does (tests/browser/, tests/learner/). Debian's chromium, chromium-driver and python3-selenium
(scripts/setup.sh installs them); the tests run under /usr/bin/python3, which has selenium.

    import browser                       # tests/support/ on sys.path
    why = browser.missing()              # None, or what is missing
    driver = browser.start()             # quit, and its profile removed, however the test ends
    browser.stop()                       # early, when the test is done with it
    browser.actions(driver).move_to_element(cell).perform()   # a hover, a click, keys: at once
    seconds = browser.open_page(driver, path, logs=True) # loaded, and the page's script done
    errors, requests, resources = browser.page_logs(driver, path)  # what the page logged, fetched
    browser.check(cond, 'what was checked')              # recorded in browser.failures
    stdout = browser.run(tool, 'attend', case)           # the tool's output, or the test stops
    browser.finish('all checks passed')                  # exit 1 if a check failed
"""
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
DRIVER = shutil.which('chromedriver')
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:
    webdriver = None

_drivers = []
failures = []
print_limit = None  # print only the first N failures (a test that checks thousands of cells)


def check(cond, what):
    """record `what` as failed unless cond (printed: FAIL and what); returns cond"""
    if not cond:
        failures.append(what)
        if print_limit is None or len(failures) <= print_limit:
            print('FAIL:', what)
    return cond


def finish(passed='all checks passed'):
    """the test's last line: how many checks failed (exit 1), or `passed`"""
    stop()
    if failures:
        print('\n%d checks failed' % len(failures))
        sys.exit(1)
    print(passed)


def run(tool, *args):
    """the tool's stdout; a failed run stops the test, with its exit code and stderr"""
    r = subprocess.run([tool, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit('qkv %s failed (%d): %s' % (' '.join(args), r.returncode, r.stderr))
    return r.stdout


def open_page(driver, path, logs=False, tries=200):
    """seconds until the page at `path` (file://) has run its script (data-qkv-ready), polled
    every 50 ms up to `tries` times; logs: the console and network logs emptied first, so that
    page_logs() reads this page's only"""
    driver.get('about:blank')
    if logs:
        driver.get_log('browser')
        driver.get_log('performance')
    t0 = time.time()
    driver.get('file://' + os.path.abspath(path))
    for _ in range(tries):
        if driver.execute_script('return document.documentElement.getAttribute("data-qkv-ready")') == '1':
            break
        time.sleep(0.05)
    return time.time() - t0



def wait_editable(driver, seconds=20):
    """the open page's data-qkv-editable once its editor has decided ('1': editable, '0': the page
    says why not), polled every 50 ms for up to `seconds`; None when it never did"""
    js = 'return document.documentElement.getAttribute("data-qkv-editable")'
    t0 = time.time()
    while time.time() - t0 < seconds and driver.execute_script(js) is None:
        time.sleep(0.05)
    return driver.execute_script(js)

def page_logs(driver, path):
    """(console warnings and errors, network requests other than the page and data:/blob:
    addresses, resources the page loaded) since open_page(driver, path, logs=True)"""
    url = 'file://' + os.path.abspath(path)
    errors = [e for e in driver.get_log('browser') if e['level'] in ('SEVERE', 'WARNING')]
    requests = []
    for e in driver.get_log('performance'):
        msg = json.loads(e['message'])['message']
        if msg.get('method') == 'Network.requestWillBeSent':
            u = msg['params']['request']['url']
            if u != url and not u.startswith(('data:', 'blob:', 'about:')):
                requests.append(u)
    resources = driver.execute_script('return performance.getEntriesByType("resource").map(e => e.name)')
    return errors, requests, resources


def actions(driver):
    """selenium's ActionChains with no pause in a pointer move: its default (250 ms a move, the
    speed of a hand) was most of the page tests' time (392 hovers: 115 of 168 s)"""
    from selenium.webdriver.common.action_chains import ActionChains
    return ActionChains(driver, duration=0)
_profiles = []


def missing():
    """None when chromium, its driver and selenium are all here; else what is missing"""
    if CHROMIUM and DRIVER and webdriver is not None:
        return None
    return ('chromium, chromedriver or python3-selenium is missing (scripts/setup.sh installs chromium, '
            'chromium-driver and python3-selenium)')


def stop():
    """every browser this test started quit, its profile removed (also done at exit)"""
    while _drivers:
        try:
            _drivers.pop().quit()
        except Exception:  # noqa: BLE001 - a driver that is already gone
            pass
    while _profiles:
        shutil.rmtree(_profiles.pop(), ignore_errors=True)


def start(width=1280, height=900, logs=False, extra=()):
    """a headless chromium with a profile of its own, no network service of its own (no
    component updates, sync or QUIC), at width x height; logs: keep the console and the network
    log (goog:loggingPrefs); extra: more chromium switches. Stopped, its profile removed, at exit: after an uncaught exception
    too, and on SIGTERM (meson's timeout), which becomes SystemExit."""
    if not _profiles:
        atexit.register(stop)
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    profile = tempfile.mkdtemp(prefix='qkv-chromium-')
    _profiles.append(profile)
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
              '--disable-background-networking', '--disable-component-update', '--disable-sync',
              '--disable-dev-shm-usage', '--user-data-dir=' + profile, '--window-size=%d,%d' % (width, height),
              *extra]:
        opts.add_argument(a)
    if logs:
        opts.set_capability('goog:loggingPrefs', {'browser': 'ALL', 'performance': 'ALL'})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    _drivers.append(driver)
    return driver


# the page's numbers as bits, per matrix: hex of the float32 or float64 bytes, little-endian (JSON has
# no NaN and no -0); exact rationals left out
_BITS_JS = '''
var P = window.qkvPage, out = {};
Object.keys(P.data.matrices).forEach(function (id) {
  var m = P.data.matrices[id]; if (!m.data || (m.dtype !== 'float32' && m.dtype !== 'float64')) return;
  var f = m.dtype === 'float32', a = f ? new Float32Array(m.data) : new Float64Array(m.data), u = new Uint8Array(a.buffer), s = '';
  for (var k = 0; k < u.length; ++k) s += (u[k] < 16 ? '0' : '') + u[k].toString(16);
  out[id] = [m.dtype, s];
});
return out;'''


def page_bits(driver):
    """every float32/float64 matrix of the open page's data: {id: (dtype, bytes)}"""
    return {k: (v[0], bytes.fromhex(v[1])) for k, v in driver.execute_script(_BITS_JS).items()}


def steps_native(native, edit, bits, tmp, texts=None):
    """tests/browser/page_steps_native (the path `native`) on an open `qkv explain` page's steps
    (edit: the page's edit object, its steps' scalars and masks as they are now; bits:
    page_bits()): every step's bytes as the same C++ gives them natively, by id; on a page whose
    steps mix types (03b), an exact operand's fractions from `texts` (id: [fraction, ...]) and an
    exact step's fractions"""
    ops = {s[k] for s in edit['steps'] for k in ('a', 'b', 'c') if s[k]}
    steps = {s['id'] for s in edit['steps']}
    doc = {'steps': edit['steps'], 'matrices': {}}
    for id_ in ops - steps:
        if texts and id_ in texts:
            doc['matrices'][id_] = {'dtype': 'exact', 'exact': list(texts[id_])}
            continue
        dt, b = bits[id_]
        size = 4 if dt == 'float32' else 8
        doc['matrices'][id_] = {'dtype': dt, 'bits': ['%x' % int.from_bytes(b[k:k + size], 'little')
                                                      for k in range(0, len(b), size)]}
    path = os.path.join(tmp, 'in.json')
    with open(path, 'w') as f:
        json.dump(doc, f)
    r = subprocess.run([native, path], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit('page_steps_native failed: ' + r.stderr)
    out = {}
    for id_, hexes in json.loads(r.stdout).items():
        if texts and id_ in texts:  # an exact step: its fractions
            out[id_] = hexes
            continue
        size = 4 if bits[id_][0] == 'float32' else 8
        out[id_] = b''.join(int(h, 16).to_bytes(size, 'little') for h in hexes)
    return out

def same_numbers(dtype, a, b):
    """two matrices' bytes hold the same numbers, bit for bit, a NaN as any NaN (which NaN a sum
    of two keeps is the compiler's choice of operand order)"""
    size = 4 if dtype == 'float32' else 8
    exp_mask, frac_bits = (0x7f800000, 23) if size == 4 else (0x7ff0000000000000, 52)

    def words(x):
        out = []
        for k in range(0, len(x), size):
            u = int.from_bytes(x[k:k + size], 'little')
            out.append('nan' if (u & exp_mask) == exp_mask and u & ((1 << frac_bits) - 1) else u)
        return out
    return words(a) == words(b)
