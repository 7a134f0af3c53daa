"""Which examples go into which training batch, and in what order.

Every sampler is a pure function of ``(seed, epoch)``: a resumed run rebuilds
the same epoch and skips the batches it already trained on, so exact resume
holds whatever the sampler. Each returns one list of example indices per
step for this data-parallel ``rank``; all ranks get the same number of steps.

* ``random``: a seeded permutation, cut into batches.
* ``by_length``: the permutation is cut into mega-batches of
  ``mega_batches`` batches, each sorted by length and cut into batches; the
  order of the batches is then shuffled. Batches hold texts of similar
  length, so little padding is computed (HF's ``group_by_length``,
  fairseq's bucketing); every example is still used once per epoch.
* ``balanced``: a batch is drawn class by class, a class with probability
  proportional to ``count ** power`` (1: the data's own mix, 0.5: square
  root, 0: uniform). Within a class examples are drawn without replacement
  from a reshuffled cycle, so every example of a class is drawn before any is
  drawn twice. The epoch has as many batches as ``random``.
* ``m_per_class``: each batch is ``m`` examples of each of ``batch_size / m``
  classes (pytorch-metric-learning's ``MPerClassSampler``), classes chosen
  uniformly without replacement within a batch, examples cycled as above.
"""
import numpy as np

SAMPLERS = ("random", "by_length", "balanced", "m_per_class")


def feature_length(feature):
    """Tokens of a feature: the sum over its ``*input_ids`` fields."""
    return sum(len(v) for k, v in feature.items() if k.endswith("input_ids"))


def _rng(seed, epoch):
    return np.random.RandomState((seed + epoch) % (2 ** 32))


def train_batches(n, batch_size, *, seed, epoch, sampler="random", lengths=None, classes=None,
                  mega_batches=50, power=0.5, m=2, rank=0, world_size=1):
    """Index lists for one epoch of ``n`` examples (see the module docstring)."""
    rng = _rng(seed, epoch)
    step = batch_size * world_size  # one global batch: every rank's share of a step
    if sampler in ("random", "by_length"):
        order = rng.permutation(n)
        if sampler == "by_length":
            lengths = np.asarray(lengths)
            span = step * mega_batches
            order = np.concatenate([chunk[np.argsort(lengths[chunk], kind="stable")]
                                    for chunk in np.split(order, range(span, n, span))]) if n else order
        batches = [order[i:i + step] for i in range(0, n, step)]
        if world_size > 1 and batches and len(batches[-1]) < step:
            batches.pop()  # ranks must run the same number of steps
        if sampler == "by_length":
            batches = [batches[i] for i in rng.permutation(len(batches))]
    elif sampler in ("balanced", "m_per_class"):
        batches = _class_batches(rng, n, step, np.asarray(classes), sampler, power, m)
    else:
        raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    return [batch[rank::world_size].tolist() for batch in batches]


class _Cycle:
    """Draws a class's examples without replacement, reshuffling when all were drawn."""

    def __init__(self, members, rng):
        self.members, self.rng, self.queue = members, rng, []

    def take(self, k):
        out = []
        while len(out) < k:
            if not self.queue:
                self.queue = list(self.rng.permutation(self.members))
            out.append(self.queue.pop())
        return out


def _class_batches(rng, n, step, classes, sampler, power, m):
    names = np.unique(classes)
    cycles = {c: _Cycle(np.flatnonzero(classes == c), rng) for c in names}
    counts = np.array([len(cycles[c].members) for c in names], dtype=float)
    batches = []
    for _ in range(n // step if n >= step else 1):
        if sampler == "balanced":
            weights = counts ** power
            drawn = rng.choice(len(names), size=step, p=weights / weights.sum())
            picks = [i for c, k in zip(names, np.bincount(drawn, minlength=len(names))) for i in cycles[c].take(k)]
        else:
            per_batch = step // m
            chosen = rng.choice(len(names), size=min(per_batch, len(names)), replace=False)
            picks = [i for c in chosen for i in cycles[names[c]].take(m)]
        batches.append(np.asarray(rng.permutation(picks)))
    return batches


def length_order(features):
    """Indices that sort ``features`` by length (longest first): evaluation
    batches then pad little. Invert with ``np.argsort``."""
    return sorted(range(len(features)), key=lambda i: -feature_length(features[i]))
