"""From a validated plan to a finished run: plan -> prepare -> modes.

:mod:`appzoo.run.plan` raises everything a param file can get wrong.
:func:`prepare` reads the data, the labels, the encoder and the model, and
raises everything the data can get wrong, still without writing anything.
Only then is the output folder locked and written: the model through
:mod:`appzoo.store.bundle`, the folder's slots through :mod:`appzoo.store.archive`, every
file atomically through :mod:`appzoo.utils.files`.
"""
import dataclasses
import json
import os
import tempfile
import time

from appzoo.utils.text import clip as cut
from appzoo.store import bundle as bundles
from appzoo.run import callbacks as cb
from appzoo.utils import files, progress
from appzoo.run import interrupts, param_groups
from appzoo.reports import card, fidelity, label_issues, mistakes, record, report
from appzoo.store.archive import RunFolder
from appzoo.params.dataset import SPLITS
from appzoo.errors import ConfigError, Interrupted
from appzoo.utils.progress import note
from appzoo.store.resolve import TRAIN_LONGER, changed_keys, trains_longer
from appzoo.params.trainer import AUTO
from appzoo.reports.audit import audit, to_markdown
from appzoo.inference import export, prediction
from appzoo.encoders import frozen_prefix
from appzoo.run.teacher import Teacher
from appzoo.task.model import forward_inputs, frozen_embedder


@dataclasses.dataclass
class Prepared:
    """Everything read and built before the first write."""

    bundle: object  # the model, its reader, tokenizer, labels and model arguments (appzoo.store.bundle.Bundle)
    splits: dict  # split -> examples
    features: dict  # split -> features
    work_dir: object  # a TemporaryDirectory holding a from-scratch vocabulary until the run ends
    teacher: object = None  # a distilled run's appzoo.run.teacher.Teacher (None: no teacher, or alpha 0)

    def cleanup(self):
        """Save the frozen prefix's last cache entries (and say what it read and computed); remove the
        from-scratch vocabulary's temporary folder (the saved run has its own copy)."""
        frozen = frozen_prefix.attached(self.bundle.model.encoder) if self.bundle is not None else None
        if frozen is not None:
            frozen.close()
            note(f"note: {frozen.summary()}")
            frozen_prefix.detach(self.bundle.model.encoder)
        if self.work_dir is not None:
            self.work_dir.cleanup()
            self.work_dir = None


def run(plan, callbacks=()):
    """Execute a validated plan; returns the metrics dict written to metrics.json. ``callbacks``: more
    :class:`~appzoo.run.callbacks.Callback` s for the trainer (a search's report to its trial)."""
    started = time.time()
    _set_up(plan)
    folder = RunFolder(plan.trainer.output_dir)
    import paddle

    is_main = paddle.distributed.get_rank() == 0
    with interrupts.handled():
        resume_from = _resume_point(plan, folder)
        prepared = prepare(plan)
        try:
            if not is_main:
                return _modes(plan, prepared, folder, resume_from, started, callbacks)
            return _main_rank(plan, prepared, folder, resume_from, started, callbacks)
        finally:
            prepared.cleanup()


def _main_rank(plan, prepared, folder, resume_from, started, callbacks):
    """Run the modes in the locked run folder, putting an older run back when the new one saved nothing."""
    folder.lock()
    try:
        message = folder.recover()
        if message:
            note(message)
        if "train" in plan.do and not resume_from:
            folder.replace_run()
        try:
            return _modes(plan, prepared, folder, resume_from, started, callbacks)
        except BaseException as error:
            if folder.rollback_replace() and isinstance(error, Interrupted):
                raise Interrupted(error.signum, f"{error.signal_name}: stopped before the new run saved "
                                                f"a model; the older run in {folder.root} is kept as it "
                                                f"was") from None
            raise
    finally:
        folder.unlock()


def _set_up(plan):
    """Process-wide settings of the run: device, threads, seed, log levels."""
    import paddle
    from paddlenlp.utils.log import logger

    logger.set_level("WARNING")  # paddlenlp logs every config/tokenizer save at INFO
    cfg = plan.trainer
    progress.ENABLED = cfg.progress_bar  # the readers' tokenisation bars too
    if cfg.device == "gpu" and not paddle.is_compiled_with_cuda():
        raise ConfigError("trainer.device: 'gpu', but this paddle is a CPU build "
                          "(install paddlepaddle-gpu, or use 'auto' or 'cpu')")
    if cfg.device == "cpu" or (cfg.device == "auto" and not paddle.is_compiled_with_cuda()):
        paddle.set_device("cpu")
    if cfg.num_threads:
        paddle.base.core.set_num_threads(cfg.num_threads)  # paddle is loaded: OMP_NUM_THREADS is too late
    paddle.seed(cfg.seed)


# -------------------------------------------------------------------- prepare
def prepare(plan):
    """Read the splits the modes need and build the model (:func:`appzoo.store.bundle.build`);
    the caller removes the temporary folder with :meth:`Prepared.cleanup`."""
    data = plan.data
    reader = plan.reader_class(**plan.reader_kwargs)
    reader.tune_metric = plan.trainer.dev_metric(reader)[0]
    audit = "audit" in plan.do  # the audit reads every split there is
    needed = {"train": "train" in plan.do or audit, "dev": bool({"train", "eval"} & set(plan.do)) or audit,
              "test": "eval" in plan.do or audit, "predict": "predict" in plan.do or audit}
    splits = {}
    for split in SPLITS:
        path = getattr(data, split)
        if path and needed[split]:
            splits[split] = reader.read(path, split)
            reader.check_split(splits[split], split, path, plan.metric)

    work_dir = None if plan.init_from else tempfile.TemporaryDirectory(prefix="appzoo-vocab-")
    try:
        trained = bundles.build(plan, reader, splits, work_dir and work_dir.name)
        if "train" in plan.do:  # a learning-rate key that names no parameter of the model: refused before any write
            param_groups.groups(trained.model, plan.trainer)
        features = {s: reader.encode(ex, trained.tokenizer, trained.labels, data.max_seq_len, s)
                    for s, ex in splits.items()}
        teacher = _teacher(plan, trained, splits)
        _fill_prefix_cache(plan, trained, features)
    except BaseException:
        if work_dir is not None:
            work_dir.cleanup()
        raise
    return Prepared(trained, splits, features, work_dir, teacher)


def _fill_prefix_cache(plan, trained, features):
    """``model.encoder.freeze_layers`` with a cache: the frozen layers' output for every text of every split,
    computed for those the cache lacks (the layers above are not run), so no training step computes it."""
    frozen = frozen_prefix.attached(trained.model.encoder)
    if frozen is None or frozen.cache is None:
        return
    inputs = forward_inputs(trained.model, labels=False)
    trained.model.eval()
    frozen.skip_top = True
    try:
        for split, split_features in features.items():
            prediction.run_only(lambda batch, tensors: trained.model(**inputs(tensors)), trained, split_features,
                                batch_size=plan.trainer.eval_batch_size, bar=plan.trainer.progress_bar,
                                desc=f"frozen layers, {split}")
    finally:
        frozen.skip_top = False
    frozen.close()


def _training_features(plan, p, trainer):
    """The training features, and after them a distilled run's transfer inputs labelled by its teacher."""
    if p.teacher is None or not p.teacher.transfer:
        return p.features["train"]
    trained, labelled = p.bundle, p.teacher.labelled_transfer(trainer.is_main)
    return trained.reader.encode(p.splits["train"] + labelled, trained.tokenizer, trained.labels,
                                 plan.data.max_seq_len, "train and transfer")


def _teacher(plan, trained, splits):
    """A distilled run's teacher, loaded and checked against the student's labels (nothing run yet)."""
    if plan.distill is None:
        return None
    if plan.distill.alpha == 0 and not plan.distill.transfer:
        note("note: distill.alpha is 0: the student learns from the labels alone, and the teacher is not run")
        return None
    cfg = plan.trainer
    return Teacher(plan.distill, trained, RunFolder(cfg.output_dir), splits["train"],
                   num_threads=cfg.num_threads or None, bar=cfg.progress_bar)


# ---------------------------------------------------------------------- resume
def _resume_point(plan, folder):
    """The checkpoint ``trainer.resume`` continues from (None: a new run).
    Refuses one made with settings or data that change what is trained."""
    resume = plan.trainer.resume
    if not resume or "train" not in plan.do:
        return None
    if resume is True or resume == AUTO:
        checkpoint = folder.latest_checkpoint()
        if checkpoint is None and resume == AUTO:
            return None  # nothing to continue yet: the first start of a job
        if checkpoint is None:
            raise ConfigError(f"trainer.resume: no checkpoint to resume from in {folder.checkpoints!r}")
    else:
        checkpoint = resume
    saved, state = RunFolder.checkpoint_meta(checkpoint)
    longer = TRAIN_LONGER if trains_longer(saved, plan.config) else ()  # the trainer rebuilds the schedule
    changed = changed_keys(saved, plan.config, plan.defaults, may_change=longer)
    if changed:
        key, old, new = changed[0]
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise ConfigError(f"trainer.resume: {checkpoint} was trained with {key}={_short(old)}, this run "
                          f"says {_short(new)}{more}; resume with the same settings, or start a new run in "
                          f"another trainer.output_dir")
    digest = state.get("train_sha256")
    if digest and digest != files.file_sha256(plan.data.train):
        raise ConfigError(f"trainer.resume: dataset_reader.train: {plan.data.train!r} changed since "
                          f"{checkpoint} was saved; resume on the same data, or start a new run")
    return checkpoint


def _short(value, width=60):
    return cut(json.dumps(value, ensure_ascii=False), width)


# ----------------------------------------------------------------------- modes
def _modes(plan, prepared, folder, resume_from, started, callbacks=()):
    from appzoo.run.trainer import Trainer  # paddle: loaded by a run's modes; planning needs none

    cfg, p, trained = plan.trainer, prepared, prepared.bundle
    trainer = Trainer(trained, cfg, (plan.metric, plan.greater), [*_callbacks(plan, folder), *callbacks],
                      started, p.teacher and p.teacher.objective())
    metrics = {}
    if "audit" in plan.do:
        _audit(plan, p, folder, trainer.is_main)
    if "train" in plan.do:
        if trainer.is_main and not resume_from:
            files.write_json(folder.config, plan.config)
        resume = folder.load_checkpoint(resume_from) if resume_from else None
        resume_step = resume["state"]["global_step"] if resume else None
        if trainer.is_main and resume:  # the log up to the checkpoint: no row twice, the plots show the whole run
            rows = [r for r in files.read_jsonl(folder.train_log) if r.get("step", 0) <= resume_step]
            files.write_jsonl(folder.train_log, rows)
            trainer.history = rows
        trainer.state.train_sha256 = files.file_sha256(plan.data.train)
        dev = (p.splits["dev"], p.features["dev"]) if "dev" in p.splits else None
        floor, floor_seconds = _floor(plan, p) if trainer.is_main else (None, 0)  # a checkpoint loads in train()
        state = trainer.train(_training_features(plan, p, trainer), dev, resume=resume)
        if resume and state.finished and state.global_step == resume_step:
            note(f"note: the run in {cfg.output_dir} had finished (step {state.global_step}); "
                 f"trainer.resume trains no further")
        metrics["best"] = {"step": state.best_step if dev else state.global_step,
                           "metric": trainer.metric if dev else None, "value": state.best_metric}
        undertrained = dev and _best_is_last(state, trainer.history, trainer.metric)
        if undertrained and trainer.is_main:
            metrics["best"]["note"] = undertrained
            note(f"note: {undertrained}")
        metrics["train"] = {"steps": state.global_step, "epochs_completed": state.epoch,
                            "parameter_groups": param_groups.rows(trainer.groups)}
        if floor is not None:
            final = _at_best(state, trainer.history, floor)
            metrics["floor"] = {**floor.to_json(final), "seconds": floor_seconds}
            if floor.verdict(final):
                note(f"warning: {floor.verdict(final)}")
    predictor = _predictor_for(plan, trained, trainer, folder)  # None: the dygraph model, through the trainer
    described = {}  # the mistakes of each evaluated split, for report.html
    engine = _evaluated_with(predictor)
    aside = "eval" in plan.do and "train" not in plan.do and not _is_the_runs_own(folder, engine)
    if "eval" in plan.do:  # every rank evaluates its share; the main process writes
        evaluated = {}
        for split in ("dev", "test"):
            if split in p.splits:
                metrics[split], predictions = (predictor or trainer).evaluate(
                    p.splits[split], p.features[split], split=split, with_predictions=True)
                evaluated[split] = (p.splits[split], predictions)
                if predictor is not None and predictor.spec.precision != "fp32":
                    _against_fp32(plan, trainer, predictor.spec, p, split, metrics)
        if trainer.is_main and not aside:  # predictions/<split>.jsonl, errors.md, the class warnings into metrics
            warnings, described = mistakes.write(folder.root, trained.reader, trained.labels, evaluated, metrics)
            for warning in warnings:
                note(warning)
    if "predict" in plan.do:
        if not p.splits["predict"] and trainer.is_main:
            note(f"note: {plan.data.predict} has no rows to predict; predictions.jsonl is empty")
        predict = predictor.predict_features if predictor else trainer.predict
        predictions, _ = predict(p.splits["predict"], p.features["predict"])
        if trainer.is_main:
            files.write_jsonl(folder.predictions,
                              trained.reader.prediction_rows(p.splits["predict"], predictions, trained.labels))
    if not trainer.is_main:
        return metrics
    if "export" in plan.do:
        metrics["export"] = {"folder": _export(plan, trained, folder)}
    skipped = {path: n for path, n in trained.reader.skipped.items() if n}
    if skipped:  # dataset_reader.on_bad_line: skip
        metrics["skipped_lines"] = skipped
    # the whole run's time: a resumed run counts the processes before it (up to its checkpoint)
    metrics["wall_time_s"] = round(trainer.wall_time() if "train" in plan.do else time.time() - started, 1)
    _write_metrics_and_report(cfg, plan, p, folder, metrics, trainer.history, described, engine, aside)
    return metrics


def _against_fp32(plan, trainer, spec, p, split, metrics):
    """Compare an eval in ``spec``'s lower precision with fp32 (the dygraph model) on the same split
    (:func:`appzoo.reports.fidelity.compare`): into the split's metrics as ``vs_fp32``, and a warning line
    for each class that loses more than :data:`~appzoo.reports.fidelity.DROP_POINTS` F1 points."""
    reference = trainer.evaluate(p.splits[split], p.features[split], split=f"{split} in fp32")
    comparison = fidelity.compare(reference, metrics[split], plan.metric)
    metrics[split]["vs_fp32"] = comparison
    for line in fidelity.warnings(comparison, split, f"{spec.engine} {spec.precision}") if trainer.is_main else ():
        note(f"warning: {line}")


def _floor(plan, p):
    """``(floor, seconds)``: the run's :class:`~appzoo.task.floor.Floor` as its reader declares it, measured
    now on the encoder as built, and the seconds it took (part of wall_time_s, so said apart); None for an
    encoder from scratch (random: there is nothing to beat) or from init_from (trained already), where the
    reader declares none, and with trainer.floor false."""
    if not plan.trainer.floor or plan.init_from or plan.encoder is None or plan.encoder.pretrained is None:
        return None, 0
    started, trained = time.time(), p.bundle
    embed = frozen_embedder(trained.model.base_encoder(), trained.tokenizer, plan.data.max_seq_len,
                            plan.trainer.eval_batch_size)
    floor = trained.reader.floor(p.splits, embed)
    if floor is not None:
        note(f"note: floor ({floor.said}): {floor.split} {floor.metric} {floor.value:.4f}")
    return floor, round(time.time() - started, 1)


def _at_best(state, history, floor):
    """The run's value of the floor's metric on its split at the best checkpoint (None: never evaluated)."""
    key = f"{floor.split}_{floor.metric}"
    rows = [row for row in history if key in row]
    if not rows:
        return None
    at_best = [row[key] for row in rows if row["step"] == state.best_step]
    return at_best[-1] if at_best else rows[-1][key]


def _best_is_last(state, history, metric):
    """A note when the best model is that of the last of several dev
    evaluations: the metric was still improving when training stopped."""
    evaluations = [row["step"] for row in history if f"dev_{metric}" in row]
    if len(evaluations) < 2 or state.best_step != evaluations[-1]:
        return None
    return (f"the best checkpoint is the last evaluated step ({state.best_step}): dev {metric} was still "
            f"improving, so the model may be under-trained (try more trainer.epochs or trainer.max_steps)")


def _callbacks(plan, folder):
    """What the run does with what the trainer emits: the log, best/ and checkpoints in ``folder``."""
    cfg = plan.trainer
    callbacks = [cb.JsonlLogger(folder.train_log), cb.SaveBest(folder),
                 cb.SaveCheckpoints(folder, plan.config, cfg.keep_checkpoints)]
    if cfg.visualdl:
        callbacks.append(cb.VisualDLLogger(folder.vdl))
    return callbacks


def _audit(plan, p, folder, is_main):
    """audit.md and audit.json; each warning also as one line."""
    trained = p.bundle
    report = audit(trained.reader, p.splits, p.features, trained.tokenizer, trained.labels, plan.data.max_seq_len,
                   plan.trainer.batch_size)
    text = to_markdown(report, plan.source)
    if plan.trainer.audit_labels:
        from appzoo.run.label_folds import out_of_fold  # paddle, through the trainer: loaded by this audit alone

        given, probs, multi = out_of_fold(plan, p, folder.label_folds)
        rows, report["labels"] = label_issues.find(given, probs, multi, trained.labels, p.splits["train"],
                                                   plan.trainer.audit_folds)
        text += label_issues.to_markdown(report["labels"], rows)
        if is_main:
            files.write_jsonl(folder.label_issues, rows)
            note(f"audit: {report['labels']['note']}; written {folder.label_issues}")
    if is_main:
        files.write_json(folder.audit_json, report)
        files.write_text(folder.audit, text)
        for warning in report["warnings"]:
            note(f"audit: {warning}")
        for advice in report["what_to_try"]:
            note(f"audit: try {advice['key']}: {advice['try']} ({advice['why']})")
        note(f"audit: written {folder.audit}")


def _predictor_for(plan, trained, trainer, folder):
    """The :class:`~appzoo.inference.predictor.Predictor` that eval and predict run on
    under ``trainer.inference_engine`` (None: dygraph, through the trainer).
    Its graph is ``<output_dir>/inference/``, exported first unless it is of
    this very model (:func:`appzoo.inference.export.current`: best/'s contents, not its timestamps)."""
    cfg = plan.trainer
    if cfg.inference_engine == "dygraph" or not {"eval", "predict"} & set(plan.do):
        return None
    if trainer.world_size > 1:
        note(f"note: trainer.inference_engine: {cfg.inference_engine!r} is single-process; this data-parallel "
             f"run evaluates and predicts on the dygraph model")
        return None
    from appzoo.inference.predictor import Predictor  # paddle inference and onnxruntime: only for a graph engine

    return Predictor(_source(plan, folder), trained=trained, spec=cfg.inference, inference_dir=folder.inference,
                     batch_size=cfg.eval_batch_size, progress_bar=True)  # bars as trainer.progress_bar says


def _source(plan, folder):
    """The best/ folder the run's model is (this run's, once trained; else the one it was loaded from)."""
    return folder.best if "train" in plan.do else plan.init_from


def _export(plan, trained, folder):
    """Export into ``<output_dir>/inference`` (a new folder swapped in whole), recording what it is of."""
    return export.export(trained.model, folder.inference, export.source_key(trained, _source(plan, folder)))


def _evaluated_with(predictor):
    """What eval and predict run on (:meth:`~appzoo.params.inference.InferenceSpec.evaluated_with`)."""
    if predictor is None:  # the dygraph model (a data-parallel run of a graph engine too)
        return dict(OWN_ENGINE)
    return predictor.spec.evaluated_with()


#: What the metrics of a metrics.json that does not say (one written before they were labelled) came from.
OWN_ENGINE = {"engine": "dygraph", "precision": "fp32"}


def engine_label(engine):
    """The key of an eval in metrics.json's ``eval``: ``onnxruntime/int8``, ``onnxruntime/int8-static``, ..."""
    label = f"{engine['engine']}/{engine['precision']}"
    return f"{label}-static" if engine.get("quantization") == "static" else label


def _is_the_runs_own(folder, engine):
    """Whether an eval that does not train gives the run's own metrics (metrics.json's ``dev`` and
    ``test``): when it has none yet, or they came from the same engine and precision. Another eval (int8
    after fp32, say) goes beside them, under ``eval``."""
    path = folder.metrics
    saved = files.read_json(path, "metrics of the run") if os.path.exists(path) else {}
    if not {"dev", "test"} & set(saved):
        return True
    return engine_label(saved.get("evaluated_with", OWN_ENGINE)) == engine_label(engine)


def _write_metrics_and_report(cfg, plan, prepared, folder, metrics, history, described, engine, aside):
    """A training run writes metrics.json and report.md afresh; a later eval
    run updates the splits it evaluated and keeps the training record; a
    predict-only or export-only run leaves both alone. The run's own metrics
    (``dev``, ``test``) say what they were evaluated on (``evaluated_with``);
    an eval ``aside`` from them (:func:`_is_the_runs_own`) is added under
    ``eval``, keyed by :func:`engine_label`, and they are kept as they were. A run that trains or gives the
    run's own metrics writes run_record.json and MODEL_CARD.md (:mod:`appzoo.reports.record`) before the
    reports, which link the card."""
    path = folder.metrics
    metrics = dict(metrics)  # run() returns this run's own numbers, whichever key they are saved under
    if "eval" in plan.do and not aside and {"dev", "test"} & set(metrics):
        metrics["evaluated_with"] = engine
    if "train" not in plan.do:
        if "eval" not in plan.do:
            return
        saved = files.read_json(path, "metrics of the run") if os.path.exists(path) else {}
        if aside:
            entry = {**engine, **{key: metrics.pop(key) for key in ("dev", "test", "wall_time_s") if key in metrics}}
            metrics["eval"] = {**saved.get("eval", {}), engine_label(engine): entry}
        metrics = {**saved, **metrics}
        history = files.read_jsonl(folder.train_log)
    files.fault("metrics")
    files.write_json(path, metrics)
    if not aside:
        facts = record.build(plan, prepared, metrics, described, folder, plan.command)
        record.write(folder, facts)
        card.write(folder, facts)
    report.write(cfg.output_dir, metrics, history, prepared.bundle.labels, plots=cfg.plots, mistakes=described,
                 html=not aside)
