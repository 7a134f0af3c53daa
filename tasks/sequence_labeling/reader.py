"""Reader for sequence labeling (NER): CoNLL columns, the appzoo line format, JSONL.

Every input token gets exactly one predicted tag: tokens are tokenised one
by one (a token the tokenizer drops, such as a space, becomes ``[UNK]``),
the first piece of each token carries its tag, and a sentence longer than
``max_seq_len`` is cut into overlapping windows whose predictions are merged
back, each token taking the tag of the window where it has the most context.
"""
import os
from collections import Counter
from typing import Annotated, Literal, Optional

import numpy as np

from appzoo.config import Key, check_args
from appzoo.data.encoding import encode_texts
from appzoo.data.reader import DatasetReader, label_counts, read_label_file, warn_label_variants
from appzoo.data.tabular import Column, clip, jsonl_rows
from appzoo.errors import ConfigError, DataError
from appzoo.metrics.sequence_labeling import entity_spans
from appzoo.progress import note, progress
from appzoo.registry import METRICS, READERS, did_you_mean
from tasks.sequence_labeling.schemes import check_tag, detect_scheme, invalid_position, tag_order


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

    @check_args("dataset_reader")
    def __init__(self, format: Annotated[Literal["conll", "line", "jsonl", "spans"], Key(
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
                 scheme: Annotated[Literal["auto", "BIO", "IOB1", "BIOES", "BMES"], Key(
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
        for key, value in (("token_column", token_column), ("tag_column", tag_column)):
            if want and value is not None and (type(value) is not want):
                kind = "a column index" if want is int else "a field name"
                raise ConfigError(f"dataset_reader.{key}: format {format!r} needs {kind}, got {value!r}")
        if delimiter is not None and format != "conll":
            raise ConfigError(f"dataset_reader.delimiter: only used with format 'conll', got format {format!r}")
        if format == "spans" and scheme not in ("auto", "BIO"):
            raise ConfigError(f"dataset_reader.scheme: format 'spans' writes BIO tags, got {scheme!r} "
                              f"(use 'auto' or 'BIO')")
        if format == "conll" and token_column is not None and token_column == tag_column:
            raise ConfigError(f"dataset_reader.tag_column: the same column as token_column ({token_column})")
        self.format = format
        default_columns = {"conll": (0, 1), "jsonl": ("tokens", "tags"), "spans": ("text", "label"),
                           "line": (None, None)}[format]
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
    def read(self, path, split):
        with self.open_data(path) as source:
            reader = {"conll": self._read_conll, "line": self._read_line, "jsonl": self._read_jsonl,
                      "spans": self._read_spans}[self.format]
            examples = list(reader(source, path, split))
        if not examples and split != "predict":
            raise DataError(f"{path}: no sentences")
        return self._carve_dev(examples, path, split)

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

    def _columns(self, line):
        if self.delimiter is not None:
            return line.split(self.delimiter)
        return line.split("\t") if "\t" in line else line.split()

    def _read_conll(self, source, path, split):
        # A sentence that lost a line (skipped with on_bad_line "skip") is left
        # out whole: a missing token would shift its entities and line numbers.
        tokens, tags, first, last, broken = [], [], None, 0, False
        for number, raw in source:
            broken, last = broken or number != last + 1, number
            line = raw.rstrip("\r\n")
            if not line.strip() or line.startswith("-DOCSTART-"):
                if tokens and not broken:
                    yield self._example(tokens, tags, path, first, split, conll=True)
                tokens, tags, first, broken = [], [], None, False
                continue
            columns = self._columns(line)
            try:
                token = columns[self.token_column]
            except IndexError:
                source.bad(number, f"no token column {self.token_column} "
                                   f"(the line has {len(columns)} column(s): {line!r})")
                broken = True
                continue
            try:
                tag = columns[self.tag_column].strip()
            except IndexError:
                if split != "predict":
                    source.bad(number, f"no tag column {self.tag_column} "
                                       f"(the line has {len(columns)} column(s): {line!r})")
                    broken = True
                    continue
                tag = None
            if not tag and tag is not None:
                source.bad(number, f"empty tag in column {self.tag_column}: {line!r}")
                broken = True
                continue
            if first is None:
                first = number
            tokens.append(token)
            tags.append(tag)
        if tokens and not broken:  # the last sentence may lack a trailing blank line
            yield self._example(tokens, tags, path, first, split, conll=True)

    def _read_line(self, source, path, split):
        blank = None
        for number, raw in source:
            line = raw.rstrip("\r\n")
            if not line.strip():
                blank = blank or number
                continue
            if blank is not None:
                raise DataError(f"{path}:{blank}: empty sentence (the line format holds one sentence per line)")
            parts = line.split("\t")
            if len(parts) > 2:
                source.bad(number, f"expected tokens<TAB>tags, got {len(parts)} tab-separated fields")
                continue
            tokens = parts[0].split()
            tags = parts[1].split() if len(parts) == 2 else None
            if tags is None and split != "predict":
                source.bad(number, "no tags (expected tokens<TAB>tags)")
                continue
            yield self._example(tokens, tags, path, number, split)

    def _read_jsonl(self, source, path, split):
        fields = {"tokens": self.token_column, "tags": self.tag_column}
        for number, row in jsonl_rows(source, fields, optional=("tags",) if split == "predict" else ()):
            tokens, tags = row["tokens"], row["tags"]
            tokens = list(tokens) if isinstance(tokens, str) else tokens
            tags = tags.split() if isinstance(tags, str) else tags
            wrong = [(name, values) for name, values in (("tokens", tokens), ("tags", tags))
                     if (values is not None or name == "tokens" or split != "predict")  # a predict file: no tags
                     and not (isinstance(values, list) and all(isinstance(v, str) for v in values))]
            if wrong:
                source.bad(number, f"{wrong[0][0]} must be a list of strings, got {clip(wrong[0][1])}")
                continue
            if any(t == "" for t in tokens):
                source.bad(number, f"empty token at position {tokens.index('')}")
                continue
            yield self._example(tokens, tags, path, number, split)

    def _read_spans(self, source, path, split):
        fields = {"text": self.token_column, "spans": self.tag_column}
        for number, row in jsonl_rows(source, fields, optional=("spans",) if split == "predict" else ()):
            text, spans = row["text"], row["spans"]
            if not isinstance(text, str) or not text.strip():
                source.bad(number, f"field {self.token_column!r} must be a non-empty text, got {clip(text)}")
                continue
            if spans is None and split == "predict":
                yield self._example(list(text), None, path, number, split)
                continue
            try:
                tags = spans_to_bio(text, spans)
            except ValueError as e:
                source.bad(number, f"field {self.tag_column!r}: {e}")
                continue
            yield self._example(list(text), tags, path, number, split)

    def read_inputs(self, inputs):
        """A token list, or a text: split on whitespace when it has any
        (``John lives in Paris``), else into characters (``我爱北京``); always
        into characters under format ``spans``, as the model was trained."""
        examples = []
        for i, value in enumerate(inputs):
            if isinstance(value, str) and self.format == "spans":
                tokens = list(value) if value.strip() else None
            elif isinstance(value, str):
                tokens = value.split() if any(c.isspace() for c in value.strip()) else list(value.strip())
            else:
                tokens = value
            if not (isinstance(tokens, (list, tuple)) and tokens and all(isinstance(t, str) and t for t in tokens)):
                raise DataError(f"input {i}: expected a text or a list of non-empty tokens, got {clip(value)}")
            examples.append(self._example(list(tokens), None, "input", i, "predict"))
        return examples

    def _example(self, tokens, tags, path, line, split, conll=False):
        where = f"{path}:{line}"
        if not tokens:
            raise DataError(f"{where}: empty sentence")
        if tags is not None and all(t is None for t in tags):
            tags = None
        if tags is not None and None in tags:
            missing = tags.index(None)
            raise DataError(f"{path}:{line + missing}: no tag, while other tokens of the sentence have one")
        if tags is not None and len(tags) != len(tokens):
            raise DataError(f"{where}: {len(tokens)} tokens but {len(tags)} tags")
        return {"tokens": tokens, "tags": tags, "path": path, "line": line, "conll": conll}

    @staticmethod
    def where(example, position):
        """``file:line`` of one token (CoNLL files have a line per token)."""
        if example["conll"]:
            return f"{example['path']}:{example['line'] + position}"
        return f"{example['path']}:{example['line']} (token {position + 1})"

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
                    raise DataError(f"{self.where(example, i)}: tag {tag!r} is not in the label set"
                                    f"{did_you_mean(tag, labels)} (labels: {', '.join(labels)})")
                problem = check_tag(tag, self.scheme)
                if problem:
                    hint = "" if self.configured_scheme != "auto" else " (detected; set dataset_reader.scheme)"
                    raise DataError(f"{self.where(example, i)}: {problem}{hint}")

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
                    previous = example["tags"][position - 1] if position else "(start)"
                    bad.append(f"{self.where(example, position)}: {previous} -> {example['tags'][position]}")
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

    def audit(self, splits, features, batch_size):
        """Sentences that windows cut, and the entities no single window holds whole."""
        out, warnings = {}, []
        for split in ("train", "dev", "test"):
            examples, feats = splits.get(split), features.get(split)
            if not examples or not feats or examples[0]["tags"] is None:
                continue
            spans = {}
            for feature in feats:
                spans.setdefault(feature["example"], []).append(feature["span"])
            cut = [n for n, s in spans.items() if len(s) > 1]
            broken = [(n, kind, start, end) for n in cut
                      for kind, start, end in entity_spans(examples[n]["tags"], self.scheme)
                      if not any(a <= start and end <= b for a, b in spans[n])]
            out[f"{split}: sentences cut into windows"] = len(cut)
            out[f"{split}: entities that no window holds whole"] = len(broken)
            if broken:
                n, kind, start, end = broken[0]
                warnings.append(f"{split}: {len(broken)} entit(y/ies) span a window cut and are split between "
                                f"windows, e.g. {kind} at tokens {start}-{end} of {self.where(examples[n], start)} "
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
        index = {name: i for i, name in enumerate(labels)}
        pieces_of, cut = token_pieces(tokenizer, (t for e in examples for t in e["tokens"]), budget, split)
        features, windowed = [], 0
        for number, example in enumerate(progress(examples, desc=f"align {split}", unit="sent", leave=False,
                                              mininterval=2)):
            pieces = [pieces_of[token] for token in example["tokens"]]
            spans = windows([len(p) for p in pieces], budget, self.window_overlap)
            windowed += len(spans) > 1
            tags = [index[t] for t in example["tags"]] if example["tags"] is not None else None
            for start, end in spans:
                ids, positions = [tokenizer.cls_token_id], []
                for piece_ids in pieces[start:end]:
                    positions.append(len(ids))
                    ids.extend(piece_ids)
                ids.append(tokenizer.sep_token_id)
                feature = {"input_ids": ids, "positions": positions, "lengths": len(positions), "example": number,
                           "span": (start, end), "sentence_edges": (int(start == 0), int(end == len(pieces)))}
                if tags is not None:
                    feature["labels"] = tags[start:end]
                features.append(feature)
        if windowed:
            note(f"note: {windowed} of {len(examples)} {split} sentences are longer than "
                       f"max_seq_len={max_seq_len} and are split into overlapping windows "
                       f"(window_overlap={self.window_overlap} tokens)")
        if cut:
            note(f"note: {cut} distinct {split} token(s) have more than {budget} word pieces; "
                 f"only their first {budget} pieces are used")
        return features

    # ---- output side -----------------------------------------------------
    def decode(self, examples, features, outputs, labels):
        """Merge window predictions: each token takes the tag of the window in
        which it is farthest from a cut edge."""
        tags = [np.full(len(e["tokens"]), -1, dtype="int64") for e in examples]
        context = [np.full(len(e["tokens"]), -1, dtype="int64") for e in examples]
        for feature, row in zip(features, outputs["tags"]):
            number, (start, end) = feature["example"], feature["span"]
            position = np.arange(start, end)
            far = np.full_like(position, len(tags[number]))  # a real sentence edge is not a cut
            left = far if feature["sentence_edges"][0] else position - start
            right = far if feature["sentence_edges"][1] else end - 1 - position
            score = np.minimum(left, right)
            better = score > context[number][start:end]
            tags[number][start:end][better] = np.asarray(row[:end - start])[better]
            context[number][start:end][better] = score[better]
        predictions = []
        for example, ids in zip(examples, tags):
            if (ids < 0).any():  # an encode/decode bug, never the user's data
                raise RuntimeError(f"{example['path']}:{example['line']}: a token got no prediction")
            predictions.append({"tags": [labels[i] for i in ids]})
        return predictions

    def evaluate(self, examples, predictions, labels):
        gold = [e["tags"] for e in examples]
        pred = [p["tags"] for p in predictions]
        return METRICS.get("sequence_labeling", "metric")(gold, pred, self.scheme)

    def prediction_rows(self, examples, predictions, labels):
        join = "".join if self.format == "spans" else join_tokens  # spans: the tokens are the text's characters
        rows = []
        for example, p in zip(examples, predictions):
            tokens = example["tokens"]
            entities = [{"type": kind, "start": start, "end": end, "text": join(tokens[start:end])}
                        for kind, start, end in entity_spans(p["tags"], self.scheme)]
            row = {"text": "".join(tokens)} if self.format == "spans" else {}  # entity offsets are characters
            row.update({"tokens": tokens, "tags": p["tags"], "entities": entities})
            if example["tags"] is not None:
                row["gold"] = example["tags"]
            rows.append(row)
        return rows


def spans_to_bio(text, spans):
    """BIO tags, one per character of ``text``, from entity spans: CLUENER's
    ``{type: {mention: [[start, end], ...]}}`` (end inclusive, the mention
    must be the text there), or a list of ``[start, end, type]`` /
    ``{"start", "end", "label" | "type"}`` (end exclusive). ValueError says
    what does not fit."""
    found = []  # (start, end exclusive, type)
    if isinstance(spans, dict):
        for kind, mentions in spans.items():
            if not isinstance(mentions, dict):
                raise ValueError(f"type {kind!r}: expected {{mention: [[start, end], ...]}}, got {clip(mentions)}")
            for mention, places in mentions.items():
                if not (isinstance(places, list) and all(_pair(p) for p in places)):
                    raise ValueError(f"{kind!r} {mention!r}: expected a list of [start, end], got {clip(places)}")
                for start, end in places:
                    if not 0 <= start <= end < len(text) or text[start:end + 1] != mention:
                        raise ValueError(f"{kind!r} {mention!r} at [{start}, {end}] (end inclusive, as in "
                                         f"CLUENER): the text there is {text[max(start, 0):end + 1]!r} "
                                         f"(the text has {len(text)} characters)")
                    found.append((start, end + 1, kind))
    elif isinstance(spans, list):
        for span in spans:
            if isinstance(span, dict):
                kind = span.get("label", span.get("type"))
                start, end = span.get("start"), span.get("end")
                kind = kind[0] if isinstance(kind, list) and len(kind) == 1 else kind  # Label Studio: ["PER"]
            elif isinstance(span, list) and len(span) == 3:
                start, end, kind = span
            else:
                raise ValueError(f"expected [start, end, type] or {{start, end, label}}, got {clip(span)}")
            if not (_pair([start, end]) and isinstance(kind, str) and kind and 0 <= start < end <= len(text)):
                raise ValueError(f"span {clip(span)}: expected 0 <= start < end <= {len(text)} (the text's "
                                 f"length; end exclusive) and a type name")
            found.append((start, end, kind))
    else:
        raise ValueError(f"expected CLUENER's {{type: {{mention: [[start, end]]}}}} or a list of spans, "
                         f"got {clip(spans)}")
    tags = ["O"] * len(text)
    for start, end, kind in sorted(set(found)):
        if any(t != "O" for t in tags[start:end]):
            raise ValueError(f"{kind!r} at [{start}, {end}) overlaps another entity (nested entities are not "
                             f"supported)")
        if any(c.isspace() for c in kind) or "-" in kind[:1]:
            raise ValueError(f"entity type {kind!r}: no spaces, and not starting with '-'")
        tags[start:end] = [f"B-{kind}"] + [f"I-{kind}"] * (end - start - 1)
    return tags


def _pair(value):
    return (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value))


def token_pieces(tokenizer, tokens, budget, split):
    """``({token: word-piece ids}, cut)`` for each distinct input token, at
    most ``budget`` pieces each (``cut``: how many had more). A token the
    tokenizer drops entirely (a space, a control character) becomes
    ``[UNK]``, so that it keeps its position and its tag."""
    distinct = list(dict.fromkeys(tokens))
    encoded = encode_texts(tokenizer, distinct, split=split, special_tokens=False)["input_ids"]
    pieces = {token: (ids or [tokenizer.unk_token_id])[:budget] for token, ids in zip(distinct, encoded)}
    return pieces, sum(len(ids) > budget for ids in encoded)


def windows(piece_counts, budget, overlap):
    """``[(start, end)]`` token ranges, each fitting ``budget`` pieces; the next
    window starts ``overlap`` tokens before the previous one ended (and at
    least one token later than it started). One window when all fit."""
    spans, start, total = [], 0, len(piece_counts)
    while True:
        end, used = start, 0
        while end < total and used + piece_counts[end] <= budget:
            used += piece_counts[end]
            end += 1
        spans.append((start, end))
        if end >= total:
            return spans
        start = max(start + 1, end - overlap)


def join_tokens(tokens):
    """Entity text: CJK characters are joined directly, other tokens with spaces."""
    text = ""
    for token in tokens:
        if text and not (_is_cjk(text[-1]) or _is_cjk(token[:1])):
            text += " "
        text += token
    return text


def _is_cjk(char):
    return bool(char) and ("\u4e00" <= char <= "\u9fff" or "\u3400" <= char <= "\u4dbf"
                           or "\u3000" <= char <= "\u303f" or "\uff00" <= char <= "\uffef")
