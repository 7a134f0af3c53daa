"""Metrics of a binary matcher that outputs a score per pair (scikit-learn)."""
import numpy as np

from appzoo.registry import METRICS


#: what :func:`best_threshold` can maximise
THRESHOLD_METRICS = ("f1", "accuracy")


def best_threshold(gold, scores, metric="f1"):
    """The decision threshold with the best ``metric``: the F1 of the positive class, or accuracy.

    ``gold`` holds 0/1, ``scores`` any real numbers (probabilities or
    similarities); a pair is predicted positive when ``score >= threshold``.
    Every distinct score is a candidate cut, and so (for accuracy) is calling
    every pair negative; the returned threshold lies halfway between the
    chosen score and the next lower one, so that a score close to the cut on
    new data is not decided by rounding (when every pair is called positive,
    the threshold is the lowest score; when none is, the highest plus one).
    Ties go to the higher threshold (fewer positives). Returns
    ``(threshold, value)``; without a positive in ``gold`` the F1 is 0 and
    the threshold the highest score plus one.
    """
    if metric not in THRESHOLD_METRICS:
        raise ValueError(f"metric: one of {', '.join(THRESHOLD_METRICS)}, got {metric!r}")
    gold = np.asarray(gold, dtype=int)
    scores = np.asarray(scores, dtype="float64")
    if not len(scores) or (metric == "f1" and not gold.any()):
        return (float(scores.max()) + 1.0 if len(scores) else 0.5), 0.0
    order = np.argsort(-scores, kind="stable")
    sorted_scores, sorted_gold = scores[order], gold[order]
    # cutting after the last of each run of equal scores: positives predicted = i + 1
    last = np.r_[np.flatnonzero(np.diff(sorted_scores) != 0), len(scores) - 1]
    tp = np.cumsum(sorted_gold)[last]
    predicted = last + 1
    if metric == "f1":
        value = 2 * tp / (predicted + gold.sum())
    else:  # right: the true positives and the negatives left below the cut
        value = (tp + (len(gold) - gold.sum()) - (predicted - tp)) / len(gold)
        none_positive = 1.0 - gold.mean()
        if none_positive >= value.max():
            return float(scores.max()) + 1.0, float(none_positive)
    best = int(np.argmax(value))  # the first maximum is the highest threshold
    cut = sorted_scores[last[best]]
    below = sorted_scores[last[best] + 1] if last[best] + 1 < len(scores) else cut
    return float((cut + below) / 2), float(value[best])


@METRICS.register("matching")
def matching_metrics(gold, scores, threshold):
    """AUC of ``scores`` and accuracy / P / R / F1 of the positive class when
    pairs with ``score >= threshold`` are called positive; also the
    confusion matrix (rows gold, columns predicted; negative first). AUC is
    left out when ``gold`` holds a single class (it is undefined there)."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support, roc_auc_score

    gold = np.asarray(gold, dtype=int)
    scores = np.asarray(scores, dtype="float64")
    pred = (scores >= threshold).astype(int)
    p, r, f, _ = precision_recall_fscore_support(gold, pred, labels=[1], average="binary", pos_label=1,
                                                 zero_division=0)
    out = {}
    if len(set(gold.tolist())) == 2:
        out["auc"] = float(roc_auc_score(gold, scores))
    out.update({"accuracy": float((gold == pred).mean()) if len(gold) else 0.0,
                "precision": float(p), "recall": float(r), "f1": float(f), "threshold": float(threshold),
                "confusion_matrix": confusion_matrix(gold, pred, labels=[0, 1]).tolist()})
    return out
