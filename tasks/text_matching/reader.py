"""Readers for text matching: labelled pairs, and triples for pairwise training.

Three registered readers share one implementation and differ in how a pair
reaches the model:

* ``text_matching``: one sequence ``[CLS] a [SEP] b [SEP]`` (cross-encoder);
* ``text_matching_siamese``: the two texts encoded apart (shared encoder);
* ``text_matching_pairwise``: as siamese for dev/test/predict, but trains on
  ``(query, positive, negative)`` triples or on positive pairs whose batch
  mates are the negatives.

Every split but train is labelled pairs ``text_a, text_b, label`` (predict
files may leave the label out). The labels are two configured strings; any
other label is an error naming ``file:line``. A decision threshold on the
score (probability of the positive label, or similarity) is tuned on dev for
the best F1 (:meth:`MatchingReader.fit`), saved with the model and reused
for test and predict.
"""
from typing import Annotated, Literal, Optional

import numpy as np

from appzoo.config import Key, check_args
from appzoo.data.encoding import encode_texts
from appzoo.data.reader import DatasetReader, label_counts, label_number
from appzoo.data.tabular import (
    DELIMITER_HELP, FORMAT_HELP, HEADER_HELP, QUOTING_HELP, Column, clip, columns, read_rows, table_options,
    wrong_type,
)
from appzoo.errors import ConfigError, DataError
from appzoo.metrics.matching import best_f1_threshold
from appzoo.progress import note
from appzoo.registry import METRICS, READERS
from tasks.text_matching.triples import build_triples

DEFAULT_THRESHOLD = 0.5  # used only when no threshold is configured and none was tuned on dev


@READERS.register("text_matching")
class MatchingReader(DatasetReader):
    """Labelled pairs for a cross-encoder: ``[CLS] text_a [SEP] text_b [SEP]``.

    Columns are indices (0-based) or header names for TSV/CSV, field names
    for JSONL; by default columns 0, 1, 2 / fields ``text_a``, ``text_b``,
    ``label``. ``positive_label`` and ``negative_label`` are the only labels
    accepted. ``threshold``: a fixed decision threshold on the score; null
    (default) tunes it on dev for the best F1.
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
                     "fixed decision threshold on the score (null: tuned on dev for the best F1)")] = None,
                 **kwargs):
        super().__init__(**kwargs)
        self.options = table_options(format, delimiter, header, quoting)
        if positive_label == negative_label:
            raise ConfigError(f"dataset_reader.negative_label: must differ from positive_label, "
                              f"both are {positive_label!r}")
        self.fields = columns(format, text_a=(text_a_column, 0), text_b=(text_b_column, 1),
                              label=(label_column, 2))
        self.positive_label, self.negative_label = positive_label, negative_label
        self.threshold = threshold
        self.tuned_threshold = None
        self.tuned_f1 = None

    # ---- data side -------------------------------------------------------
    def read(self, path, split):
        return self._read_pairs(path, split)

    def _read_pairs(self, path, split):
        examples = []
        with self.open_data(path) as source:
            for line, row in read_rows(source, self.fields, optional=("label",) if split == "predict" else (),
                                       **self.options):
                problem = _row_problem(row, self.fields, ("text_a", "text_b"), label_required=split != "predict")
                if problem:
                    source.bad(line, problem)
                    continue
                where = f"{path}:{line}"
                header_like = line == 1 and not self.options["header"] and self.options["format"] != "jsonl"
                examples.append({"text_a": row["text_a"], "text_b": row["text_b"],
                                 "label": self._parse_label(row["label"], where, header_like), "source": where})
        if not examples and split != "predict":
            raise DataError(f"{path}: no examples")
        return examples

    def read_inputs(self, inputs):
        examples = []
        for i, pair in enumerate(inputs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                    and all(isinstance(t, str) and t.strip() for t in pair)):
                raise DataError(f"input {i}: expected a pair of non-empty texts (text_a, text_b), got {clip(pair)}")
            examples.append({"text_a": pair[0], "text_b": pair[1], "label": None, "source": f"input {i}"})
        return examples

    def _parse_label(self, value, where, header_like=False):
        """``header_like``: the value is on the first line of a file read without a header row."""
        if value is None:
            return None
        label = str(value).strip()
        number = label_number(label)
        for known in (self.positive_label, self.negative_label):
            if label != known and number is not None and number == label_number(known):
                return known  # 1.0 for 1: labels written by a float column
        if label not in (self.positive_label, self.negative_label):
            near = [known for known in (self.positive_label, self.negative_label)
                    if known.strip().casefold() == label.casefold()]
            hint = f"; it differs from {near[0]!r} only by case or spaces" if near else ""
            if header_like and not near and number is None:
                hint = "; if this line is a header row, set dataset_reader.header=1"
            raise DataError(
                f"{where}: label {label!r} is neither the positive label {self.positive_label!r} nor the "
                f"negative label {self.negative_label!r}{hint} (set dataset_reader.positive_label / negative_label)"
            )
        return label

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
            names += ["argmax_accuracy", "argmax_precision", "argmax_recall", "argmax_f1", "loss"]
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
        """The configured threshold, else the one tuned on dev, else 0.5."""
        if self.threshold is not None:
            return self.threshold
        return self.tuned_threshold if self.tuned_threshold is not None else DEFAULT_THRESHOLD

    def evaluate(self, examples, predictions, labels):
        gold = [int(e["label"] == self.positive_label) for e in examples]
        scores = [p["score"] for p in predictions]
        metrics = METRICS.get("matching", "metric")(gold, scores, self.decision_threshold)
        if predictions and "probs" in predictions[0]:  # pointwise models: also at their argmax
            positive = self._positive_index(labels)
            argmax = [float(np.argmax(p["probs"]) == positive) for p in predictions]
            at_argmax = METRICS.get("matching", "metric")(gold, argmax, 0.5)
            metrics.update({f"argmax_{k}": at_argmax[k] for k in ("accuracy", "precision", "recall", "f1")})
        return metrics

    def fit(self, examples, predictions, labels):
        """Tune the decision threshold on dev for the best F1 (unless one is configured)."""
        if self.threshold is not None:
            return self.state()
        gold = [int(e["label"] == self.positive_label) for e in examples]
        self.tuned_threshold, self.tuned_f1 = best_f1_threshold(gold, [p["score"] for p in predictions])
        return self.state()

    def state(self):
        if self.threshold is not None:
            return {"threshold": self.threshold, "tuned": False}
        if self.tuned_threshold is None:  # no dev set: nothing was tuned
            return {"threshold": DEFAULT_THRESHOLD, "tuned": False}
        return {"threshold": self.tuned_threshold, "tuned": True, "dev_f1": self.tuned_f1}

    def load_state(self, state):
        self.tuned_threshold = state.get("threshold") if state.get("tuned") else None
        self.tuned_f1 = state.get("dev_f1")

    def prediction_rows(self, examples, predictions, labels):
        rows = []
        for example, p in zip(examples, predictions):
            positive = p["score"] >= self.decision_threshold
            row = {"text_a": example["text_a"], "text_b": example["text_b"], "score": round(p["score"], 6),
                   "label": self.positive_label if positive else self.negative_label}
            if "probs" in p:
                row["probs"] = {name: round(float(v), 6) for name, v in zip(labels, p["probs"])}
            if example["label"] is not None:
                row["gold"] = example["label"]
            rows.append(row)
        return rows


@READERS.register("text_matching_siamese")
class SiameseMatchingReader(MatchingReader):
    """Labelled pairs whose texts are encoded apart (``query_input_ids`` and
    ``title_input_ids``), for siamese models. Same keys as ``text_matching``."""

    LABELS_IN_BATCH = True  # the pointwise siamese model takes labels; the pairwise one trains on triples

    def encode(self, examples, tokenizer, labels, max_seq_len, split):
        ids = _encode_distinct(tokenizer, self.texts(examples), max_seq_len, split)
        features = [{"query_input_ids": ids[e["text_a"]], "title_input_ids": ids[e["text_b"]]} for e in examples]
        return self._with_labels(features, examples, labels) if self.LABELS_IN_BATCH else features


@READERS.register("text_matching_pairwise")
class PairwiseMatchingReader(SiameseMatchingReader):
    """Siamese pairs for dev/test/predict; training items for a pairwise model.

    The training file is labelled pairs (``train_format: "pairs"``, read with
    the same column keys as dev) or triples (``"triples"``: columns
    ``query_column``, ``positive_column``, ``negative_column``, by default 0,
    1, 2 / fields ``query``, ``positive``, ``negative``).

    ``negatives: "labelled"`` trains on triples: from a triples file, or built
    from labelled pairs by grouping on ``text_a`` (each query's positives ×
    its negatives, at most ``max_triples_per_query`` drawn with ``seed``, plus
    ``random_negatives`` random texts per positive pair).
    ``negatives: "in_batch"`` trains on the positive pairs alone; the other
    positives of a batch are the negatives. trainer.sampler ``no_duplicates``
    (the default here) puts no two pairs that share a query or a positive in
    one batch; under another sampler the collate keeps one pair per distinct
    query and positive, so duplicates are not false negatives.
    """

    LABELS_IN_BATCH = False

    @check_args("dataset_reader")
    def __init__(self, train_format: Annotated[Literal["pairs", "triples"], Key(
                     "the training file holds labelled pairs (as dev) or (query, positive, negative) "
                     "triples")] = "pairs",
                 negatives: Annotated[Literal["labelled", "in_batch"], Key(
                     "train on triples (labelled) or on positive pairs whose batch mates are the negatives "
                     "(in_batch)")] = "labelled",
                 query_column: Annotated[Column, Key("triples: column or field of the query (null: 0 / "
                                                     "query)")] = None,
                 positive_column: Annotated[Column, Key("triples: column or field of the positive text "
                                                        "(null: 1 / positive)")] = None,
                 negative_column: Annotated[Column, Key("triples: column or field of the negative text "
                                                        "(null: 2 / negative)")] = None,
                 max_triples_per_query: Annotated[int, Key(
                     "pairs: at most this many (positive, negative) triples drawn per query", ge=1)] = 10,
                 random_negatives: Annotated[int, Key(
                     "pairs: random texts added as negatives per positive pair", ge=0)] = 0,
                 seed: Annotated[int, Key("seed of the triple sampling", ge=0)] = 42, **kwargs):
        super().__init__(**kwargs)  # the keys of text_matching
        if random_negatives and (train_format == "triples" or negatives == "in_batch"):
            raise ConfigError("dataset_reader.random_negatives: only used when triples are built from labelled "
                              "pairs (train_format 'pairs' with negatives 'labelled')")
        self.triple_fields = columns(self.options["format"], query=(query_column, 0),
                                     positive=(positive_column, 1), negative=(negative_column, 2))
        self.train_format, self.negatives = train_format, negatives
        self.max_triples_per_query, self.random_negatives, self.seed = max_triples_per_query, random_negatives, seed
        self.dropped_duplicates = 0  # in-batch pairs the collate left out of their batch (see collate)

    def read(self, path, split):
        if split != "train":
            return self._read_pairs(path, split)
        if self.train_format == "triples":
            items = self._read_triples(path)
        else:
            pairs = [{**e, "positive": e["label"] == self.positive_label} for e in self._read_pairs(path, split)]
            if self.negatives == "labelled":
                items = build_triples(pairs, max_per_query=self.max_triples_per_query,
                                      random_negatives=self.random_negatives, seed=self.seed)
                if not items:
                    raise DataError(
                        f"{path}: no training triples: no text_a has both a positive and a negative pair "
                        f"(set dataset_reader.random_negatives >= 1, or negatives 'in_batch')")
            else:
                items = [{"query": e["text_a"], "positive": e["text_b"], "source": e["source"]}
                         for e in pairs if e["positive"]]
        if self.negatives == "in_batch":
            items = list({(i["query"], i["positive"]): {"query": i["query"], "positive": i["positive"],
                                                        "source": i["source"]} for i in items}.values())
            if not items:
                raise DataError(f"{path}: no positive pairs (label {self.positive_label!r}) to train on")
        return items

    def _read_triples(self, path):
        items = []
        with self.open_data(path) as source:
            for line, row in read_rows(source, self.triple_fields, **self.options):
                problem = _row_problem(row, self.triple_fields, ("query", "positive", "negative"))
                if problem:
                    source.bad(line, problem)
                    continue
                items.append({key: row[key] for key in ("query", "positive", "negative")})
                items[-1]["source"] = f"{path}:{line}"
        if not items:
            raise DataError(f"{path}: no triples")
        return items

    def plan_model_args(self):
        return {"negatives": self.negatives}

    @property
    def batch_composition_matters(self):
        """In-batch negatives: a length-sorted batch would hold easy negatives
        (trainer.sampler is then no_duplicates unless set)."""
        return self.negatives == "in_batch"

    def sampling_classes(self, features):
        return None  # triples and in-batch positive pairs have no class

    def duplicate_keys(self, features):
        """In-batch negatives: a pair's query and positive (as encoded, which
        is what the collate compares); a batch mate sharing either would be a
        false negative."""
        if self.negatives != "in_batch":
            return None
        return [(tuple(f["query_input_ids"]), tuple(f["positive_input_ids"])) for f in features]

    def model_args(self, labels, train_examples):
        return {"negatives": self.negatives}

    def texts(self, examples):
        for example in examples:
            if "query" in example:  # a training item
                yield example["query"]
                yield example["positive"]
                if "negative" in example and self.negatives == "labelled":
                    yield example["negative"]
            else:
                yield example["text_a"]
                yield example["text_b"]

    def encode(self, examples, tokenizer, labels, max_seq_len, split):
        if split != "train":
            return super().encode(examples, tokenizer, labels, max_seq_len, split)
        ids = _encode_distinct(tokenizer, self.texts(examples), max_seq_len, split)
        features = []
        for item in examples:
            feature = {"query_input_ids": ids[item["query"]], "positive_input_ids": ids[item["positive"]]}
            if self.negatives == "labelled":
                feature["negative_input_ids"] = ids[item["negative"]]
            features.append(feature)
        return features

    def collate(self, features, pad_id):
        if self.negatives == "in_batch" and "positive_input_ids" in features[0]:
            kept = _distinct(features)
            if len(kept) < len(features):  # a safety net: trainer.sampler no_duplicates never lets this happen
                if not self.dropped_duplicates:
                    note("note: in-batch negatives: a pair whose query or positive repeats within its batch is "
                         "left out of that batch (trainer.sampler no_duplicates defers it to a later batch instead)")
                self.dropped_duplicates += len(features) - len(kept)
            features = kept
        return super().collate(features, pad_id)


def _distinct(features):
    """Keep the first feature of each query and of each positive, so that no
    batch mate is a duplicate of a pair's own text (a false negative)."""
    seen_query, seen_positive, kept = set(), set(), []
    for f in features:
        q, p = tuple(f["query_input_ids"]), tuple(f["positive_input_ids"])
        if q not in seen_query and p not in seen_positive:
            seen_query.add(q)
            seen_positive.add(p)
            kept.append(f)
    return kept


def _encode_distinct(tokenizer, texts, max_seq_len, split):
    """``{text: token ids}`` of each distinct text (texts repeat across pairs and triples)."""
    unique = list(dict.fromkeys(texts))
    encoded = encode_texts(tokenizer, unique, max_seq_len=max_seq_len, split=split, what="distinct texts")
    return dict(zip(unique, encoded["input_ids"]))


def _row_problem(row, fields, texts, label_required=False):
    """Why ``row`` cannot be read, else None. JSONL values: texts are strings;
    a label is a string or a number (``1`` reads as ``"1"``), null only where
    labels may be left out."""
    for name in texts:
        if not isinstance(row[name], str):
            return wrong_type(fields[name], row[name])
    label = row.get("label")
    if (label is None and label_required) or not isinstance(label, (str, int, float, type(None))):
        return wrong_type(fields["label"], label, "a string or a number")
    empty = next((name for name in texts if not row[name].strip()), None)
    return f"empty {empty}" if empty else None

