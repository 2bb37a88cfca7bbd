"""browser.py: headless chromium through selenium, for the tests that look at pages as a learner
does (tests/browser/, tests/learner/). Debian's chromium, chromium-driver and python3-selenium
(scripts/setup.sh installs them); the tests run under /usr/bin/python3, which has selenium.

    import browser                       # tests/support/ on sys.path
    why = browser.missing()              # None, or what is missing
    driver = browser.start()             # quit, and its profile removed, however the test ends
    browser.stop()                       # early, when the test is done with it
    browser.actions(driver).move_to_element(cell).perform()   # a hover, a click, keys: at once
"""
import atexit
import shutil
import signal
import sys
import tempfile

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
DRIVER = shutil.which('chromedriver')
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:
    webdriver = None

_drivers = []


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
