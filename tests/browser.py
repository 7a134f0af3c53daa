"""A real browser for the tests of what a person looks at: headless Chromium
(the Debian package, installed by ``.ci/run``) driven with Selenium.

    python tests/browser.py RUN/report.html docs/img/report.png   # a full-page screenshot

is how the screenshots in docs/ are made.
"""
import importlib.util
import os
import shutil
import sys

#: where the Debian packages chromium and chromium-driver put their binaries, then other usual names
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)


def missing():
    """Why no browser can run here (None when one can): what is not installed."""
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (pip install -r requirements.txt)"
    if not any(shutil.which(name) for name in BROWSERS):
        return "no Chromium (.ci/run installs it: apt-get install -y chromium chromium-driver)"
    if not any(shutil.which(name) for name in DRIVERS):
        return "no chromedriver (.ci/run installs it: apt-get install -y chromium-driver)"
    return None


def chromium(width=1280, height=1000):
    """A headless Chromium that keeps the page's console messages (``driver.get_log("browser")``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = next(shutil.which(n) for n in BROWSERS if shutil.which(n))
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = next(shutil.which(n) for n in DRIVERS if shutil.which(n))
    return webdriver.Chrome(service=Service(driver), options=options)


def open_page(driver, path):
    """Load ``path`` and wait for its web fonts (report.html carries its CJK glyphs): what a person sees."""
    driver.get("file://" + os.path.abspath(path))
    driver.execute_async_script("document.fonts.ready.then(() => arguments[arguments.length - 1]())")


def screenshot(driver, path, out, max_height=6000):
    """The page at ``path`` as a PNG at ``out``, as tall as the page (up to ``max_height`` pixels)."""
    open_page(driver, path)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(height + 40, max_height))
    driver.save_screenshot(out)


if __name__ == "__main__":
    if len(sys.argv) < 3 or len(sys.argv) % 2 != 1:
        sys.exit("usage: python tests/browser.py PAGE.html OUT.png [PAGE.html OUT.png ...]")
    reason = missing()
    if reason:
        sys.exit(reason)
    browser = chromium()
    try:
        for page, png in zip(sys.argv[1::2], sys.argv[2::2]):
            screenshot(browser, page, png)
            print(png)
    finally:
        browser.quit()
