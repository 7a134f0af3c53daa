"""From a validated plan to a finished run: plan -> prepare -> modes.

:mod:`appzoo.plan` raises everything a param file can get wrong.
:func:`prepare` reads the data, the labels, the encoder and the model, and
raises everything the data can get wrong, still without writing anything.
Only then is the output folder locked and written, through
:mod:`appzoo.archive`, which owns every file format in it.
"""
import dataclasses
import os
import tempfile
import time

from appzoo import archive, interrupts
from appzoo.archive import RunFolder, file_sha256
from appzoo.errors import ConfigError, Interrupted
from appzoo.plan import SPLITS
from appzoo.progress import note

#: Trainer keys a resumed run may change: they do not alter what is trained.
RESUME_MAY_CHANGE = ("output_dir", "do", "eval_batch_size", "logging_steps", "keep_checkpoints", "resume",
                     "overwrite_output_dir", "num_threads", "progress_bar", "plots", "device", "visualdl", "audit",
                     "inference_engine")
#: Data keys a resumed run may change (evaluation and prediction only).
RESUME_MAY_CHANGE_DATA = ("test", "predict")


@dataclasses.dataclass
class Prepared:
    """Everything read and built before the first write."""

    reader: object
    splits: dict  # split -> examples
    features: dict  # split -> features
    labels: list
    model_args: dict
    model: object
    tokenizer: object
    work_dir: object  # a TemporaryDirectory holding a from-scratch vocabulary until the run ends


def run(plan):
    """Execute a validated plan; returns the metrics dict written to metrics.json."""
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
                return _modes(plan, prepared, folder, resume_from, started)
            return _main_rank(plan, prepared, folder, resume_from, started)
        finally:
            if prepared.work_dir is not None:
                prepared.work_dir.cleanup()


def _main_rank(plan, prepared, folder, resume_from, started):
    """Run the modes in the locked run folder, putting an older run back when the new one saved nothing."""
    folder.lock()
    try:
        message = folder.recover()
        if message:
            note(message)
        if "train" in plan.do and not resume_from:
            folder.replace_run()
        try:
            return _modes(plan, prepared, folder, resume_from, started)
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

    from appzoo import progress

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
    """Read the splits the modes need, the labels, the encoder and the model."""
    from appzoo.encoders import build_encoder, load_encoder
    from appzoo.losses import build_loss

    data = plan.data
    reader = plan.reader_class(**plan.reader_kwargs)
    audit = "audit" in plan.do  # the audit reads every split there is
    needed = {"train": "train" in plan.do or audit, "dev": bool({"train", "eval"} & set(plan.do)) or audit,
              "test": "eval" in plan.do or audit, "predict": "predict" in plan.do or audit}
    metric = plan.trainer.metric_for_best or reader.default_metric
    splits = {}
    for split in SPLITS:
        path = getattr(data, split)
        if path and needed[split]:
            splits[split] = reader.read(path, split)
            reader.check_split(splits[split], split, path, metric)

    saved = None
    if plan.init_from:
        archive.check_best(plan.init_from)
        saved = archive.read_best(plan.init_from)
        labels = saved.labels
        reader.load_state(saved.reader_state)
    else:
        labels = reader.build_labels(splits["train"])
    for split in ("train", "dev", "test") if plan.init_from else ("dev", "test"):
        if split in splits:  # a model trained further must know every label of its data
            reader.check_labels(splits[split], labels, getattr(data, split))

    if saved is not None and "train" not in plan.do:
        model_args = saved.model_args  # what the model got from its training data (class counts, ...)
    else:
        model_args = reader.model_args(labels, splits.get("train"))
    loss = plan.model_kwargs.get("loss")
    if loss is not None:  # fail on a bad loss before any weights are loaded
        build_loss(loss, key_path="model.loss", class_counts=model_args.get("class_counts"),
                   family=plan.model_class.LOSS_FAMILY)

    work_dir = None
    if saved is not None:  # the saved encoder and vocabulary: rebuilding them would reorder the embeddings
        if plan.encoder is not None and "train" in plan.do:
            note(f"note: trainer.init_from: training goes on from {plan.init_from}, with its encoder and "
                 f"vocabulary (model.encoder is not used)")
        encoder, tokenizer = load_encoder(os.path.join(plan.init_from, "encoder"))
    else:
        work_dir = tempfile.TemporaryDirectory(prefix="appzoo-vocab-")
        encoder, tokenizer = build_encoder(plan.encoder, lambda: reader.texts(splits["train"]), work_dir.name)
    model = plan.model_class(encoder=encoder, **model_args, **plan.model_kwargs)
    if saved is not None:
        model.set_state_dict(archive.load_weights(os.path.join(plan.init_from, archive.MODEL_FILE)))
    features = {s: reader.encode(ex, tokenizer, labels, data.max_seq_len, s) for s, ex in splits.items()}
    return Prepared(reader, splits, features, labels, model_args, model, tokenizer, work_dir)


# ---------------------------------------------------------------------- resume
def _resume_point(plan, folder):
    """The checkpoint ``trainer.resume`` continues from (None: a new run).
    Refuses one made with settings or data that change what is trained."""
    resume = plan.trainer.resume
    if not resume or "train" not in plan.do:
        return None
    if resume is True:
        checkpoint = folder.latest_checkpoint()
        if checkpoint is None:
            raise ConfigError(f"trainer.resume: no checkpoint to resume from in {folder.checkpoints!r}")
    else:
        checkpoint = resume
        if not os.path.exists(os.path.join(checkpoint, archive.MARKER)):
            raise ConfigError(f"trainer.resume: {checkpoint!r} is not a complete checkpoint folder "
                              f"(no {archive.MARKER} marker)")
    saved = archive.read_json(os.path.join(checkpoint, "config.json"), "config of a checkpoint")
    changed = changed_keys(saved, plan.config)
    if changed:
        key, old, new = changed[0]
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise ConfigError(f"trainer.resume: {checkpoint} was trained with {key}={_short(old)}, this run "
                          f"says {_short(new)}{more}; resume with the same settings, or start a new run in "
                          f"another trainer.output_dir")
    state = archive.read_json(os.path.join(checkpoint, archive.STATE_FILE), "trainer state")
    digest = state.get("train_sha256")
    if digest and digest != file_sha256(plan.data.train):
        raise ConfigError(f"trainer.resume: dataset_reader.train: {plan.data.train!r} changed since "
                          f"{checkpoint} was saved; resume on the same data, or start a new run")
    return checkpoint


def changed_keys(saved, current):
    """``[(key.path, saved value, current value)]`` of the settings that matter."""
    out = []
    for section in ("dataset_reader", "model", "trainer"):
        old, new = saved.get(section, {}), current.get(section, {})
        skip = RESUME_MAY_CHANGE if section == "trainer" else RESUME_MAY_CHANGE_DATA \
            if section == "dataset_reader" else ()
        for key in sorted(set(old) | set(new)):
            if key not in old and section == "trainer":
                continue  # a key newer than the checkpoint: it was trained with the key's default
            if key not in skip and old.get(key) != new.get(key):
                out.append((f"{section}.{key}", old.get(key), new.get(key)))
    return out


def _short(value, width=60):
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[:width - 3] + "..."


# ----------------------------------------------------------------------- modes
def _modes(plan, prepared, folder, resume_from, started):
    from appzoo.trainer import Trainer

    cfg, p = plan.trainer, prepared
    trainer = Trainer(p.model, p.reader, p.tokenizer, p.labels, cfg, cfg.output_dir, run_config=plan.config,
                      model_args=p.model_args, folder=folder)
    metrics = {}
    if "audit" in plan.do:
        _audit(plan, p, folder, trainer.is_main)
    if "train" in plan.do:
        if trainer.is_main and not resume_from:
            archive.write_json(folder.path("config.json"), plan.config)
        resume_step = _checkpoint_step(resume_from) if resume_from else None
        if trainer.is_main and resume_from:  # the log up to the checkpoint: no row twice, the plots show the whole run
            step = resume_step
            rows = [r for r in archive.read_jsonl(folder.path("train_log.jsonl")) if r.get("step", 0) <= step]
            archive.write_jsonl(folder.path("train_log.jsonl"), rows)
            trainer.history = rows
        trainer.state.train_sha256 = file_sha256(plan.data.train)
        dev = (p.splits["dev"], p.features["dev"]) if "dev" in p.splits else None
        state = trainer.train(p.features["train"], dev, resume_from=resume_from)
        if resume_from and state.finished and state.global_step == resume_step:
            note(f"note: the run in {cfg.output_dir} had finished (step {state.global_step}); "
                 f"trainer.resume trains no further")
        metrics["best"] = {"step": state.best_step if dev else state.global_step,
                           "metric": trainer.metric if dev else None, "value": state.best_metric}
        metrics["train"] = {"steps": state.global_step, "epochs_completed": state.epoch}
    predictor = _predictor_for(plan, p, trainer, folder)  # None: the dygraph model, through the trainer
    if "eval" in plan.do:  # every rank evaluates its share; the main process writes
        for split in ("dev", "test"):
            if split in p.splits:
                metrics[split] = (predictor or trainer).evaluate(p.splits[split], p.features[split], split=split)
    if "predict" in plan.do:
        if not p.splits["predict"] and trainer.is_main:
            note(f"note: {plan.data.predict} has no rows to predict; predictions.jsonl is empty")
        predict = predictor.predict_features if predictor else trainer.predict
        predictions, _ = predict(p.splits["predict"], p.features["predict"])
        if trainer.is_main:
            archive.write_jsonl(folder.path("predictions.jsonl"),
                                p.reader.prediction_rows(p.splits["predict"], predictions, p.labels))
    if not trainer.is_main:
        return metrics
    if "export" in plan.do:
        metrics["export"] = {"folder": _export(trainer, folder)}
    skipped = {path: n for path, n in getattr(p.reader, "skipped", {}).items() if n}
    if skipped:  # dataset_reader.on_bad_line: skip
        metrics["skipped_lines"] = skipped
    metrics["wall_time_s"] = round(time.time() - started, 1)
    _write_metrics_and_report(cfg, plan, folder, metrics, trainer.history, p.labels)
    return metrics


def _audit(plan, p, folder, is_main):
    """audit.md and audit.json; each warning also as one line."""
    from appzoo.audit import audit, to_markdown

    report = audit(p.reader, p.splits, p.features, p.tokenizer, p.labels, plan.data.max_seq_len,
                   plan.trainer.batch_size)
    if is_main:
        archive.write_json(folder.path("audit.json"), report)
        archive.write_text(folder.path("audit.md"), to_markdown(report, plan.source))
        for warning in report["warnings"]:
            note(f"audit: {warning}")
        note(f"audit: written {folder.path('audit.md')}")


def _checkpoint_step(folder):
    return archive.read_json(os.path.join(folder, archive.STATE_FILE))["global_step"]


def _predictor_for(plan, prepared, trainer, folder):
    """The :class:`~appzoo.predictor.Predictor` that eval and predict run on
    under ``trainer.inference_engine`` (None: dygraph, through the trainer).
    Its graph is ``<output_dir>/inference/``, exported first when missing,
    older than best/, or of another model (``trainer.init_from`` elsewhere)."""
    cfg = plan.trainer
    if cfg.inference_engine == "dygraph" or not {"eval", "predict"} & set(plan.do):
        return None
    if trainer.world_size > 1:
        note(f"note: trainer.inference_engine: {cfg.inference_engine!r} is single-process; this data-parallel "
             f"run evaluates and predicts on the dygraph model")
        return None
    from appzoo.predictor import Predictor, export_is_current

    source = folder.best if "train" in plan.do else plan.init_from
    target = folder.path("inference")
    if os.path.realpath(source) != os.path.realpath(folder.best) or not export_is_current(target, source):
        _export(trainer, folder)
    return Predictor.from_parts(prepared.model, prepared.reader, prepared.tokenizer, prepared.labels,
                                plan.data.max_seq_len, engine=cfg.inference_engine, inference_dir=target,
                                batch_size=cfg.eval_batch_size, num_threads=cfg.num_threads)


def _export(trainer, folder):
    """Export into ``<output_dir>/inference`` (a new folder swapped in whole)."""
    from appzoo.predictor import export

    return export(trainer.model, folder.path("inference"))


def _write_metrics_and_report(cfg, plan, folder, metrics, history, labels):
    """A training run writes metrics.json and report.md afresh; a later eval
    run updates the splits it evaluated and keeps the training record; a
    predict-only or export-only run leaves both alone."""
    from appzoo import report

    path = folder.path("metrics.json")
    if "train" not in plan.do:
        if "eval" not in plan.do:
            return
        if os.path.exists(path):
            metrics = {**archive.read_json(path), **metrics}
        history = archive.read_jsonl(folder.path("train_log.jsonl"))
    archive.fault("metrics")
    archive.write_json(path, metrics)
    report.write(cfg.output_dir, metrics, history, labels, plots=cfg.plots)
