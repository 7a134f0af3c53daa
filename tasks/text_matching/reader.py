"""The text matching reader of labelled pairs, on which the siamese and pairwise readers build.

Three registered readers share this implementation and differ in how a pair
reaches the model:

* ``text_matching``: one sequence ``[CLS] a [SEP] b [SEP]`` (cross-encoder; here);
* ``text_matching_siamese``: the two texts encoded apart (shared encoder;
  :mod:`tasks.text_matching.siamese`);
* ``text_matching_pairwise``: as siamese for dev/test/predict, but trains on
  ``(query, positive, negative)`` triples or on positive pairs whose batch
  mates are the negatives (:mod:`tasks.text_matching.siamese`).

Every split but train is labelled pairs ``text_a, text_b, label`` (predict
files may leave the label out). The labels are two configured strings; any
other label is an error naming ``file:line``. A decision threshold on the
score (probability of the positive label, or similarity) is tuned on dev for
the best F1, or accuracy (``tune_threshold_for``; :meth:`MatchingReader.fit`),
saved with the model and reused for test and predict.
"""
from typing import Annotated, Literal, Optional

import numpy as np
from sklearn.metrics import roc_auc_score

from appzoo.params.keys import Key, check_args
from appzoo.data.encoding import encode_texts
from appzoo.task.reader import DatasetReader, label_counts
from appzoo.data.tabular import (
    DELIMITER_HELP, FORMAT_HELP, HEADER_HELP, QUOTING_HELP, Column, columns, table_options,
)
from appzoo.errors import ConfigError, DataError
from appzoo.metrics.calibration import calibration
from appzoo.metrics.curves import threshold_curves
from appzoo.metrics.matching import THRESHOLD_METRICS
from appzoo.reports.mistakes import label_mistakes
from appzoo.task.decisions import Decisions, Threshold
from appzoo.task.floor import Floor
from appzoo.task.serving import Field, Serving
from appzoo.registry import METRICS, READERS
from tasks.text_matching.pairs import read_pairs

DEFAULT_THRESHOLD = 0.5  # used only when no threshold is configured and none was tuned on dev
#: e5's prefix for symmetric tasks (both texts of a pair); the floor is measured with and without it
QUERY_PREFIX = "query: "


@READERS.register("text_matching")
class MatchingReader(DatasetReader):
    """Labelled pairs for a cross-encoder: ``[CLS] text_a [SEP] text_b [SEP]``.

    Columns are indices (0-based) or header names for TSV/CSV, field names
    for JSONL; by default columns 0, 1, 2 / fields ``text_a``, ``text_b``,
    ``label``. ``positive_label`` and ``negative_label`` are the only labels
    accepted. ``threshold``: a fixed decision threshold on the score; null
    (default) tunes it on dev for the best ``tune_threshold_for``: F1 of the
    positive class, or accuracy.
    """

    default_metric = "auc"

    @check_args("dataset_reader")
    def __init__(self, format: Annotated[Literal["tsv", "csv", "jsonl"], Key(FORMAT_HELP)] = "tsv",
                 text_a_column: Annotated[Column, Key("column index or header name (tsv/csv), field name "
                                                      "(jsonl) of the first text (null: 0 / text_a)")] = None,
                 text_b_column: Annotated[Column, Key("column or field of the second text (null: 1 / "
                                                      "text_b)")] = None,
                 label_column: Annotated[Column, Key("column or field of the label (null: 2 / label)")] = None,
                 delimiter: Annotated[Optional[str], Key(DELIMITER_HELP)] = None,
                 header: Annotated[int, Key(HEADER_HELP, ge=0)] = 0,
                 quoting: Annotated[Optional[bool], Key(QUOTING_HELP)] = None,
                 positive_label: Annotated[str, Key("the label of a matching pair")] = "1",
                 negative_label: Annotated[str, Key("the label of a pair that does not match")] = "0",
                 threshold: Annotated[Optional[float], Key(
                     "fixed decision threshold on the score (null: tuned on dev, see tune_threshold_for)")] = None,
                 tune_threshold_for: Annotated[Literal[THRESHOLD_METRICS], Key(
                     "what the threshold tuned on dev maximises: the positive class's f1, or accuracy (CLUE's "
                     "AFQMC measure); a model saved with a threshold tuned for the other is tuned again by "
                     "--do eval")] = "f1",
                 **kwargs):
        super().__init__(**kwargs)
        self.options = table_options(format, delimiter, header, quoting)
        if positive_label == negative_label:
            raise ConfigError(f"dataset_reader.negative_label: must differ from positive_label, "
                              f"both are {positive_label!r}")
        self.fields = columns(format, text_a=(text_a_column, 0), text_b=(text_b_column, 1),
                              label=(label_column, 2))
        self.positive_label, self.negative_label = positive_label, negative_label
        if threshold is not None and tune_threshold_for != "f1":
            raise ConfigError(f"dataset_reader.tune_threshold_for: {tune_threshold_for!r} tunes the threshold, "
                              f"but dataset_reader.threshold fixes it at {threshold}; set one of them")
        self.decisions = Decisions(Threshold(threshold, DEFAULT_THRESHOLD, tune_threshold_for))

    # ---- data side -------------------------------------------------------
    INPUT = "a pair of non-empty texts (text_a, text_b)"

    def read_file(self, path, split):
        with self.open_data(path) as source:
            return read_pairs(source, path, split, self.fields, self.options, self.positive_label,
                              self.negative_label)

    def input_fields(self, value):
        if (isinstance(value, (tuple, list)) and len(value) == 2
                and all(isinstance(t, str) and t.strip() for t in value)):
            return {"text_a": value[0], "text_b": value[1]}
        return None

    def build_labels(self, train_examples):
        return [self.negative_label, self.positive_label]

    def check_labels(self, examples, labels, path):
        self._positive_index(labels)
        for example in examples:
            if example["label"] is not None and example["label"] not in labels:
                raise DataError(f"{example['source']}: label {example['label']!r} is not a label of the "
                                f"trained model (labels: {', '.join(labels)})")

    def _positive_index(self, labels):
        if self.positive_label not in labels:
            raise ConfigError(f"dataset_reader.positive_label: {self.positive_label!r} is not a label of the "
                              f"model (labels: {', '.join(labels)})")
        return labels.index(self.positive_label)

    # ---- planning ----------------------------------------------------------
    LABELS_IN_BATCH = True  # the cross-encoder takes labels (so dev has a loss) and gives probabilities

    def metric_names(self):
        """What :func:`matching_metrics` returns as scalars (``auc`` once dev
        holds both labels: see :meth:`check_split`); pointwise models also
        give the argmax decision's scores and a dev loss."""
        names = ["auc", "accuracy", "precision", "recall", "f1", "threshold"]
        if self.LABELS_IN_BATCH:
            names += ["argmax_accuracy", "argmax_precision", "argmax_recall", "argmax_f1", "loss", "ece"]
        return names

    def check_split(self, examples, split, path, metric):
        """A pointwise model learns from both labels in train; ``auc`` needs both
        in dev, or the best model cannot be chosen."""
        found = {e["label"] for e in examples if e.get("label") is not None}
        if split == "train" and self.LABELS_IN_BATCH and len(found) == 1:
            raise DataError(f"{path}: every training pair has the label {next(iter(found))!r}; a pointwise model "
                            f"learns from pairs labelled {self.positive_label!r} and {self.negative_label!r} "
                            f"(for positive pairs alone, use in-batch negatives: "
                            f"examples/mtch_ernie_siamese_infonce.json)")
        if split != "dev" or metric != "auc":
            return
        if len(found) < 2:
            only = f"only label {next(iter(found))!r}" if found else "no labels"
            raise DataError(f"{path}: the dev set has {only}, so its auc (the metric the best model is chosen "
                            f"on) is undefined; add dev pairs labelled {self.positive_label!r} and "
                            f"{self.negative_label!r}, or set trainer.metric_for_best to another metric")

    def model_args(self, labels, train_examples):
        counts = label_counts((e["label"] for e in train_examples), labels) if train_examples else None
        return {"num_labels": len(labels), "class_counts": counts}

    def audit(self, splits, features, batch_size):
        """Queries without a positive or a negative, duplicate pairs, and how
        often random batches of positives would hold a false negative."""
        out, warnings = {}, []
        train = splits.get("train") or []
        if not train or train[0].get("label") is None:
            return out
        by_query = {}
        for e in train:
            by_query.setdefault(e["text_a"], set()).add(e["label"] == self.positive_label)
        no_pos = sum(1 for v in by_query.values() if True not in v)
        no_neg = sum(1 for v in by_query.values() if False not in v)
        pairs = [(e["text_a"], e["text_b"]) for e in train]
        duplicates = len(pairs) - len(set(pairs))
        out.update({"train queries": len(by_query), "queries without a positive": no_pos,
                    "queries without a negative": no_neg, "duplicate pairs": duplicates})
        if duplicates:
            warnings.append(f"train: {duplicates} duplicate (text_a, text_b) pair(s)")
        positives = [(e["text_a"], e["text_b"]) for e in train if e["label"] == self.positive_label]
        if len(positives) > 1:
            # a batch mate (query j, positive j) is a false negative for query i when
            # query i = query j, positive i = positive j, or (query i, positive j) is a known positive
            known = set(positives)
            rng = np.random.RandomState(0)
            false, mates = 0, 0
            for _ in range(min(200, max(1, len(positives) // batch_size))):
                drawn = rng.choice(len(positives), min(batch_size, len(positives)), replace=False)
                batch = [positives[k] for k in drawn]
                for i, (qi, pi) in enumerate(batch):
                    for j, (qj, pj) in enumerate(batch):
                        if i != j:
                            mates += 1
                            false += qi == qj or pi == pj or (qi, pj) in known
            share = false / mates
            out[f"in-batch false negatives at batch size {batch_size}"] = f"{share:.3%} of batch mates"
            if share > 0.001:
                warnings.append(f"train: at batch size {batch_size}, {share:.2%} of in-batch negatives are in fact "
                                f"positives (repeated queries or texts)")
        out["warnings"] = warnings
        return out

    def texts(self, examples):
        for example in examples:
            yield example["text_a"]
            yield example["text_b"]

    def encode(self, examples, tokenizer, labels, max_seq_len, split):
        encoded = encode_texts(tokenizer, [e["text_a"] for e in examples], [e["text_b"] for e in examples],
                               max_seq_len=max_seq_len, split=split, what="pairs")
        features = [{"input_ids": ids, "token_type_ids": types}
                    for ids, types in zip(encoded["input_ids"], encoded["token_type_ids"])]
        return self._with_labels(features, examples, labels)

    def sampling_classes(self, features):
        """The label of a pair (pointwise training)."""
        return [f["labels"] for f in features]

    def _with_labels(self, features, examples, labels):
        """Add each labelled example's label index to its feature."""
        for feature, example in zip(features, examples):
            if example["label"] is not None:
                feature["labels"] = labels.index(example["label"])
        return features

    # ---- the floor ---------------------------------------------------------
    ADDED_TEXTS = (QUERY_PREFIX,)

    def floor(self, splits, embed):
        """The untrained encoder's zero-shot cosine AUC on dev: each text of a pair embedded alone, the
        pair scored by the cosine of the two. Measured with e5's ``query: `` prefix on both texts and
        without; the floor is the higher of the two (the toolkit does not know whether an encoder was
        trained with prefixes, and a bar the run must clear should be the stricter one), both in
        ``details``. None when dev is missing or holds one label."""
        dev = [e for e in splits.get("dev", ()) if e.get("label") is not None]
        gold = [int(e["label"] == self.positive_label) for e in dev]
        if len(set(gold)) < 2:
            return None

        def auc(prefix):
            texts = list(dict.fromkeys(prefix + e[key] for e in dev for key in ("text_a", "text_b")))
            vectors = dict(zip(texts, embed(texts)))
            return float(roc_auc_score(gold, [float(vectors[prefix + e["text_a"]] @ vectors[prefix + e["text_b"]])
                                              for e in dev]))

        with_prefix, without = auc(QUERY_PREFIX), auc("")
        return Floor("zero-shot cosine", "auc", "dev", max(with_prefix, without),
                     how="the untrained encoder's cosine of each pair's two texts, each mean-pooled alone, as "
                         "a score: the higher ROC AUC of with and without the prefix",
                     details={"with_prefix": with_prefix, "without_prefix": without, "prefix": QUERY_PREFIX,
                              "uses": "with_prefix" if with_prefix >= without else "without_prefix"})

    # ---- output side -----------------------------------------------------
    def decode(self, examples, features, outputs, labels):
        """``score``: the probability of the positive label (models with
        ``probs``) or the similarity (models with ``scores``)."""
        if "probs" in outputs:
            positive = self._positive_index(labels)
            return [{"score": float(p[positive]), "probs": p} for p in outputs["probs"]]
        return [{"score": float(s)} for s in outputs["scores"]]

    @property
    def decision_threshold(self):
        """The configured threshold, else the one tuned on dev, else 0.5 (:class:`Threshold`)."""
        return self.decisions.get(Threshold).value

    def evaluate(self, examples, predictions, labels):
        gold = [int(e["label"] == self.positive_label) for e in examples]
        scores = [p["score"] for p in predictions]
        metrics = METRICS.get("matching", "metric")(gold, scores, self.decision_threshold)
        if predictions and "probs" in predictions[0]:  # pointwise models: also at their argmax
            positive = self._positive_index(labels)
            argmax = [float(np.argmax(p["probs"]) == positive) for p in predictions]
            at_argmax = METRICS.get("matching", "metric")(gold, argmax, 0.5)
            metrics.update({f"argmax_{k}": at_argmax[k] for k in ("accuracy", "precision", "recall", "f1")})
            probs = np.stack([p["probs"] for p in predictions])
            index = {name: i for i, name in enumerate(labels)}
            gold_index = np.array([index.get(e["label"], -1) for e in examples])
            table = calibration(probs.max(axis=1), probs.argmax(axis=1) == gold_index)
            metrics.update({"ece": table["ece"], "calibration": table})
        curves = threshold_curves(gold, scores, self.decision_threshold)
        if curves is not None:
            metrics["curves"] = curves
        return metrics

    def fit(self, examples, predictions, labels):
        """Tune the decision threshold on dev for the best F1 or accuracy (unless one is configured)."""
        if self.decisions.fits:
            gold = [int(e["label"] == self.positive_label) for e in examples]
            self.decisions.fit([p["score"] for p in predictions], gold, labels, self.tune_metric)
        return self.state()

    #: the answer a server gives also has each label's probability (a siamese reader's does not)
    SERVES_PROBS = True

    def serving(self, labels):
        """A pair in; its score, its label by the decision threshold (which the list of models shows) and, for
        the cross-encoder, each label's probability out."""
        outputs = (Field("score", "score"), Field("label", "label"))
        if self.SERVES_PROBS:
            outputs += (Field("probs", "probs"),)
        return Serving("pair", outputs, "text matching", {"threshold": self.decision_threshold})

    def prediction_row(self, example, p, labels):
        positive = p["score"] >= self.decision_threshold
        row = {"text_a": example["text_a"], "text_b": example["text_b"], "score": round(p["score"], 6),
               "label": self.positive_label if positive else self.negative_label}
        if "probs" in p:
            row["probs"] = {name: round(float(v), 6) for name, v in zip(labels, p["probs"])}
        return row

    def mistakes(self, examples, predictions, labels):
        """Pairs on the wrong side of the decision threshold; the confidence
        of a mistake is its score's distance from the threshold."""
        threshold = self.decision_threshold
        predicted = [self.positive_label if p["score"] >= threshold else self.negative_label for p in predictions]
        return label_mistakes([f"{e['text_a']} ‖ {e['text_b']}" for e in examples], [e["label"] for e in examples],
                              predicted, [abs(p["score"] - threshold) for p in predictions],
                              [f"score {p['score']:.3f}, threshold {threshold:.3f}" for p in predictions])
