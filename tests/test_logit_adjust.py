"""Post-hoc logit adjustment (``dataset_reader.logit_adjust``, Menon et al. 2021) against a NumPy
reference of its formula, tuning tau on dev, saving it with the model, and its errors."""
import numpy as np
import pytest

from appzoo.errors import ConfigError
from appzoo.metrics import classification_metrics
from appzoo.metrics.calibration import adjust
from appzoo.metrics.classification import decision_score
from appzoo.task.decisions import DECISION_METRICS, TAUS, LogitAdjust
from tasks.text_classification.reader import ClassificationReader

LABELS = ["common", "middle", "rare"]


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_adjust_is_the_argmax_of_logits_minus_tau_log_prior():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(200, 5)) * 3
    priors = np.array([0.6, 0.2, 0.1, 0.07, 0.03])
    for tau in (0.0, 0.5, 1.0, 2.0):
        want = softmax(logits - tau * np.log(priors))  # the paper's f_y(x) - tau log pi_y, then softmax
        got = adjust(softmax(logits), priors, tau)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        assert (got.argmax(axis=1) == (logits - tau * np.log(priors)).argmax(axis=1)).all()
    np.testing.assert_allclose(adjust(adjust(softmax(logits), priors, 1.3), priors, -1.3), softmax(logits),
                               rtol=1e-9, atol=1e-12)
    extreme = adjust(np.array([[1.0, 0.0, 0.0]]), [0.98, 0.01, 0.01], 2.0)  # a zero probability stays finite
    assert np.isfinite(extreme).all() and extreme.argmax() == 0


def test_the_tuning_score_is_the_reported_metric():
    rng = np.random.default_rng(1)
    for n, classes in ((50, 3), (400, 7), (5, 4)):  # (5, 4): classes never predicted and never in gold
        gold, pred = rng.integers(0, classes, n), rng.integers(0, max(classes - 1, 1), n)
        full = classification_metrics(list(gold), list(pred), [str(i) for i in range(classes)])
        for metric in DECISION_METRICS:
            assert decision_score(gold, pred, classes, metric) == pytest.approx(full[metric], abs=1e-12), metric
    assert decision_score([], [], 3, "macro_f1") == 0.0


def biased(n=3000, seed=0):
    """Gold drawn 80/15/5; the planted model's logits favour the common class by 2.5 beyond the evidence,
    so its argmax under-predicts the rare classes: an adjustment should raise macro-F1."""
    rng = np.random.default_rng(seed)
    gold = rng.choice(3, size=n, p=[0.8, 0.15, 0.05])
    logits = rng.normal(size=(n, 3)) + 2.0 * np.eye(3)[gold] + np.array([2.5, 0.0, 0.0])
    return gold, softmax(logits)


def reader_with(logit_adjust, priors=(0.8, 0.15, 0.05), metric="macro_f1"):
    reader = ClassificationReader(logit_adjust=logit_adjust)
    adjusting(reader).priors, reader.tune_metric = list(priors), metric
    return reader


def adjusting(reader):
    """The reader's logit adjustment rule (None without one)."""
    return reader.decisions.get(LogitAdjust)


def predictions_of(reader, probs):
    return reader.decode(None, None, {"probs": list(probs)}, LABELS)


def test_tuned_tau_never_lowers_the_dev_metric_and_finds_the_planted_bias():
    for seed in range(6):
        gold, probs = biased(seed=seed)
        examples = [{"text": "", "label": LABELS[g]} for g in gold]
        for metric in ("macro_f1", "accuracy", "weighted_f1"):
            reader = reader_with("tune", metric=metric)
            predictions = predictions_of(reader, probs)
            reader.fit(examples, predictions, LABELS)
            tuned = reader.evaluate(examples, predictions, LABELS)
            plain = classification_metrics(list(gold), list(probs.argmax(axis=1)), LABELS)
            assert tuned[metric] >= plain[metric] - 1e-12, (seed, metric, adjusting(reader).tau)
            assert tuned[f"{metric}_before_logit_adjust"] == pytest.approx(plain[metric])
            assert adjusting(reader).tau in TAUS and tuned["logit_adjust_tau"] == adjusting(reader).tau
        reader = reader_with("tune")
        predictions = predictions_of(reader, probs)
        reader.fit(examples, predictions, LABELS)
        assert adjusting(reader).tau > 0, "the planted bias toward the common class is undone"
        assert reader.evaluate(examples, predictions, LABELS)["macro_f1"] > plain["macro_f1"] + 0.05


def test_a_fixed_tau_decodes_and_the_state_is_saved_and_restored():
    gold, probs = biased()
    reader = reader_with(1.0)
    predictions = predictions_of(reader, probs)
    want = (np.log(probs) - np.log([0.8, 0.15, 0.05])).argmax(axis=1)
    assert [p["label"] for p in predictions] == [LABELS[i] for i in want]
    state = reader.state()
    assert state == {"logit_adjust": {"tau": 1.0, "priors": [0.8, 0.15, 0.05]}}
    tuned = reader_with("tune")
    adjusting(tuned).tau = 0.7
    again = ClassificationReader(logit_adjust="tune")
    again.load_state(tuned.state())  # what a Predictor does with best/reader_state.json
    assert adjusting(again).tau == 0.7 and adjusting(again).priors == [0.8, 0.15, 0.05]
    assert [p["label"] for p in predictions_of(again, probs)] == [p["label"] for p in predictions_of(tuned, probs)]
    off = ClassificationReader()
    off.load_state(tuned.state())  # a model used without logit_adjust decodes as trained
    assert adjusting(off) is None and [p["label"] for p in predictions_of(off, probs)] == [
        LABELS[i] for i in probs.argmax(axis=1)]


def test_priors_come_from_the_training_labels_and_an_unseen_label_counts_as_one():
    reader = ClassificationReader(logit_adjust="tune")
    train = [{"text": "", "label": name} for name in ["common"] * 6 + ["middle"] * 3]
    args = reader.model_args(LABELS, train)
    assert args["class_counts"] == [6, 3, 0] and args["train_size"] == 9
    assert adjusting(reader).priors == pytest.approx([0.6, 0.3, 0.1])


def test_logit_adjust_errors_are_one_line():
    with pytest.raises(ConfigError, match=r"^dataset_reader.logit_adjust: adjusts a softmax over the labels; "
                                          r"multi_label decodes each label by its own sigmoid"):
        ClassificationReader(logit_adjust=1.0, multi_label=True)
    with pytest.raises(ConfigError, match=r"^dataset_reader.logit_adjust: must be >= 0, got -1$"):
        ClassificationReader(logit_adjust=-1)
    reader = ClassificationReader(logit_adjust=1.0)
    reader.load_state({})
    reader.saved_model_args({"num_labels": 3, "class_counts": None})  # saved without counts
    with pytest.raises(ConfigError, match=r"^dataset_reader.logit_adjust: needs the training label priors, "
                                          r"which this model was saved without \(nor with its training label "
                                          r"counts\); train it with logit_adjust set$"):
        predictions_of(reader, biased()[1])


def test_a_model_saved_without_logit_adjust_takes_its_priors_from_its_training_counts_and_is_fitted_on_dev():
    """Post hoc means after training: a model trained without logit_adjust, evaluated with ``tune``, gets the
    priors from the label counts saved with it (best/model_args.json) and is unfitted until dev fits it."""
    gold, probs = biased()
    reader = ClassificationReader(logit_adjust="tune")
    reader.load_state({})  # best/reader_state.json of a model trained without the rule
    assert reader.decisions.unfitted() == [adjusting(reader)]
    reader.saved_model_args({"num_labels": 3, "class_counts": [800, 150, 0], "train_size": 950})
    assert adjusting(reader).priors == pytest.approx(np.array([800, 150, 1]) / 951)
    reader.tune_metric = "macro_f1"
    examples = [{"text": "", "label": LABELS[g]} for g in gold]
    predictions = predictions_of(reader, probs)
    reader.fit(examples, predictions, LABELS)
    assert adjusting(reader).tau > 0 and reader.decisions.unfitted() == []
    saved = ClassificationReader(logit_adjust="tune")
    saved.load_state(reader.state())  # a model trained with it: fitted, and its own priors kept
    saved.saved_model_args({"class_counts": [1, 1, 1]})
    assert saved.decisions.unfitted() == [] and adjusting(saved).priors == adjusting(reader).priors
    fixed = ClassificationReader(logit_adjust=1.0)
    fixed.load_state({})
    assert fixed.decisions.unfitted() == [], "a fixed tau fits nothing"
