"""Threshold views (PR, ROC, P/R/F1 by threshold) on planted scores, and the report's plots of them
and of calibration, drawn from metrics alone."""
import numpy as np
import pytest

from appzoo.reports import report
from appzoo.metrics.calibration import calibration
from appzoo.metrics.curves import threshold_curves


def test_a_planted_threshold_separates_the_classes():
    rng = np.random.default_rng(0)
    negatives, positives = rng.uniform(0.0, 0.69, 300), rng.uniform(0.71, 1.0, 100)
    scores = np.r_[negatives, positives]
    gold = np.r_[np.zeros(300), np.ones(100)]
    curves = threshold_curves(gold, scores, threshold=0.7, points=1000)  # every point
    view = curves["by_threshold"]
    best = int(np.argmax(view["f1"]))
    assert view["f1"][best] == 1.0 and positives.min() - 0.02 <= view["threshold"][best] <= positives.min()
    assert curves["threshold"] == 0.7
    assert max(curves["roc"]["tpr"][i] for i, f in enumerate(curves["roc"]["fpr"]) if f == 0.0) == 1.0
    thin = threshold_curves(gold, scores, threshold=0.7)
    assert all(len(v) <= 50 for part in ("pr", "roc", "by_threshold") for v in thin[part].values())
    assert len(set(map(len, thin["by_threshold"].values()))) == 1  # aligned after thinning
    assert thin["by_threshold"]["threshold"][0] == view["threshold"][0]  # the ends are kept
    assert thin["by_threshold"]["threshold"][-1] == view["threshold"][-1]


def test_precision_and_recall_by_threshold_match_a_direct_count():
    gold = np.array([1, 0, 1, 1, 0, 0, 1, 0])
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])
    view = threshold_curves(gold, scores, 0.5)["by_threshold"]
    for cut, p, r in zip(view["threshold"], view["precision"], view["recall"]):
        called = scores >= cut
        assert p == pytest.approx((gold & called).sum() / called.sum(), abs=1e-6)
        assert r == pytest.approx((gold & called).sum() / gold.sum(), abs=1e-6)


def test_one_class_has_no_curves():
    assert threshold_curves([1, 1, 1], [0.2, 0.5, 0.9], 0.5) is None


def test_the_report_draws_calibration_and_threshold_views(tmp_path):
    rng = np.random.default_rng(1)
    gold = rng.integers(0, 2, 200)
    scores = np.clip(gold * 0.3 + rng.uniform(0, 0.7, 200), 0, 1)
    matcher = {"f1": 0.8, "curves": threshold_curves(gold, scores, 0.5),
               "calibration": calibration(np.maximum(scores, 1 - scores), (scores >= 0.5) == gold)}
    multi = {"f1": 0.5, "curves": {name: threshold_curves(gold, scores, t) for name, t in (("体育", 0.4),
                                                                                             ("财经", 0.6))}}
    report.write(str(tmp_path), {"dev": matcher, "test": multi}, [], ["0", "1"])
    plots = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert plots == ["reliability_dev.png", "thresholds_dev.png", "thresholds_test.png"]
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "![thresholds_test.png](plots/thresholds_test.png)" in text
