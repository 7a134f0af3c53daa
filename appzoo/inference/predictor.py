"""Predict from Python with a trained model, on one of three engines.

    from appzoo import Predictor

    p = Predictor("output/cls/best", engine="paddle_inference")
    p.predict(["a text", "another"])  # the rows predictions.jsonl would hold
    p.embed(["a text"]).vectors     # a text classifier's or a siamese matcher's text vectors

The model is loaded from ``best/`` through :func:`appzoo.store.bundle.load` (its
reader, tokenizer, labels and tuned state with it), so inputs go through the
same tokenisation, collation, prediction loop (:mod:`appzoo.inference.prediction`) and
decoding as ``--do predict``. Engines (:mod:`appzoo.inference.engines`):

* ``dygraph``: the Paddle model itself.
* ``paddle_inference``: the static graph of ``<run>/inference/`` (exported
  first when missing or of another model than ``best/`` holds:
  :func:`appzoo.inference.export.current`), on Paddle Inference with oneDNN on CPU.
* ``onnxruntime``: that graph converted by paddle2onnx to
  ``inference/model.onnx``, on ONNX Runtime.

``precision`` (:data:`appzoo.params.inference.PRECISIONS`): ``fp32``; ``bf16`` on
Paddle Inference where the CPU has bf16 instructions; ``int8`` on ONNX
Runtime, ``quantization`` ``dynamic`` or ``static`` (calibrated on
``calibration_examples`` examples of the model's dev set), the MatMuls int8 hurts most on
``sensitivity_examples`` dev examples left in fp32 (``keep_fp32``: :mod:`appzoo.inference.quantize`). Measured speed and
agreement with fp32: docs/deployment.md.

One Predictor may be shared by threads: each call predicts its own inputs
(:mod:`appzoo.inference.engines`).
"""
import dataclasses
import os
import unicodedata

from appzoo.store import bundle

from appzoo.data.encoding import encode_texts
from appzoo.inference import engines, export, prediction
from appzoo.params.inference import CAPABILITIES, InferenceSpec, spec_keys
from appzoo.errors import DataError
from appzoo.utils.files import file_sha256
from appzoo.utils.progress import bars, note


@dataclasses.dataclass
class Embedded:
    """Texts embedded: ``vectors`` (``[N, H]`` float32, in the texts' order), the ``tokens`` each text was read as
    (special tokens included) and the indices of those cut at ``max_seq_len``."""

    vectors: object
    tokens: list
    cut: list


@dataclasses.dataclass
class Prepared:
    """Inputs read and tokenised: their examples and features, and the
    indices of those cut at ``max_seq_len``."""

    examples: list
    features: list
    cut: list

    def longest(self):
        """Tokens of the longest feature (its ``*input_ids``): the length a batch holding it is padded to."""
        return max((len(v) for f in self.features for k, v in f.items() if k.endswith("input_ids")), default=0)


#: The Predictor's keywords for the :class:`~appzoo.params.inference.InferenceSpec` fields, by field: the
#: field's name, but ``num_threads`` (so a field added to the spec is a keyword here with no edit).
KEYWORDS = spec_keys({"threads": "num_threads"})


def _spec(spec, engine, keys):
    """The spec a Predictor runs: ``spec``, or the one of ``engine`` and the spec's keywords ``keys``, checked;
    TypeError for an unknown keyword or for both at once (a programming error, as Python's own)."""
    unknown = sorted(set(keys) - set(KEYWORDS.values()))
    if unknown:
        raise TypeError(f"Predictor: unknown keyword {unknown[0]!r} (its spec's keywords: "
                        f"{', '.join(KEYWORDS.values())})")
    if engine is not None:
        keys = {**keys, KEYWORDS["engine"]: engine}
    if spec is not None:
        if keys:
            raise TypeError(f"Predictor: give spec or its keywords ({', '.join(sorted(keys))}), not both")
        return spec
    by_field = {field: keys[key] for field, key in KEYWORDS.items() if key in keys}
    return InferenceSpec(**by_field).check(KEYWORDS)


class Predictor:
    """A trained model that takes raw inputs: texts (classification), token
    lists or texts (sequence labeling: a text with spaces is split on them,
    one without into characters), or ``(text_a, text_b)`` pairs (matching).

    ``predict`` returns one dict per input, as in ``predictions.jsonl``: the
    label and the probability of each label (multi-label: the labels above
    ``dataset_reader.threshold``), the tokens, tags and entity spans, or the
    match score, the label it gives at the saved threshold
    (:attr:`reader_state`) and, for pointwise models, the probabilities.
    ``progress_bar``: show the tokenising bars of ``predict`` (off: a call
    from a service prints nothing). What it predicts on: ``spec``, an
    :class:`~appzoo.params.inference.InferenceSpec`, or its keys as keywords (:data:`KEYWORDS`: ``engine``,
    ``precision``, ``quantization``, ``calibration_examples``, ``num_threads``, ``keep_fp32``,
    ``sensitivity_examples``; see the module docstring), never both.
    """

    def __init__(self, best, engine=None, *, batch_size=64, inference_dir=None, mkldnn=True, progress_bar=False,
                 spec=None, trained=None, allow_pickle=True, **keys):
        """``best``: a ``best/`` folder; ``trained``: the :class:`~appzoo.store.bundle.Bundle` loaded from it
        when the caller holds it already (a run's eval and predict), else it is loaded here. ``spec``: an
        :class:`~appzoo.params.inference.InferenceSpec` checked by the section that built it (the runner's and
        the server's); else the spec of ``engine`` and ``keys`` (:data:`KEYWORDS`), checked here.
        ``inference_dir``: where the graph engines' export lives (None: the ``inference/`` of ``best``'s run
        folder), exported first unless it is of this very model. ``allow_pickle``: load the weights of a
        ``best/`` saved before safetensors (a pickle; with a note on how to re-save them), or refuse them (the
        server): :func:`appzoo.store.bundle.weights`."""
        spec = _spec(spec, engine, keys)
        self.bundle = bundle.load(best, "Predictor", allow_pickle=allow_pickle) if trained is None else trained
        self.spec, self.batch_size, self.progress_bar = self._measurable(spec), batch_size, progress_bar
        spec = self.spec
        if CAPABILITIES[spec.engine].graph:  # the graph it runs is exported first, unless it is of this model
            inference_dir = export.current(self.bundle, best, inference_dir)
        dev = None
        if spec.needs_dev():  # the cache's name says which dev set
            dev = (file_sha256(self._dev_file(spec))[:8], self._dev_batches)
        self.engine = engines.create(spec, self.bundle.model, inference_dir, mkldnn, dev)
        self.reader_state = self.bundle.reader.state()

    model = property(lambda self: self.bundle.model)
    reader = property(lambda self: self.bundle.reader)
    tokenizer = property(lambda self: self.bundle.tokenizer)
    labels = property(lambda self: self.bundle.labels)
    max_seq_len = property(lambda self: self.bundle.max_seq_len)

    # ---- raw inputs ------------------------------------------------------
    def predict(self, inputs):
        """One dict per input (see the class docstring)."""
        with bars(self.progress_bar):
            prepared = self.prepare(inputs)
            return self.predict_prepared([prepared])[0] if prepared.examples else []

    def prepare(self, inputs):
        """The inputs read and tokenised (:class:`Prepared`), ready for
        :meth:`predict_prepared`; DataError naming the input that does not fit."""
        if isinstance(inputs, (str, bytes)):
            raise DataError(f"inputs: expected a list of inputs, got one {type(inputs).__name__}; for one input, "
                            f"pass [input]")
        inputs = list(inputs)
        if not inputs:
            return Prepared([], [], [])
        check_inputs(inputs)
        examples = self.reader.read_inputs(inputs)
        features = self.reader.encode(examples, self.tokenizer, self.labels, self.max_seq_len, "predict")
        return Prepared(examples, features, self._cut(examples, features))

    def predict_prepared(self, groups):
        """The rows of each :class:`Prepared` group, the groups run through the
        engine together (a server's batch of requests) and decoded each on its own."""
        predictions = prediction.predict_groups(self.engine, self.bundle, [(g.examples, g.features) for g in groups],
                                                batch_size=self.batch_size)
        return [self.reader.prediction_rows(g.examples, p, self.labels) for g, p in zip(groups, predictions)]

    # ---- text vectors ----------------------------------------------------
    @property
    def embedding(self):
        """What :meth:`embed` gives for this model, in a few words, or None when it embeds no text on its own
        (:attr:`appzoo.task.model.TaskModel.EMBEDDING`)."""
        return self.model.EMBEDDING

    def embed(self, texts):
        """:class:`Embedded`: the model's vector of each text (a list of strings), each text tokenised alone
        and cut at ``max_seq_len``, computed on the Paddle model whatever the engine (in fp32); DataError for
        a model that embeds no text, or an input that is not a non-blank text."""
        if self.embedding is None:
            raise DataError(f"embed: {type(self.model).__name__} embeds no text on its own (a model whose "
                            f"EMBEDDING is set does: a text classifier, a siamese matcher)")
        if isinstance(texts, (str, bytes)):
            raise DataError(f"embed: expected a list of texts, got one {type(texts).__name__}; for one text, "
                            f"pass [text]")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text:
                raise DataError(f"input {i}: expected a non-empty text, got {type(text).__name__} {text!r:.40}")
        check_inputs(texts)
        with bars(self.progress_bar):
            ids = encode_texts(self.tokenizer, texts, max_seq_len=self.max_seq_len)["input_ids"]
        vectors = prediction.embed(self.bundle, ids, batch_size=self.batch_size)
        return Embedded(vectors, [len(i) for i in ids], [i for i, t in enumerate(ids) if len(t) >= self.max_seq_len])

    def _cut(self, examples, features):
        """The inputs whose end was not read: a feature of a reader that cuts
        (not one that splits into windows) that reached ``max_seq_len``."""
        if self.reader.long_inputs != "cut":
            return []
        return [i for i, f in enumerate(features)
                if any(k.endswith("input_ids") and len(v) >= self.max_seq_len for k, v in f.items())]

    def _measurable(self, spec):
        """``spec``, with ``keep_fp32: auto`` of dynamic int8 turned into ``none`` (said in a note) where the model's
        dev set is not a file here (a ``best/`` copied to a server): the sensitivity pass has nothing to measure on,
        and a model that quantizes every MatMul still serves, as it did before the pass existed."""
        if not (spec.needs_dev() and spec.quantization == "dynamic") or os.path.isfile(self._dev_path()):
            return spec
        note(f"note: quantize_keep_fp32: 'auto' measures int8 on the model's dev set, and its dataset_reader.dev "
             f"({self._dev_path()!r}) is not a file here: every MatMul is quantized (as 'none'); run from the folder "
             f"the model was trained in to keep the most sensitive ones in fp32")
        return dataclasses.replace(spec, keep_fp32="none")

    def _dev_path(self):
        return self.bundle.config.get("dataset_reader", {}).get("dev") or ""

    def _dev_file(self, spec):
        """The model's dev set (the file its ``dataset_reader.dev`` names), which static int8 calibrates on and
        the sensitivity pass of ``keep_fp32: auto`` measures on."""
        path = self._dev_path()
        if not os.path.isfile(path):  # static only: dynamic's auto became none without one (_measurable)
            raise DataError(f"quantization: 'static' calibrates on the model's dev set, and its "
                            f"dataset_reader.dev ({path or None!r}) is not a file here; run from the folder the model "
                            f"was trained in, or use quantization 'dynamic'")
        return path

    def _dev_batches(self, n):
        """Collated batches of ``n`` examples spread evenly over the model's dev set (:meth:`_dev_file`), for
        static int8 calibration and the sensitivity pass."""
        examples = self.reader.read(self._dev_file(self.spec), "calibration")
        examples = examples[::max(1, len(examples) // n)][:n]
        with bars(False):
            features = self.reader.encode(examples, self.tokenizer, self.labels, self.max_seq_len, "calibration")
        pad_id = self.tokenizer.pad_token_id
        for start in range(0, len(features), self.batch_size):
            yield self.reader.collate(features[start:start + self.batch_size], pad_id)

    # ---- examples and features (the runner's eval and predict) -----------
    def predict_features(self, examples, features):
        """``(predictions, None)`` as the trainer gives them (no loss: the graphs take no labels)."""
        return prediction.predict(self.engine, self.bundle, examples, features, batch_size=self.batch_size)

    def evaluate(self, examples, features, split=None, with_predictions=False, fit=False):
        """The reader's metrics of one labelled split; ``with_predictions``:
        ``(metrics, predictions)``; ``fit``: the reader's decision rules fitted on it first
        (:func:`appzoo.inference.prediction.evaluate`)."""
        return prediction.evaluate(self.engine, self.bundle, examples, features, batch_size=self.batch_size,
                                   fit=fit, with_predictions=with_predictions)


# ---- raw inputs: what no reader should see (the Predictor's and the server's)
def check_inputs(inputs):
    """DataError for what no reader should see: a value that is not text (a lone surrogate from a JSON
    ``\\ud800`` escape), or a text or token that is blank: only whitespace and invisible format characters
    (Unicode category Cf: U+200B zero-width space, U+200C/U+200D joiners, U+2060 word joiner, U+FEFF, the
    bidirectional marks), which the tokenizer drops, leaving nothing to predict from."""
    for i, value in enumerate(inputs):
        for text in (value if isinstance(value, (list, tuple)) else [value]):
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise DataError(f"input {i}: not valid Unicode text ({e.reason} at character {e.start})") \
                        from None
                if text and is_blank(text):
                    raise DataError(f"input {i}: {_escaped(text)} is blank (only whitespace and invisible "
                                    f"format characters such as U+200B); expected a non-empty text")


def is_blank(text):
    """Whether ``text`` holds nothing visible: each character whitespace or a format character (Cf)."""
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in text)


def _escaped(text, width=40):
    """``text`` in double quotes with every invisible character as an escape (``"\\u200b"``)."""
    shown = "".join(c if c.isprintable() and not c.isspace() or c == " " else
                    {"\n": "\\n", "\t": "\\t"}.get(c, f"\\u{ord(c):04x}") for c in text[:width])
    return f'"{shown}{"..." if len(text) > width else ""}"'
