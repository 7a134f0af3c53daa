"""From a param file to a finished run: validate, read, build, train, report.

Everything the user can get wrong is checked in :func:`validate` before any
data, weights or output folder is touched.
"""
import dataclasses
import json
import os
import shutil
import time
from typing import Optional

from appzoo.config import check_kwargs
from appzoo.encoders import parse_encoder_spec
from appzoo.errors import ConfigError
from appzoo.registry import MODELS, READERS
from appzoo.trainer_config import TrainerConfig

SPLITS = ("train", "dev", "test", "predict")


@dataclasses.dataclass
class DatasetConfig:
    """The keys of ``dataset_reader`` that every task shares; the rest go to the reader."""

    type: Optional[str] = None
    train: Optional[str] = None
    dev: Optional[str] = None
    test: Optional[str] = None
    predict: Optional[str] = None
    max_seq_len: int = 128


@dataclasses.dataclass
class Plan:
    """A validated param file."""

    config: dict  # the resolved config, as written to config.json
    data: DatasetConfig
    reader_class: type
    reader_kwargs: dict
    model_class: type
    model_kwargs: dict
    encoder: object  # EncoderSpec, or None when loading from a saved model
    trainer: TrainerConfig
    do: list
    init_from: str  # a best/ folder to start from, or None
    source: str = "<param file>"  # the param file, for messages


def validate(config, param_path="<param file>", do=None):
    """Check the whole param file and return a :class:`Plan`."""
    try:
        plan = _validate(config, do)
        plan.source = param_path
        return plan
    except ConfigError as e:
        raise ConfigError(f"{param_path}: {e}") from None


def _validate(config, do):
    trainer_section = dict(config["trainer"])
    if do is not None:
        trainer_section["do"] = do
    check_kwargs(TrainerConfig, trainer_section, "trainer", label="trainer")
    trainer = TrainerConfig(**trainer_section)

    model_section = dict(config["model"])
    if "type" not in model_section:
        raise ConfigError(f"model.type: required key is missing (available: {', '.join(MODELS.names())})")
    model_class = MODELS.get(model_section.pop("type"), "model.type")

    data_section = dict(config["dataset_reader"])
    data_section.setdefault("type", model_class.READERS[0])
    reader_class = READERS.get(data_section["type"], "dataset_reader.type")
    if data_section["type"] not in model_class.READERS:
        raise ConfigError(
            f"dataset_reader.type: {model_class.__name__} reads {', '.join(model_class.READERS)}, "
            f"not {data_section['type']!r}"
        )
    common = {k: data_section.pop(k) for k in list(data_section) if k in DatasetConfig.__dataclass_fields__}
    _check_reader_keys(common, reader_class, data_section)
    data = DatasetConfig(**common)
    if data.max_seq_len < 8:
        raise ConfigError(f"dataset_reader.max_seq_len: must be >= 8, got {data.max_seq_len}")

    modes = trainer.do or [m for m, split in (("train", "train"), ("eval", None), ("predict", "predict"))
                           if split is None or getattr(data, split)]
    if "eval" in modes and not (data.dev or data.test):
        if trainer.do is not None:
            raise ConfigError("trainer.do: 'eval' needs dataset_reader.dev or dataset_reader.test")
        modes.remove("eval")
    for mode, split in (("train", "train"), ("predict", "predict")):
        if mode in modes and not getattr(data, split):
            raise ConfigError(f"dataset_reader.{split}: required for trainer.do {mode!r}")
    for split in SPLITS:
        path = getattr(data, split)
        if path is not None and not os.path.isfile(path):
            raise ConfigError(f"dataset_reader.{split}: no such file {path!r}")

    init_from = trainer.init_from
    if "train" not in modes and init_from is None:
        init_from = os.path.join(trainer.output_dir, "best")
        if not os.path.isdir(init_from):
            raise ConfigError(
                f"trainer.init_from: trainer.do {modes} does not train, so it needs a trained model: "
                f"{init_from!r} does not exist (train first, or set trainer.init_from to a best/ folder)"
            )
    if init_from is not None and not os.path.isfile(os.path.join(init_from, "labels.json")):
        raise ConfigError(f"trainer.init_from: {init_from!r} is not a best/ folder of an appzoo run")

    encoder = model_section.pop("encoder", None)
    if encoder is None and init_from is None:
        raise ConfigError("model.encoder: required key is missing (a PaddleNLP name, a local folder, "
                          "or {\"config\": \"configs/ernie_tiny.json\"})")
    encoder = parse_encoder_spec(encoder) if encoder is not None else None
    check_kwargs(model_class, model_section, "model", injected=model_class.INJECTED, label=model_class.__name__)
    reader_class(**data_section)  # constructors check their own value ranges

    # A folder counts as holding a run once a model was saved there; a run that
    # stopped before (a bad metric name at the first evaluation, say) can be redone.
    saved = any(os.path.exists(os.path.join(trainer.output_dir, d)) for d in ("best", "checkpoints"))
    if "train" in modes and not trainer.resume and not trainer.overwrite_output_dir and saved:
        raise ConfigError(
            f"trainer.output_dir: {trainer.output_dir!r} already holds a run; choose another folder, "
            f"or set trainer.resume=true to continue it or trainer.overwrite_output_dir=true to replace it"
        )
    resolved = json.loads(json.dumps(config))
    resolved["trainer"] = dataclasses.asdict(trainer)
    resolved["trainer"]["do"] = modes
    return Plan(resolved, data, reader_class, data_section, model_class, model_section,
                encoder, trainer, modes, init_from)


def _check_reader_keys(common, reader_class, rest):
    """Unknown keys of dataset_reader are checked against the shared keys and
    the reader's own, so the message lists both."""
    accepted = set(DatasetConfig.__dataclass_fields__)
    try:
        check_kwargs(reader_class, rest, "dataset_reader", label=common.get("type"))
    except ConfigError as e:
        message = str(e)
        if "unknown key" in message and "(accepted: " in message:
            head, tail = message.rsplit("(accepted: ", 1)
            names = sorted(accepted | set(tail.rstrip(")").split(", ")))
            raise ConfigError(f"{head}(accepted: {', '.join(names)})") from None
        raise
    check_kwargs(DatasetConfig, common, "dataset_reader", label="dataset_reader")


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
