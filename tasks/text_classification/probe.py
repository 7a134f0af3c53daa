"""A single-label classifier's floor: the frozen-encoder probe, a logistic regression on the untrained encoder's
text vectors, trained on a sample of train and scored on (a sample of) dev.

Capped so that it stays cheap beside the run: at most :data:`PROBE_TRAIN` training texts (a stratified sample,
every class kept) and :data:`PROBE_DEV` dev texts are embedded, each sample seeded by :data:`SEED` so the floor
is the same number every time.
"""
import numpy as np

from appzoo.registry import METRICS
from appzoo.task.floor import Floor

#: training examples the probe embeds at most: the size of the known TNEWS probe (3,200 titles)
PROBE_TRAIN = 3200
#: dev examples the probe is scored on at most
PROBE_DEV = 2000
SEED = 0  # of both samples: fixed, not trainer.seed, so that every run of one data set has one floor
#: the probe's logistic regression (scikit-learn; multinomial, lbfgs): no grid, so nothing is tuned on dev
C, MAX_ITER = 1.0, 1000
#: the run's dev metrics a probe is scored in; any other metric_for_best: accuracy
METRICS_SCORED = ("accuracy", "macro_f1")


def stratified_sample(labels, n, seed=SEED):
    """Sorted indices of at most ``n`` of ``labels`` (all of them when there are no more), each class's share
    kept (largest remainders) and every class present at least once; which examples of a class, ``seed``
    decides."""
    if len(labels) <= n:
        return list(range(len(labels)))
    by_class = {}
    for i, label in enumerate(labels):
        by_class.setdefault(label, []).append(i)
    classes = sorted(by_class)
    counts = np.array([len(by_class[c]) for c in classes])
    exact = counts * n / len(labels)
    quota = np.maximum(np.floor(exact).astype(int), 1)
    for j in np.argsort(-(exact - quota), kind="stable")[:max(0, n - int(quota.sum()))]:
        quota[j] += quota[j] < counts[j]
    rng = np.random.RandomState(seed)
    return sorted(i for c, q in zip(classes, quota) for i in rng.permutation(by_class[c])[:q])


def probe_floor(train, dev, labels, embed, metric):
    """The probe's :class:`Floor` in ``metric`` (accuracy or macro_f1, as the reader's ``evaluate`` computes it
    over ``labels``, the run's label set), or None when train has one class or dev is empty. ``train``, ``dev``:
    ``(text, label)`` pairs; ``embed``: see :meth:`appzoo.task.reader.DatasetReader.floor`."""
    from sklearn.linear_model import LogisticRegression

    if len({label for _, label in train}) < 2 or not dev:
        return None
    available = len(train), len(dev)
    train = [train[i] for i in stratified_sample([label for _, label in train], PROBE_TRAIN)]
    dev = [dev[i] for i in stratified_sample([label for _, label in dev], PROBE_DEV)]
    index = {name: i for i, name in enumerate(labels)}
    probe = LogisticRegression(C=C, max_iter=MAX_ITER)
    probe.fit(embed([text for text, _ in train]), [index[label] for _, label in train])
    predicted = probe.predict(embed([text for text, _ in dev]))
    scores = METRICS.get("classification", "metric")([index[label] for _, label in dev], predicted, labels)
    return Floor("frozen-encoder probe", metric, "dev", float(scores[metric]),
                 how=f"a logistic regression (scikit-learn, C={C}, max_iter={MAX_ITER}) on the untrained "
                     f"encoder's mean-pooled, L2-normalised text vectors, trained on {len(train)} of the "
                     f"{available[0]} training examples and scored on {len(dev)} of the {available[1]} dev "
                     f"examples, each a stratified sample (seed {SEED}) when there are more",
                 details={"accuracy": float(scores["accuracy"]), "macro_f1": float(scores["macro_f1"]),
                          "train_examples": len(train), "dev_examples": len(dev), "classes": len(labels)},
                 phrase="a logistic regression on the untrained encoder's frozen text vectors")
