"""The contract between a task's reader and the shared trainer.

A reader is registered in ``READERS`` and built from the task-specific keys
of the ``dataset_reader`` section. It owns everything that depends on the
task's data: reading files into examples, the label set, tokenisation,
batching, turning model outputs back into per-example predictions, metrics
and the rows of ``predictions.jsonl``. The trainer only moves batches.
"""
import contextlib
import math
import os
from collections import Counter
from typing import Annotated, Literal

import numpy as np

from appzoo.data.encoding import IGNORE_INDEX, collate
from appzoo.params.keys import Key, check_args
from appzoo.data.tabular import ON_BAD_LINE, TextFile, check_encoding, clip
from appzoo.task.decisions import Decisions
from appzoo.task.serving import Field, Serving
from appzoo.errors import ConfigError, DataError
from appzoo.utils.progress import note


class DatasetReader:
    """Base class; subclasses implement the methods that raise."""

    #: name of the scalar metric the best checkpoint is chosen on by default
    default_metric = "macro_f1"
    #: reader keys that change what a model outputs: a model trained with one value is not loaded with another
    MODEL_KEYS = ()
    #: what encoding does to an input longer than max_seq_len: "cut" (its end is lost) or "windows"
    long_inputs = "cut"
    #: why ``trainer.audit_labels`` cannot judge this task's labels (the plan refuses it with this reason); None:
    #: it can, through :meth:`label_probabilities`
    label_audit = None

    @check_args("dataset_reader")
    def __init__(self, encoding: Annotated[str, Key("codec of the data and label files, any Python codec name "
                                                    "(a UTF-8 byte-order mark is dropped)",
                                                    check=check_encoding)] = "utf-8",
                 on_bad_line: Annotated[Literal[ON_BAD_LINE], Key(
                     "a line that cannot be decoded or parsed is an error naming file:line (error), or is "
                     "left out and counted in metrics.json (skip)")] = "error"):
        """Keys every reader takes (subclasses pass them on with ``**kwargs``).

        ``encoding``: of the data and label files, any Python codec name (a
        UTF-8 byte-order mark is dropped). ``on_bad_line``: a line that cannot
        be decoded or parsed (too many fields, bad JSON, a field of the wrong
        type) is an error naming ``file:line`` ("error"), or is left out and
        counted in ``skipped`` (``{path: lines skipped}``) and in a note ("skip").
        """
        self.encoding = encoding
        self.on_bad_line = on_bad_line
        self.skipped = {}

    @contextlib.contextmanager
    def open_data(self, path):
        """``path`` as a :class:`~appzoo.data.tabular.TextFile` with this
        reader's encoding and bad-line policy; the lines it skipped are
        recorded in ``skipped[path]`` and noted once the file is read."""
        with TextFile(path, self.encoding, self.on_bad_line) as source:
            yield source
        self.skipped[path] = source.skipped
        if source.skipped:
            note(f"note: skipped {source.skipped} bad line(s) of {path} (first: {source.first_skipped})")

    # ---- data side -------------------------------------------------------
    #: what the examples of a data file are called when a file has none
    UNIT = "examples"
    #: what one in-memory input must be (:meth:`read_inputs`), said when one is not
    INPUT = "an input"

    def read(self, path, split):
        """Return a list of examples (dicts); ``split`` is train/dev/test/predict:
        those of :meth:`read_file`, refused when there are none but in a
        predict file. Predict files may come without labels."""
        examples = self.read_file(path, split)
        if not examples and split != "predict":
            raise DataError(f"{path}: no {self.UNIT}")
        return examples

    def read_file(self, path, split):
        """The examples of the data file ``path`` (a list, maybe empty)."""
        raise NotImplementedError

    def read_inputs(self, inputs):
        """Examples, as :meth:`read` gives them for a predict file, from
        in-memory inputs (what :class:`appzoo.Predictor` takes), each input's
        fields by :meth:`input_fields`; DataError naming the input's index for
        one that does not fit."""
        examples = []
        for i, value in enumerate(inputs):
            fields = self.input_fields(value)
            if fields is None:
                raise DataError(f"input {i}: expected {self.INPUT}, got {clip(value)}")
            examples.append({**fields, "label": None, "source": f"input {i}"})
        return examples

    def input_fields(self, value):
        """The text fields of an example from one in-memory input, or None
        when it is not :data:`INPUT`."""
        raise NotImplementedError

    def build_labels(self, train_examples):
        """The sorted label set seen in training."""
        raise NotImplementedError

    def check_labels(self, examples, labels, path):
        """Raise DataError (file:line) for a label not in ``labels``."""

    def model_args(self, labels, train_examples):
        """Arguments the model gets from the data (``num_labels``, ``class_counts``
        for 'balanced' weights, ...); ``train_examples`` is None when not training."""
        raise NotImplementedError

    def texts(self, examples):
        """Iterate over the raw texts, for building a from-scratch vocabulary."""
        raise NotImplementedError

    def encode(self, examples, tokenizer, labels, max_seq_len, split):
        """Tokenise examples into features (dicts of lists / ints), with
        :func:`~appzoo.data.encoding.encode_texts`."""
        raise NotImplementedError

    def example_rows(self, examples, features, rows):
        """Per-example rows (a teacher's logits, :mod:`appzoo.run.teacher`) from per-feature ``rows``: one
        feature per example here; a reader whose features are parts of an example merges them."""
        return list(rows)

    def with_prediction(self, example, row, labels):
        """A copy of an unlabelled ``example`` labelled by the argmax of its logits ``row`` (a teacher's, on a
        transfer input: :mod:`appzoo.run.teacher`)."""
        return {**example, "label": labels[int(np.argmax(row))]}

    def example_of(self, index, feature):
        """The number of the example that feature ``index`` was encoded from."""
        return index

    def feature_rows(self, feature, example_row):
        """The part of an example's row (:meth:`example_rows`) that ``feature`` covers: all of it here."""
        return example_row

    def collate(self, features, pad_id):
        """One batch: a dict of numpy arrays named like the model's ``forward``
        arguments (the trainer passes only those a model takes). Token ids
        (keys ending in ``input_ids``) are padded with ``pad_id``, label
        sequences with the ignored index, anything else with 0; see
        :func:`~appzoo.data.encoding.collate`."""
        pads = {key: pad_id for key in features[0] if key.endswith("input_ids")}
        return collate(features, {"labels": IGNORE_INDEX, **pads})

    # ---- output side -----------------------------------------------------
    def decode(self, examples, features, outputs, labels):
        """Per-example predictions from the concatenated ``outputs`` of the
        model's ``predict`` (one row per feature)."""
        raise NotImplementedError

    def evaluate(self, examples, predictions, labels):
        """Metrics dict: scalars at the top level, tables nested."""
        raise NotImplementedError

    #: the example's field that holds its gold answer, written under ``gold`` beside a prediction
    GOLD = "label"

    def prediction_rows(self, examples, predictions, labels):
        """JSON-serialisable rows for predictions.jsonl (and for
        ``predictions/<split>.jsonl``), one per example by
        :meth:`prediction_row`, with the gold answer under ``gold`` where
        the example has one."""
        rows = []
        for example, p in zip(examples, predictions):
            row = self.prediction_row(example, p, labels)
            if example.get(self.GOLD) is not None:
                row["gold"] = example[self.GOLD]
            rows.append(row)
        return rows

    def prediction_row(self, example, prediction, labels):
        """The row of one example's prediction (without its gold answer)."""
        raise NotImplementedError

    def mistakes(self, examples, predictions, labels):
        """The mistakes of one labelled split, for ``errors.md`` and the
        never-predicted warnings: a dict built with :mod:`appzoo.reports.mistakes`'s
        helpers (``label_mistakes``, ``multilabel_mistakes``,
        ``entity_mistakes``), or None where this reader lists none (errors.md
        then says so, and warns from the per-class table alone)."""
        return None

    def serving(self, labels):
        """How a model of this reader, with the label set ``labels``, is
        served (:class:`~appzoo.task.serving.Serving`): its input kind, the
        fields of its prediction rows a server answers, and what the list of
        models says about it. Called once the model's state is loaded (a
        tuned threshold is known). By default one text in and the row's
        ``label`` out; a server refuses to load a model whose warm-up rows
        lack a declared field."""
        return Serving("text", (Field("label", "label"),), "classification")

    #: the post-hoc decision rules (:mod:`appzoo.task.decisions`) this reader decodes with, in their order;
    #: a reader's state is theirs unless it overrides :meth:`state`
    decisions = Decisions()
    #: the dev metric that chooses best/ (``trainer.metric_for_best``), which :meth:`fit` tunes a decision rule
    #: for where it tunes one; set by the runner before training
    tune_metric = None

    def fit(self, examples, predictions, labels):
        """Fit :attr:`decisions` on the dev predictions at each evaluation
        during training, and decode those predictions again with what was
        fitted; returns :meth:`state`."""
        return self.state()

    def state(self):
        """What a model saved by this reader needs to decode the same way
        later (a tuned threshold, a detected tagging scheme): saved with every
        best/ and checkpoint, whether or not there was a dev set."""
        return self.decisions.state()

    def load_state(self, state):
        """Restore what :meth:`state` returned."""
        self.decisions.load_state(state or {})

    def saved_model_args(self, args):
        """What a loaded model's arguments (:meth:`model_args` of its training data, saved with it) tell the
        reader beyond its state: by default nothing."""

    # ---- training batches (appzoo.data.sampler) ----------------------------
    def loss_targets(self, feature):
        """How many targets the loss of ``feature`` averages over (tokens for a
        tagger): with length-grouped batches a per-token loss is weighted by it."""
        return 1

    def sampling_classes(self, features):
        """The class of each training feature (a hashable, e.g. the label
        index), for trainer.sampler ``balanced`` and ``m_per_class``; None
        where training items have no class (triples, in-batch pairs). The
        plan calls it with ``[]``: None there refuses those samplers."""
        return None

    def duplicate_keys(self, features):
        """Per training feature, a tuple of hashables (its query, its
        positive) that no batch mate may share, for trainer.sampler
        ``no_duplicates``; None where batch mates are not the negatives. The
        plan calls it with ``[]``, as :meth:`sampling_classes`; a list there
        says the batch mates are part of the loss, so batches are not
        length-sorted by default (:func:`~appzoo.data.sampler.choose_sampler`)."""
        return None

    def audit_classes(self, examples, labels):
        """``(counts, names)`` for the audit's imbalance and per-class
        findings: a Counter of the classes in ``examples`` (empty without
        gold) and every class name of ``labels``. By default the classes are
        the labels; sequence labeling counts entity types."""
        counts = Counter()
        for example in examples:
            value = example.get("label")
            if value is not None:
                counts.update(value if isinstance(value, list) else [value])
        return counts, list(labels)

    def label_probabilities(self, examples, predictions, labels):
        """``(given, probs, multi_label)`` for the audit's search for mislabeled examples
        (``trainer.audit_labels``): the given label indices of ``examples`` (one int each; a list of them
        where ``multi_label``) and ``[N, len(labels)]`` predicted probabilities in ``labels``' order; None where
        the task has no per-example probabilities over its labels. By default an example's ``label`` (a name, or
        a list of names) against its prediction's ``probs``: a classifier's, or a pointwise pair model's over
        its two labels."""
        if not examples or any("probs" not in p for p in predictions):
            return None
        index = {name: i for i, name in enumerate(labels)}
        multi = isinstance(examples[0]["label"], list)
        given = [[index[n] for n in e["label"]] if multi else index[e["label"]] for e in examples]
        probs = np.stack([np.asarray(p["probs"], dtype="float64") for p in predictions])
        return given, probs, multi

    def audit(self, splits, features, batch_size):
        """Task findings for ``--do audit`` (:mod:`appzoo.reports.audit`): a JSON-able
        dict, with its ``"warnings"`` (a list of lines) if any."""
        return {}

    # ---- the floor: what the untrained encoder scores (appzoo.task.floor) ----
    #: texts the reader puts beside the data's own (its floor's prefix): model.encoder.prune_vocab keeps their pieces
    ADDED_TEXTS = ()

    def floor(self, splits, embed):
        """The run's :class:`~appzoo.task.floor.Floor`, computed once before a pretrained encoder is trained,
        or None: this task declares none (the default), or the data allows none (one class in dev).
        ``splits``: ``{split: examples}`` as read; ``embed(texts) -> [N, H]``: each text alone through the
        run's tokenizer and untrained encoder, mean-pooled and L2-normalised
        (:func:`appzoo.task.model.frozen_embedder`). The floor's metric is one :meth:`evaluate` gives, so that
        the run's result can be compared with it."""
        return None

    # ---- planning: checks that need the config alone, or one split -------
    def check_plan(self, data):
        """Raise ConfigError for reader keys that do not fit the shared
        ``dataset_reader`` keys (``data``: max_seq_len, the split paths).
        Called by :func:`appzoo.run.plan.validate`, before anything is read or
        written."""

    def plan_model_args(self):
        """The part of :meth:`model_args` that the config alone fixes (no
        data needed), so that a model can check its keys against it at plan
        time (``multi_label``, ``negatives``)."""
        return {}

    def metric_names(self):
        """The scalar dev metrics of this reader's config: the scalar keys
        :meth:`evaluate` returns, plus ``"loss"`` where dev batches carry
        labels. None: not declared (``metric_for_best`` is then checked only
        at the first evaluation)."""
        return None

    def check_split(self, examples, split, path, metric):
        """Raise DataError (naming ``path``) when a split that was read cannot
        give ``metric`` (the ``metric_for_best`` in use) although the config
        is fine, e.g. a single-class dev set under ``auc``. Called by the
        runner after reading each split."""


def label_counts(values, labels):
    """How often each of ``labels`` occurs in ``values`` (label names), in the
    label set's order: class counts for 'balanced' weights, and for messages."""
    counts = Counter(values)
    return [counts[label] for label in labels]


def read_label_file(path, what="label", encoding="utf-8"):
    """Labels (or tags) one per line, in the file's order; blank lines skipped.
    A line that cannot be decoded is an error (a label set is never partial)."""
    try:
        with TextFile(path, encoding) as source:
            labels = [line.strip() for _, line in source if line.strip()]
    except DataError:
        if not os.path.isfile(path):
            raise ConfigError(f"dataset_reader.label_file: no such file {path!r}") from None
        raise
    seen = set()
    for label in labels:
        if label in seen:
            raise DataError(f"{path}: the {what} {label!r} is listed twice")
        seen.add(label)
    return labels


def warn_label_variants(counts, what="label"):
    """Print one warning listing labels that differ only by case or surrounding
    whitespace (``Sports`` next to ``sports``): they are different classes to
    the model, which is rarely what the data meant. ``counts``: ``{label:
    examples}`` in the label set's order."""
    groups = {}
    for label in counts:
        groups.setdefault(_variant_key(label), []).append(label)
    variants = [group for group in groups.values() if len(group) > 1]
    if variants:
        listed = "; ".join(" / ".join(f"{label!r} ({counts[label]})" for label in group) for group in variants)
        note(f"warning: {what}s that differ only by case, surrounding whitespace or number format are different "
             f"classes: {listed} (training counts in brackets; fix the data if they mean one {what})")


def _variant_key(label):
    """What labels that mean the same share: ``Sports``/``sports `` and ``1``/``1.0``."""
    text = label.strip().casefold()
    number = label_number(text)
    return text if number is None else repr(number)


def label_number(text):
    """A label written as a number (``1``, ``1.0``) as a finite float, else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
