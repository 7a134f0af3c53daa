"""The models a server holds: each a :class:`~appzoo.inference.predictor.Predictor`
with a micro-batcher, its task's input shape, and what the try-it page and
the KServe V2 metadata route say about it."""
import os
import time

from appzoo.store import bundle
from appzoo.errors import ConfigError
from appzoo.inference.predictor import Predictor
from appzoo.utils.progress import quiet
from appzoo.serve.batcher import MicroBatcher

#: the reader type of a trained model -> the shape of one input
INPUT_KINDS = {"text_classification": "text", "sequence_labeling": "text_or_tokens",
               "text_matching": "pair", "text_matching_pairwise": "pair", "text_matching_siamese": "pair"}
_WARM_UP = {"text": "warm up", "text_or_tokens": "warm up", "pair": ("warm up", "warm up")}


def parse_models(specs, key_path="models"):
    """``{name: best folder}`` from ``PATH`` or ``NAME=PATH`` items (a bare
    path is named after its run folder); ConfigError for a repeated name or
    a folder that is not a complete ``best/``."""
    models = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            path = spec
            name = os.path.basename(os.path.dirname(os.path.abspath(path))) or "model"
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            raise ConfigError(f"{key_path}: {spec!r}: a model name is letters, digits, '-', '_' and '.' "
                              f"(NAME=PATH/best)")
        if name in models:
            raise ConfigError(f"{key_path}: two models named {name!r} ({models[name]} and {path}); name them "
                              f"NAME=PATH/best")
        bundle.check(path, f"{key_path}: {name}")
        models[name] = path
    if not models:
        raise ConfigError(f"{key_path}: no model to serve (give PATH/best or NAME=PATH/best)")
    return models


class ServedModel:
    """One model behind the server: loaded, warmed up, and batched."""

    def __init__(self, name, best, config, threads, on_batch=None):
        started = time.monotonic()
        self.name, self.best, self.config = name, best, config
        self.predictor = Predictor(best, spec=config.inference(threads), batch_size=config.max_batch_size)
        self.task = self.predictor.bundle.config["dataset_reader"]["type"]  # the reader's registered name
        self.input_kind = INPUT_KINDS.get(self.task, "text")
        self.predictor.predict([_WARM_UP[self.input_kind]])  # the first batch pays the graph's set-up
        if hasattr(self.predictor.tokenizer, "unknown_pieces"):
            self.predictor.tokenizer.unknown_pieces = 0  # /metrics counts the requests' pieces, not the warm-up's
        self.load_seconds = time.monotonic() - started
        self.batcher = MicroBatcher(self.predictor.predict_prepared, max_batch_size=config.max_batch_size,
                                    max_wait_ms=config.max_wait_ms, max_queue=config.max_queue,
                                    on_batch=on_batch, name=f"batcher-{name}")

    # ---- what the model is ----------------------------------------------------
    @property
    def multi_label(self):
        return bool(getattr(self.predictor.reader, "multi_label", False))

    def describe(self):
        """What the try-it page and ``GET /models`` show."""
        reader = self.predictor.reader
        out = {"name": self.name, "task": self.task, "input": self.input_kind, "labels": self.predictor.labels,
               "multi_label": self.multi_label, "engine": self.config.engine,
               "precision": self.config.precision,
               "max_seq_len": self.predictor.max_seq_len}  # not best/'s place on the server's disk
        if self.input_kind == "pair":
            out["threshold"] = reader.decision_threshold
        if self.multi_label:  # a label is given at or above its own threshold (tuned per label on dev)
            labels = self.predictor.labels
            out["thresholds"] = {name: round(float(t), 6) for name, t in zip(labels, reader.thresholds(labels))}
        return out

    # ---- a request ----------------------------------------------------------------
    def prepare(self, inputs):
        """``(Prepared, notes)`` of one request's inputs (a list), each cut at
        ``max_input_chars`` first; DataError naming the input that does not fit.
        Runs on a request's thread, so tokenising overlaps the running batch."""
        inputs, notes = self._cut_long(inputs)
        with quiet():
            prepared = self.predictor.prepare(inputs)
        for i in prepared.cut:
            notes.append(f"input {i}: cut at max_seq_len={self.predictor.max_seq_len} tokens; the rest of it was "
                         f"not read")
        return prepared, notes

    def _cut_long(self, inputs):
        limit, notes, out = self.config.max_input_chars, [], []
        for i, value in enumerate(inputs):
            if isinstance(value, (list, tuple)) and self.input_kind == "pair":
                if any(isinstance(v, str) and len(v) > limit for v in value):
                    notes.append(f"input {i}: a text longer than max_input_chars={limit} characters is cut there")
                    value = [v[:limit] if isinstance(v, str) else v for v in value]
            elif isinstance(value, (str, list)) and len(value) > limit:
                what = "characters" if isinstance(value, str) else "tokens"
                notes.append(f"input {i}: {len(value)} {what}, cut at max_input_chars={limit}")
                value = value[:limit]
            out.append(value)
        return out, notes

    def stop(self, timeout=None):
        return self.batcher.stop(timeout)
