"""Calibration: ECE against hand-computed values, temperature scaling on a planted
over-confident model, the classification reader's ``calibrate: temperature``, and a run."""
import json
import os

import numpy as np
import pytest

import run_trainer
from appzoo.errors import ConfigError
from appzoo.metrics.calibration import calibration, fit_temperature, scale
from appzoo.task.decisions import Temperature
from tasks.text_classification.reader import ClassificationReader


def test_ece_of_hand_made_predictions():
    # one bin: confidence 0.9, 3 of 4 right -> |0.75 - 0.9| = 0.15
    assert calibration([0.9, 0.9, 0.9, 0.9], [1, 1, 1, 0])["ece"] == pytest.approx(0.15)
    # two bins, half the predictions each: (0.5 * |1 - 0.95|) + (0.5 * |0 - 0.35|) = 0.2
    table = calibration([0.95, 0.95, 0.35, 0.35], [1, 1, 0, 0], bins=10)
    assert table["ece"] == pytest.approx(0.2)
    assert [(round(b["lower"], 6), b["count"], b["accuracy"]) for b in table["bins"]] == [(0.3, 2, 0.0),
                                                                                            (0.9, 2, 1.0)]
    assert calibration([1.0, 0.0], [1, 0], bins=4)["bins"][-1]["count"] == 1  # 1.0 falls in the last bin
    assert calibration([], [])["ece"] == 0.0


def planted(n=4000, classes=4, inflate=3.0, seed=0):
    """Labels drawn from softmax(z): a calibrated model's probabilities are softmax(z);
    the planted model reports softmax(inflate * z), over-confident by ``inflate``."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 1.2, size=(n, classes))
    true = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    gold = np.array([rng.choice(classes, p=p) for p in true])
    over = np.exp(inflate * logits) / np.exp(inflate * logits).sum(axis=1, keepdims=True)
    return over, gold


def test_temperature_scaling_recovers_a_planted_over_confidence():
    probs, gold = planted()
    before = calibration(probs.max(axis=1), probs.argmax(axis=1) == gold)
    temperature = fit_temperature(probs, gold)
    assert temperature == pytest.approx(3.0, rel=0.1)
    scaled = scale(probs, temperature)
    after = calibration(scaled.max(axis=1), scaled.argmax(axis=1) == gold)
    assert before["mean_confidence"] > before["accuracy"] + 0.15 and before["ece"] > 0.15
    assert after["ece"] < 0.03
    assert (scaled.argmax(axis=1) == probs.argmax(axis=1)).all()  # the predicted class never changes
    np.testing.assert_allclose(scale(probs, 1.0), probs, rtol=1e-9)


def test_the_reader_fits_saves_and_applies_the_temperature():
    labels = ["a", "b", "c", "d"]
    probs, gold = planted(n=2000)
    examples = [{"text": "x", "label": labels[g]} for g in gold]
    reader = ClassificationReader(calibrate="temperature")
    predictions = reader.decode(examples, None, {"probs": list(probs)}, labels)
    reader.fit(examples, predictions, labels)
    metrics = reader.evaluate(examples, predictions, labels)
    temperature = reader.decisions.get(Temperature).temperature
    assert temperature == pytest.approx(3.0, rel=0.1)
    assert metrics["ece"] < 0.04 < 0.15 < metrics["ece_before_scaling"]
    assert metrics["calibration"]["temperature"] == temperature
    assert reader.state() == {"temperature": temperature}
    again = ClassificationReader(calibrate="temperature")
    again.load_state(reader.state())
    decoded = again.decode(examples, None, {"probs": list(probs)}, labels)
    np.testing.assert_allclose(np.stack([p["probs"] for p in decoded]), np.stack([p["probs"] for p in predictions]))
    assert [p["label"] for p in decoded] == [labels[i] for i in probs.argmax(axis=1)]
    plain = ClassificationReader()
    plain.load_state(reader.state())  # a model trained further with calibrate none keeps its softmax
    assert plain.decisions.get(Temperature) is None and plain.state() == {}
    assert "ece_before_scaling" not in plain.evaluate(examples, plain.decode(examples, None, {"probs": list(probs)},
                                                                             labels), labels)


def test_temperature_on_a_multi_label_reader_is_refused():
    with pytest.raises(ConfigError, match=r"^dataset_reader\.calibrate: 'temperature' scales a softmax over the "
                                          r"labels; multi_label decodes each label by its own sigmoid"):
        ClassificationReader(multi_label=True, calibrate="temperature")


@pytest.mark.slow
def test_a_run_reports_ece_and_the_logit_adjustment_before_and_after_and_the_predictor_uses_both(tmp_path):
    """Temperature scaling and post-hoc logit adjustment (tests/test_logit_adjust.py) in one run."""
    from appzoo import Predictor

    out = tmp_path / "out"
    assert run_trainer.main(["--param_path", "examples/cls_ernie_fc_ch.json", "--set", f"trainer.output_dir={out}",
                             "--set", "trainer.max_steps=6", "--set", "trainer.progress_bar=false",
                             "--set", "dataset_reader.calibrate=temperature",
                             "--set", "dataset_reader.logit_adjust=tune"]) == 0
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    state = json.loads((out / "best" / "reader_state.json").read_text(encoding="utf-8"))
    assert state["temperature"] > 0 and state["temperature"] != 1.0
    assert state["logit_adjust"]["priors"] == pytest.approx([0.2175, 0.0867, 0.5533, 0.1425], abs=1e-4)
    for split in ("dev", "test"):
        assert 0 <= metrics[split]["ece"] <= 1 and "ece_before_scaling" in metrics[split]
        assert metrics[split]["calibration"]["temperature"] == state["temperature"]
        assert metrics[split]["logit_adjust_tau"] == state["logit_adjust"]["tau"]
        assert 0 <= metrics[split]["macro_f1_before_logit_adjust"] <= 1
    assert os.path.isfile(out / "plots" / "reliability_test.png")
    assert "| ece |" in (out / "report.md").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()]
    got = Predictor(str(out / "best")).predict([r["text"] for r in rows])
    for row, mine in zip(rows, got):
        assert mine["label"] == row["label"]
        np.testing.assert_allclose(list(mine["probs"].values()), list(row["probs"].values()), atol=1e-5)


def test_ece_chooses_the_best_model_lower_is_better():
    from appzoo.params.trainer import TrainerConfig

    reader = ClassificationReader()
    assert "ece" in reader.metric_names() and "ece" not in ClassificationReader(multi_label=True).metric_names()
    assert TrainerConfig(metric_for_best="ece").dev_metric(reader) == ("ece", False)
    assert TrainerConfig(metric_for_best="ece", greater_is_better=True).dev_metric(reader) == ("ece", True)
    assert TrainerConfig().dev_metric(reader) == ("macro_f1", True)


@pytest.mark.slow
def test_post_hoc_rules_given_at_eval_time_are_fitted_on_dev_and_applied_to_test(tmp_path, capsys):
    """A model trained without temperature scaling or logit adjustment, evaluated with both (``--do eval``,
    ``init_from``): they are fitted on dev first (the logit adjustment's priors from the training counts saved
    with the model), said in a note, and test is decoded with them. Evaluated so in its own run folder, the
    run's own metrics stay and the eval goes beside them; predict-only has no dev and says so."""
    out, again, pred = tmp_path / "out", tmp_path / "again", tmp_path / "pred"
    common = ["--param_path", "examples/cls_ernie_fc_ch.json", "--set", "trainer.max_steps=6",
              "--set", "trainer.progress_bar=false"]
    assert run_trainer.main([*common, "--set", f"trainer.output_dir={out}"]) == 0
    capsys.readouterr()
    rules = ["--set", "dataset_reader.calibrate=temperature", "--set", "dataset_reader.logit_adjust=tune"]
    assert run_trainer.main([*common, *rules, "--do", "eval", "--set", f"trainer.output_dir={again}",
                             "--set", f"trainer.init_from={out / 'best'}"]) == 0
    said = capsys.readouterr().out
    assert ("note: dataset_reader.calibrate, dataset_reader.logit_adjust: the model was saved without it, so it "
            "was fitted on dev now (temperature ") in said
    metrics = json.loads((again / "metrics.json").read_text(encoding="utf-8"))
    temperature = metrics["dev"]["calibration"]["temperature"]
    assert temperature != 1.0 and metrics["test"]["calibration"]["temperature"] == temperature
    assert f"temperature {temperature:.4g}, tau {metrics['dev']['logit_adjust_tau']:g})" in said
    assert metrics["test"]["logit_adjust_tau"] == metrics["dev"]["logit_adjust_tau"]
    assert "ece_before_scaling" in metrics["test"] and "macro_f1_before_logit_adjust" in metrics["test"]
    own = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert run_trainer.main(["--param_path", str(out / "config.json"), *rules, "--do", "eval"]) == 0
    beside = json.loads((out / "metrics.json").read_text(encoding="utf-8"))  # the run's own numbers are kept
    assert (beside["dev"], beside["test"]) == (own["dev"], own["test"])
    entry = beside["eval"]["dygraph/fp32+calibrate+logit_adjust"]
    assert entry["fitted_on_dev"] == ["dataset_reader.calibrate", "dataset_reader.logit_adjust"]
    assert entry["dev"]["logit_adjust_tau"] == metrics["dev"]["logit_adjust_tau"]
    assert ("with `dataset_reader.calibrate`, `dataset_reader.logit_adjust` fitted on dev by this eval"
            in (out / "report.md").read_text(encoding="utf-8"))
    capsys.readouterr()
    assert run_trainer.main([*common, *rules, "--do", "predict", "--set", f"trainer.output_dir={pred}",
                             "--set", f"trainer.init_from={out / 'best'}"]) == 0
    assert ("note: dataset_reader.calibrate, dataset_reader.logit_adjust: the model was saved without it and "
            "there is no dev set here to fit it on, so it decodes without it") in capsys.readouterr().out
