"""Per-label decision thresholds of multi-label classification, tuned on dev."""
import json
import os

import numpy as np
import pytest
from conftest import cli, read_json, read_jsonl

from appzoo import Predictor
from tasks.text_classification.reader import ClassificationReader

LABELS = ["a", "b", "c", "d", "rare"]


def dev_set(n=120, seed=0):
    """Random multi-label dev examples and predictions whose probabilities
    are informative but noisy; 'rare' has 3 positives."""
    rng = np.random.RandomState(seed)
    rates = [0.5, 0.3, 0.15, 0.08]
    gold = np.zeros((n, len(LABELS)), dtype=int)
    for j, rate in enumerate(rates):
        gold[:, j] = rng.rand(n) < rate
    gold[rng.choice(n, 3, replace=False), 4] = 1
    probs = np.clip(0.35 * gold + rng.rand(n, len(LABELS)) * 0.7, 0, 1).round(2)  # rounding makes ties
    examples = [{"text": f"t{i}", "label": [LABELS[j] for j in np.flatnonzero(row)]} for i, row in enumerate(gold)]
    predictions = [{"probs": p} for p in probs]
    return examples, predictions, gold, probs


def f1(gold, pred):
    tp = int((gold & pred).sum())
    return 2 * tp / (gold.sum() + pred.sum()) if gold.sum() + pred.sum() else 0.0


def brute_force_best_f1(gold, scores):
    """Best F1 over every candidate cut: each distinct score (predict >= it), and predicting nothing."""
    return max([0.0] + [f1(gold, scores >= t) for t in np.unique(scores)])


def decoded(reader, probs):
    rows = reader.decode(None, None, {"probs": list(probs)}, LABELS)
    return np.array([[name in row["labels"] for name in LABELS] for row in rows], dtype=int)


@pytest.mark.parametrize("seed", range(5))
def test_each_label_gets_its_best_dev_f1(seed):
    examples, predictions, gold, probs = dev_set(seed=seed)
    reader = ClassificationReader(multi_label=True, min_positives_to_tune=5)
    state = reader.fit(examples, predictions, LABELS)
    pred = decoded(reader, probs)
    tuned = [j for j in range(len(LABELS)) if gold[:, j].sum() >= 5]
    assert len(tuned) >= 3 and sorted(state["per_label"]) == [LABELS[j] for j in tuned]
    for j in tuned:
        name = LABELS[j]
        best = brute_force_best_f1(gold[:, j], probs[:, j])
        assert f1(gold[:, j], pred[:, j]) == pytest.approx(best, abs=1e-12), name
        assert state["per_label"][name]["dev_f1"] == pytest.approx(best, abs=1e-12)
        assert state["per_label"][name]["dev_positives"] == gold[:, j].sum()
    # tuning beats (or ties) the fixed 0.5 on every tuned label
    fixed = decoded(ClassificationReader(multi_label=True, per_label_thresholds=False), probs)
    assert all(f1(gold[:, j], pred[:, j]) >= f1(gold[:, j], fixed[:, j]) for j in tuned)


def test_the_dev_metrics_of_a_fit_are_those_of_the_thresholds_it_tuned_and_the_global_ones_stand_beside():
    """The evaluation that tunes scores its own thresholds (not those of the evaluation before), and reports
    the same model at the global threshold as ``<metric>_global_threshold``."""
    examples, predictions, gold, probs = dev_set(seed=3)
    reader = ClassificationReader(multi_label=True, min_positives_to_tune=5)
    stale = reader.decode(None, None, {"probs": list(probs)}, LABELS)  # decoded before the fit, at 0.5
    reader.fit(examples, stale, LABELS)
    metrics = reader.evaluate(examples, stale, LABELS)
    tuned = decoded(reader, probs)
    macro = np.mean([f1(gold[:, j], tuned[:, j]) for j in range(len(LABELS))])
    assert metrics["macro_f1"] == pytest.approx(macro, abs=1e-12)
    at_half = (probs >= 0.5).astype(int)
    assert metrics["macro_f1_global_threshold"] == pytest.approx(
        np.mean([f1(gold[:, j], at_half[:, j]) for j in range(len(LABELS))]), abs=1e-12)
    assert metrics["macro_f1"] >= metrics["macro_f1_global_threshold"]
    assert "macro_f1_global_threshold" in reader.metric_names()
    assert "macro_f1_global_threshold" not in ClassificationReader(multi_label=True,
                                                                   per_label_thresholds=False).metric_names()


def test_labels_with_few_dev_positives_keep_the_global_threshold():
    examples, predictions, gold, probs = dev_set()
    reader = ClassificationReader(multi_label=True, threshold=0.6, min_positives_to_tune=4)
    state = reader.fit(examples, predictions, LABELS)
    assert "rare" not in state["per_label"] and state["threshold"] == 0.6
    np.testing.assert_array_equal(decoded(reader, probs)[:, 4], probs[:, 4] >= 0.6)
    reader = ClassificationReader(multi_label=True, min_positives_to_tune=3)  # exactly 3 positives: tuned
    assert "rare" in reader.fit(examples, predictions, LABELS)["per_label"]


def test_per_label_thresholds_off_decodes_as_before():
    examples, predictions, gold, probs = dev_set()
    reader = ClassificationReader(multi_label=True, per_label_thresholds=False)
    assert reader.fit(examples, predictions, LABELS) == {"threshold": 0.5, "per_label": {}}
    np.testing.assert_array_equal(decoded(reader, probs), probs >= 0.5)
    # a saved state with tuned thresholds does not override the configured choice
    tuned = ClassificationReader(multi_label=True).fit(examples, predictions, LABELS)
    reader.load_state(tuned)
    np.testing.assert_array_equal(decoded(reader, probs), probs >= 0.5)


def test_single_label_state_is_empty():
    assert ClassificationReader().state() == {}


def test_saved_and_loaded_thresholds_give_the_same_predictions():
    examples, predictions, gold, probs = dev_set()
    reader = ClassificationReader(multi_label=True)
    state = json.loads(json.dumps(reader.fit(examples, predictions, LABELS)))  # as reader_state.json
    fresh = ClassificationReader(multi_label=True)
    np.testing.assert_array_equal(decoded(fresh, probs), probs >= 0.5)  # nothing tuned yet
    fresh.load_state(state)
    np.testing.assert_array_equal(decoded(fresh, probs), decoded(reader, probs))
    fresh.load_state({})  # a best/ saved before per-label thresholds existed
    np.testing.assert_array_equal(decoded(fresh, probs), probs >= 0.5)


@pytest.mark.slow
def test_cli_saves_per_label_thresholds_and_predict_uses_them(tmp_path):
    out = tmp_path / "run"
    assert cli("examples/cls_ernie_fc_multilabel.json", str(out), "--set", "trainer.max_steps=2",
               "--set", "dataset_reader.predict=data/cls_multilabel/test.tsv",
               "--set", "dataset_reader.min_positives_to_tune=5") == 0
    state = read_json(out / "best" / "reader_state.json")
    labels = read_json(out / "best" / "labels.json")
    assert state["threshold"] == 0.5 and state["per_label"]  # some labels have 5+ dev positives
    thresholds = np.array([state["per_label"].get(name, {"threshold": 0.5})["threshold"] for name in labels])
    assert (thresholds != 0.5).any()
    os.remove(out / "predictions.jsonl")
    assert cli("examples/cls_ernie_fc_multilabel.json", str(out), "--do", "predict",
               "--set", "dataset_reader.predict=data/cls_multilabel/test.tsv") == 0
    rows = read_jsonl(out / "predictions.jsonl")
    for row in rows:
        probs = np.array([row["probs"][name] for name in labels])
        expected = [name for name, p, t in zip(labels, probs, thresholds) if p >= t]
        # probs are rounded to 6 places in the file: skip rows with a prob within rounding of a threshold
        if not (np.abs(probs - thresholds) < 1e-6).any():
            assert row["labels"] == expected
    predictor = Predictor(str(out / "best"))
    assert [r["labels"] for r in predictor.predict([r["text"] for r in rows])] == [r["labels"] for r in rows]
