"""Percentile bootstrap intervals of a metric over the examples of a split (the model card's headline interval).

Each resample draws the split's size of example indices with replacement from one seeded
``numpy.random.default_rng``, so an interval is the same on every run of the same predictions. A statistic
that is undefined on a resample (AUC of a resample with one class) returns None, and that resample is left
out and counted.
"""
import numpy as np

from appzoo.metrics.classification import decision_score

#: resamples of the examples, the generator's seed, the interval's level
RESAMPLES, SEED, LEVEL = 1000, 0, 0.95
#: metrics of one label per example that :func:`labels_statistic` recomputes (as decision_score does)
LABEL_METRICS = frozenset({"accuracy", *(f"{a}_{k}" for a in ("macro", "micro", "weighted")
                                         for k in ("precision", "recall", "f1"))})


def interval(statistic, n, resamples=RESAMPLES, seed=SEED, level=LEVEL):
    """``([low, high], undefined)``: the percentile interval of ``statistic(indices)`` over ``resamples``
    resamples of ``n`` examples, and how many resamples it was undefined on (None: no interval at all)."""
    rng = np.random.default_rng(seed)
    values = [statistic(rng.integers(0, n, n)) for _ in range(resamples)]
    defined = [v for v in values if v is not None]
    if not defined:
        return None, len(values)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(defined, [tail, 100 - tail])
    return [float(low), float(high)], len(values) - len(defined)


def labels_statistic(gold, pred, num_classes, metric):
    """The statistic of ``metric`` (one of :data:`LABEL_METRICS`) on class indices ``gold`` and ``pred``."""
    gold, pred = np.asarray(gold), np.asarray(pred)
    return lambda i: decision_score(gold[i], pred[i], num_classes, metric)


def auc_statistic(gold, scores):
    """The statistic of ROC AUC of binary ``gold`` (1 positive) against ``scores``: the Mann-Whitney count of
    positive-negative pairs ordered right, ties counted half; None on a resample without both classes."""
    gold = np.asarray(gold)
    values, rank = np.unique(np.asarray(scores, dtype=np.float64), return_inverse=True)

    def auc(i):
        pos = np.bincount(rank[i][gold[i] == 1], minlength=len(values)).astype(np.float64)
        neg = np.bincount(rank[i][gold[i] == 0], minlength=len(values)).astype(np.float64)
        pairs = pos.sum() * neg.sum()
        if not pairs:
            return None
        below = np.cumsum(neg) - neg  # negatives scored lower than each value
        return float((pos * (below + 0.5 * neg)).sum() / pairs)

    return auc
