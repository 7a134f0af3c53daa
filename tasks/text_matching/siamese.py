"""The text matching readers whose two texts are encoded apart: siamese pairs,
and pairwise training on triples or on in-batch negatives."""
from typing import Annotated, Literal

from appzoo.params.keys import Key, check_args
from appzoo.data.encoding import encode_texts
from appzoo.data.tabular import Column, columns
from appzoo.errors import ConfigError, DataError
from appzoo.utils.progress import note
from appzoo.registry import READERS
from tasks.text_matching.pairs import read_triples
from tasks.text_matching.reader import MatchingReader
from tasks.text_matching.triples import build_triples


@READERS.register("text_matching_siamese")
class SiameseMatchingReader(MatchingReader):
    """Labelled pairs whose texts are encoded apart (``query_input_ids`` and
    ``title_input_ids``), for siamese models. Same keys as ``text_matching``."""

    LABELS_IN_BATCH = True  # the pointwise and cosine siamese models take labels; the pairwise one trains on triples
    SERVES_PROBS = False  # served with its score and label, as the pairwise model (that has no probabilities)

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
            return super().read(path, split)
        if self.train_format == "triples":
            with self.open_data(path) as source:
                items = read_triples(source, path, self.triple_fields, self.options)
            if not items:
                raise DataError(f"{path}: no triples")
        else:
            pairs = [{**e, "positive": e["label"] == self.positive_label} for e in super().read(path, split)]
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

    def plan_model_args(self):
        return {"negatives": self.negatives}

    def sampling_classes(self, features):
        return None  # triples and in-batch positive pairs have no class

    def duplicate_keys(self, features):
        """In-batch negatives: a pair's query and positive (as encoded, which
        is what the collate compares); a batch mate sharing either would be a
        false negative, and a length-sorted batch would hold easy negatives
        (trainer.sampler is then no_duplicates unless set)."""
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

