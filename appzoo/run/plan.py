"""Planning a run: everything a param file can get wrong is raised here.

:func:`validate` turns a loaded param file into a :class:`Plan` before any
data, weights or output folder is touched; nothing is written until the plan
is complete.
"""
import dataclasses
import os
from typing import Optional

from appzoo.store import bundle
from appzoo.store.archive import RunFolder
from appzoo.run import param_groups
from appzoo.run.callbacks import VisualDLLogger
from appzoo.params.keys import check_kwargs, non_finite
from appzoo.params.dataset import SPLITS, DatasetConfig
from appzoo.data.sampler import Sampler
from appzoo.encoders.sources import check_model_sources
from appzoo.encoders.spec import parse_encoder_spec
from appzoo.errors import ConfigError
from appzoo.params.param_file import check_text
from appzoo.params.sections import SECTIONS, build, plain_sections
from appzoo.registry import MODELS, READERS, did_you_mean
from appzoo.store.resolve import resolve
from appzoo.params.trainer import AUTO, Do, TrainerConfig


@dataclasses.dataclass
class Plan:
    """A validated param file."""

    config: dict  # the resolved param tree, as written to config.json (appzoo.store.resolve)
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
    metric: Optional[str] = None  # the dev metric the best model is chosen on
    greater: bool = True  # whether a larger ``metric`` is better
    defaults: dict = dataclasses.field(default_factory=dict)  # {key.path: default} (appzoo.store.resolve)
    command: Optional[dict] = None  # {"argv", "overrides"} as typed, for run_record.json (None: not from the CLI)
    distill: Optional[object] = None  # the distill section (DistillConfig) of a run that trains, or None


def validate(config, param_path="<param file>", do=None):
    """Check the whole param file and return a :class:`Plan`."""
    plan = _validate(config, do)  # run_trainer.main names the param file in messages, once
    plan.source = param_path
    return plan


def _validate(config, do):
    trainer = _trainer(config, do)
    model_section = dict(config.get("model", {}))
    if "type" not in model_section:
        raise ConfigError(f"model.type: required key is missing (available: {', '.join(MODELS.names())})")
    model_type = model_section.pop("type")
    model_class = MODELS.get(model_type, "model.type")
    data, reader_class, data_section = _dataset(config, model_class)
    modes = _modes(trainer, data)
    init_from = _init_from(trainer, modes, data)
    if trainer.audit_labels and init_from is not None:  # a fold would start from weights that saw it
        raise ConfigError(f"trainer.audit_labels: each fold trains from the model's initial weights, but "
                          f"{init_from!r} (trainer.init_from, or the run's best/ for modes that do not train) "
                          f"may have been trained on the very examples a fold holds out; run the audit without "
                          f"init_from, and without eval, predict or export in the same command")
    encoder = _encoder(model_section.pop("encoder", None), init_from, model_type, data, reader_class, data_section)
    # MODEL_ARGS: what the toolkit supplies (the encoder and reader.model_args()), never the param file
    check_kwargs(model_class, model_section, "model", supplied=model_class.MODEL_ARGS, label=model_class.__name__)
    reader = reader_class(**data_section)  # constructors check their own value ranges
    reader.check_plan(data)
    if trainer.audit_labels and reader.label_audit:
        raise ConfigError(f"trainer.audit_labels: not for dataset_reader.type {data.type!r}: {reader.label_audit}")
    Sampler.check_plan(trainer, reader, data.type)
    model_class.check_config(model_section, reader.plan_model_args())  # the loss, its fit to head and reader
    param_groups.check_plan(trainer, model_class, model_type)
    metric, greater = _check_metric(trainer, reader)
    distill = _distill(config, trainer, modes, model_class, model_type, data, data_section)
    _check_output_dir(trainer.output_dir)
    _check_run_folder(trainer, modes)
    trainer.do = modes
    resolved, defaults = resolve(config, trainer=trainer, data=data, reader_class=reader_class,
                                 reader_kwargs=data_section, model_class=model_class, model_kwargs=model_section,
                                 encoder=encoder)
    return Plan(resolved, data, reader_class, data_section, model_class, model_section, encoder, trainer, modes,
                init_from, metric=metric, greater=greater, defaults=defaults, distill=distill)


def _encoder(encoder, init_from, model_type, data, reader_class, data_section):
    """The parsed ``model.encoder`` (None with ``init_from``, whose saved encoder is used), its sources checked;
    or the saved model's fit to this run's task and data."""
    if encoder is None and init_from is None:
        raise ConfigError("model.encoder: required key is missing (a PaddleNLP name, a local folder, "
                          "or {\"config\": \"configs/ernie_tiny.json\"})")
    encoder = parse_encoder_spec(encoder) if encoder is not None else None
    if init_from is not None:  # the saved encoder is used (appzoo.store.bundle.build)
        bundle.check(init_from, "trainer.init_from", data.max_seq_len)
        bundle.check_fits(init_from, model_type, data.type, reader_class, data_section)
    else:
        check_model_sources(encoder, data.max_seq_len)
    return encoder


def _check_run_folder(trainer, modes):
    """A run that trains anew refuses a folder that holds a run (unless it replaces it) or files no run wrote.
    A folder counts as holding a run once a model was saved there; a run that stopped before (a bad metric
    name at the first evaluation, say) can be redone."""
    folder = RunFolder(trainer.output_dir)
    starts_anew = not trainer.resume or (trainer.resume == AUTO and folder.latest_checkpoint() is None)
    if modes.trains and starts_anew and not trainer.overwrite_output_dir and folder.has_run():
        raise ConfigError(
            f"trainer.output_dir: {trainer.output_dir!r} already holds a run"
            f"{' and no checkpoint to continue it from' if trainer.resume == AUTO else ''}; choose another folder, "
            f"or set trainer.resume=true to continue it or trainer.overwrite_output_dir=true to replace it"
        )
    writes = modes.trains and starts_anew or modes.audits  # an audit writes audit.md and audit.json
    foreign = writes and not trainer.overwrite_output_dir and folder.foreign_files()
    if foreign:
        raise ConfigError(
            f"trainer.output_dir: {trainer.output_dir!r} holds files no run wrote ({', '.join(foreign)}), which a "
            f"run would replace; choose another folder, or set trainer.overwrite_output_dir=true to replace them"
        )


def _distill(config, trainer, modes, model_class, model_type, data, data_section):
    """The ``distill`` section of a run that trains (None: no teacher), its teacher checked: a best/ folder of
    the same task, both models giving class logits."""
    if not config.get("distill") or not modes.trains:
        return None
    distill = build("distill", config["distill"])
    if distill.teacher is None:
        raise ConfigError("distill.teacher: required key is missing (the best/ folder of a trained run of the "
                          "same task, e.g. output/cls_e5_fc_ch/best)")
    if model_class.DISTILL is None:
        takes = ", ".join(n for n in MODELS.names() if MODELS.get(n, "model.type").DISTILL)
        raise ConfigError(f"distill: model.type {model_type!r} gives similarity scores, not class logits, so there "
                          f"is no distribution to match a teacher's on; distil into a model with logits ({takes})")
    if data_section.get("multi_label"):
        raise ConfigError("distill: dataset_reader.multi_label is true: a sigmoid per label is no distribution "
                          "over the labels, which the temperature-softened KL is taken over; distil a "
                          "single-label classifier")
    if trainer.audit_labels:
        raise ConfigError("trainer.audit_labels: a fold's model is scored on the examples it did not learn from, "
                          "but with distill it learns them from a teacher that saw them; audit without distill")
    if distill.transfer is not None and not os.path.isfile(distill.transfer):
        raise ConfigError(f"distill.transfer: no such file {distill.transfer!r} (a file of unlabelled inputs in the "
                          f"training file's format)")
    bundle.check(distill.teacher, "distill.teacher")
    root, teacher = os.path.realpath(trainer.output_dir), os.path.realpath(distill.teacher)
    if trainer.overwrite_output_dir and os.path.commonpath([root, teacher]) == root:
        raise ConfigError(f"distill.teacher: {distill.teacher!r} is inside trainer.output_dir {trainer.output_dir!r}, "
                          f"which trainer.overwrite_output_dir replaces: the teacher would be moved aside before the "
                          f"student learns from it; copy it out first (cp -rL), or write the student elsewhere")
    saved = bundle.saved_config(distill.teacher)
    teacher_type, teacher_reader = saved["model"].get("type"), saved["dataset_reader"].get("type")
    if teacher_reader != data.type:
        raise ConfigError(f"distill.teacher: {distill.teacher!r} was trained with dataset_reader.type "
                          f"{teacher_reader!r}; this run reads {data.type!r}: a teacher must do the same task")
    if teacher_type not in MODELS.names() or MODELS.get(teacher_type, "distill.teacher").DISTILL != model_class.DISTILL:
        raise ConfigError(f"distill.teacher: {distill.teacher!r} holds a {teacher_type!r} model, whose outputs "
                          f"are no class logits {'per word' if model_class.DISTILL == 'word' else 'per example'} "
                          f"as model.type {model_type!r} gives")
    return distill


def _trainer(config, do):
    """The ``trainer`` section (``--do`` given as ``do``), after the checks of the whole tree."""
    for name in SECTIONS:  # load_param_file checks this too; a config built in Python may lack it
        if not isinstance(config.get(name, {}), dict):
            raise ConfigError(f"{name}: expected an object, got {config[name]!r}")
    found = non_finite(config, "")
    if found:
        raise ConfigError(f"{found[0].lstrip('.')}: must be a finite number, got {found[1]!r}")
    section = dict(config.get("trainer", {}))
    if do is not None:
        section["do"] = do
    trainer = build("trainer", section)
    for name in plain_sections():  # a run that serves or searches later is told now about a bad key there
        if name != "trainer" and config.get(name):
            build(name, config[name])
    if trainer.visualdl:
        VisualDLLogger.check_installed()
    if trainer.amp != "off":
        import paddle

        if trainer.device == "cpu" or not paddle.is_compiled_with_cuda():
            raise ConfigError(f"trainer.amp: {trainer.amp!r} needs a GPU: paddle's autocast has no effect on "
                              f"CPU, so the run would be float32 anyway (use 'off', or a CUDA build of paddle)")
    return trainer


def _dataset(config, model_class):
    """``(DatasetConfig, reader class, the reader's own keys)`` of the ``dataset_reader`` section."""
    section = dict(config.get("dataset_reader", {}))
    section.setdefault("type", model_class.READERS[0])
    reader_class = READERS.get(section["type"], "dataset_reader.type")
    if section["type"] not in model_class.READERS:
        raise ConfigError(
            f"dataset_reader.type: {model_class.__name__} reads {', '.join(model_class.READERS)}, "
            f"not {section['type']!r}"
        )
    common, rest = DatasetConfig.split_section(section)
    _check_reader_keys(common, reader_class, rest)
    data = DatasetConfig(**common)
    for split in SPLITS:
        path = getattr(data, split)
        if path is not None and not os.path.isfile(path):
            raise ConfigError(f"dataset_reader.{split}: no such file {path!r}")
    return data, reader_class, rest


def _modes(trainer, data):
    """The modes to run: ``trainer.do``, or what the data files given call for."""
    modes = Do(trainer.do or [m for m, split in (("train", "train"), ("eval", None), ("predict", "predict"))
                              if split is None or getattr(data, split)])
    if modes.evaluates and not (data.dev or data.test):
        if trainer.do is not None:
            raise ConfigError("trainer.do: 'eval' needs dataset_reader.dev or dataset_reader.test")
        modes.remove("eval")
    for mode, split in (("train", "train"), ("predict", "predict")):
        if mode in modes and not getattr(data, split):
            raise ConfigError(f"dataset_reader.{split}: required for trainer.do {mode!r}")
    if (trainer.audit or trainer.audit_labels) and not modes.audits:
        modes = Do(["audit", *modes])
    return modes


def _init_from(trainer, modes, data):
    """The ``best/`` folder the run starts from: ``trainer.init_from``, or the
    run's own ``best/`` for modes that do not train; None for a new model."""
    init_from = trainer.init_from
    if modes.audits and not data.train and init_from is None:
        raise ConfigError("dataset_reader.train: required for trainer.do 'audit' (the vocabulary and label set "
                          "come from it), unless trainer.init_from names a trained model")
    if modes.uses_a_trained_model and init_from is None:
        init_from = RunFolder(trainer.output_dir).best
        if not os.path.isdir(init_from):
            raise ConfigError(
                f"trainer.init_from: trainer.do {modes} does not train, so it needs a trained model: "
                f"{init_from!r} does not exist (train first, or set trainer.init_from to a best/ folder)"
            )
    return init_from


def _check_metric(trainer, reader):
    """``(name, greater_is_better)`` of the dev metric the best model is chosen on,
    checked against the names the reader declares (the trainer checks again at
    the first evaluation)."""
    metric, greater = trainer.dev_metric(reader)
    names = reader.metric_names()
    if names is not None and metric not in names:
        raise ConfigError(
            f"trainer.metric_for_best: {metric!r} is not a dev metric of this task{did_you_mean(metric, names)} "
            f"(available: {', '.join(sorted(names))})"
        )
    return metric, greater


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
