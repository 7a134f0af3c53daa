"""The models a server holds: each a :class:`~appzoo.inference.predictor.Predictor`
with a micro-batcher and the serving shape its reader declares
(:mod:`appzoo.task.serving`), from which the try-it page and the KServe V2
routes take its inputs and outputs."""
import contextlib
import os
import threading
import time

from appzoo.store import bundle
from appzoo.errors import ConfigError
from appzoo.inference.predictor import Predictor
from appzoo.utils.progress import quiet
from appzoo.serve.batcher import DeadlineExceeded, MicroBatcher, QueueFull


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

    def __init__(self, name, best, config, threads, on_batch=None, on_refused=None):
        """``on_batch(size, tokens)``: told each batch's inputs and padded tokens; ``on_refused(reason)``:
        told each request the batcher refused (``queue_full``: 429, ``deadline``: 504), by the routes that
        answer it."""
        started = time.monotonic()
        self.name, self.best, self.config = name, best, config
        self.predictor = Predictor(best, spec=config.inference(threads), batch_size=config.max_batch_size,
                                   allow_pickle=config.trust_pickled_weights)
        self.task = self.predictor.bundle.config["dataset_reader"]["type"]  # the reader's registered name
        self.serving = self._declared_serving()
        self.input_kind = self.serving.input
        self.embedding_size = self._warm_up_embedding()
        self._embedding, self._embeddings_waiting = threading.Lock(), 0
        if hasattr(self.predictor.tokenizer, "unknown_pieces"):
            self.predictor.tokenizer.unknown_pieces = 0  # /metrics counts the requests' pieces, not the warm-up's
        self.load_seconds = time.monotonic() - started
        self.batcher = MicroBatcher(self.predictor.predict_prepared, max_batch_size=config.max_batch_size,
                                    max_batch_tokens=config.max_batch_tokens, max_wait_ms=config.max_wait_ms,
                                    max_queue=config.max_queue, on_batch=on_batch, name=f"batcher-{name}")
        self.on_refused = on_refused or (lambda reason: None)
        self.replaced_by = None  # the model a reload put in this one's place (appzoo/serve/repository.py)
        self._requests, self._idle = 0, threading.Condition()

    def _declared_serving(self):
        """The reader's serving shape, checked against its prediction rows of the warm-up input (a
        model that answers is one that answers every field it declares); the warm-up pays the graph's
        set-up before the first request."""
        serving = self.predictor.reader.serving(self.predictor.labels)
        reader = repr(self.task)
        serving.check(reader)
        serving.check_rows(reader, self.predictor.predict([serving.warm_up_input()]))
        return serving

    def _warm_up_embedding(self):
        """The length of the model's text vectors, from embedding the warm-up text; None for a model that embeds
        no text on its own."""
        if self.predictor.embedding is None:
            return None
        sample = self.serving.warm_up_input()
        text = sample[0] if isinstance(sample, (list, tuple)) else sample  # a pair's first text, a token list's
        with quiet():
            return int(self.predictor.embed([text if isinstance(text, str) else " ".join(text)]).vectors.shape[1])

    # ---- what the model is ----------------------------------------------------
    def describe(self):
        """What the try-it page and ``GET /models`` show: the model, its declared outputs (each field's
        name and kind), and what its reader shows beside them (thresholds). ``multi_label``: its answer
        is a set of labels."""
        shape = self.serving
        return {"name": self.name, "task": self.task, "input": shape.input, "description": shape.description,
                "outputs": [{"name": f.name, "kind": f.kind} for f in shape.outputs],
                "labels": self.predictor.labels, "multi_label": "labels" in shape.kinds(),
                "engine": self.config.engine, "precision": self.config.precision,
                "max_seq_len": self.predictor.max_seq_len,  # not best/'s place on the server's disk
                "embedding": self.predictor.embedding, "embedding_size": self.embedding_size, **shape.shows}

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

    def embed(self, texts, ends=None):
        """``(Embedded, notes)`` of one request's texts (``/v1/embeddings``), each cut at ``max_input_chars``
        first; DataError naming an input that is not a text; QueueFull when ``max_queue`` requests already wait.

        Not through the batcher: its batches run the engine's graph, which answers the task's outputs, while a
        text's vector comes from the Paddle model (:meth:`~appzoo.inference.predictor.Predictor.embed`). The
        texts of one request run in batches of ``max_batch_size``, and one request's at a time per model (a
        lock), so that a burst of them does not run a model on every thread of the pool at once. ``ends``: the
        request's deadline (``time.monotonic()`` seconds); DeadlineExceeded when the lock is not had by then."""
        texts, notes = self._cut_long(texts)
        if self._embeddings_waiting >= self.config.max_queue:
            raise QueueFull(f"{self._embeddings_waiting} embedding requests wait (max_queue={self.config.max_queue})")
        self._embeddings_waiting += 1  # a bound, so the GIL's atomicity is enough (off by one at worst)
        try:
            left = -1 if ends is None else max(ends - time.monotonic(), 0)
            if not self._embedding.acquire(timeout=left):
                raise DeadlineExceeded("no turn on the model before the deadline")
            try:
                with quiet():
                    embedded = self.predictor.embed(texts)
            finally:
                self._embedding.release()
        finally:
            self._embeddings_waiting -= 1
        for i in embedded.cut:
            notes.append(f"input {i}: cut at max_seq_len={self.predictor.max_seq_len} tokens; the rest of it was "
                         f"not read")
        return embedded, notes

    @contextlib.contextmanager
    def in_flight(self):
        """Count a request from its preparation to its answer, so that a reload retires this model only once
        none is under way (:meth:`retire`)."""
        with self._idle:
            self._requests += 1
        try:
            yield self
        finally:
            with self._idle:
                self._requests -= 1
                self._idle.notify_all()

    def retire(self, timeout):
        """Once replaced: wait up to ``timeout`` s for the requests under way on this model, then run what is
        queued and stop its batcher; True when all of it ended in time."""
        ends = time.monotonic() + timeout
        with self._idle:
            while self._requests and self._idle.wait(max(0.0, ends - time.monotonic())):
                pass
        return self.stop(max(0.0, ends - time.monotonic()))

    def stop(self, timeout=None):
        return self.batcher.stop(timeout)
