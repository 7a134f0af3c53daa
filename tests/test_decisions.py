"""The post-hoc decision rules (appzoo/task/decisions.py): a reader composes them, and a best/reader_state.json
written before they were objects loads into them and is written back unchanged."""
import json

import numpy as np
import pytest

from appzoo.errors import ConfigError
from appzoo.metrics.calibration import adjust, scale
from appzoo.task import decisions
from appzoo.task.decisions import Decisions, LogitAdjust, PerLabelThresholds, Temperature, Threshold
from tasks.text_classification.reader import ClassificationReader
from tasks.text_matching.reader import MatchingReader

LABELS = ["a", "b", "c"]
PROBS = np.array([[0.5, 0.3, 0.2], [0.2, 0.45, 0.35], [0.34, 0.33, 0.33]], dtype="float32")

# reader_state.json as the readers wrote it before the rules were objects (same keys, same order)
SAVED = {
    "single": {"temperature": 1.7, "logit_adjust": {"tau": 0.6, "priors": [0.7, 0.2, 0.1]}},
    "multi": {"threshold": 0.5, "per_label": {"b": {"threshold": 0.3, "dev_f1": 0.8, "dev_positives": 9}}},
    "match": {"threshold": 0.41, "tuned": True, "dev_f1": 0.9},
}


def test_an_old_single_label_state_loads_decodes_as_its_formula_and_is_written_back_unchanged():
    reader = ClassificationReader(calibrate="temperature", logit_adjust="tune")
    reader.load_state(json.loads(json.dumps(SAVED["single"])))
    assert json.dumps(reader.state()) == json.dumps(SAVED["single"])
    want = adjust(scale(PROBS, 1.7), [0.7, 0.2, 0.1], 0.6)  # temperature first, then the adjustment
    got = reader.decode(None, None, {"probs": list(PROBS)}, LABELS)
    np.testing.assert_array_equal(np.stack([p["probs"] for p in got]), want)
    assert [p["label"] for p in got] == [LABELS[i] for i in want.argmax(axis=1)]


def test_an_old_multi_label_and_matching_state_load_and_are_written_back_unchanged():
    multi = ClassificationReader(multi_label=True)
    multi.load_state(SAVED["multi"])
    assert json.dumps(multi.state()) == json.dumps(SAVED["multi"])
    assert list(multi.thresholds(LABELS)) == [0.5, 0.3, 0.5]
    assert [p["labels"] for p in multi.decode(None, None, {"probs": list(PROBS)}, LABELS)] == [
        ["a", "b"], ["b"], ["b"]]
    match = MatchingReader()
    match.load_state(SAVED["match"])
    assert json.dumps(match.state()) == json.dumps(SAVED["match"]) and match.decision_threshold == 0.41
    assert MatchingReader(threshold=0.7).decision_threshold == 0.7  # a configured one wins over a saved one


def test_a_reader_lists_only_the_rules_its_config_switches_on():
    assert list(ClassificationReader().decisions) == []
    kinds = [type(rule) for rule in ClassificationReader(calibrate="temperature", logit_adjust=1.0).decisions]
    assert kinds == [Temperature, LogitAdjust]
    assert [type(rule) for rule in ClassificationReader(multi_label=True).decisions] == [PerLabelThresholds]
    assert [type(rule) for rule in MatchingReader().decisions] == [Threshold]


def test_the_rules_compose_fit_and_apply_in_order():
    adjusting = LogitAdjust("tune")
    adjusting.priors = [0.8, 0.15, 0.05]
    rules = Decisions(Temperature(), None, adjusting)  # None: a rule the config switched off
    assert rules.fits and rules.get(Threshold) is None and rules.get(LogitAdjust) is adjusting
    rng = np.random.default_rng(0)
    gold = rng.choice(3, size=400, p=[0.8, 0.15, 0.05])
    logits = rng.normal(size=(400, 3)) + 2.0 * np.eye(3)[gold] + np.array([2.0, 0.0, 0.0])
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    fitted = rules.fit(probs, list(gold), LABELS, "macro_f1")
    temperature = rules.get(Temperature).temperature
    assert temperature != 1.0 and adjusting.tau > 0
    np.testing.assert_array_equal(fitted, adjust(scale(scale(probs, 1.0), temperature), adjusting.priors,
                                                 adjusting.tau))
    np.testing.assert_array_equal(rules.apply(probs, LABELS),
                                  adjust(scale(probs, temperature), adjusting.priors, adjusting.tau))
    assert list(rules.state()) == ["temperature", "logit_adjust"]
    fixed = LogitAdjust(1.0)
    assert not fixed.fits and fixed.fit(probs, list(gold), LABELS) is probs  # a configured tau is kept


def test_a_threshold_tunes_unless_fixed_and_says_so_in_its_state():
    gold, scores = [1, 1, 0, 0], [0.9, 0.8, 0.4, 0.1]
    tuned = Threshold()
    assert tuned.state() == {"threshold": 0.5, "tuned": False}  # no dev set: the default
    assert list(tuned.fit(scores, gold)) == [True, True, False, False]
    assert tuned.state() == {"threshold": pytest.approx(0.6), "tuned": True, "dev_f1": 1.0}
    fixed = Threshold(0.85)
    fixed.fit(scores, gold)
    assert fixed.state() == {"threshold": 0.85, "tuned": False} and list(fixed.apply(scores)) == [
        True, False, False, False]


def test_a_state_without_priors_is_refused_where_an_adjustment_needs_them():
    fixed = LogitAdjust(0.5)
    fixed.load_state({})  # the priors may still come from the model's saved training counts
    with pytest.raises(ConfigError, match=r"^dataset_reader\.logit_adjust: needs the training label priors"):
        fixed.apply(PROBS)
    tuned = LogitAdjust("tune")
    tuned.load_state({})
    assert tuned.apply(PROBS) is PROBS  # tau 0 until tuned: nothing to adjust with yet


def test_a_rule_is_unfitted_only_when_the_saved_state_lacks_it_and_the_note_names_its_key():
    """A model trained without a rule and evaluated with it (``--do eval --set dataset_reader.calibrate=...``)
    holds no fitted value: :meth:`Decisions.unfitted` lists it, and the eval fits it on dev first."""
    single = ClassificationReader(calibrate="temperature", logit_adjust="tune")
    single.load_state({})  # saved without either
    assert [type(rule) for rule in single.decisions.unfitted()] == [Temperature, LogitAdjust]
    single.load_state(SAVED["single"])
    assert single.decisions.unfitted() == []
    multi = ClassificationReader(multi_label=True)
    multi.load_state({})
    assert [type(rule) for rule in multi.decisions.unfitted()] == [PerLabelThresholds]
    multi.load_state(SAVED["multi"])
    assert multi.decisions.unfitted() == []
    match = MatchingReader()
    match.load_state({"threshold": 0.5, "tuned": False})  # trained without a dev set
    assert [type(rule) for rule in match.decisions.unfitted()] == [Threshold]
    assert MatchingReader(threshold=0.7).decisions.unfitted() == []  # a fixed threshold fits nothing
    adjusting = single.decisions.get(LogitAdjust)
    adjusting.tau = 0.6
    temperature = single.decisions.get(Temperature)
    temperature.temperature = 1.7
    assert decisions.unfitted_note([temperature, adjusting], fitted_on_dev=True) == (
        "note: dataset_reader.calibrate, dataset_reader.logit_adjust: the model was saved without it, so it was "
        "fitted on dev now (temperature 1.7, tau 0.6): dev's metrics are scored on the data it was fitted on, "
        "test's are not; train with it to save it with the model")
    assert decisions.unfitted_note([match.decisions.get(Threshold)], fitted_on_dev=False).startswith(
        "note: dataset_reader.threshold: the model was saved without it and there is no dev set here to fit it on")
    assert decisions.unfitted_note([adjusting], fitted_on_dev=True, test=False) == (
        "note: dataset_reader.logit_adjust: the model was saved without it, so it was fitted on dev now (tau 0.6): "
        "dev's metrics are scored on the data it was fitted on; train with it to save it with the model")
