"""Text from the data in the Markdown a run writes (appzoo.utils.markdown.literal): errors.md, report.md, audit.md, sweep.md
and search.md show hostile label names and texts as text. Checked on the files, through a CommonMark renderer that
passes HTML through (markdown-it-py, as many viewers do), and in headless Chromium, where no script may run."""
import html
import html.parser
import json
import unicodedata

import numpy as np
import pytest
from markdown_it import MarkdownIt

import browser
from appzoo.reports import audit, card, mistakes, report
from appzoo.utils.markdown import literal
from appzoo.search import results
from appzoo.sweep import summary
from tasks.text_classification.reader import ClassificationReader

#: each sets a flag and the page's title if it ever runs
SCRIPT = "<script>window.__pwned = 'script'; document.title = 'pwned'</script>"
IMG = "<img src=x onerror=\"window.__pwned = 'img'; document.title = 'pwned'\">"
PIPE = "R&D | ops"
NEWLINE = "two\nlines"  # a JSONL label may hold one
LABELS = [SCRIPT, IMG, PIPE, NEWLINE]
#: what a reader sees of each label: itself, but the newline as predictions/<split>.jsonl writes it
SHOWN = {SCRIPT: SCRIPT, IMG: IMG, PIPE: PIPE, NEWLINE: "two\\nlines"}
ESC_BEL = "\x1b[31mred\x07 and on"
BIDI = "invoice \u202eexe.pdf"
#: (text, gold, predicted): NEWLINE is never predicted, so the class warnings quote it
ROWS = [(ESC_BEL, SCRIPT, IMG), (BIDI, SCRIPT, PIPE), (IMG + " & more", IMG, PIPE), (SCRIPT, IMG, SCRIPT),
        ("a | b", PIPE, PIPE), ("`code` *bold* [link](https://example.com) ~~gone~~", PIPE, IMG),
        ("__init__ # not a heading", NEWLINE, SCRIPT), ("zero\u200bwidth\u2028line", NEWLINE, IMG)]
PAGE = '<!doctype html><html><head><meta charset="utf-8"><title>clean</title></head><body>\n{}</body></html>\n'


def renderer():
    """CommonMark with HTML passed through (markdown-it's default), plus GFM's tables and strikethrough."""
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """errors.md and report.md of a run whose data (read from JSONL, as a user's would be) is hostile."""
    folder = tmp_path_factory.mktemp("hostile")
    data = folder / "dev.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": g}, ensure_ascii=False) + "\n" for t, g, _ in ROWS),
                    encoding="utf-8")
    reader = ClassificationReader(format="jsonl")
    examples = reader.read(str(data), "dev")
    assert [e["label"] for e in examples] == [g for _, g, _ in ROWS]  # the format allows every one of them
    predictions = []
    for _, _, predicted in ROWS:
        probs = np.full(len(LABELS), 0.1, dtype=np.float32)
        probs[LABELS.index(predicted)] = 0.7
        predictions.append({"probs": probs, "label": predicted})
    metrics = {"best": {"step": 4, "metric": "macro_f1", "value": 0.5}, "wall_time_s": 1.0,
               "dev": reader.evaluate(examples, predictions, LABELS)}
    _, described = mistakes.write(str(folder), reader, LABELS, {"dev": (examples, predictions)}, metrics)
    report.write(str(folder), metrics, [], LABELS, plots=False, mistakes=described)
    return folder


# ------------------------------------------------------------- checks
class Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.handlers = set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]


def assert_shows_no_html(markdown_text):
    """No control character but the line ends, and rendered HTML that holds only what Markdown makes."""
    bad = sorted({hex(ord(c)) for c in markdown_text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl",
                                                                                                    "Zp", "Cs")})
    assert not bad, f"raw control or format characters: {bad}"
    tags = Tags()
    tags.feed(renderer().render(markdown_text))
    assert not tags.tags - {"h1", "h2", "h3", "p", "ul", "li", "strong", "em", "code", "a", "table", "thead",
                            "tbody", "tr", "th", "td"}, tags.tags
    assert not tags.handlers


def row_cells(line):
    """The cells of a raw table row, split at each pipe that no backslash escapes (markdown-it's and GitHub's
    rule: a pipe right after a backslash is text)."""
    cells, current, escaped = [], "", False
    for char in line.strip()[1:-1]:
        if char == "|" and not escaped:
            cells.append(current)
            current = ""
        else:
            current += char
        escaped = char == "\\"
    return cells + [current]


def tables(markdown_text):
    """Each table of a Markdown file as its raw rows (the header, then the body rows)."""
    found, current = [], None
    for line in markdown_text.splitlines():
        if line.startswith("|"):
            if current is None:
                current = []
                found.append(current)
            if not line.startswith("|---"):
                current.append(line)
        else:
            current = None
    return found


def rendered_tables(markdown_text):
    """Each table as markdown-it renders it: rows of cell texts (inline text with its escapes resolved)."""
    out, row = [], None
    tokens = renderer().parse(markdown_text)
    for token, following in zip(tokens, tokens[1:] + [None]):
        if token.type == "table_open":
            out.append([])
        elif token.type == "tr_open":
            row = []
            out[-1].append(row)
        elif token.type in ("th_open", "td_open"):
            row.append("".join(child.content for child in following.children or [] if child.type == "text"))
    return out


def per_class_table(markdown_text):
    [table] = [t for t in tables(markdown_text) if t[0].startswith("| class | precision |")]
    return table


# ------------------------------------------------------------- the function
#: where literal() text goes: (the Markdown before it, after it), the HTML around it, what shows before it
PLACES = [("x ", "", ("<p>", "</p>"), "x "), ("- ", "", ("<ul>\n<li>", "</li>\n</ul>"), ""),
          ("| h |\n|---|\n| ", " |", ("<table>\n<thead>\n<tr>\n<th>h</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n<td>",
                                     "</td>\n</tr>\n</tbody>\n</table>"), "")]


@pytest.mark.parametrize("text", [SCRIPT, IMG, PIPE, "&lt; is already an entity", "a \\ b \\| c", "news_tech",
                                  "_emphasis_ and __strong__ and a__b", "*star* **bold**", "`code` and ``more``",
                                  "[link](https://example.com) ![image](x.png) <https://example.com>",
                                  "~~struck~~", "# heading", "### x", "- item", "+ item", "12. item", "3) item",
                                  "---", "- - -", "-1", "#tag"])
def test_literal_renders_as_the_text_itself_in_a_line_a_list_item_and_a_table_cell(text):
    for before, after, (opening, closing), shown in PLACES:
        page = renderer().render(before + literal(text) + after).strip()
        assert page.startswith(opening) and page.endswith(closing), page
        inner = page[len(opening):-len(closing)]
        assert "<" not in inner, f"{text!r} made markup: {page}"
        assert html.unescape(inner) == shown + text


@pytest.mark.parametrize("char", ["\x1b", "\x07", "\x00", "\x7f", "\x85", "\x9b", "\t", "\r", "\n", "\u202a",
                                  "\u202e", "\u2066", "\u2069", "\u200b", "\u200d", "\ufeff", "\u2028", "\u2029"])
def test_an_invisible_character_is_written_as_json_escapes_it(char):
    assert literal(f"a{char}b") == "a" + json.dumps(char)[1:-1] + "b"
    if ord(char) < 0x20:  # what predictions/<split>.jsonl (json.dumps, ensure_ascii=False) writes too
        assert json.dumps(char, ensure_ascii=False)[1:-1] == json.dumps(char)[1:-1]


# ------------------------------------------------------------- the files of a run
def test_errors_md_and_report_md_hold_no_html_and_no_control_character(hostile_run):
    errors = (hostile_run / "errors.md").read_text(encoding="utf-8")
    text = (hostile_run / "report.md").read_text(encoding="utf-8")
    assert "<" not in errors
    assert "<" not in text.replace("`predictions/<split>.jsonl`", "")  # the code's own code span
    for name in (errors, text):
        assert_shows_no_html(name)
    # ESC and BEL read as predictions/dev.jsonl writes them; U+202E and the zero-width space visibly
    jsonl = (hostile_run / "predictions" / "dev.jsonl").read_text(encoding="utf-8")
    assert "\\u001b[31mred\\u0007 and on" in jsonl
    shown = "\n".join(cell for table in rendered_tables(errors) for row in table for cell in row)
    assert "\\u001b[31mred\\u0007 and on" in shown and "invoice \\u202eexe.pdf" in shown
    assert "zero\\u200bwidth\\u2028line" in shown
    assert "`code` *bold* [link](https://example.com) ~~gone~~" in shown
    assert "__init__ # not a heading" in shown and IMG + " & more" in shown and SCRIPT in shown


def test_the_per_class_table_keeps_its_columns_with_a_pipe_and_a_newline_in_label_names(hostile_run):
    text = (hostile_run / "report.md").read_text(encoding="utf-8")
    table = per_class_table(text)
    assert len(table) == 1 + len(LABELS)
    assert [len(row_cells(row)) for row in table] == [5] * len(table)
    [rendered] = [t for t in rendered_tables(text) if t[0][0] == "class"]
    assert [row[0] for row in rendered[1:]] == [SHOWN[name] for name in LABELS]
    warning = f"warning: class {NEWLINE!r} was never predicted on dev (F1 0, 2 in gold)"
    assert f"- {literal(warning)}" in text and "- warning: class 'two\\\\nlines' was never predicted" in text


def test_every_table_of_errors_md_keeps_its_columns(hostile_run):
    errors = (hostile_run / "errors.md").read_text(encoding="utf-8")
    found = tables(errors)
    assert len(found) == 1 + len(LABELS)  # the confusions, then a table per class with a mistake
    for table in found:
        assert len({len(row_cells(row)) for row in table}) == 1, table
    confusions = rendered_tables(errors)[0]
    assert confusions[0] == ["gold", "predicted", "count", "share of gold"]
    assert {(row[0], row[1]) for row in confusions[1:]} == {(SHOWN[g], SHOWN[p]) for _, g, p in ROWS if g != p}


def test_a_label_name_with_a_pipe_or_a_newline_keeps_the_report_table(tmp_path):
    names = ["a|b", "c\nd", "e\\|f", "g\r\nh"]
    metrics = {"dev": {"accuracy": 0.5, "per_class": {n: {"precision": 1.0, "recall": 0.5, "f1": 0.6, "support": 2}
                                                      for n in names}}}
    report.write(str(tmp_path), metrics, [], names, plots=False)
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    table = per_class_table(text)
    assert [len(row_cells(row)) for row in table] == [5] * 5
    [rendered] = [t for t in rendered_tables(text) if t[0][0] == "class"]
    assert [row[0] for row in rendered[1:]] == ["a|b", "c\\nd", "e\\|f", "g\\r\\nh"]
    assert [row[1:] for row in rendered[1:]] == [["1.0000", "0.5000", "0.6000", "2"]] * 4


def test_the_model_card_shows_data_as_text_and_its_front_matter_reads_back():
    """MODEL_CARD.md (appzoo/reports/card.py) of a record whose labels, file name and command are hostile."""
    import yaml

    scores = {"macro_f1": 0.5, "ece": 0.1}
    record = {
        "record_version": 1, "run": SCRIPT, "folder": "/runs/x", "written": "2026-01-01T00:00:00+00:00",
        "task": "text_classification", "model": "ErnieFcClassification", "labels": LABELS, "do": ["train", "eval"],
        "encoder": {"kind": "local folder", "source": IMG, "licence": "unknown (not recorded by the toolkit)"},
        "command": {"argv": ["--set", f"trainer.output_dir={PIPE}"], "overrides": [f"trainer.output_dir={PIPE}"],
                    "cwd": "/work"}, "max_seq_len": 8, "long_inputs": "cut",
        "data": {"train": {"path": f"{IMG}.tsv", "abs_path": "/x", "sha256": "ab", "examples": 8,
                           "classes": {name: 2 for name in LABELS}}},
        "best": {"step": 2, "metric": "macro_f1", "value": 0.5},
        "metrics": {"test": {"scalars": scores, "per_class_f1": {name: 0.5 for name in LABELS}}},
        "headline": {"split": "test", "metric": "macro_f1", "value": 0.5, "ci": [0.25, 0.75], "level": 0.95,
                     "resamples": 1000, "seed": 0},
        "confusions": {"test": [{"gold": SCRIPT, "predicted": NEWLINE, "count": 2}]},
        "limitations": {"few_training_examples": {NEWLINE: 2}, "few_threshold": 20, "rarest_in_training": {IMG: 2},
                        "training_examples": 8, "longer_than_max_seq_len": {"train": 1}},
        "versions": {"python": "3.11"}, "machine": {"cpu": "cpu", "cores": 2, "platform": "linux"},
        "git": {"commit": None}, "wall_time_s": 1.0}
    text = card.to_markdown(record)
    _, front, body = text.split("---\n", 2)
    assert yaml.safe_load(front)["datasets"] == [f"{IMG}.tsv"] and yaml.safe_load(front)["model-index"][0]["name"] \
        == SCRIPT
    assert not set("<>&") & set(front), front  # no markup for a renderer that allows HTML (issue 42, SEC2)
    assert "<" not in body.replace("`predictions/<split>.jsonl`", "")
    assert_shows_no_html(body)
    for table in tables(body):
        assert len({len(row_cells(row)) for row in table}) == 1, table
    [classes] = [t for t in rendered_tables(body) if t[0] == ["class", "train"]]
    assert [row[0] for row in classes[1:]] == [SHOWN[name] for name in LABELS]


def test_audit_sweep_and_search_markdown_show_data_as_text():
    found = {"max_seq_len": 64, "long_inputs": "cut", "warnings": [f"train: imbalance ratio 12 (rarest {SCRIPT!r} 1)"],
             "what_to_try": [{"key": "trainer.sampler", "try": "balanced", "why": f"{IMG!r} 1"}],
             "splits": {"train": {"examples": 3, "labels": {SCRIPT: 1, PIPE: 1, NEWLINE: 1}, "imbalance_ratio": 1.0,
                                  "unknown_words": {"distinct": 1, "occurrences": 1, "top": {"<b>": 1}}}},
             "leakage": {"train-dev": {"count": 1, "examples": [ESC_BEL]}},
             "conflicts": {"count": 1, "examples": [f"{BIDI} -> {sorted([SCRIPT, PIPE])}"]},
             "task": {"train: windows": IMG}}
    audit_md = audit.to_markdown(found, "params.json")
    [classes] = [t for t in tables(audit_md) if t[0].startswith("| class |")]
    assert [len(row_cells(row)) for row in classes] == [3] * 4
    [leakage] = [t for t in tables(audit_md) if t[0].startswith("| between |")]
    assert [len(row_cells(row)) for row in leakage] == [3] * 2

    def setting(name):
        return {"setting": name, "n": 1, "wall_time_s": {"mean": 1.0},
                "metrics": {"dev.f1": {"mean": 0.5, "std": None}}, "verdict": "baseline", "verdict_p": None,
                "per_class_f1": {"dev": {n: {"mean": 0.0, "runs": 1, "zero_in_every_run": True} for n in LABELS}}}

    sweep_md = summary.markdown({"param_path": "p.json", "command": None, "greater_is_better": True,
                                 "key_metrics": ["dev.f1"], "primary_metric": "dev.f1", "seeds": [1],
                                 "runs_finished": 2, "runs_planned": 2, "settings": [setting("lr=1"), setting("lr=2")]})
    [per_class] = [t for t in tables(sweep_md) if t[0].startswith("| class |")]
    assert [len(row_cells(row)) for row in per_class] == [3] * 5
    search_md = results.markdown({"param_path": "p.json", "command": None, "counts": {"failed": 1}, "metric": "f1",
                                  "direction": "maximize", "settings": {"sampler": "tpe", "pruner": "median"},
                                  "cpu_time_s": 1, "space": {}, "baseline": {}, "best": None,
                                  "trials": [{"trial": 0, "state": "failed", "params": {}, "value": None,
                                              "pruned_at_step": None, "continued_by": None, "continues": None,
                                              "error": f"dev.jsonl:3: label {SCRIPT} | {ESC_BEL}", "steps": None,
                                              "cpu_time_s": None, "wall_time_s": None}]})
    [trials] = [t for t in tables(search_md) if t[0].startswith("| trial |")]
    assert [len(row_cells(row)) for row in trials] == [8] * 2
    for text in (audit_md, sweep_md, search_md):
        assert "<script" not in text and "<img" not in text and "<b>" not in text
        assert_shows_no_html(text)


# ------------------------------------------------------------- in a real browser
def rendered_page(markdown_path, out):
    out.write_text(PAGE.format(renderer().render(markdown_path.read_text(encoding="utf-8"))), encoding="utf-8")
    return out


def state(driver, path):
    """Open the page (the driver waits for its load event, after any image's onerror) and read what a payload
    would have changed, and its tables' cell counts and first cells."""
    browser.open_page(driver, path)
    return driver.execute_script(
        "return {title: document.title, pwned: window.__pwned === undefined ? null : String(window.__pwned),"
        " scripts: document.scripts.length, images: document.images.length,"
        " tables: Array.from(document.querySelectorAll('table')).map(t => Array.from(t.rows).map("
        "   r => Array.from(r.cells).map(c => c.textContent)))}")


def test_in_chromium_no_script_of_the_data_runs_and_the_tables_hold(hostile_run, tmp_path):
    reason = browser.missing()
    if reason:
        pytest.skip(f"no browser can run here: {reason}")
    driver = browser.chromium()
    try:
        # the probe works: the same payloads unescaped run in this renderer and browser
        raw = tmp_path / "raw.html"
        raw.write_text(PAGE.format(renderer().render(f"text {IMG}\n\n{SCRIPT}\n")), encoding="utf-8")
        found = state(driver, raw)
        assert found["title"] == "pwned" and found["pwned"] in ("script", "img")
        pages = {name: rendered_page(hostile_run / name, tmp_path / f"{name}.html")
                 for name in ("errors.md", "report.md")}
        for name, page in pages.items():
            found = state(driver, page)
            assert (found["title"], found["pwned"], found["scripts"], found["images"]) == ("clean", None, 0, 0), name
            for table in found["tables"]:
                assert len({len(row) for row in table}) == 1, (name, table)
        [per_class] = [t for t in state(driver, pages["report.md"])["tables"] if t[0][0] == "class"]
        assert [row[0] for row in per_class[1:]] == [SHOWN[name] for name in LABELS]
        assert all(len(row) == 5 for row in per_class)
        browser.screenshot(driver, pages["errors.md"], str(tmp_path / "errors.png"))
        assert (tmp_path / "errors.png").stat().st_size > 10_000
    finally:
        driver.quit()


def test_label_issues_in_audit_md_and_report_html_show_data_as_text(tmp_path):
    """trainer.audit_labels: the suspects' texts and label names (the data's) as text, tables keeping columns."""
    from appzoo.reports import html as report_html, label_issues
    from appzoo.store.archive import RunFolder

    labels = [SCRIPT, PIPE, NEWLINE]
    texts = [ESC_BEL, BIDI, IMG, "a | b", "__init__ # not a heading", SCRIPT] * 2
    given = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 1]
    probs = np.full((len(given), 3), 0.05)
    probs[np.arange(len(given)), given] = 0.9
    probs[0] = probs[4] = [0.05, 0.05, 0.9]  # two given labels the probabilities disagree with
    examples = [{"text": t, "source": f"{IMG}:{i + 1}"} for i, t in enumerate(texts)]
    rows, summary = label_issues.find(given, probs, False, labels, examples, 2)
    assert {r["index"] for r in rows} == {0, 4}
    text = label_issues.to_markdown(summary, rows)
    assert_shows_no_html(text)
    assert [len(row_cells(r)) for t in tables(text) for r in t] == [4] * 4 + [6] * 3
    folder = RunFolder(str(tmp_path))
    with open(folder.audit_json, "w", encoding="utf-8") as f:
        json.dump({"labels": summary}, f)
    with open(folder.label_issues, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    page = "\n".join(report_html._label_issues_section(folder))
    tags = Tags()
    tags.feed(page)
    assert tags.tags == {"h2", "p", "table", "thead", "tbody", "tr", "th", "td", "code"} and not tags.handlers
    assert html.escape(SCRIPT, quote=True) in page
