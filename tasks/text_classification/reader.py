"""Reader for text classification: TSV / CSV / JSONL, multi-class or multi-label."""
import os
from typing import Annotated, Literal, Optional, Union

import numpy as np

from appzoo.params.keys import Key, check_args
from appzoo.data.encoding import encode_texts
from appzoo.task.reader import DatasetReader, label_counts, read_label_file, warn_label_variants
from appzoo.data.tabular import (
    DELIMITER_HELP, FORMAT_HELP, HEADER_HELP, QUOTING_HELP, Column, clip, columns, read_rows, table_options,
    wrong_type,
)
from appzoo.errors import ConfigError, DataError
from appzoo.metrics.calibration import calibration
from appzoo.metrics.curves import threshold_curves
from appzoo.task.decisions import Decisions, LogitAdjust, PerLabelThresholds, Temperature
from appzoo.task.serving import Field, Serving
from appzoo.reports.mistakes import label_mistakes, multilabel_mistakes
from appzoo.utils.progress import note
from appzoo.registry import METRICS, READERS, did_you_mean
from tasks.text_classification import probe


#: ``dataset_reader.calibrate``: how the probabilities of a single-label model are calibrated on dev.
CALIBRATIONS = ("none", "temperature")
#: what metrics.json also gives, with per_label_thresholds, at the global threshold: ``<name>_global_threshold``
GLOBAL_THRESHOLD = ("macro_f1", "micro_f1")
#: what metrics.json also gives without the adjustment, ``<name>_before_logit_adjust``
BEFORE_ADJUST = ("accuracy", "macro_f1", "micro_f1", "weighted_f1")


@READERS.register("text_classification")
class ClassificationReader(DatasetReader):
    """One text and its label(s) per row.

    Columns are indices (0-based) or header names for TSV/CSV, field names for
    JSONL; by default column 0 / field ``text`` holds the text and column 1 /
    field ``label`` the label. With ``multi_label`` the label field holds
    several labels split by ``label_separator`` (or a JSON list).
    """

    default_metric = "macro_f1"
    MODEL_KEYS = ("multi_label",)  # a softmax over the labels, or a sigmoid per label

    @check_args("dataset_reader")
    def __init__(self, format: Annotated[Literal["tsv", "csv", "jsonl"], Key(FORMAT_HELP)] = "tsv",
                 text_column: Annotated[Column, Key("column index or header name (tsv/csv), field name (jsonl) "
                                                    "of the text (null: 0 / text)")] = None,
                 label_column: Annotated[Column, Key("column or field of the label (null: 1 / label)")] = None,
                 delimiter: Annotated[Optional[str], Key(DELIMITER_HELP)] = None,
                 header: Annotated[int, Key(HEADER_HELP, ge=0)] = 0,
                 quoting: Annotated[Optional[bool], Key(QUOTING_HELP)] = None,
                 label_file: Annotated[Optional[str], Key("file with the label set, one per line (null: the "
                                                          "labels seen in training)")] = None,
                 multi_label: Annotated[bool, Key("each row has a set of labels, each decoded by its sigmoid "
                                                  "against its threshold (per_label_thresholds)")] = False,
                 label_separator: Annotated[str, Key("splits the label field into labels (multi_label; a JSON "
                                                     "list in jsonl needs none)")] = ",",
                 threshold: Annotated[float, Key("a label is predicted when its probability is at least this "
                                                 "(multi_label): every label's, or that of the labels "
                                                 "per_label_thresholds does not tune", gt=0, lt=1)] = 0.5,
                 per_label_thresholds: Annotated[bool, Key(
                     "multi_label: at each dev evaluation, tune each label's threshold for its best dev F1 "
                     "(saved with the model in best/, used by eval, predict and appzoo.Predictor); false: "
                     "threshold for every label")] = True,
                 min_positives_to_tune: Annotated[int, Key(
                     "per_label_thresholds: a label with fewer dev positives than this keeps threshold",
                     ge=1)] = 5,
                 calibrate: Annotated[Literal[CALIBRATIONS], Key(
                     "single-label: temperature fits one temperature on dev at each dev evaluation for the "
                     "smallest dev log-loss, so that the probabilities match how often they are right (saved "
                     "with the model in best/, used by eval, predict and appzoo.Predictor; --do eval of a "
                     "model trained without it fits it on dev first; the predicted label never changes); none "
                     "keeps the softmax as trained")] = "none",
                 logit_adjust: Annotated[Union[float, Literal["tune"], None], Key(
                     "single-label, post-hoc logit adjustment (Menon et al. 2021): decode by argmax of logits - "
                     "tau * log(prior), the priors from the training labels; a number is tau (1 aims at the "
                     "balanced error), tune picks tau in 0, 0.1, ..., 2 on dev for trainer.metric_for_best at "
                     "each dev evaluation (saved with the model in best/, used by eval, predict and "
                     "appzoo.Predictor; metrics.json also gives the metrics without it); --do eval of a model "
                     "trained without it fits it on dev first, the priors from the training counts saved with "
                     "the model; null: off", ge=0)] = None,
                 **kwargs):
        super().__init__(**kwargs)
        self.options = table_options(format, delimiter, header, quoting)
        self.fields = columns(format, text=(text_column, 0), label=(label_column, 1))
        self.label_file = label_file
        self.multi_label = multi_label
        self.label_separator = label_separator
        if calibrate != "none" and multi_label:
            raise ConfigError("dataset_reader.calibrate: 'temperature' scales a softmax over the labels; "
                              "multi_label decodes each label by its own sigmoid and threshold (use none)")
        if logit_adjust is not None and multi_label:
            raise ConfigError("dataset_reader.logit_adjust: adjusts a softmax over the labels; multi_label decodes "
                              "each label by its own sigmoid and threshold (per_label_thresholds tunes those)")
        if multi_label:
            self.decisions = Decisions(PerLabelThresholds(threshold, per_label_thresholds, min_positives_to_tune))
        else:  # a model used or trained further with calibrate none or without logit_adjust decodes as trained
            self.decisions = Decisions(Temperature() if calibrate == "temperature" else None,
                                       LogitAdjust(logit_adjust) if logit_adjust is not None else None)

    # ---- data side -------------------------------------------------------
    INPUT = "a non-empty text (a string)"

    def read_file(self, path, split):
        examples = []
        with self.open_data(path) as source:
            for line, row in read_rows(source, self.fields, optional=("label",) if split == "predict" else (),
                                       **self.options):
                problem = self._row_problem(row, split)
                if problem:
                    source.bad(line, problem)
                    continue
                examples.append({"text": row["text"], "label": self._parse_label(row["label"]),
                                 "source": f"{path}:{line}"})
        return examples

    def input_fields(self, value):
        return {"text": value} if isinstance(value, str) and value.strip() else None

    def _row_problem(self, row, split):
        """Why a row cannot be read, else None. JSONL values: the text is a
        string; a label a string or a number (a list of them with
        ``multi_label``), null only where labels may be left out."""
        text, label = row["text"], row["label"]
        if not isinstance(text, str):
            return wrong_type(self.fields["text"], text)
        if label is None:
            fits = split == "predict"
        elif self.multi_label and isinstance(label, list):
            fits = all(_scalar(v) for v in label)
        else:
            fits = _scalar(label)
        if not fits:
            expected = "a string or a list of strings" if self.multi_label else "a string or a number"
            return wrong_type(self.fields["label"], label, expected)
        if not text.strip():
            return "empty text"
        if not self.multi_label and label is not None and not str(label).strip():
            return "empty label"
        return None

    def _parse_label(self, value):
        if value is None:
            return None
        if self.multi_label:
            parts = value if isinstance(value, list) else str(value).split(self.label_separator)
            labels = sorted({str(p).strip() for p in parts if str(p).strip()})
            return labels
        return str(value).strip()

    def _values(self, examples):
        """Every label of every example (several per example with ``multi_label``)."""
        for example in examples:
            yield from (example["label"] or []) if self.multi_label else [example["label"]]

    def build_labels(self, train_examples):
        if self.label_file:
            labels = read_label_file(self.label_file, encoding=self.encoding)
            self.check_labels(train_examples, labels, "the training file")
        else:
            labels = sorted(set(self._values(train_examples)))
        counts = dict(zip(labels, label_counts(self._values(train_examples), labels)))
        if not self.multi_label and len(labels) < 2:
            where = (f"{self.label_file}: lists one label" if self.label_file else
                     f"{_file_of(train_examples[0])}: every training row has one label")
            raise DataError(f"{where}, {labels[0]!r}; a single-label classifier needs at least 2 (list every "
                            f"label in dataset_reader.label_file when the training data lacks some)")
        warn_label_variants(counts)
        self._warn_header_row(train_examples[0], counts)
        return labels

    def _warn_header_row(self, first, counts):
        """A column-name row read as data (``header`` left at 0) becomes a class of one example."""
        if self.options["format"] == "jsonl" or self.options["header"] or not first["source"].endswith(":1"):
            return
        names = [v for v in self._values([first]) if counts.get(v) == 1]
        if names and (first["text"].strip().casefold() in HEADER_NAMES
                      or any(v.casefold() in HEADER_NAMES for v in names)):
            note(f"warning: {first['source']}: the label {names[0]!r} occurs only on this line, which looks like "
                 f"a header row (text {clip(first['text'])!r}); set dataset_reader.header=1 to skip it")

    def check_labels(self, examples, labels, path):
        known = set(labels)
        for example in examples:
            for value in self._values([example]):
                if value is not None and value not in known:
                    raise DataError(
                        f"{example['source']}: label {value!r} is not in the label set"
                        f"{did_you_mean(value, labels)} (labels: {', '.join(labels)})"
                    )

    # ---- planning ----------------------------------------------------------
    def check_plan(self, data):
        if self.label_file is not None and not os.path.isfile(self.label_file):
            raise ConfigError(f"dataset_reader.label_file: no such file {self.label_file!r}")

    def plan_model_args(self):
        return {"multi_label": self.multi_label}

    def sampling_classes(self, features):
        """The label; multi-label: the example's rarest label by training
        frequency (ties: the first in the label set), -1 for no label."""
        if not self.multi_label:
            return [f["labels"] for f in features]
        counts = np.sum([f["labels"] for f in features], axis=0) if features else None
        classes = []
        for f in features:
            present = np.flatnonzero(f["labels"])
            classes.append(int(present[np.argmin(counts[present])]) if len(present) else -1)
        return classes

    def metric_names(self):
        """What :func:`classification_metrics` / :func:`multilabel_metrics` return as scalars, and the dev loss."""
        averages = [f"{a}_{m}" for a in ("macro", "micro", "weighted") for m in ("precision", "recall", "f1")]
        if self.multi_label:
            beside = [f"{name}_global_threshold" for name in GLOBAL_THRESHOLD] if self.decisions.fits else []
            return ["subset_accuracy", *averages, "loss", *beside]
        calibrated = ["ece_before_scaling"] if self.decisions.get(Temperature) else []
        adjusted = ([f"{name}_before_logit_adjust" for name in BEFORE_ADJUST] + ["logit_adjust_tau"]
                    if self.decisions.get(LogitAdjust) else [])
        return ["accuracy", *averages, "loss", "ece", *calibrated, *adjusted]

    def model_args(self, labels, train_examples):
        """Also keeps the training label shares as the priors of ``logit_adjust`` (a label with no training
        example counts as one, so its log-prior stays finite)."""
        counts = label_counts(self._values(train_examples), labels) if train_examples else None
        adjusting = self.decisions.get(LogitAdjust)
        if counts is not None and adjusting:
            adjusting.priors = None
            adjusting.priors_from_counts(counts)
        return {"num_labels": len(labels), "class_counts": counts, "multi_label": self.multi_label,
                "train_size": len(train_examples) if train_examples else None}

    def saved_model_args(self, args):
        """A saved model's training label counts are the priors of a ``logit_adjust`` it was not trained with."""
        adjusting = self.decisions.get(LogitAdjust)
        if adjusting is not None:
            adjusting.priors_from_counts(args.get("class_counts"))

    def texts(self, examples):
        return (example["text"] for example in examples)

    def encode(self, examples, tokenizer, labels, max_seq_len, split):
        index = {name: i for i, name in enumerate(labels)}
        encoded = encode_texts(tokenizer, [e["text"] for e in examples], max_seq_len=max_seq_len, split=split)
        features = []
        for example, ids, types in zip(examples, encoded["input_ids"], encoded["token_type_ids"]):
            feature = {"input_ids": ids, "token_type_ids": types}
            if example["label"] is not None:
                if self.multi_label:
                    feature["labels"] = np.zeros(len(labels), dtype="float32")
                    feature["labels"][[index[v] for v in example["label"]]] = 1.0
                else:
                    feature["labels"] = index[example["label"]]
            features.append(feature)
        return features

    # ---- the floor ---------------------------------------------------------
    def floor(self, splits, embed):
        """The frozen-encoder probe (:mod:`tasks.text_classification.probe`): a logistic regression on the
        untrained encoder's text vectors, trained on (a sample of) train, scored on (a sample of) dev in
        ``trainer.metric_for_best`` when that is accuracy or macro_f1, else in accuracy. None when dev is
        missing or train has one class, and for ``multi_label``: one probe per label with its own threshold
        would be a second model to tune, and its subset accuracy or F1 a floor of those choices as much as
        of the encoder."""
        if self.multi_label:
            return None
        train, dev = ([(e["text"], e["label"]) for e in splits.get(split, ()) if e.get("label") is not None]
                      for split in ("train", "dev"))
        labels = (read_label_file(self.label_file, encoding=self.encoding) if self.label_file
                  else sorted({label for _, label in train}))  # what build_labels gives, without its warnings
        metric = self.tune_metric if self.tune_metric in probe.METRICS_SCORED else "accuracy"
        return probe.probe_floor(train, dev, labels, embed, metric)

    # ---- output side -----------------------------------------------------
    def decode(self, examples, features, outputs, labels):
        probs = np.stack(outputs["probs"])
        if self.multi_label:
            chosen = self.decisions.apply(probs, labels)
            return [{"probs": p, "labels": [labels[j] for j in np.flatnonzero(c)]} for p, c in zip(probs, chosen)]
        return [{"probs": p, "label": labels[int(np.argmax(p))]} for p in self.decisions.apply(probs, labels)]

    def evaluate(self, examples, predictions, labels):
        index = {name: i for i, name in enumerate(labels)}
        if self.multi_label:
            gold = np.zeros((len(examples), len(labels)), dtype=int)
            pred = np.zeros_like(gold)
            for i, (e, p) in enumerate(zip(examples, predictions)):
                gold[i, [index[v] for v in e["label"]]] = 1
                pred[i, [index[v] for v in p["labels"]]] = 1
            metrics = METRICS.get("multilabel_classification", "metric")(gold, pred, labels)
            probs = np.stack([p["probs"] for p in predictions]) if predictions else None
            cutoffs = self.decisions.get(PerLabelThresholds)
            if cutoffs.tune and probs is not None:  # beside: every label at the global threshold
                at_global = (probs >= cutoffs.threshold).astype(int)
                same = METRICS.get("multilabel_classification", "metric")(gold, at_global, labels)
                metrics.update({f"{name}_global_threshold": same[name] for name in GLOBAL_THRESHOLD})
            curves = {} if probs is None else {
                name: threshold_curves(gold[:, j], probs[:, j], t)
                for j, (name, t) in enumerate(zip(labels, self.thresholds(labels)))}
            return {**metrics, "curves": {k: v for k, v in curves.items() if v is not None}}
        gold = [index[e["label"]] for e in examples]
        pred = [index[p["label"]] for p in predictions]
        metrics = METRICS.get("classification", "metric")(gold, pred, labels)
        adjusting = self.decisions.get(LogitAdjust)
        if adjusting and predictions:  # temperature scaling kept
            unadjusted = adjusting.undo(np.stack([p["probs"] for p in predictions]))
            before = METRICS.get("classification", "metric")(gold, list(unadjusted.argmax(axis=1)), labels)
            metrics.update({f"{name}_before_logit_adjust": before[name] for name in BEFORE_ADJUST},
                           logit_adjust_tau=adjusting.tau)
        return {**metrics, **self._calibration(predictions, gold)}

    def _calibration(self, predictions, gold):
        """``ece`` and the reliability bins (``calibration``) of the probabilities
        predicted, and with a fitted temperature the ECE before scaling."""
        if not predictions:
            return {}
        probs = np.stack([p["probs"] for p in predictions])
        correct = probs.argmax(axis=1) == np.asarray(gold)
        table = calibration(probs.max(axis=1), correct)
        scaling = self.decisions.get(Temperature)
        temperature = scaling.temperature if scaling else 1.0
        out = {"ece": table["ece"], "calibration": {**table, "temperature": temperature}}
        if temperature != 1.0:
            unscaled = scaling.undo(probs)
            out["ece_before_scaling"] = calibration(unscaled.max(axis=1), correct)["ece"]
        return out

    # ---- decision rules (appzoo.task.decisions) ------------------------------
    def thresholds(self, labels):
        """Multi-label: the decision threshold of each of ``labels`` (:class:`PerLabelThresholds`)."""
        return self.decisions.get(PerLabelThresholds).thresholds(labels)

    def fit(self, examples, predictions, labels):
        """Fit the rules of :attr:`decisions` on these (dev) predictions, in
        their order (temperature, then logit adjustment; multi-label: the
        per-label thresholds), and decode the predictions again with them."""
        if not examples or not self.decisions.fits:
            return self.state()
        probs = np.stack([p["probs"] for p in predictions])
        index = {name: j for j, name in enumerate(labels)}
        if self.multi_label:
            gold = np.zeros(probs.shape, dtype=int)
            for i, example in enumerate(examples):
                gold[i, [index[v] for v in example["label"]]] = 1
            for p, row in zip(predictions, self.decisions.fit(probs, gold, labels, self.tune_metric)):
                p["labels"] = [labels[j] for j in np.flatnonzero(row)]
            return self.state()
        gold = [index[e["label"]] for e in examples]
        adjusting = self.decisions.get(LogitAdjust)
        relabel = adjusting is not None and adjusting.fits  # a temperature keeps the argmax
        for p, row in zip(predictions, self.decisions.fit(probs, gold, labels, self.tune_metric)):
            p["probs"] = row
            if relabel:
                p["label"] = labels[int(np.argmax(row))]
        return self.state()

    def serving(self, labels):
        """A text in; its label (multi-label: its labels, each given at or above its own threshold, which
        the list of models shows) and every label's probability out."""
        if self.multi_label:
            thresholds = {name: round(float(t), 6) for name, t in zip(labels, self.thresholds(labels))}
            return Serving("text", (Field("labels", "labels"), Field("probs", "probs")), "multi-label classification",
                           {"thresholds": thresholds})
        return Serving("text", (Field("label", "label"), Field("probs", "probs")), "classification")

    def prediction_row(self, example, p, labels):
        row = {"text": example["text"]}
        row.update({"labels": p["labels"]} if self.multi_label else {"label": p["label"]})
        row["probs"] = {name: round(float(v), 6) for name, v in zip(labels, p["probs"])}
        return row

    def mistakes(self, examples, predictions, labels):
        """Single-label: each misclassified text, its confidence the
        probability of the predicted class (beside it the gold class's);
        multi-label: labels missed and labels given wrongly."""
        texts = [e["text"] for e in examples]
        if self.multi_label:
            return multilabel_mistakes(texts, [e["label"] for e in examples], [p["labels"] for p in predictions],
                                       [p["probs"] for p in predictions], labels)
        index = {name: i for i, name in enumerate(labels)}
        return label_mistakes(texts, [e["label"] for e in examples], [p["label"] for p in predictions],
                              [float(np.max(p["probs"])) for p in predictions],
                              [f"p(gold) {float(p['probs'][index[e['label']]]):.3f}"
                               for e, p in zip(examples, predictions)])


#: column names a header row usually has, for :meth:`ClassificationReader._warn_header_row`
HEADER_NAMES = {"label", "labels", "class", "category", "categories", "target", "tag", "tags", "y", "sentiment",
                "intent", "text", "texts", "sentence", "content", "query", "review", "title", "document", "x"}


def _file_of(example):
    """The file of an example's ``source`` (``path:line``)."""
    return example["source"].rsplit(":", 1)[0]


def _scalar(value):
    return isinstance(value, (str, int, float))  # bool is an int: true reads as "True", as it always has
