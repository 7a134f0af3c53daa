"""From a validated plan to a finished run: read, build, train, report.

Everything the user can get wrong is checked in :mod:`appzoo.plan` before any
data, weights or output folder is touched.
"""
import json
import os
import shutil
import time

from appzoo.errors import ConfigError
from appzoo.plan import SPLITS


def run(plan):
    """Execute a validated plan; returns the metrics dict written to metrics.json."""
    from appzoo import report
    from appzoo.encoders import build_encoder, load_encoder
    from appzoo.losses import build_loss
    from appzoo.trainer import MODEL_FILE, Trainer

    import paddle
    from paddlenlp.utils.log import logger

    logger.set_level("WARNING")  # paddlenlp logs every config/tokenizer save at INFO
    cfg, data = plan.trainer, plan.data
    from appzoo import progress

    progress.ENABLED = cfg.progress_bar  # the readers' tokenisation bars too
    started = time.time()
    if cfg.device == "gpu" and not paddle.is_compiled_with_cuda():
        raise ConfigError(f"{plan.source}: trainer.device: 'gpu', but this paddle is a CPU build "
                          f"(install paddlepaddle-gpu, or use 'auto' or 'cpu')")
    if cfg.device == "cpu" or (cfg.device == "auto" and not paddle.is_compiled_with_cuda()):
        paddle.set_device("cpu")
    if cfg.num_threads:
        paddle.base.core.set_num_threads(cfg.num_threads)  # paddle is loaded: OMP_NUM_THREADS is too late
    paddle.seed(cfg.seed)
    reader = plan.reader_class(**plan.reader_kwargs)
    needed = {"train": "train" in plan.do, "dev": bool({"train", "eval"} & set(plan.do)),
              "test": "eval" in plan.do, "predict": "predict" in plan.do}
    splits = {s: reader.read(getattr(data, s), s) for s in SPLITS if getattr(data, s) and needed[s]}

    if plan.init_from:
        with open(os.path.join(plan.init_from, "labels.json"), encoding="utf-8") as f:
            labels = json.load(f)
        with open(os.path.join(plan.init_from, "reader_state.json"), encoding="utf-8") as f:
            reader.load_state(json.load(f))
    else:
        labels = reader.build_labels(splits["train"])
    for split in ("train", "dev", "test") if plan.init_from else ("dev", "test"):
        if split in splits:  # a model trained further must know every label of its data
            reader.check_labels(splits[split], labels, getattr(data, split))

    if plan.init_from and "train" not in plan.do:
        # what the model got from the training data (class counts for 'balanced' weights, ...)
        with open(os.path.join(plan.init_from, "model_args.json"), encoding="utf-8") as f:
            injected = json.load(f)
    else:
        injected = reader.model_args(labels, splits.get("train"))
    loss = plan.model_kwargs.get("loss")
    if loss is not None:  # fail on a bad loss before any weights are loaded
        try:
            build_loss(loss, key_path="model.loss", class_counts=injected.get("class_counts"),
                       family=plan.model_class.LOSS_FAMILY)
        except ConfigError as e:
            raise ConfigError(f"{plan.source}: {e}") from None

    os.makedirs(cfg.output_dir, exist_ok=True)
    if plan.encoder is not None and not (plan.init_from and "train" not in plan.do):
        encoder, tokenizer = build_encoder(plan.encoder, lambda: reader.texts(splits["train"]),
                                           os.path.join(cfg.output_dir, "vocab"))
    else:
        encoder, tokenizer = load_encoder(os.path.join(plan.init_from, "encoder"))
    model = plan.model_class(encoder=encoder, **injected, **plan.model_kwargs)
    if plan.init_from:
        model.set_state_dict(paddle.load(os.path.join(plan.init_from, MODEL_FILE)))

    if "train" in plan.do:
        with open(os.path.join(cfg.output_dir, "config.json"), "w", encoding="utf-8") as f:
            json.dump(plan.config, f, ensure_ascii=False, indent=2)
        if not cfg.resume:  # a new run (validate allowed it): nothing of an older one may mix in
            for stale in ("train_log.jsonl", "metrics.json", "predictions.jsonl", "report.md"):
                if os.path.exists(os.path.join(cfg.output_dir, stale)):
                    os.remove(os.path.join(cfg.output_dir, stale))
            for stale in ("best", "checkpoints", "plots"):
                shutil.rmtree(os.path.join(cfg.output_dir, stale), ignore_errors=True)
    trainer = Trainer(model, reader, tokenizer, labels, cfg, cfg.output_dir, run_config=plan.config,
                      model_args=injected)
    features = {s: reader.encode(ex, tokenizer, labels, data.max_seq_len, s) for s, ex in splits.items()}
    metrics = {}
    if "train" in plan.do:
        dev = (splits["dev"], features["dev"]) if "dev" in splits else None
        state = trainer.train(features["train"], dev)
        best = os.path.join(cfg.output_dir, "best")
        model.set_state_dict(paddle.load(os.path.join(best, MODEL_FILE)))
        with open(os.path.join(best, "reader_state.json"), encoding="utf-8") as f:
            reader.load_state(json.load(f))
        metrics["best"] = {"step": state.best_step if dev else state.global_step,
                           "metric": trainer.metric if dev else None, "value": state.best_metric}
        metrics["train"] = {"steps": state.global_step, "epochs_completed": state.epoch}
    if trainer.is_main and "eval" in plan.do:
        for split in ("dev", "test"):
            if split in splits:
                metrics[split] = trainer.evaluate(splits[split], features[split], split=split)
    if trainer.is_main and "predict" in plan.do:
        predictions, _ = trainer.predict(splits["predict"], features["predict"])
        rows = reader.prediction_rows(splits["predict"], predictions, labels)
        with open(os.path.join(cfg.output_dir, "predictions.jsonl"), "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    if trainer.is_main and "export" in plan.do:
        metrics["export"] = {"folder": trainer.export(os.path.join(plan.init_from or os.path.join(cfg.output_dir, "best"), "inference"))}
    if trainer.is_main:
        metrics["wall_time_s"] = round(time.time() - started, 1)
        _write_metrics_and_report(cfg, plan, metrics, trainer.history, labels, report)
    return metrics


def _write_metrics_and_report(cfg, plan, metrics, history, labels, report):
    """A training run writes metrics.json and report.md afresh; a later eval
    run updates the splits it evaluated and keeps the training record; a
    predict-only run leaves both alone."""
    path = os.path.join(cfg.output_dir, "metrics.json")
    if "train" not in plan.do:
        if "eval" not in plan.do:
            return
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                metrics = {**json.load(f), **metrics}
        log = os.path.join(cfg.output_dir, "train_log.jsonl")
        if os.path.exists(log):
            with open(log, encoding="utf-8") as f:
                history = [json.loads(line) for line in f if line.strip()]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(metrics, f, ensure_ascii=False, indent=2)
    report.write(cfg.output_dir, metrics, history, labels, plots=cfg.plots)
