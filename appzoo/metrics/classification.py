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
