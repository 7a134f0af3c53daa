"""The teacher of a distilled run (the ``distill`` section): its logits of the training examples, and the loss
that mixes them with the labels.

The teacher is a trained run's ``best/``, loaded as a :class:`~appzoo.inference.predictor.Predictor` and run
in inference mode once per training example the run will learn from (the steps it plans, from where it
starts: a 100-step run on a large file asks for 3,200 examples, not all of them). Each model reads an example
through its own tokenizer and ``max_seq_len``; the logits are matched per example (classification, matching)
or per word (sequence labeling: each word's first piece, a CRF's emissions, the teacher's windows merged as its
predictions are), so the two vocabularies and tokenizations may differ.

The logits go to ``teacher/<key>.npz`` in the run folder, written atomically after each chunk of examples, the
key naming the teacher's weights (:func:`appzoo.store.bundle_files.digest`), the training examples and the engine:
a resumed run, a re-run in the same folder or one asking for more examples computes only what is missing, and a
changed teacher or data never reuses a stale file. ``teacher_engine: auto`` runs the teacher on ONNX Runtime
when its logits agree with the Paddle model's on the first examples (same label everywhere, within 1e-3),
else on the Paddle model, and on the Paddle model when it has fewer than :data:`AUTO_EXPORT_FROM` examples to
label (the export would cost more than it saves); the graph is exported into ``teacher/graph/``, never into the
teacher's own folder.

The loss (:meth:`Teacher.loss`): ``(1 - alpha) * hard + alpha * T^2 KL(softmax(t / T) || softmax(s / T))``
(:func:`appzoo.losses.kl.distillation_loss`), the KL over a tagger's real words only.
"""
import hashlib
import io
import json
import os
import zipfile

import numpy as np

from appzoo.errors import DataError, first_line
from appzoo.inference import prediction
from appzoo.inference.predictor import Predictor
from appzoo.store import bundle as bundles
from appzoo.store.bundle_files import digest
from appzoo.utils import files
from appzoo.utils.progress import note, progress, quiet

#: the feature key the teacher's rows travel under, collated into ``[B, C]`` or ``[B, words, C]``
KEY = "teacher_logits"
CHUNK = 2048  # examples per saved chunk: a killed run loses at most this much of the teacher's work
AGREE_EXAMPLES = 32  # teacher_engine auto: ONNX Runtime is checked against the Paddle model on these
#: teacher_engine auto: fewer examples to label than this run on the Paddle model, where exporting the teacher to
#: ONNX and checking it (seconds for a 12-layer encoder) would cost more than ONNX Runtime saves
AUTO_EXPORT_FROM = 1024
AGREE_TOLERANCE = 1e-3


class Teacher:
    """The teacher of one run: ``spec`` (:class:`~appzoo.params.distill.DistillConfig`), the student's
    ``bundle``, the run ``folder``, the training ``examples``; ``num_threads`` of its engine."""

    def __init__(self, spec, bundle, folder, examples, *, num_threads=None, batch_size=64, bar=False):
        self.spec, self.student = spec, bundle
        self.trained_on = len(examples)  # the labelled ones; the transfer inputs follow them, numbered on
        self.transfer = bundle.reader.read(spec.transfer, "predict") if spec.transfer else []
        if spec.transfer and not self.transfer:
            raise DataError(f"distill.transfer: {spec.transfer} holds no inputs")
        self.examples = list(examples) + self.transfer
        self.root = folder.teacher
        self.num_threads, self.batch_size, self.bar = num_threads, batch_size, bar
        self.teacher = bundles.load(spec.teacher, "distill.teacher")
        if list(self.teacher.labels) != list(bundle.labels):
            raise DataError(f"distill.teacher: {spec.teacher!r} predicts the labels {_few(self.teacher.labels)}, "
                            f"this run's data has {_few(bundle.labels)}: a teacher's outputs are matched label "
                            f"by label, so both must have the same labels in the same order")
        self.digest = digest(spec.teacher)  # of the teacher's files: the cache's key, and the run's record
        self.path = os.path.join(self.root, f"{self._key(self.digest)}.npz")
        self.engine_used = None  # what computes the rows of the current call (None: all came from the cache)
        self.rows_by_engine = {}  # {engine: rows it computed in this process}: what the record names

    def _key(self, teacher_digest):
        content = hashlib.sha256()
        for example in self.examples:
            content.update(json.dumps(example, sort_keys=True, ensure_ascii=False, default=str).encode())
        key = {"teacher": teacher_digest, "examples": content.hexdigest(), "engine": self.spec.teacher_engine}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    # ---- the transfer set -----------------------------------------------------
    def labelled_transfer(self, is_main=True):
        """The transfer inputs (``distill.transfer``), each with the teacher's prediction as its label (the
        argmax of its logits; per word for a tagger), to be encoded after the training examples: their
        numbers in :attr:`examples` follow the training examples'."""
        numbers = range(self.trained_on, len(self.examples))
        rows = self._load()
        missing = [n for n in numbers if n not in rows]
        if missing:
            note(f"note: distill.transfer: the teacher labels {len(missing):,} input(s) of {self.spec.transfer}")
            self._compute(missing, rows, is_main)
        labels = self.student.labels
        return [self.student.reader.with_prediction(example, rows[n], labels)
                for n, example in zip(numbers, self.transfer)]

    # ---- the teacher's rows, once per example --------------------------------
    def attach(self, features, indices, is_main=True):
        """Put the teacher's rows under :data:`KEY` into the training ``features`` at ``indices`` (those the
        run will learn from), computing those of examples the cache lacks first; ``is_main``: this process
        writes the cache."""
        reader = self.student.reader
        wanted = sorted({reader.example_of(i, features[i]) for i in indices})
        rows = self._load()
        missing = [n for n in wanted if n not in rows]
        if missing:
            note(f"note: distill: the teacher ({self.spec.teacher}) labels {len(missing):,} training example(s)"
                 f"{f' ({len(wanted) - len(missing):,} more from {self.path})' if len(missing) < len(wanted) else ''}")
            self._compute(missing, rows, is_main)
        elif wanted:
            note(f"note: distill: the teacher's logits of {len(wanted):,} training example(s) read from {self.path}")
        for i in indices:
            features[i][KEY] = reader.feature_rows(features[i], rows[reader.example_of(i, features[i])])

    def _compute(self, missing, rows, is_main):
        self._missing = len(missing)
        predictor = self._predictor(missing[:AGREE_EXAMPLES])
        self.rows_by_engine[self.engine_used] = self.rows_by_engine.get(self.engine_used, 0) + len(missing)
        chunks = [missing[i:i + CHUNK] for i in range(0, len(missing), CHUNK)]
        for chunk in progress(chunks, desc="teacher", unit="chunk", disable=not self.bar or len(chunks) < 2):
            rows.update(zip(chunk, self._rows(predictor, chunk)))
            if is_main:
                self._save(rows)

    def _rows(self, predictor, numbers):
        """The teacher's per-example rows (``[C]``, or ``[words, C]``) of the examples ``numbers``."""
        teacher = predictor.bundle
        examples = [self.examples[n] for n in numbers]
        with quiet():  # the run noted its own reading of these examples; the teacher's, chunk by chunk, is noise
            features = teacher.reader.encode(examples, teacher.tokenizer, teacher.labels, teacher.max_seq_len,
                                             "teacher")
        logits = prediction.logits(predictor.engine, teacher, features, batch_size=self.batch_size)
        return [np.asarray(r, dtype="float32") for r in teacher.reader.example_rows(examples, features, logits)]

    def _predictor(self, sample):
        """The Predictor the teacher runs on: ``teacher_engine``, or for auto ONNX Runtime when it gives the
        Paddle model's logits on ``sample`` (else the Paddle model)."""
        choice = self.spec.teacher_engine
        options = {"num_threads": self.num_threads, "batch_size": self.batch_size, "trained": self.teacher,
                   "inference_dir": os.path.join(self.root, "graph")}
        if choice != "auto":
            self.engine_used = choice
            return Predictor(self.spec.teacher, engine=choice, **options)
        dygraph = Predictor(self.spec.teacher, engine="dygraph", **options)
        if self._missing < AUTO_EXPORT_FROM:
            self.engine_used = "dygraph"
            return dygraph
        try:
            fast = Predictor(self.spec.teacher, engine="onnxruntime", **options)
        except Exception as e:  # noqa: BLE001 - no onnxruntime, or an export it cannot run: the Paddle model labels
            note(f"note: distill.teacher_engine: auto: ONNX Runtime cannot run the teacher ({type(e).__name__}: "
                 f"{str(e).splitlines()[0] if str(e) else ''}); it runs on the Paddle model")
            self.engine_used = "dygraph"
            return dygraph
        a, b = self._rows(fast, sample), self._rows(dygraph, sample)
        gap = max((float(np.abs(x - y).max()) for x, y in zip(a, b) if x.size), default=0.0)
        same = all((x.argmax(-1) == y.argmax(-1)).all() for x, y in zip(a, b))
        if same and gap <= AGREE_TOLERANCE:
            self.engine_used = "onnxruntime"
            return fast
        note(f"note: distill.teacher_engine: auto: ONNX Runtime's logits differ from the Paddle model's on the "
             f"first {len(sample)} examples (largest gap {gap:.2g}{'' if same else ', a label differs'}); the "
             f"teacher runs on the Paddle model")
        self.engine_used = "dygraph"
        return dygraph

    def engines_said(self):
        """What computed this process's teacher rows, for the record: one engine's name, or each with its rows
        (``onnxruntime (20,000 rows), dygraph (62 rows)``: auto picks per call, by how many rows are missing);
        ``cached`` when the cache held them all."""
        if not self.rows_by_engine:
            return "cached"
        if len(self.rows_by_engine) == 1:
            return next(iter(self.rows_by_engine))
        ranked = sorted(self.rows_by_engine.items(), key=lambda item: -item[1])
        return ", ".join(f"{engine} ({rows:,} rows)" for engine, rows in ranked)

    # ---- the cache -------------------------------------------------------------
    def _load(self):
        """``{example number: row}`` from the cache file (empty when there is none)."""
        if not os.path.isfile(self.path):
            return {}
        try:
            with np.load(self.path) as saved:
                numbers, offsets, flat = saved["examples"], saved["offsets"], saved["rows"]
                shapes = saved["shapes"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:  # damaged: computed again
            note(f"note: distill: {self.path} cannot be read ({type(e).__name__}); the teacher's logits are "
                 f"computed again")
            return {}
        rows, width = {}, len(self.teacher.labels)
        try:
            for n, start, end, shape in zip(numbers.tolist(), offsets[:-1], offsets[1:], shapes):
                rows[n] = flat[start:end].reshape([int(d) for d in shape if d >= 0])
                if rows[n].ndim and rows[n].shape[-1] != width:  # another teacher's (another label set)
                    raise ValueError(f"a row of {rows[n].shape[-1]} logits, the teacher has {width} labels")
        except (ValueError, TypeError, IndexError) as e:  # well-formed but not this teacher's: computed again
            note(f"note: distill: {self.path} is not this teacher's cache ({first_line(e)}); the teacher's logits "
                 f"are computed again")
            return {}
        return rows

    def _save(self, rows):
        numbers = sorted(rows)
        shapes = np.full((len(numbers), 2), -1, dtype="int64")
        flat = []
        for i, n in enumerate(numbers):
            shapes[i, :rows[n].ndim] = rows[n].shape
            flat.append(rows[n].reshape(-1))
        offsets = np.concatenate([[0], np.cumsum([len(f) for f in flat])]).astype("int64")
        buffer = io.BytesIO()
        np.savez(buffer, examples=np.asarray(numbers, dtype="int64"), offsets=offsets, shapes=shapes,
                 rows=np.concatenate(flat) if flat else np.zeros(0, "float32"))
        os.makedirs(self.root, exist_ok=True)
        files.write_bytes(self.path, buffer.getvalue())

    # ---- the loss --------------------------------------------------------------
    def objective(self):
        """The objective a run distilled from this teacher trains by (:class:`Distillation`)."""
        return Distillation(self)

    def loss(self, out, batch):
        """The student's loss of one batch: its hard-label loss (``out["loss"]``) and the soft loss to the
        teacher's rows in ``batch`` (:data:`KEY`), weighted by ``alpha``."""
        import paddle

        from appzoo.losses.kl import distillation_loss  # paddle: the plan imports this module, and needs none

        logits, teacher = out["logits"], batch[KEY]  # the batch's tensors
        mask = None
        if logits.ndim == 3:  # a tagger: [B, words, C], the real words of each row
            lengths = batch["lengths"].reshape([-1, 1])
            mask = paddle.arange(logits.shape[1], dtype=lengths.dtype).reshape([1, -1]) < lengths
            teacher = teacher[:, :logits.shape[1]]
        soft = distillation_loss(logits, teacher, temperature=self.spec.temperature, mask=mask)
        alpha = self.spec.alpha
        return (1.0 - alpha) * out["loss"].astype("float32") + alpha * soft


def _few(labels, shown=6):
    labels = list(labels)
    more = f", ... ({len(labels)} in all)" if len(labels) > shown else ""
    return "[" + ", ".join(repr(x) for x in labels[:shown]) + more + "]"


class Distillation:
    """The objective of a distilled run (:mod:`appzoo.losses.objective`): before the first step, the teacher's
    rows of the features the steps ahead learn from (read from its cache, or computed and kept by the main
    process); each step, the student's loss mixed with the soft loss to them (:meth:`Teacher.loss`)."""

    def __init__(self, teacher):
        self.teacher = teacher

    def prepare(self, features, planned):
        import paddle

        self.teacher.attach(features, planned(), paddle.distributed.get_rank() == 0)

    def __call__(self, outputs, batch):
        loss = self.teacher.loss(outputs, batch)
        return loss, [loss]
