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
  uniformly without replacement within a batch, examples cycled as above (a
  class smaller than ``m`` repeats an example within its batch). With data
  parallelism each rank's share of a step is such a batch.
* ``no_duplicates``: for in-batch negatives (sentence-transformers'
  ``NoDuplicatesBatchSampler``). Each example has keys (its query and its
  positive); an example whose key is already in the batch being filled is
  deferred to a later batch, so the batch mates that are the negatives are
  never copies of an example's own texts, and batches keep their size. Every
  example is used once per epoch, except where the epoch ends: the examples
  that could not fill a batch make duplicate-free short batches, and a short
  batch of a single example (it would have no negatives, so a loss of 0) is
  left out of the epoch; a reshuffled later epoch places it. With data
  parallelism only full batches are kept (every rank runs the same steps).

Which sampler a run uses: :func:`choose_sampler`; a run's sampler, with what
it needs of the training features: :class:`Sampler`.
"""
import numpy as np

from appzoo.errors import ConfigError, DataError
from appzoo.params.trainer import CLASS_SAMPLERS, SAMPLERS


class Sampler:
    """The training batches of a run: the sampler the ``trainer`` keys choose
    (:func:`choose_sampler`), what it needs of the training features (their
    lengths, classes or duplicate keys, the last two from the reader), and one
    epoch at a time, a pure function of ``(trainer.seed, epoch)``.

    ``config``: a :class:`~appzoo.params.trainer.TrainerConfig`;
    ``per_token_loss``: the model's loss averages over tokens (``LOSS_PER =
    "token"``), so that length-grouped batches are weighted (:meth:`loss_share`);
    ``rank`` / ``world_size``: this process's share of data parallelism.
    """

    def __init__(self, config, reader, features, *, per_token_loss=False, rank=0, world_size=1):
        self.config, self.reader, self.rank, self.world_size = config, reader, rank, world_size
        self.name = choose_sampler(config.sampler, config.group_by_length, in_batch_negatives(reader))
        self.size = len(features)
        self.lengths = [feature_length(f) for f in features] if self.name == "by_length" else None
        self.classes = reader.sampling_classes(features) if self.name in CLASS_SAMPLERS else None
        self.keys = reader.duplicate_keys(features) if self.name == "no_duplicates" else None
        if self.name in CLASS_SAMPLERS:
            check_class_count(self.name, config.batch_size, config.sampler_m, self.classes)
        self.tokens_per_batch = None  # see loss_share
        if self.name == "by_length" and per_token_loss:
            tokens = sum(reader.loss_targets(f) for f in features)
            self.tokens_per_batch = config.batch_size * tokens / max(1, len(features))

    def epoch(self, epoch):
        """The steps of ``epoch`` for this rank, each a list of
        ``trainer.gradient_accumulation_steps`` micro-batches (index lists)."""
        cfg = self.config
        micro = train_batches(self.size, cfg.batch_size, seed=cfg.seed, epoch=epoch, sampler=self.name,
                              lengths=self.lengths, classes=self.classes, keys=self.keys,
                              power=cfg.sampler_power, m=cfg.sampler_m, mega_batches=cfg.sampler_mega_batches,
                              rank=self.rank, world_size=self.world_size)
        k = cfg.gradient_accumulation_steps
        return [micro[i:i + k] for i in range(0, len(micro), k)]

    def steps_per_epoch(self):
        """The steps of the first epoch; DataError where the training data makes none."""
        steps = len(self.epoch(0))
        if steps == 0:
            if self.name == "no_duplicates":
                raise DataError(f"trainer.sampler: no_duplicates cannot make a batch of two or more of the "
                                f"{self.size} training pairs without a repeated query or positive")
            raise DataError(f"the training data has {self.size} example(s), fewer than the "
                            f"{self.world_size} data-parallel processes")
        return steps

    def planned_indices(self, state, total):
        """The training features a run takes from where ``state`` (a
        :class:`~appzoo.run.trainer.TrainerState`) stands up to step ``total``:
        this rank's batches, epoch by epoch, sorted."""
        indices, step, epoch, start = set(), state.global_step, state.epoch, state.step_in_epoch
        while step < total:
            order = self.epoch(epoch)
            if not order:
                break
            for group in order[start:]:
                indices.update(i for micro in group for i in micro)
                step += 1
                if step >= total:
                    break
            epoch, start = epoch + 1, 0
        return sorted(indices)

    def loss_share(self, features):
        """1, or with length-grouped batches and a per-token loss the batch's
        tokens over the mean tokens of a batch: a batch of short sentences
        then weighs what its tokens weigh in a random batch, not as much as a
        batch of long ones."""
        if self.tokens_per_batch is None:
            return 1.0
        return sum(self.reader.loss_targets(f) for f in features) / self.tokens_per_batch

    @staticmethod
    def check_plan(trainer, reader, reader_type):
        """Plan time: the sampler fits the reader's training items, a class
        each for balanced and m_per_class, a query and a positive for
        no_duplicates (``trainer``: the TrainerConfig)."""
        sampler = choose_sampler(trainer.sampler, trainer.group_by_length, in_batch_negatives(reader))
        if sampler in CLASS_SAMPLERS and reader.sampling_classes([]) is None:
            raise ConfigError(f"trainer.sampler: {sampler!r} draws batches by class, but the training items of "
                              f"dataset_reader.type {reader_type!r} with this config have no class (triples, or "
                              f"in-batch positive pairs); use random or by_length"
                              f"{' or no_duplicates' if in_batch_negatives(reader) else ''}")
        if sampler == "no_duplicates" and not in_batch_negatives(reader):
            raise ConfigError(f"trainer.sampler: 'no_duplicates' keeps repeated queries and positives out of a "
                              f"batch whose mates are the negatives; dataset_reader.type {reader_type!r} with this "
                              f"config has no in-batch negatives (that is text_matching_pairwise with negatives "
                              f"'in_batch')")


def in_batch_negatives(reader):
    """Whether the batch mates of ``reader``'s training items are their
    negatives: the reader gives duplicate keys (its ``duplicate_keys([])`` is
    a list, not None)."""
    return reader.duplicate_keys([]) is not None


def choose_sampler(sampler, group_by_length, in_batch):
    """The sampler a run uses: ``trainer.sampler``, or when that is null,
    ``by_length``, except where batch mates are the negatives (``in_batch``):
    ``no_duplicates`` there, since a length-sorted batch would hold easy
    negatives. ``trainer.group_by_length`` is shorthand: true means
    ``by_length``, false any other sampler; a contradicting pair is refused
    by :meth:`TrainerConfig.check_keys_together`."""
    if sampler is not None:
        return sampler
    if group_by_length is not None:
        return "by_length" if group_by_length else ("no_duplicates" if in_batch else "random")
    return "no_duplicates" if in_batch else "by_length"


def check_class_count(sampler, batch_size, m, classes):
    """``m_per_class`` needs ``batch_size / m`` distinct classes in the
    training data (the balanced sampler needs one)."""
    found = len(set(classes))
    if sampler == "m_per_class" and batch_size // m > found:
        raise ConfigError(f"trainer.sampler_m: m_per_class takes batch_size / sampler_m = {batch_size} / {m} = "
                          f"{batch_size // m} classes per batch, but the training data has {found} "
                          f"(raise trainer.sampler_m or lower trainer.batch_size)")
    if sampler in CLASS_SAMPLERS and not found:
        raise ConfigError(f"trainer.sampler: {sampler!r} found no classes in the training data")


def feature_length(feature):
    """Tokens of a feature: the sum over its ``*input_ids`` fields."""
    return sum(len(v) for k, v in feature.items() if k.endswith("input_ids"))


def _rng(seed, epoch):
    return np.random.RandomState((seed + epoch) % (2 ** 32))


def train_batches(n, batch_size, *, seed, epoch, sampler="random", lengths=None, classes=None, keys=None,
                  mega_batches=8, power=0.5, m=2, rank=0, world_size=1):
    """Index lists for one epoch of ``n`` examples (see the module docstring).

    ``lengths`` (by_length): tokens per example; ``classes`` (balanced,
    m_per_class): a hashable class per example; ``keys`` (no_duplicates): per
    example a tuple of hashables, no two examples of a batch sharing one."""
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
    elif sampler in CLASS_SAMPLERS:
        batches = _class_batches(rng, n, batch_size, world_size, np.asarray(classes), sampler, power, m)
    elif sampler == "no_duplicates":
        batches = _no_duplicate_batches(rng.permutation(n), step, keys, world_size)
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


def _class_batches(rng, n, batch_size, world_size, classes, sampler, power, m):
    names = np.unique(classes)
    cycles = {c: _Cycle(np.flatnonzero(classes == c), rng) for c in names}
    counts = np.array([len(cycles[c].members) for c in names], dtype=float)
    step = batch_size * world_size
    batches = []
    for _ in range(n // step if n >= step else 1):
        if sampler == "balanced":
            weights = counts ** power
            drawn = rng.choice(len(names), size=step, p=weights / weights.sum())
            picks = [i for c, k in zip(names, np.bincount(drawn, minlength=len(names))) for i in cycles[c].take(k)]
            batches.append(np.asarray(rng.permutation(picks)))
        else:  # one m-per-class batch per rank, interleaved so that batch[rank::world_size] is rank's
            shares = []
            for _ in range(world_size):
                chosen = rng.choice(len(names), size=min(batch_size // m, len(names)), replace=False)
                shares.append(rng.permutation([i for c in chosen for i in cycles[names[c]].take(m)]))
            batches.append(np.stack(shares, axis=1).ravel())
    return batches


def _no_duplicate_batches(order, step, keys, world_size):
    """Fill each batch from the front of the examples not yet placed,
    skipping (deferring) one that shares a key with the batch."""
    ids = {}  # each distinct key as a small int: cheap to hash
    coded = [tuple(ids.setdefault(k, len(ids)) for k in keys[i]) for i in range(len(keys))]
    remaining = dict.fromkeys(order.tolist())
    batches = []
    while remaining:
        batch, taken = [], set()
        for i in remaining:
            if taken.isdisjoint(coded[i]):
                batch.append(i)
                taken.update(coded[i])
                if len(batch) == step:
                    break
        for i in batch:
            del remaining[i]
        if len(batch) == step or (world_size == 1 and len(batch) > 1):
            batches.append(np.asarray(batch))
    return batches


def length_order(features):
    """Indices that sort ``features`` by length (longest first): evaluation
    batches then pad little. Invert with ``np.argsort``."""
    return sorted(range(len(features)), key=lambda i: -feature_length(features[i]))
