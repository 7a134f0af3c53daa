"""predictions/<split>.jsonl, errors.md and the never-predicted warnings (appzoo.reports.mistakes), on made-up data with known answers."""
import json
import os

import numpy as np
import pytest

from appzoo.reports import mistakes, report
from appzoo.store.archive import REPLACED, RunFolder
from appzoo.metrics import classification_metrics, sequence_labeling_metrics
from conftest import cli, read_jsonl
from tasks.sequence_labeling.reader import SequenceLabelingReader
from tasks.text_classification.reader import ClassificationReader
from tasks.text_matching.reader import MatchingReader

LABELS = ["体育", "财经", "科技"]


def probs(*rows):
    return [np.asarray(r, dtype=np.float32) for r in rows]


def classified():
    """Six texts; 科技 (two in gold) is never predicted, 财经 is predicted once and wrongly."""
    examples = [{"text": t, "label": g, "source": f"f:{i}"}
                for i, (t, g) in enumerate([("a", "体育"), ("b", "体育"), ("c", "财经"), ("d", "科技"),
                                            ("e", "科技"), ("f", "财经")])]
    predicted = probs([.9, .05, .05], [.2, .7, .1], [.8, .1, .1], [.6, .3, .1], [.55, .4, .05], [.5, .3, .2])
    return examples, [{"probs": p, "label": LABELS[int(np.argmax(p))]} for p in predicted]


def split_metrics(examples, predictions):
    return ClassificationReader().evaluate(examples, predictions, LABELS)


def test_a_class_never_predicted_and_a_class_with_f1_0_are_each_warned_about():
    examples, predictions = classified()
    found, lines = mistakes.class_warnings("test", split_metrics(examples, predictions),
                                           ClassificationReader().mistakes(examples, predictions, LABELS))
    assert found == {"科技": {"support": 2, "predicted": 0, "f1": 0.0},
                     "财经": {"support": 2, "predicted": 1, "f1": 0.0}}
    assert lines == ["warning: class '财经' has F1 0 on test (predicted 1 time, never right; 2 in gold)",
                     "warning: class '科技' was never predicted on test (F1 0, 2 in gold)"]


def test_no_warning_when_every_class_is_predicted_right_at_least_once():
    examples, predictions = classified()
    for p, e in zip(predictions, examples):
        p["label"] = e["label"]
    metrics = classification_metrics([LABELS.index(e["label"]) for e in examples],
                                     [LABELS.index(p["label"]) for p in predictions], LABELS)
    assert mistakes.class_warnings("dev", metrics, ClassificationReader().mistakes(examples, predictions, LABELS)) \
        == ({}, [])


def test_a_class_absent_from_the_split_is_not_warned_about():
    metrics = {"per_class": {"a": {"f1": 1.0, "support": 3}, "b": {"f1": 0.0, "support": 0}}}
    assert mistakes.class_warnings("dev", metrics, {"gold": {"a": 3}, "predicted": {"a": 3}}) == ({}, [])


def test_classification_mistakes_most_confident_first_and_the_costliest_confusions():
    examples, predictions = classified()
    found = ClassificationReader().mistakes(examples, predictions, LABELS)
    assert found["confusions"] == [{"gold": "科技", "predicted": "体育", "count": 2},
                                   {"gold": "财经", "predicted": "体育", "count": 2},
                                   {"gold": "体育", "predicted": "财经", "count": 1}]
    assert [(r["text"], r["predicted"], round(r["confidence"], 2)) for r in found["rows"]] == [
        ("b", "财经", 0.7), ("c", "体育", 0.8), ("d", "体育", 0.6), ("e", "体育", 0.55), ("f", "体育", 0.5)]
    text = mistakes.to_markdown("run", {"test": found}, {"test": {"class_warnings": ["warning: x"]}})
    assert "- warning: x" in text
    assert "| 科技 | 体育 | 2 | 100.0% |" in text  # both 科技 texts went to 体育
    section = text[text.index("**科技**"):]
    assert section.index("| d |") < section.index("| e |")  # 0.6 before 0.55
    assert "p(gold) 0.300" in section


def test_multilabel_mistakes_are_missed_and_spurious_labels():
    reader = ClassificationReader(multi_label=True)
    examples = [{"text": "x", "label": ["体育", "财经"]}, {"text": "y", "label": ["科技"]}]
    predictions = [{"probs": np.array([.9, .2, .7]), "labels": ["体育", "科技"]},
                   {"probs": np.array([.1, .1, .8]), "labels": ["科技"]}]
    found = reader.mistakes(examples, predictions, LABELS)
    assert [(r["kind"], r["class"], round(r["confidence"], 2)) for r in found["rows"]] == [
        ("missed", "财经", 0.8), ("spurious", "科技", 0.7)]
    assert found["confusions"] == [{"gold": "财经", "predicted": "科技", "count": 1}]
    assert found["gold"] == {"体育": 1, "财经": 1, "科技": 1} and found["predicted"] == {"体育": 1, "科技": 2}


def test_entity_mistakes_missed_spurious_wrong_type_and_wrong_boundary():
    reader = SequenceLabelingReader(scheme="BIO")
    tokens = list("张三在北京的华为工作")
    gold = ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "B-ORG", "I-ORG", "O", "O"]
    pred = ["B-PER", "O", "O", "B-ORG", "I-ORG", "O", "O", "O", "B-LOC", "I-LOC"]
    examples = [{"tokens": tokens, "tags": gold}, {"tokens": list("上海"), "tags": ["B-LOC", "I-LOC"]}]
    predictions = [{"tags": pred}, {"tags": ["B-LOC", "I-LOC"]}]
    found = reader.mistakes(examples, predictions, None)
    rows = [(r["kind"], r["class"], r["gold"], r["predicted"], r["text"]) for r in found["rows"]]
    assert rows == [("wrong_boundary", "PER", "PER", "PER", "**张三**在北京的华为工作"),
                    ("wrong_type", "LOC", "LOC", "ORG", "张三在**北京**的华为工作"),
                    ("missed", "ORG", "ORG", "(none)", "张三在北京的**华为**工作"),
                    ("spurious", "LOC", "(none)", "LOC", "张三在北京的华为**工作**")]
    assert found["gold"] == {"PER": 1, "LOC": 2, "ORG": 1} and found["predicted"] == {"PER": 1, "ORG": 1, "LOC": 2}
    assert found["rows"][0]["detail"] == "predicted 张"
    metrics = sequence_labeling_metrics([e["tags"] for e in examples], [p["tags"] for p in predictions])
    found_warnings, lines = mistakes.class_warnings("dev", metrics, found)
    assert set(found_warnings) == {"PER", "ORG"}  # ORG predicted once (wrongly), PER once with the wrong end
    text = mistakes.to_markdown("run", {"dev": found}, {"dev": {"class_warnings": lines}})
    for title in ("Missed", "Spurious", "Wrong type", "Wrong boundary"):
        assert f"### {title}" in text
    assert "| gold | predicted | text |" in text and "confidence" not in text  # a tagger gives none
    assert "| PER | PER | **张三**在北京的华为工作 | predicted 张 |" in text


def test_an_entity_mistake_is_bold_in_errors_md_and_its_text_escaped_around_it():
    """The bold is errors.md's; a sentence's own asterisks, HTML and ESC show as text (appzoo.utils.markdown.literal)."""
    tokens = ["<b>", "*x*", "\x1b[1m", "|"]
    found = mistakes.entity_mistakes([tokens], [[("PER", 1, 2)]], [[]], " ".join)
    assert found["rows"][0]["context"] == ["<b> ", " \x1b[1m |"]
    text = mistakes.to_markdown("run", {"dev": found}, {"dev": {}})
    assert "| PER | (none) | &lt;b&gt; **\\*x\\*** \\u001b\\[1m \\| |" in text


def test_a_long_sentence_is_cut_around_the_entity():
    row = mistakes.entity_mistakes([list("甲" * 100 + "北京" + "乙" * 100)], [[("LOC", 100, 102)]], [[]], "".join)
    assert row["rows"][0]["text"] == "…" + "甲" * mistakes.CONTEXT + "**北京**" + "乙" * mistakes.CONTEXT + "…"


def test_matching_mistakes_are_pairs_on_the_wrong_side_of_the_threshold():
    reader = MatchingReader(threshold=0.5)
    examples = [{"text_a": "a", "text_b": "b", "label": "1"}, {"text_a": "c", "text_b": "d", "label": "0"},
                {"text_a": "e", "text_b": "f", "label": "1"}]
    predictions = [{"score": 0.9}, {"score": 0.95}, {"score": 0.2}]
    found = reader.mistakes(examples, predictions, ["0", "1"])
    assert [(r["text"], r["predicted"], round(r["confidence"], 2)) for r in found["rows"]] == [
        ("c ‖ d", "1", 0.45), ("e ‖ f", "0", 0.3)]
    assert found["predicted"] == {"1": 2, "0": 1}


def test_a_reader_that_lists_no_mistakes_still_gets_warnings_from_its_table(tmp_path):
    class Quiet:
        def prediction_rows(self, examples, predictions, labels):
            return [{"label": p, "gold": e} for e, p in zip(examples, predictions)]

        def mistakes(self, examples, predictions, labels):
            return None

    metrics = {"test": {"per_class": {"a": {"f1": 0.0, "support": 2}}}}
    warnings, _ = mistakes.write(str(tmp_path), Quiet(), ["a"], {"test": (["a", "a"], ["b", "b"])}, metrics)
    assert warnings == ["warning: class 'a' has F1 0 on test (2 in gold)"]
    assert "lists no mistakes" in (tmp_path / "errors.md").read_text(encoding="utf-8")


def test_write_leaves_split_predictions_with_gold_errors_md_and_warnings_in_metrics_and_report(tmp_path):
    examples, predictions = classified()
    metrics = {"dev": split_metrics(examples, predictions), "test": split_metrics(examples, predictions)}
    reader = ClassificationReader()
    warnings, _ = mistakes.write(str(tmp_path), reader, LABELS, {s: (examples, predictions) for s in ("dev", "test")},
                              metrics)
    assert len(warnings) == 4 and "warning: class '科技' was never predicted on dev (F1 0, 2 in gold)" in warnings
    for split in ("dev", "test"):
        rows = read_jsonl(str(tmp_path / "predictions" / f"{split}.jsonl"))
        assert rows == reader.prediction_rows(examples, predictions, LABELS) or rows == json.loads(
            json.dumps(reader.prediction_rows(examples, predictions, LABELS), ensure_ascii=False))
        assert [r["gold"] for r in rows] == [e["label"] for e in examples]
        assert metrics[split]["zero_f1_classes"]["科技"]["predicted"] == 0
    assert not [n for n in os.listdir(tmp_path / "predictions") if ".tmp-" in n]  # written atomically
    errors = (tmp_path / "errors.md").read_text(encoding="utf-8")
    assert "## dev" in errors and "## test" in errors and "Most confident mistakes" in errors
    report.write(str(tmp_path), metrics, [], LABELS, plots=False)
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "- warning: class '科技' was never predicted on test (F1 0, 2 in gold)" in text
    assert "[errors.md](errors.md)" in text


def test_replacing_a_run_moves_its_split_predictions_and_errors_aside(tmp_path):
    folder = RunFolder(str(tmp_path))
    os.makedirs(tmp_path / "predictions")
    (tmp_path / "predictions" / "dev.jsonl").write_text("{}\n")
    (tmp_path / "errors.md").write_text("# old\n")
    (tmp_path / "metrics.json").write_text("{}\n")
    folder.replace_run()
    assert not (tmp_path / "predictions").exists() and not (tmp_path / "errors.md").exists()
    assert (tmp_path / REPLACED / "predictions" / "dev.jsonl").exists()
    assert folder.rollback_replace() and (tmp_path / "errors.md").read_text() == "# old\n"


@pytest.mark.slow
def test_a_run_writes_dev_and_test_predictions_from_its_one_evaluation(tmp_path, monkeypatch, capsys):
    """A planted never-predicted class (tech decoded as sports) reaches metrics.json, report.md and the console;
    eval predicts each split once."""
    from appzoo.inference import prediction

    real_decode = ClassificationReader.decode

    def never_tech(self, examples, features, outputs, labels):
        found = real_decode(self, examples, features, outputs, labels)
        return [{**p, "label": "sports" if p["label"] == "tech" else p["label"]} for p in found]

    calls = []
    real_predict = prediction.predict

    def counted(*args, **kwargs):
        calls.append(kwargs.get("desc"))
        return real_predict(*args, **kwargs)

    monkeypatch.setattr(ClassificationReader, "decode", never_tech)
    monkeypatch.setattr(prediction, "predict", counted)
    out = str(tmp_path / "out")
    assert cli("examples/cls_ernie_fc_with_focal.json", out, "--do", "train,eval", "--set", "trainer.max_steps=2",
               "--set", "trainer.eval_steps=0", "--set", "trainer.progress_bar=false",
               "--set", "trainer.plots=false") == 0
    # the eval mode predicts each split once (the end of training evaluated dev before, to choose best/)
    assert calls[-2:] == ["eval dev", "eval test"] and calls.count("eval test") == 1
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    for split in ("dev", "test"):
        rows = read_jsonl(os.path.join(out, "predictions", f"{split}.jsonl"))
        assert len(rows) == np.sum(metrics[split]["confusion_matrix"]) == 300
        assert {"text", "label", "probs", "gold"} <= set(rows[0]) and "tech" not in {r["label"] for r in rows}
        assert metrics[split]["zero_f1_classes"]["tech"]["predicted"] == 0
    printed = capsys.readouterr().out
    for split in ("dev", "test"):
        assert f"warning: class 'tech' was never predicted on {split} (F1 0, " in printed
    text = open(os.path.join(out, "report.md"), encoding="utf-8").read()
    assert "warning: class 'tech' was never predicted on test" in text
    assert os.path.isfile(os.path.join(out, "errors.md"))
