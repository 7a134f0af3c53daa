"""Threshold views of a binary score: the PR and ROC curves, and precision, recall and F1
against the decision threshold, each cut down to a few dozen points for metrics.json."""
import numpy as np


def threshold_curves(gold, scores, threshold, points=50):
    """``{"threshold", "pr": {"recall", "precision"}, "roc": {"fpr", "tpr"},
    "by_threshold": {"threshold", "precision", "recall", "f1"}}`` of 0/1 ``gold`` and
    real ``scores`` (a pair is positive when ``score >= threshold``); None without
    both classes in ``gold`` (the curves are undefined there). At most ``points``
    points per curve, spread evenly over its length; ``threshold`` is the one in use."""
    from sklearn.metrics import precision_recall_curve, roc_curve

    gold = np.asarray(gold, dtype=int)
    scores = np.asarray(scores, dtype="float64")
    if len(set(gold.tolist())) < 2:
        return None
    precision, recall, cuts = precision_recall_curve(gold, scores)
    fpr, tpr, _ = roc_curve(gold, scores)
    # precision_recall_curve's last point (recall 0, precision 1) has no threshold
    f1 = np.divide(2 * precision[:-1] * recall[:-1], precision[:-1] + recall[:-1],
                   out=np.zeros(len(cuts)), where=(precision[:-1] + recall[:-1]) > 0)
    return {"threshold": float(threshold),
            "pr": {"recall": _thin(recall, points), "precision": _thin(precision, points)},
            "roc": {"fpr": _thin(fpr, points), "tpr": _thin(tpr, points)},
            "by_threshold": {"threshold": _thin(cuts, points), "precision": _thin(precision[:-1], points),
                             "recall": _thin(recall[:-1], points), "f1": _thin(f1, points)}}


def _thin(values, points):
    """``points`` values of ``values`` at evenly spread positions, the first and last kept, rounded."""
    values = np.asarray(values, dtype="float64")
    if len(values) > points:
        values = values[np.unique(np.linspace(0, len(values) - 1, points).round().astype(int))]
    return [round(float(v), 6) for v in values]
