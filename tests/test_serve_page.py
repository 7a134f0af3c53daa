"""The try-it page of ``appzoo.serve`` (appzoo/serve/static/index.html) in a real browser (headless
Chromium, tests/browser.py): for a tiny trained model of each task, what the page shows after a person
types a text and presses Predict is the server's own answer to the same input.

    APPZOO_SCREENSHOTS=docs/img python -m pytest -q tests/test_serve_page.py

also saves what each task looks like there (serve_cls.png, serve_multilabel.png, ...); the plain suite
writes nothing into the repository.

The tests of what a task's answer looks like need the trained runs (conftest ``served_runs``, seven short
trainings shared with the other serving tests), so they are slow; the page's security headers are checked in
the browser in the quick lane, on a server whose models never load.
"""
import contextlib
import http.server
import os
import threading
import time

import pytest

import browser
import serving

pytestmark = pytest.mark.xdist_group("served")  # with the other users of the served runs (conftest.py)
slow = pytest.mark.slow

reason = browser.missing()
if reason:
    pytest.skip(f"no browser can run here: {reason}", allow_module_level=True)

#: the served models, each named as in tests/serving.py's TASKS
MODELS = ("cls", "multilabel", "ner_crf", "pointwise")


@pytest.fixture(scope="module")
def base(served_runs):
    with serving.live_server({name: served_runs[name] + "/best" for name in MODELS}) as (url, _):
        yield url


@pytest.fixture(scope="module")
def driver():
    chromium = browser.chromium(width=960, height=800)
    yield chromium
    chromium.quit()


def ask(driver, base, model, *texts, screenshot=None):
    """Open the page, choose ``model``, type ``texts`` (two for a pair model), press Predict and wait
    for the answer to be shown; the server's own answer to the same input (its one prediction row)."""
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver.get_log("browser")  # drop what an earlier page left
    driver.get(base + "/")
    wait = WebDriverWait(driver, 30)
    wait.until(lambda d: d.find_elements("css selector", f'#model option[value="{model}"]'))
    Select(driver.find_element("id", "model")).select_by_value(model)
    for box, text in zip(("text_a", "text_b"), texts):
        field = driver.find_element("id", box)
        field.clear()
        field.send_keys(text)
    driver.find_element("id", "submit").click()
    wait.until(lambda d: d.find_element("tag name", "body").get_attribute("data-answered") == "1"
               or d.find_element("id", "error").text)  # a refusal shows there, and counts no answer
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    assert driver.find_element("id", "error").text == ""
    if screenshot and os.environ.get("APPZOO_SCREENSHOTS"):
        save(driver, os.path.join(os.environ["APPZOO_SCREENSHOTS"], screenshot))

    status, _, answer = serving.request(base, "POST", f"/models/{model}/predict",
                                        {"inputs": [texts[0] if len(texts) == 1 else list(texts)]})
    assert status == 200, answer
    return answer["predictions"][0]


def save(driver, path):
    """What is on the page, as a PNG at ``path`` (the whole document, not the empty window below it)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    driver.find_element("tag name", "html").screenshot(path)


def bars(driver):
    """``{label: (shown probability, fraction of the track filled, chosen)}`` of the probability bars."""
    out = {}
    for bar in driver.find_elements("css selector", "#bars .bar[data-label]"):
        fill = bar.find_element("css selector", ".fill").size["width"]
        track = bar.find_element("css selector", ".track").size["width"]
        out[bar.get_attribute("data-label")] = (bar.find_element("css selector", ".p").text, fill / track,
                                                "top" in bar.get_attribute("class").split())
    return out


def check_bars(driver, row, chosen):
    shown = bars(driver)
    assert sorted(shown) == sorted(row["probs"])
    for label, p in row["probs"].items():
        text, filled, top = shown[label]
        assert text == f"{p:.3f}", label
        assert filled == pytest.approx(p, abs=0.01), label
        assert top == (label in chosen), label


@slow
def test_classification_shows_the_label_and_every_probability(driver, base):
    row = ask(driver, base, "cls", "中国队在决赛中夺得冠军", screenshot="serve_cls.png")
    assert driver.find_element("id", "answer").text == f"Label: {row['label']}"
    check_bars(driver, row, [row["label"]])


@slow
def test_multi_label_marks_every_chosen_label(driver, base):
    row = ask(driver, base, "multilabel", "新药上市后公司股价大涨", screenshot="serve_multilabel.png")
    assert driver.find_element("id", "answer").text == f"Labels: {', '.join(row['labels']) or '(none)'}"
    check_bars(driver, row, row["labels"])
    thresholds = {m["name"]: m for m in serving.request(base, "GET", "/models")[2]["models"]}["multilabel"]["thresholds"]
    marks = {bar.get_attribute("data-label"): bar.find_element("class name", "thr").get_attribute("title")
             for bar in driver.find_elements("css selector", "#bars .bar")}
    assert marks == {name: f"threshold {t:.3f}" for name, t in thresholds.items()}  # each label's own threshold
    for name in thresholds:  # and a label is given exactly when it reaches its threshold
        assert (name in row["labels"]) == (row["probs"][name] >= thresholds[name] - 1e-6)


@slow
def test_entities_are_marked_in_the_sentence_as_it_was_typed(driver, base):
    text = "张三在北京大学读书"
    row = ask(driver, base, "ner_crf", text, screenshot="serve_ner.png")
    assert row["entities"], "the tiny model found no entity: nothing to check"
    marks = driver.find_elements("css selector", "#sentence mark.ent")
    assert [(m.text, m.get_attribute("data-type")) for m in marks] \
        == [(e["text"], e["type"]) for e in row["entities"]]
    assert driver.find_element("id", "sentence").text == text  # characters joined back, no spaces, no tag names
    count = len(row["entities"])
    assert driver.find_element("id", "entity-count").text == f"{count} entit{'y' if count == 1 else 'ies'}"


@slow
def test_words_keep_the_spaces_typed_between_them(driver, base):
    text = "张三去了 New York 读书"  # split at its spaces: four tokens, 张三去了 one of them
    row = ask(driver, base, "ner_crf", text)
    assert len(row["tokens"]) == 4, row["tokens"]
    assert driver.find_element("id", "sentence").text == text
    marks = driver.find_elements("css selector", "#sentence mark.ent")
    assert [m.get_attribute("data-type") for m in marks] == [e["type"] for e in row["entities"]]


@slow
def test_matching_shows_the_score_and_the_label(driver, base):
    row = ask(driver, base, "pointwise", "今天天气怎么样", "今天的天气如何", screenshot="serve_matching.png")
    assert driver.find_element("id", "label").text == row["label"]
    assert driver.find_element("id", "score").text == f"{row['score']:.4f}"


# ---- the page's Content-Security-Policy, in the browser (quick: no model is loaded) ----------------
@pytest.fixture(scope="module")
def unloaded():
    with serving.live_server({"cls": "/nowhere/best"}, load=False) as (url, _):
        yield url


def test_the_page_runs_under_its_csp_which_refuses_inline_script_and_framing(driver, unloaded):
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")
    driver.get(unloaded + "/")
    wait = WebDriverWait(driver, 10)  # its script (a file of its own) ran: it asked /models and says so
    wait.until(lambda d: d.find_element("id", "meta").text == "loading the models…")
    assert driver.find_element("tag name", "h1").value_of_css_property("font-size") != "32px"  # page.css applied
    assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    driver.execute_script("""const s = document.createElement("script");
        s.textContent = "document.body.dataset.injected = '1'"; document.body.append(s);""")  # as an XSS would
    wait.until(lambda d: any("Content Security Policy" in e["message"] for e in d.get_log("browser")))
    assert driver.find_element("tag name", "body").get_attribute("data-injected") is None
    # framed by another page, the page is refused (frame-ancestors 'none'; X-Frame-Options DENY), where an
    # answer without those headers is shown
    with framing_page(f"<iframe id=page src='{unloaded}/'></iframe><iframe id=live "
                      f"src='{unloaded}/v2/health/live'></iframe>") as url:
        driver.get(url)
        time.sleep(1)
        shown = {}
        for frame in ("page", "live"):
            driver.switch_to.frame(frame)
            shown[frame] = (driver.title, driver.find_element("tag name", "body").text)
            driver.switch_to.default_content()
    assert '{"live":true}' in shown["live"][1]
    assert shown["page"][0] != "appzoo: try a model" and "Try a model" not in shown["page"][1], shown


# ---- a server that needs an API key: the page asks for it, keeps it for the tab, sends it -----------------
KEY = "page-K3Y-123"
NEEDS_KEY = ("missing API key: this server needs the header 'Authorization: Bearer KEY' on every route but "
             "/v2/health/live and /v2/health/ready. Enter the server's API key above and press \"Use this key\".")


def enter_key(driver, key):
    driver.find_element("id", "api_key").send_keys(key)
    driver.find_element("id", "use_key").click()


def test_the_page_asks_for_the_key_on_a_401_and_sends_the_one_typed(driver):
    from selenium.webdriver.support.ui import WebDriverWait

    with serving.live_server({"cls": "/nowhere/best"}, load=False, api_keys=[KEY]) as (url, app):
        driver.get(url + "/")
        wait = WebDriverWait(driver, 10)
        wait.until(lambda d: d.find_element("id", "error").text)
        assert driver.find_element("id", "error").text == NEEDS_KEY
        assert driver.find_element("id", "key_box").get_attribute("open") is not None  # the key field is shown
        enter_key(driver, "not-the-key")
        wait.until(lambda d: "wrong API key" in d.find_element("id", "error").text)
        enter_key(driver, KEY)  # /models answers now: the page says the model is loading, and no error
        wait.until(lambda d: d.find_element("id", "meta").text == "loading the models…")
        assert driver.find_element("id", "error").text == ""
        assert driver.execute_script("return sessionStorage.getItem('appzoo_api_key')") == KEY
        assert driver.find_element("id", "api_key").get_attribute("value") == ""  # not left in the field
        driver.get(url + "/")  # the same tab keeps it
        wait.until(lambda d: d.find_element("id", "meta").text == "loading the models…")
        assert driver.find_element("id", "error").text == ""
        driver.execute_script("sessionStorage.clear()")


@slow
def test_a_model_behind_a_key_answers_on_the_page(driver, served_runs):
    from selenium.webdriver.support.ui import WebDriverWait

    with serving.live_server({"cls": served_runs["cls"] + "/best"}, api_keys=[KEY]) as (url, _):
        driver.get(url + "/")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_element("id", "error").text == NEEDS_KEY)
        enter_key(driver, KEY)
        wait.until(lambda d: d.find_elements("css selector", '#model option[value="cls"]'))
        driver.find_element("id", "text_a").send_keys("中国队在决赛中夺得冠军")
        driver.find_element("id", "submit").click()
        wait.until(lambda d: d.find_element("tag name", "body").get_attribute("data-answered") == "1")
        status, _, answer = serving.request(url, "POST", "/models/cls/predict",
                                            {"inputs": ["中国队在决赛中夺得冠军"]}, {"Authorization": f"Bearer {KEY}"})
        assert status == 200
        assert driver.find_element("id", "answer").text == f"Label: {answer['predictions'][0]['label']}"
        driver.execute_script("sessionStorage.clear()")


@contextlib.contextmanager
def framing_page(html):
    """The URL of ``html`` served from another origin (another port of 127.0.0.1), for the framing test."""
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = html.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
