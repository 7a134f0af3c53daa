"""report.html (appzoo/reports/html.py; a sweep's, appzoo/sweep/page.py, from its parts): one self-contained page
per run and per sweep, on made-up data with known answers, opened in a real browser (headless Chromium,
tests/browser.py)."""
import re

import numpy as np
import pytest

import browser
from appzoo.reports import mistakes, report, html as report_html
from appzoo.sweep import page as sweep_page
from tasks.sequence_labeling.reader import SequenceLabelingReader
from tasks.text_classification.reader import ClassificationReader

LABELS = ["体育", "财经", "科技"]
HOSTILE = "<script>alert('x')</script> & \"quoted\""


def classification_run(folder):
    """Nine texts; 科技 (three in gold) is never predicted; one text is hostile HTML."""
    gold = ["体育", "体育", "体育", "财经", "财经", "财经", "科技", "科技", "科技"]
    probs = [[.9, .05, .05], [.8, .1, .1], [.3, .6, .1], [.1, .8, .1], [.2, .7, .1], [.7, .2, .1],
             [.6, .3, .1], [.2, .75, .05], [.5, .4, .1]]
    examples = [{"text": f"第{i}条新闻" if i != 6 else HOSTILE, "label": g, "source": f"f:{i}"}
                for i, g in enumerate(gold)]
    predictions = [{"probs": np.asarray(p, dtype=np.float32), "label": LABELS[int(np.argmax(p))]} for p in probs]
    reader = ClassificationReader()
    metrics = {"best": {"step": 4, "metric": "macro_f1", "value": 0.5}, "wall_time_s": 1.0}
    for split in ("dev", "test"):
        metrics[split] = reader.evaluate(examples, predictions, LABELS)
    _, described = mistakes.write(str(folder), reader, LABELS, {s: (examples, predictions) for s in ("dev", "test")},
                                  metrics)
    history = [{"step": s, "loss": 1.0 / s} for s in range(1, 5)] + [{"step": 4, "dev_macro_f1": 0.5}]
    report.write(str(folder), metrics, history, LABELS, plots=True, mistakes=described)
    return folder / "report.html"


def ner_run(folder):
    """Two sentences: 北京 tagged ORG instead of LOC (wrong type), 华为 missed, 工作 spurious; 上海 right."""
    reader = SequenceLabelingReader(scheme="BIO")
    tokens = list("张三在北京的华为工作")
    gold = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-ORG", "I-ORG", "O", "O"]
    pred = ["B-PER", "I-PER", "O", "B-ORG", "I-ORG", "O", "O", "O", "B-LOC", "I-LOC"]
    examples = [{"tokens": tokens, "tags": gold}, {"tokens": list("上海"), "tags": ["B-LOC", "I-LOC"]}]
    predictions = [{"tags": pred}, {"tags": ["B-LOC", "I-LOC"]}]
    metrics = {"dev": reader.evaluate(examples, predictions, None), "wall_time_s": 1.0}
    _, described = mistakes.write(str(folder), reader, None, {"dev": (examples, predictions)}, metrics)
    report.write(str(folder), metrics, [], [], plots=False, mistakes=described)
    return folder / "report.html"


def test_entity_mistakes_keep_their_sentence_for_highlighting():
    found = mistakes.entity_mistakes([list("甲乙"), ["New", "York", "is", "big"]],
                                     [[("PER", 0, 1)], [("LOC", 0, 2)]], [[], [("LOC", 0, 1)]],
                                     lambda t: " ".join(t))
    assert [r["index"] for r in found["rows"]] == [0, 1]
    assert found["rows"][1]["span"] == [0, 2]
    second = found["sentences"][1]
    assert "".join(second["pieces"]) == "New York is big" and len(second["pieces"]) == 4
    assert second["gold"] == [["LOC", 0, 2]] and second["predicted"] == [["LOC", 0, 1]]


def test_the_page_is_self_contained_and_escapes_the_texts(tmp_path):
    page = classification_run(tmp_path).read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "loads nothing from the network"
    assert "<link rel=\"stylesheet\"" not in page and "@import" not in page
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,', page)
    assert "training curve" in images and "reliability diagram, dev" in images
    assert HOSTILE not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert page.count("<script>") == 2  # the page's own, and the one that adds its CJK font in <head>
    assert page.index("new FontFace(") < page.index("<body>")
    assert "warning: class &#x27;科技&#x27; was never predicted on dev (F1 0, 3 in gold)" in page


def test_a_run_without_plots_or_mistakes_still_has_a_page(tmp_path):
    report.write(str(tmp_path), {"dev": {"accuracy": 0.5}}, [], ["a"], plots=False)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "<td>accuracy</td>" in page and "<img" not in page and 'id="mistakes"' not in page


def test_at_most_max_rows_mistakes_are_listed_spread_over_the_classes(monkeypatch):
    monkeypatch.setattr(report_html, "MAX_ROWS", 4)
    rows = [{"kind": "mistake", "class": c, "confidence": v} for c in "ab" for v in (0.1, 0.9, 0.5)]
    chosen = report_html._first(rows)
    assert [(r["class"], r["confidence"]) for r in chosen] == [("a", 0.9), ("a", 0.5), ("b", 0.9), ("b", 0.5)]


# ------------------------------------------------------------- in a real browser
@pytest.fixture(scope="module")
def chromium():
    reason = browser.missing()
    if reason:
        pytest.skip(f"no browser can run here: {reason}")
    driver = browser.chromium()
    yield driver
    driver.quit()


def opened(driver, path):
    """Open the page; fail on any console error or uncaught exception it logged."""
    driver.get_log("browser")  # drop what an earlier page left
    browser.open_page(driver, path)
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    return driver


def choose(driver, name, value):
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("css selector", f'.filters select[name="{name}"]')).select_by_value(value)


def visible_rows(driver):
    return [r for r in driver.find_elements("css selector", "#mistakes tbody tr") if r.is_displayed()]


def test_a_classification_page_renders_and_filters_by_gold_and_predicted_class(chromium, tmp_path):
    driver = opened(chromium, classification_run(tmp_path))
    assert driver.title == f"Run report: {tmp_path.name}"
    metrics = driver.find_element("id", "metrics").text
    assert "macro_f1" in metrics and "ece" in metrics
    matrix = driver.find_elements("css selector", "table.cm")[0]
    assert [c.text for c in matrix.find_elements("css selector", "tbody tr:nth-child(3) td")] == ["2", "1", "0"]
    images = driver.find_elements("css selector", "img")
    assert images and all(driver.execute_script("return arguments[0].naturalWidth", i) > 0 for i in images)

    everything = visible_rows(driver)
    assert len(everything) == 2 * 5  # five mistakes per split
    assert driver.find_element("id", "shown").text == "10 of 10 rows shown"
    choose(driver, "gold", "科技")
    shown = visible_rows(driver)
    assert len(shown) == 6 and {r.get_attribute("data-gold") for r in shown} == {"科技"}
    assert all(r.find_elements("css selector", "td")[2].text == "科技" for r in shown)
    choose(driver, "predicted", "财经")
    shown = visible_rows(driver)
    assert len(shown) == 2 and {(r.get_attribute("data-gold"), r.get_attribute("data-predicted")) for r in shown} \
        == {("科技", "财经")}
    choose(driver, "split", "test")
    assert len(visible_rows(driver)) == 1
    assert driver.find_element("id", "shown").text == "1 of 10 rows shown"
    choose(driver, "gold", "*")
    choose(driver, "predicted", "*")
    choose(driver, "split", "*")
    texts = [r.find_elements("css selector", "td")[5].text for r in visible_rows(driver)]
    assert HOSTILE in texts, "the hostile text shows as text, not as markup"


def test_the_chinese_of_a_page_is_drawn_with_the_font_it_carries(chromium, tmp_path):
    """Issue 42, item 21: report.html carries the glyphs of its Chinese (a subset of the bundled Noto Sans CJK SC,
    inlined as WOFF), so no CJK font on the machine is needed: Chromium draws a Chinese cell with that web font
    (DevTools' CSS.getPlatformFontsForNode), and every character of it has a glyph there."""
    from appzoo.utils.fonts import WEBFONT
    from appzoo.reports import html as report_html

    assert f'"{WEBFONT}"' in report_html.STYLE
    driver = opened(chromium, classification_run(tmp_path))
    cell = next(r for r in visible_rows(driver) if r.get_attribute("data-gold") == "科技")
    driver.execute_cdp_cmd("DOM.enable", {})
    driver.execute_cdp_cmd("CSS.enable", {})
    root = driver.execute_cdp_cmd("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    found = driver.execute_cdp_cmd("DOM.querySelector", {"nodeId": root, "selector": "#mistakes tbody tr td:nth-child(3)"})
    fonts = driver.execute_cdp_cmd("CSS.getPlatformFontsForNode", {"nodeId": found["nodeId"]})["fonts"]
    assert cell.find_elements("css selector", "td")[2].text == "科技"
    # the web font, not a system one (whose name it keeps inside: Noto Sans CJK SC), has both glyphs
    assert [(f["isCustomFont"], f["glyphCount"]) for f in fonts] == [(True, 2)], fonts


def test_an_ner_page_highlights_gold_and_predicted_entities(chromium, tmp_path):
    driver = opened(chromium, ner_run(tmp_path))
    kinds = [r.get_attribute("data-kind") for r in visible_rows(driver)]
    assert sorted(kinds) == ["missed", "spurious", "wrong_type"]
    choose(driver, "predicted", "ORG")
    (row,) = visible_rows(driver)
    assert row.get_attribute("data-kind") == "wrong_type" and row.get_attribute("data-gold") == "LOC"
    gold = [e.text.replace("\n", "") for e in row.find_elements("css selector", ".ent.g")]
    predicted = [e.text.replace("\n", "") for e in row.find_elements("css selector", ".ent.p")]
    assert gold == ["张三PER", "北京LOC", "华为ORG"] and predicted == ["张三PER", "北京ORG", "工作LOC"]
    outlined = [e.text.replace("\n", "") for e in row.find_elements("css selector", ".ent.bad")]
    assert outlined == ["北京LOC", "北京ORG"], "the entity the row is about, on both lines"
    assert row.find_element("css selector", "td.text").text.replace("\n", "").replace(" ", "").startswith(
        "gold张三PER在北京LOC的华为ORG工作")


def planted_summary():
    """A sweep summary as appzoo.sweep.summarise writes it: focal better on dev, rare never right under ce."""
    def row(name, dev, test, verdict, p, rare):
        return {"setting": name, "n": 3, "wall_time_s": {"mean": 12.0},
                "metrics": {"dev.macro_f1": {"mean": dev, "std": 0.01}, "test.macro_f1": {"mean": test, "std": 0.02}},
                "verdict": verdict, "verdict_p": p, "test_verdict": "tie", "test_verdict_p": 0.2,
                "per_class_f1": {"dev": {"常见": {"mean": dev, "runs": 3, "zero_in_every_run": False},
                                         "罕见": {"mean": rare, "runs": 3, "zero_in_every_run": rare == 0}}}}

    return {"param_path": "examples/x.json", "command": "python run_trainer.py --sweep model.loss.name=ce,focal",
            "seeds": [42, 43, 44], "runs_finished": 6, "runs_planned": 6, "key_metrics": ["dev.macro_f1", "test.macro_f1"],
            "primary_metric": "dev.macro_f1", "confirmation_metric": "test.macro_f1",
            "settings": [row("loss.name=ce", 0.50, 0.49, "baseline", None, 0.0),
                         row("loss.name=focal", 0.60, 0.52, "better", 0.0004, 0.3)]}


def test_a_sweep_page_shows_the_verdicts_and_flags_classes_never_right(chromium, tmp_path):
    sweep_page.write(str(tmp_path), planted_summary())
    driver = opened(chromium, tmp_path / "report.html")
    cells = [[c.text for c in r.find_elements("css selector", "td")]
             for r in driver.find_elements("css selector", "#settings tbody tr")]
    assert cells[1][0] == "loss.name=focal" and cells[1][5:] == ["better", "< 0.001", "tie", "0.200"]
    per_class = driver.find_element("css selector", 'table.per-class-f1[data-split="dev"]').text
    assert "罕见 0.0000 ⚠ 0.3000" in per_class
