"""Planning a run: everything a param file can get wrong is raised here.

:func:`validate` turns a loaded param file into a :class:`Plan` before any
data, weights or output folder is touched; nothing is written until the plan
is complete.
"""
import dataclasses
import inspect
import json
import os
from typing import Annotated, Optional

from appzoo.archive import RunFolder, check_best, read_json
from appzoo.callbacks import VisualDLLogger
from appzoo.config import SECTIONS, Key, check_fields, check_kwargs, check_text, non_finite
from appzoo.data.sampler import CLASS_SAMPLERS, choose_sampler
from appzoo.encoders import check_model_sources, parse_encoder_spec
from appzoo.errors import ConfigError
from appzoo.registry import MODELS, READERS, did_you_mean
from appzoo.trainer_config import TrainerConfig

SPLITS = ("train", "dev", "test", "predict")


@dataclasses.dataclass
class DatasetConfig:
    """The keys of ``dataset_reader`` that every task shares; the rest go to the reader."""

    type: Annotated[Optional[str], Key("the task's reader (null: the model's first reader)")] = None
    train: Annotated[Optional[str], Key("training data file")] = None
    dev: Annotated[Optional[str], Key("dev data file: evaluated during training; chooses best/")] = None
    test: Annotated[Optional[str], Key("test data file: evaluated after training")] = None
    predict: Annotated[Optional[str], Key("file to predict (labels optional): predictions.jsonl")] = None
    max_seq_len: Annotated[int, Key("tokens per encoded sequence, [CLS] and [SEP] included", ge=8)] = 128

    def __post_init__(self):
        check_fields(self, "dataset_reader")


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
    metric: Optional[str] = None  # the dev metric the best model is chosen on (for reader.check_split)


def validate(config, param_path="<param file>", do=None):
    """Check the whole param file and return a :class:`Plan`."""
    plan = _validate(config, do)  # run_trainer.main names the param file in messages, once
    plan.source = param_path
    return plan


def _validate(config, do):
    for name in SECTIONS:  # load_param_file checks this too; a config built in Python may lack it
        if not isinstance(config.get(name, {}), dict):
            raise ConfigError(f"{name}: expected an object, got {config[name]!r}")
    found = non_finite(config, "")
    if found:
        raise ConfigError(f"{found[0].lstrip('.')}: must be a finite number, got {found[1]!r}")
    trainer_section = dict(config.get("trainer", {}))
    if do is not None:
        trainer_section["do"] = do
    check_kwargs(TrainerConfig, trainer_section, "trainer", label="trainer")
    trainer = TrainerConfig(**trainer_section)
    if trainer.visualdl:
        VisualDLLogger.check_installed()

    model_section = dict(config.get("model", {}))
    if "type" not in model_section:
        raise ConfigError(f"model.type: required key is missing (available: {', '.join(MODELS.names())})")
    model_type = model_section.pop("type")
    model_class = MODELS.get(model_type, "model.type")

    data_section = dict(config.get("dataset_reader", {}))
    data_section.setdefault("type", model_class.READERS[0])
    reader_type = data_section["type"]
    reader_class = READERS.get(reader_type, "dataset_reader.type")
    if data_section["type"] not in model_class.READERS:
        raise ConfigError(
            f"dataset_reader.type: {model_class.__name__} reads {', '.join(model_class.READERS)}, "
            f"not {data_section['type']!r}"
        )
    common = {k: data_section.pop(k) for k in list(data_section) if k in DatasetConfig.__dataclass_fields__}
    _check_reader_keys(common, reader_class, data_section)
    data = DatasetConfig(**common)

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

    if trainer.audit and "audit" not in modes:
        modes = ["audit", *modes]
    if trainer.amp != "off":
        import paddle

        if trainer.device == "cpu" or not paddle.is_compiled_with_cuda():
            raise ConfigError(f"trainer.amp: {trainer.amp!r} needs a GPU: paddle's autocast has no effect on "
                              f"CPU, so the run would be float32 anyway (use 'off', or a CUDA build of paddle)")
    init_from = trainer.init_from
    if "audit" in modes and not data.train and init_from is None:
        raise ConfigError("dataset_reader.train: required for trainer.do 'audit' (the vocabulary and label set "
                          "come from it), unless trainer.init_from names a trained model")
    if "train" not in modes and {"eval", "predict", "export"} & set(modes) and init_from is None:
        init_from = os.path.join(trainer.output_dir, "best")
        if not os.path.isdir(init_from):
            raise ConfigError(
                f"trainer.init_from: trainer.do {modes} does not train, so it needs a trained model: "
                f"{init_from!r} does not exist (train first, or set trainer.init_from to a best/ folder)"
            )
    if init_from is not None:
        check_best(init_from, "trainer.init_from")
        _check_same_model(init_from, model_type, reader_type, reader_class, data_section)

    encoder = model_section.pop("encoder", None)
    if encoder is None and init_from is None:
        raise ConfigError("model.encoder: required key is missing (a PaddleNLP name, a local folder, "
                          "or {\"config\": \"configs/ernie_tiny.json\"})")
    encoder = parse_encoder_spec(encoder) if encoder is not None else None
    builds_encoder = encoder is not None and init_from is None  # else the saved encoder is used (runner.prepare)
    check_model_sources(encoder if builds_encoder else None, init_from, data.max_seq_len)
    # MODEL_ARGS: what the toolkit supplies (the encoder and reader.model_args()), never the param file
    check_kwargs(model_class, model_section, "model", supplied=model_class.MODEL_ARGS, label=model_class.__name__)
    reader = reader_class(**data_section)  # constructors check their own value ranges
    reader.check_plan(data)
    _check_sampler(trainer, reader, data.type)
    if hasattr(model_class, "check_config"):  # the loss and its fit to the head and the reader's config
        model_class.check_config(model_section, reader.plan_model_args())
    metric = _check_metric(trainer, reader)
    _check_output_dir(trainer.output_dir)

    # A folder counts as holding a run once a model was saved there; a run that
    # stopped before (a bad metric name at the first evaluation, say) can be redone.
    if "train" in modes and not trainer.resume and not trainer.overwrite_output_dir \
            and RunFolder(trainer.output_dir).has_run():
        raise ConfigError(
            f"trainer.output_dir: {trainer.output_dir!r} already holds a run; choose another folder, "
            f"or set trainer.resume=true to continue it or trainer.overwrite_output_dir=true to replace it"
        )
    resolved = json.loads(json.dumps(config))
    resolved["trainer"] = dataclasses.asdict(trainer)
    resolved["trainer"]["do"] = modes
    return Plan(resolved, data, reader_class, data_section, model_class, model_section,
                encoder, trainer, modes, init_from, metric=metric)


def _check_same_model(init_from, model_type, reader_type, reader_class, data_section):
    """A saved model is loaded into the same model type, read by the same reader
    with the same :attr:`~appzoo.data.reader.DatasetReader.MODEL_KEYS`."""
    saved = read_json(os.path.join(init_from, "config.json"), "config of a best/ folder")
    saved_model = saved.get("model", {}).get("type")
    saved_reader = saved.get("dataset_reader", {}).get("type")
    if saved_model != model_type:
        raise ConfigError(f"trainer.init_from: {init_from!r} holds a {saved_model!r} model (read by "
                          f"{saved_reader!r}); this param file builds model.type {model_type!r}: use a param file "
                          f"of that model, or train this one from model.encoder")
    if saved_reader != reader_type:
        raise ConfigError(f"trainer.init_from: {init_from!r} was trained with dataset_reader.type "
                          f"{saved_reader!r}; this param file reads {reader_type!r}")
    defaults = {name: p.default for name, p in inspect.signature(reader_class.__init__).parameters.items()}
    for key in reader_class.MODEL_KEYS:
        was = saved.get("dataset_reader", {}).get(key, defaults.get(key))
        now = data_section.get(key, defaults.get(key))
        if was != now:
            raise ConfigError(f"dataset_reader.{key}: {json.dumps(now)}, but the model in trainer.init_from "
                              f"{init_from!r} was trained with {json.dumps(was)}; a model is loaded with the value "
                              f"it was trained with")


def _check_metric(trainer, reader):
    """The dev metric the best model is chosen on, checked against the names
    the reader declares (the trainer checks again at the first evaluation)."""
    metric = trainer.metric_for_best or reader.default_metric
    names = reader.metric_names()
    if names is not None and metric not in names:
        raise ConfigError(
            f"trainer.metric_for_best: {metric!r} is not a dev metric of this task{did_you_mean(metric, names)} "
            f"(available: {', '.join(sorted(names))})"
        )
    return metric


def _check_sampler(trainer, reader, reader_type):
    """The sampler fits the reader's training items: a class each for
    balanced and m_per_class, a query and a positive for no_duplicates."""
    sampler = choose_sampler(trainer.sampler, trainer.group_by_length,
                             getattr(reader, "batch_composition_matters", False))
    if sampler in CLASS_SAMPLERS and reader.sampling_classes([]) is None:
        raise ConfigError(f"trainer.sampler: {sampler!r} draws batches by class, but the training items of "
                          f"dataset_reader.type {reader_type!r} with this config have no class (triples, or "
                          f"in-batch positive pairs); use random or by_length"
                          f"{' or no_duplicates' if reader.duplicate_keys([]) is not None else ''}")
    if sampler == "no_duplicates" and reader.duplicate_keys([]) is None:
        raise ConfigError(f"trainer.sampler: 'no_duplicates' keeps repeated queries and positives out of a batch "
                          f"whose mates are the negatives; dataset_reader.type {reader_type!r} with this config "
                          f"has no in-batch negatives (that is text_matching_pairwise with negatives 'in_batch')")


def _check_output_dir(path):
    """The output folder is a folder, or can be made one, and can be written."""
    check_text(path, "trainer.output_dir")  # its name is saved in config.json: UTF-8 only
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"trainer.output_dir: {path!r} is a file, not a folder; choose a folder")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):  # the nearest part of the path that exists
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ConfigError(f"trainer.output_dir: {path!r} cannot be created: {existing!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is" if existing == os.path.abspath(path) else f"would be created in {existing!r}, which is"
        raise ConfigError(f"trainer.output_dir: {path!r} {what} not writable; choose a folder you can write to")


def _check_reader_keys(common, reader_class, rest):
    """The reader checks its own keys and DatasetConfig the shared ones; an
    unknown key's message lists both."""
    shared = tuple(DatasetConfig.__dataclass_fields__)
    check_kwargs(reader_class, rest, "dataset_reader", label=common.get("type"), also_accepted=shared)
    check_kwargs(DatasetConfig, common, "dataset_reader", label="dataset_reader")
