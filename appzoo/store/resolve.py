"""The fully resolved param tree, and what changed between two of them.

A run saves its param file with every key written out (``config.json``, in
the run folder, ``best/`` and each checkpoint): each section carries its
defaults, filled from the same annotated signatures that drive
``--describe``, so comparing two runs compares what ran, not how the file was
spelled (spaCy saves its auto-filled config the same way).
"""
import dataclasses
import json

from appzoo.params.keys import with_defaults
from appzoo.encoders.spec import EncoderSpec
from appzoo.params.distill import DistillConfig
from appzoo.registry import LOSSES

#: Trainer keys a resumed run may change: they do not alter what is trained.
RESUME_MAY_CHANGE = ("output_dir", "do", "eval_batch_size", "logging_steps", "keep_checkpoints", "resume",
                     "overwrite_output_dir", "num_threads", "progress_bar", "plots", "device", "visualdl", "audit",
                     "inference_engine", "inference_precision", "inference_quantization", "calibration_examples",
                     "quantize_keep_fp32", "sensitivity_examples", "audit_labels", "audit_folds",
                     "floor")
#: Data keys a resumed run may change (evaluation and prediction only).
RESUME_MAY_CHANGE_DATA = ("test", "predict")
#: Keys a resumed run may raise to train longer (the learning-rate schedule is rebuilt for the new length).
TRAIN_LONGER = ("trainer.max_steps", "trainer.epochs")


def resolve(config, *, trainer, data, reader_class, reader_kwargs, model_class, model_kwargs, encoder):
    """``(tree, defaults)``: the param tree ``config`` with every key of every
    section written out, and ``{key.path: default}`` of the keys that have one
    (what a run saved before its key existed, or before trees were resolved,
    was trained with)."""
    tree = json.loads(json.dumps(config))
    tree["trainer"] = dataclasses.asdict(trainer)
    tree["dataset_reader"] = {**dataclasses.asdict(data), **with_defaults(reader_class, reader_kwargs)}
    model = with_defaults(model_class, model_kwargs, supplied=model_class.MODEL_ARGS)
    if model.get("loss") is not None:
        model["loss"] = resolve_loss(model["loss"])
    tree["model"] = {"type": tree["model"]["type"], "encoder": resolve_encoder(tree["model"].get("encoder")),
                     **model}
    if tree.get("distill"):  # a distilled run: its teacher, temperature and weight, each written out
        tree["distill"] = with_defaults(DistillConfig, tree["distill"])
    defaults = {}
    for section, target, supplied in (("trainer", type(trainer), ()), ("dataset_reader", type(data), ()),
                                      ("dataset_reader", reader_class, ()),
                                      ("model", model_class, model_class.MODEL_ARGS)):
        defaults.update({f"{section}.{k}": v for k, v in with_defaults(target, {}, supplied=supplied).items()})
    return json.loads(json.dumps(tree)), json.loads(json.dumps(defaults))


def resolve_encoder(value):
    """A ``model.encoder`` value as the object it stands for, every key written out
    (a string is ``pretrained``, or ``config`` when it ends in .json); None stays None."""
    if isinstance(value, str):
        value = {"config": value} if value.endswith(".json") else {"pretrained": value}
    return with_defaults(EncoderSpec, value) if isinstance(value, dict) else value


def resolve_loss(section):
    """A ``model.loss`` section with the loss's defaults written out (a loss
    inside it, as OHEM's ``base``, too)."""
    from appzoo.losses.build import SUPPLIED  # paddle: resolving a loss needs it; reading a config.json does not

    cls = LOSSES.get(section["name"], "model.loss.name")
    resolved = {"name": section["name"], **with_defaults(cls, {k: v for k, v in section.items() if k != "name"},
                                                       supplied=SUPPLIED)}
    return {k: resolve_loss(v) if isinstance(v, dict) and v.get("name") in LOSSES else v
            for k, v in resolved.items()}


_MISSING = object()


def changed_keys(saved, current, defaults=None, may_change=()):
    """``[(key.path, saved value, current value)]`` of the settings that change
    what is trained, between the saved tree of a run and the current one.

    A key the saved tree lacks (a run saved before the key existed, or
    before trees were resolved) was trained with its default (``defaults``,
    ``{key.path: value}``); a loss section and an encoder section are
    compared with their defaults written out on both sides. ``may_change``
    lists more key paths to leave out."""
    defaults = defaults or {}
    skip = {f"trainer.{k}" for k in RESUME_MAY_CHANGE} | {f"dataset_reader.{k}" for k in RESUME_MAY_CHANGE_DATA}
    skip |= set(may_change)
    out = []
    for section in ("dataset_reader", "model", "trainer"):
        old, new = saved.get(section) or {}, current.get(section) or {}
        for name in sorted(set(old) | set(new)):
            key = f"{section}.{name}"
            if key in skip:
                continue
            was = old.get(name, defaults.get(key, _MISSING))
            now = new.get(name, defaults.get(key, _MISSING))
            if was is _MISSING and section == "trainer":
                continue  # a key newer than the checkpoint, without a default to compare with
            if key == "model.loss":
                was, now = (resolve_loss(v) if isinstance(v, dict) and "name" in v else v for v in (was, now))
            if key == "model.encoder":
                was, now = (resolve_encoder(v) if v is not _MISSING else v for v in (was, now))
            if was != now:
                out.append((key, None if was is _MISSING else was, None if now is _MISSING else now))
    return out


def trains_longer(saved, current):
    """True when ``current`` differs from ``saved`` only by asking for more
    steps: a larger ``trainer.max_steps``, or (without max_steps) more ``trainer.epochs``."""
    was, now = saved.get("trainer", {}), current.get("trainer", {})
    steps_was, steps_now = was.get("max_steps", -1), now.get("max_steps", -1)
    if steps_now > 0:
        return steps_was > 0 and steps_now > steps_was
    return steps_was == steps_now == -1 and now.get("epochs", 3) > was.get("epochs", 3)
