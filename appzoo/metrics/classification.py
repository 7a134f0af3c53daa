"""Classification metrics (scikit-learn)."""
import numpy as np

from appzoo.registry import METRICS


def _per_class(precision, recall, f1, support, names):
    return {name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for name, p, r, f, s in zip(names, precision, recall, f1, support)}


def _averages(gold, pred, labels):
    from sklearn.metrics import precision_recall_fscore_support

    out = {}
    for average in ("macro", "micro", "weighted"):
        p, r, f, _ = precision_recall_fscore_support(gold, pred, labels=labels, average=average,
                                                     zero_division=0)
        out.update({f"{average}_precision": float(p), f"{average}_recall": float(r), f"{average}_f1": float(f)})
    return out


@METRICS.register("classification")
def classification_metrics(gold, pred, names):
    """Accuracy, macro/micro/weighted P/R/F1, per-class P/R/F1/support and the
    confusion matrix (rows gold, columns predicted) of class indices."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    ids = list(range(len(names)))
    gold, pred = np.asarray(gold), np.asarray(pred)
    per = precision_recall_fscore_support(gold, pred, labels=ids, zero_division=0)
    return {
        "accuracy": float((gold == pred).mean()) if len(gold) else 0.0,
        **_averages(gold, pred, ids),
        "per_class": _per_class(*per, names),
        "confusion_matrix": confusion_matrix(gold, pred, labels=ids).tolist(),
    }


def decision_score(gold, pred, num_classes, metric):
    """``metric`` (accuracy, or the macro, micro or weighted precision, recall
    or F1) of class indices, as :func:`classification_metrics` gives it, from
    one confusion matrix: what tuning a decision rule on dev computes for each
    candidate."""
    gold, pred = np.asarray(gold, dtype=np.int64), np.asarray(pred, dtype=np.int64)
    if not len(gold):
        return 0.0
    confusion = np.bincount(gold * num_classes + pred, minlength=num_classes ** 2).reshape(num_classes, num_classes)
    right = np.diag(confusion).astype(np.float64)
    if metric == "accuracy":
        return float(right.sum() / len(gold))
    average, kind = metric.split("_", 1)
    if average == "micro":  # one label per example, every class counted: micro P = R = F1 = accuracy
        return float(right.sum() / len(gold))
    predicted, support = confusion.sum(axis=0), confusion.sum(axis=1)
    precision = np.divide(right, predicted, out=np.zeros_like(right), where=predicted > 0)
    recall = np.divide(right, support, out=np.zeros_like(right), where=support > 0)
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros_like(right),
                   where=precision + recall > 0)
    value = {"precision": precision, "recall": recall, "f1": f1}[kind]
    if average == "macro":
        return float(value.mean())
    return float((value * support).sum() / support.sum())  # weighted by the gold count of each class


@METRICS.register("multilabel_classification")
def multilabel_metrics(gold, pred, names):
    """Subset accuracy, macro/micro/weighted P/R/F1 and per-class scores of
    multi-hot ``[n, C]`` arrays."""
    from sklearn.metrics import precision_recall_fscore_support

    gold, pred = np.asarray(gold, dtype=int), np.asarray(pred, dtype=int)
    ids = list(range(len(names)))
    per = precision_recall_fscore_support(gold, pred, labels=ids, zero_division=0)
    return {
        "subset_accuracy": float((gold == pred).all(axis=1).mean()) if len(gold) else 0.0,
        **_averages(gold, pred, ids),
        "per_class": _per_class(*per, names),
    }
