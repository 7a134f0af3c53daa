"""The sequence labeling (NER) reader: its keys, tag set and scheme, metrics and prediction rows.

Files are read by :mod:`tasks.sequence_labeling.formats`; sentences longer
than ``max_seq_len`` are cut into overlapping windows whose predictions are
merged back by :mod:`tasks.sequence_labeling.windows`.
"""
import os
from collections import Counter
from typing import Annotated, Literal, Optional

import numpy as np

from appzoo.params.keys import Key, check_args
from appzoo.task.reader import DatasetReader, label_counts, read_label_file, warn_label_variants
from appzoo.data.tabular import Column
from appzoo.errors import ConfigError, DataError
from appzoo.metrics.sequence_labeling import SCHEMES, entity_spans
from appzoo.reports.mistakes import entity_mistakes
from appzoo.task.serving import Field, Serving
from appzoo.utils.progress import note
from appzoo.registry import METRICS, READERS, did_you_mean
from tasks.sequence_labeling.formats import (
    DEFAULT_COLUMNS, FORMATS, examples_from_inputs, join_tokens, read_sentences, token_place,
)
from tasks.sequence_labeling.schemes import check_tag, detect_scheme, invalid_position, tag_order
from tasks.sequence_labeling.windows import merge_windows, split_entities, window_features


@READERS.register("sequence_labeling")
class SequenceLabelingReader(DatasetReader):
    """Sentences of tokens and their tags.

    * ``conll``: one token per line, columns split by ``delimiter`` (default:
      tab when the line has one, else any run of whitespace), the token in
      column ``token_column`` (default 0) and the tag in ``tag_column``
      (default 1; negative counts from the end); a blank line ends a sentence,
      ``-DOCSTART-`` lines are skipped.
    * ``line``: one sentence per line, ``tokens<TAB>tags``, each side split on
      spaces.
    * ``jsonl``: one object per line with a token list (field ``token_column``,
      default ``tokens``; a string is read as its characters) and a tag list
      (``tag_column``, default ``tags``).
    * ``spans``: one object per line with a text (field ``token_column``,
      default ``text``) and its entities as character spans (``tag_column``,
      default ``label``), either CLUENER's ``{"TYPE": {"mention": [[start,
      end]]}}`` (end inclusive; each mention is checked against the text) or
      a list of ``[start, end, "TYPE"]`` or ``{"start", "end", "label"}``
      (end exclusive, as doccano and Label Studio export them). The tokens
      are the characters of the text and the tags BIO; overlapping spans are
      an error.

    Predict files may leave the tags out.
    """

    default_metric = "micro_f1"
    long_inputs = "windows"  # a sentence longer than max_seq_len becomes overlapping windows
    label_audit = ("a tagger's labels are per token and its units are entities, while the search for mislabeled "
                   "examples judges one set of labels per example (docs/reports.md#label-issues says why cleanlab's "
                   "token classification is not wired in yet)")

    @check_args("dataset_reader")
    def __init__(self, format: Annotated[Literal[FORMATS], Key(
                     "conll: a token and its tag per line, a blank line between sentences; line: "
                     "tokens<TAB>tags per line; jsonl: token and tag lists; spans: a text and its entities' "
                     "character spans (CLUENER, doccano)")] = "conll",
                 token_column: Annotated[Column, Key("conll: column index of the token (null: 0); jsonl: "
                                                     "field name (null: tokens); spans: field of the text "
                                                     "(null: text)")] = None,
                 tag_column: Annotated[Column, Key("conll: column index of the tag (null: 1); jsonl: field "
                                                   "name (null: tags); spans: field of the spans (null: "
                                                   "label)")] = None,
                 delimiter: Annotated[Optional[str], Key("conll: column separator (null: tab or whitespace)",
                                                         nonempty=True)] = None,
                 scheme: Annotated[Literal[("auto", *SCHEMES)], Key(
                     "tagging scheme (auto: detected from the training tags)")] = "auto",
                 label_file: Annotated[Optional[str], Key("file with the tag set, one per line (null: the "
                                                          "tags seen in training)")] = None,
                 window_overlap: Annotated[int, Key("tokens shared by consecutive windows of a sentence longer "
                                                    "than max_seq_len", ge=0)] = 16,
                 invalid_gold: Annotated[Literal["warn", "error"], Key(
                     "a gold tag sequence the scheme forbids (I- after O) is noted or an error")] = "warn",
                 dev_from_train: Annotated[float, Key("share of train held out as dev when no dev file is "
                                                      "given (0: none)", ge=0, lt=1)] = 0.0,
                 split_seed: Annotated[int, Key("seed of the dev_from_train split", ge=0)] = 13, **kwargs):
        super().__init__(**kwargs)
        if format == "line" and (token_column is not None or tag_column is not None or delimiter is not None):
            key = "token_column" if token_column is not None else "tag_column" if tag_column is not None \
                else "delimiter"
            raise ConfigError(f"dataset_reader.{key}: not used with format 'line' "
                              f"(tokens<TAB>tags, each side split on spaces)")
        want = {"conll": int, "jsonl": str, "spans": str}.get(format)
        for i, (key, value) in enumerate((("token_column", token_column), ("tag_column", tag_column))):
            if want and value is not None and (type(value) is not want):
                kind = "a column index" if want is int else "a field name"
                raise ConfigError(f"dataset_reader.{key}: format {format!r} needs {kind}, got {value!r} (null "
                                  f"or left out: {format}'s default {DEFAULT_COLUMNS[format][i]!r})")
        if delimiter is not None and format != "conll":
            raise ConfigError(f"dataset_reader.delimiter: only used with format 'conll', got format {format!r}")
        if format == "spans" and scheme not in ("auto", "BIO"):
            raise ConfigError(f"dataset_reader.scheme: format 'spans' writes BIO tags, got {scheme!r} "
                              f"(use 'auto' or 'BIO')")
        if format == "conll" and token_column is not None and token_column == tag_column:
            raise ConfigError(f"dataset_reader.tag_column: the same column as token_column ({token_column})")
        self.format = format
        default_columns = DEFAULT_COLUMNS[format]
        self.token_column = default_columns[0] if token_column is None else token_column
        self.tag_column = default_columns[1] if tag_column is None else tag_column
        self.delimiter = delimiter
        self.configured_scheme = scheme
        self.scheme = "BIO" if format == "spans" else None if scheme == "auto" else scheme
        self.label_file = label_file
        self.window_overlap = window_overlap
        self.invalid_gold = invalid_gold
        self.dev_from_train = dev_from_train
        self.split_seed = split_seed
        self._train_path = None

    # ---- reading ---------------------------------------------------------
    UNIT = "sentences"

    def read_file(self, path, split):
        with self.open_data(path) as source:
            return list(read_sentences(source, path, split, self.format, self.token_column, self.tag_column,
                                       self.delimiter))

    def read(self, path, split):
        return self._carve_dev(super().read(path, split), path, split)

    def _carve_dev(self, examples, path, split):
        """With ``dev_from_train``, train and dev read one file: a seeded
        random share of its sentences is dev, the rest train."""
        if not self.dev_from_train or split not in ("train", "dev"):
            return examples
        if split == "train":
            self._train_path = path
        elif self._train_path is not None and self._train_path != path:
            raise ConfigError(f"dataset_reader.dev_from_train: dev is carved out of the training file, so "
                              f"dataset_reader.dev must name the same file as dataset_reader.train "
                              f"({self._train_path!r}), got {path!r}")
        size = max(1, round(len(examples) * self.dev_from_train))
        held = set(np.random.RandomState(self.split_seed).permutation(len(examples))[:size].tolist())
        return [e for i, e in enumerate(examples) if (i in held) == (split == "dev")]

    def read_inputs(self, inputs):
        return examples_from_inputs(inputs, self.format)

    def check_split(self, examples, split, path, metric):
        """An entity metric to choose the best model on needs entities in dev."""
        if split != "dev" or not metric.endswith(("_f1", "_precision", "_recall")):
            return
        if all(t == "O" for e in examples for t in e["tags"] or ()):
            raise DataError(f"{path}: the dev set has no entities (every tag is 'O'), so its {metric} (the "
                            f"metric the best model is chosen on) is 0 at every evaluation; add dev sentences "
                            f"with entities, or set trainer.metric_for_best to loss")

    # ---- labels and scheme ----------------------------------------------
    def build_labels(self, train_examples):
        tags = [t for e in train_examples for t in e["tags"]]
        if all(t == "O" for t in tags):
            raise DataError(f"{train_examples[0]['path']}: every training tag is 'O', so there are no entities "
                            f"to learn (check dataset_reader.tag_column and the file)")
        if self.label_file:
            labels = read_label_file(self.label_file, what="tag", encoding=self.encoding)
            self._resolve_scheme(labels, train_examples)
            self.check_labels(train_examples, labels, "the training file")
        else:
            labels = sorted(set(tags), key=tag_order)
            self._resolve_scheme(labels, train_examples)
            self._check_tags(train_examples, labels, known=None)
            self._report_invalid(train_examples, "train")
        warn_label_variants(dict(zip(labels, label_counts(tags, labels))), what="tag")
        return labels

    def _resolve_scheme(self, labels, examples=None):
        if self.scheme is None:
            gold = [e["tags"] for e in examples or () if e["tags"] is not None]
            self.scheme = detect_scheme(gold or [[t] for t in labels])

    def _check_tags(self, examples, labels, known):
        """Every tag fits the scheme and, given ``known``, is in the label set."""
        for example in examples:
            for i, tag in enumerate(example["tags"] or ()):
                if known is not None and tag not in known:
                    raise DataError(f"{token_place(example, i)}: tag {tag!r} is not in the label set"
                                    f"{did_you_mean(tag, labels)} (labels: {', '.join(labels)})")
                problem = check_tag(tag, self.scheme)
                if problem:
                    hint = "" if self.configured_scheme != "auto" else " (detected; set dataset_reader.scheme)"
                    raise DataError(f"{token_place(example, i)}: {problem}{hint}")

    def check_labels(self, examples, labels, path):
        self._resolve_scheme(labels, examples)
        self._check_tags(examples, labels, known=set(labels))
        self._report_invalid(examples, path)

    def _report_invalid(self, examples, name):
        """Gold sequences that break the scheme are reported, never repaired:
        seqeval's strict mode does not count their broken chunks as entities,
        and the CRF leaves them out of its loss."""
        bad = []
        for example in examples:
            if example["tags"] is not None:
                position = invalid_position(example["tags"], self.scheme)
                if position is not None:
                    tags = example["tags"]
                    previous = tags[position - 1] if position else "(start)"
                    if position < len(tags):
                        bad.append(f"{token_place(example, position)}: {previous} -> {tags[position]}")
                    elif example["conll"]:  # an entity left open: the fault is the blank line that ends it
                        bad.append(f"{token_place(example, position)}: {previous} -> (end)")
                    else:
                        bad.append(f"{token_place(example, position - 1)}: {previous} -> (end)")
        if not bad:
            return
        message = (f"{len(bad)} gold sentence(s) in {name} break scheme {self.scheme}: "
                   + "; ".join(bad[:3]) + (" ..." if len(bad) > 3 else ""))
        if self.invalid_gold == "error":
            raise DataError(message)
        note(f"note: {message} (kept as they are; dataset_reader.invalid_gold=error refuses them)")

    # ---- planning ----------------------------------------------------------
    def check_plan(self, data):
        budget = data.max_seq_len - 2  # [CLS] and [SEP]
        if self.window_overlap >= budget:
            raise ConfigError(f"dataset_reader.window_overlap: must be < max_seq_len - 2 = {budget} "
                              f"(dataset_reader.max_seq_len is {data.max_seq_len}), got {self.window_overlap}")
        if self.label_file is not None and not os.path.isfile(self.label_file):
            raise ConfigError(f"dataset_reader.label_file: no such file {self.label_file!r}")
        if self.dev_from_train and data.train and data.dev != data.train:
            raise ConfigError(f"dataset_reader.dev: dev_from_train={self.dev_from_train} carves dev out of the "
                              f"training file, so dev must name the same file as train ({data.train!r}), "
                              f"got {data.dev!r}")

    def metric_names(self):
        """What :func:`sequence_labeling_metrics` returns as scalars, and the dev loss."""
        averages = [f"{a}_{m}" for a in ("micro", "macro", "weighted") for m in ("precision", "recall", "f1")]
        return [*averages, "token_accuracy", "loss"]

    def model_args(self, labels, train_examples):
        self._resolve_scheme(labels, train_examples)
        counts = label_counts((t for e in train_examples for t in e["tags"]), labels) if train_examples else None
        return {"num_labels": len(labels), "class_counts": counts, "tag_names": list(labels),
                "scheme": self.scheme}

    def state(self):
        return {"scheme": self.scheme}

    def load_state(self, state):
        saved = state.get("scheme")
        if saved and self.configured_scheme == "auto":
            self.scheme = saved

    def audit_classes(self, examples, labels):
        """Entity types, counted in entities: ``O`` is no class (its share of
        the tokens is in :meth:`audit`)."""
        counts = Counter(kind for e in examples if e["tags"] is not None
                         for kind, _, _ in entity_spans(e["tags"], self.scheme))
        return counts, list(dict.fromkeys(t.split("-", 1)[1] for t in labels if "-" in t))

    def audit(self, splits, features, batch_size):
        """The share of tokens tagged O, sentences that windows cut, and the
        entities no single window holds whole."""
        out, warnings = {}, []
        for split in ("train", "dev", "test"):
            examples, feats = splits.get(split), features.get(split)
            if not examples or not feats or examples[0]["tags"] is None:
                continue
            tags = [t for e in examples for t in e["tags"]]
            out[f"{split}: tokens tagged O"] = f"{sum(t == 'O' for t in tags) / len(tags):.1%}"
            cut, broken = split_entities(examples, feats, self.scheme)
            out[f"{split}: sentences cut into windows"] = len(cut)
            out[f"{split}: entities that no window holds whole"] = len(broken)
            if broken:
                n, kind, start, end = broken[0]
                warnings.append(f"{split}: {len(broken)} entit(y/ies) span a window cut and are split between "
                                f"windows, e.g. {kind} at tokens {start}-{end} of {token_place(examples[n], start)} "
                                f"(raise max_seq_len or window_overlap)")
        out["warnings"] = warnings
        return out

    def loss_targets(self, feature):
        return len(feature["positions"])

    def sampling_classes(self, features):
        """A window's rarest tag by training frequency (ties: the first in the
        tag set): a window of "O" alone, the most frequent tag, is then a
        class of its own."""
        counts = Counter(t for f in features for t in f["labels"])
        return [min(set(f["labels"]), key=lambda t: (counts[t], t)) if f["labels"] else -1 for f in features]

    def texts(self, examples):
        return (" ".join(example["tokens"]) for example in examples)

    # ---- features --------------------------------------------------------
    def encode(self, examples, tokenizer, labels, max_seq_len, split):
        budget = max_seq_len - 2  # [CLS] and [SEP]
        if self.window_overlap >= budget:
            raise ConfigError(f"dataset_reader.window_overlap: must be < max_seq_len - 2 = {budget}, "
                              f"got {self.window_overlap}")
        return window_features(examples, tokenizer, labels, max_seq_len, self.window_overlap, split)

    def example_rows(self, examples, features, rows):
        """Each sentence's per-word rows (``[words, C]`` logits), its windows' rows merged as predictions are."""
        return merge_windows(examples, features, rows)

    def with_prediction(self, example, row, labels):
        """Each word tagged by the argmax of its row (a CRF teacher's emissions: its Viterbi path may differ)."""
        return {**example, "tags": [labels[int(j)] for j in np.asarray(row).argmax(-1)]}

    def example_of(self, index, feature):
        return feature["example"]

    def feature_rows(self, feature, example_row):
        """The rows of the window's words."""
        start, end = feature["span"]
        return example_row[start:end]

    # ---- output side -----------------------------------------------------
    def decode(self, examples, features, outputs, labels):
        """Merge window predictions: each token takes the tag of the window in
        which it is farthest from a cut edge."""
        return [{"tags": [labels[i] for i in ids]} for ids in merge_windows(examples, features, outputs["tags"])]

    def evaluate(self, examples, predictions, labels):
        gold = [e["tags"] for e in examples]
        pred = [p["tags"] for p in predictions]
        return METRICS.get("entities", "metric")(gold, pred, self.scheme)

    def serving(self, labels):
        """A text (split into tokens here) or a list of tokens in; a tag per token and the entities out."""
        return Serving("text_or_tokens", (Field("tags", "tags"), Field("entities", "entities")),
                       "entities (sequence labeling)")

    GOLD = "tags"

    def prediction_row(self, example, p, labels):
        join = "".join if self.format == "spans" else join_tokens  # spans: the tokens are the text's characters
        tokens = example["tokens"]
        entities = [{"type": kind, "start": start, "end": end, "text": join(tokens[start:end])}
                    for kind, start, end in entity_spans(p["tags"], self.scheme)]
        row = {"text": "".join(tokens)} if self.format == "spans" else {}  # entity offsets are characters
        if "offsets" in example:  # a text given to the Predictor or the server: also character spans of it
            row["text"], offsets = example["text"], example["offsets"]
            for entity in entities:
                entity["char_start"], entity["char_end"] = offsets[entity["start"]][0], offsets[entity["end"] - 1][1]
                entity["text"] = example["text"][entity["char_start"]:entity["char_end"]]
        row.update({"tokens": tokens, "tags": p["tags"], "entities": entities})
        return row

    def mistakes(self, examples, predictions, labels):
        """Entities missed, spurious, of the wrong type or with wrong boundaries, in their sentences."""
        join = "".join if self.format == "spans" else join_tokens
        return entity_mistakes([e["tokens"] for e in examples],
                               [entity_spans(e["tags"], self.scheme) for e in examples],
                               [entity_spans(p["tags"], self.scheme) for p in predictions], join)

