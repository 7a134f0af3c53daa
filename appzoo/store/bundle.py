"""A trained model as one object: the only code that builds, saves, loads and checks a ``best/`` folder.

A :class:`Bundle` is the model with everything it needs to predict: its
reader (tokenisation, collation, decoding, and what it tuned on dev), the
tokenizer, the labels, the model arguments it got from its training data and
the fully resolved param tree it was built from. On disk it is a ``best/``
folder whose files :mod:`appzoo.store.bundle_files` names; the run folder
(:meth:`appzoo.store.archive.RunFolder.save_best`) stages the folder, marks it
and swaps it in; this module writes the files inside it.

``trainer.init_from``, ``--do eval/predict/export``, :class:`appzoo.Predictor`
and the trainer's restore-best all go through :func:`load` /
:meth:`Bundle.restore`; a checkpoint (:mod:`appzoo.store.archive`) stores its
weights, reader state and config under the same names.
"""
import dataclasses
import inspect
import json
import os

from appzoo.store.run_files import BY_KEY
from appzoo.params.dataset import DatasetConfig
from appzoo.errors import ConfigError
from appzoo.utils.files import load_tensors, load_weights, read_json, save_tensors, write_json
from appzoo.encoders.checks import check_state_file
from appzoo.encoders.saved import check_saved_encoder, load_encoder, save_encoder
from appzoo.encoders.sources import build_encoder, saved_max_positions
from appzoo.utils.progress import note, quiet
from appzoo.data.encoding import encode_texts
from appzoo.data.unigram import UnigramTokenizer
from appzoo.encoders import frozen_prefix
from appzoo.encoders.prune import PRUNE, keep_layers, prune, read_keep_pieces, used_ids
from appzoo.registry import MODELS, READERS

from appzoo.store.bundle_files import (CONFIG_FILE, ENCODER_DIR, FILES, INFO_FILE, LABELS_FILE,  # noqa: F401
                                      MARKER, MODEL_ARGS_FILE, MODEL_FILE, READER_STATE_FILE,
                                      weights_file)


@dataclasses.dataclass
class Bundle:
    """A trained (or to-be-trained) model and everything needed to predict with it."""

    model: object
    reader: object
    tokenizer: object
    labels: list
    model_args: dict  # what the model got from its training data (class counts, tag names, ...)
    config: dict  # the resolved param tree it was built from (config.json)
    info: dict = None  # best.json of a loaded best/: {"step", "metric", "value"}

    @property
    def max_seq_len(self):
        return self.config.get("dataset_reader", {}).get("max_seq_len", DatasetConfig.max_seq_len)

    def save(self, folder, info):
        """Write every file of a ``best/`` but the marker into the new folder ``folder``."""
        save_tensors(self.model.state_dict(), os.path.join(folder, MODEL_FILE))
        save_encoder(self.model.encoder, self.tokenizer, os.path.join(folder, ENCODER_DIR))
        for name, obj in ((LABELS_FILE, self.labels), (MODEL_ARGS_FILE, self.model_args),
                          (READER_STATE_FILE, self.reader.state()), (CONFIG_FILE, self.config),
                          (INFO_FILE, info)):
            write_json(os.path.join(folder, name), obj)

    def restore(self, folder):
        """Put the weights and the reader state of the ``best/`` ``folder`` back into this model and reader."""
        self.model.set_state_dict(weights(folder))
        self.reader.load_state(read_json(os.path.join(folder, READER_STATE_FILE), "reader state"))


# ---------------------------------------------------------------------- build
def build(plan, reader, splits, work_dir):
    """The model a run trains or evaluates, from the plan and the data read.

    From scratch: labels and model arguments from the training split, the
    encoder from ``model.encoder`` (a from-scratch vocabulary goes into
    ``work_dir``). With ``trainer.init_from``: the saved model, its labels,
    encoder, vocabulary and weights, with the model section of this param file
    (a loss changed for further training, say); every split must use its labels.
    """
    if plan.init_from:
        def model_args(labels):
            for split in ("train", "dev", "test"):  # a model trained further must know every label of its data
                if split in splits:
                    reader.check_labels(splits[split], labels, getattr(plan.data, split))
            # a model that does not train keeps what it got from its own training data
            return reader.model_args(labels, splits["train"]) if plan.do.trains else None

        if plan.encoder is not None and plan.do.trains:
            note(f"note: trainer.init_from: training goes on from {plan.init_from}, with its encoder and "
                 f"vocabulary (model.encoder is not used)")
        return load(plan.init_from, reader=reader, model_kwargs=plan.model_kwargs, model_args=model_args,
                    config=plan.config)
    labels = reader.build_labels(splits["train"])
    for split in ("dev", "test"):
        if split in splits:
            reader.check_labels(splits[split], labels, getattr(plan.data, split))
    args = reader.model_args(labels, splits.get("train"))
    encoder, tokenizer = build_encoder(plan.encoder, lambda: reader.texts(splits["train"]), work_dir)
    if plan.encoder.layers is not None:
        depth = keep_layers(encoder, plan.encoder.layers)
        note(f"note: model.encoder.layers: the first {plan.encoder.layers} of the encoder's {depth} layers kept")
    if plan.encoder.prune_vocab:
        _prune_to_data(plan, reader, splits, labels, encoder, tokenizer)
    model = plan.model_class(encoder=encoder, **args, **plan.model_kwargs)
    if plan.encoder.freeze_layers:  # after pruning: the cache is named by the weights the run trains with
        frozen_prefix.attach(encoder, plan.encoder)
    return Bundle(model, reader, tokenizer, labels, args, plan.config)


def _prune_to_data(plan, reader, splits, labels, encoder, tokenizer):
    """``model.encoder.prune_vocab``: the encoder and tokenizer cut to the pieces
    of the run's train, dev and test files, as the reader encodes them, and of
    ``keep_pieces`` (:mod:`appzoo.encoders.prune`); one note says what was kept."""
    if not isinstance(tokenizer, UnigramTokenizer):
        raise ConfigError(f"{PRUNE}: {plan.encoder.pretrained!r} has a {type(tokenizer).__name__}; only a "
                          f"SentencePiece (XLM-R-family) tokenizer.json vocabulary is pruned")
    encoded, names = [], []
    for split in ("train", "dev", "test"):
        path = getattr(plan.data, split)
        if not path:
            continue
        with quiet():  # the run encodes (and notes on) its splits itself, with the pruned vocabulary
            examples = splits[split] if split in splits else reader.read(path, split)
            encoded.append(reader.encode(examples, tokenizer, labels, plan.data.max_seq_len, split))
        names.append(split)
    if reader.ADDED_TEXTS:  # a floor's prefix (appzoo.task.floor): the reader reads it beside its data
        with quiet():
            added = encode_texts(tokenizer, reader.ADDED_TEXTS)["input_ids"]
        encoded.append([{"input_ids": ids} for ids in added])
        names.append("the reader's added texts")
    transfer = plan.distill.transfer if plan.distill is not None else None
    if transfer:  # the student reads them too (appzoo.run.teacher)
        with quiet():
            encoded.append(reader.encode(reader.read(transfer, "predict"), tokenizer, labels, plan.data.max_seq_len,
                                         "transfer"))
        names.append(transfer)
    ids = used_ids(encoded)
    if plan.encoder.keep_pieces:
        ids.update(read_keep_pieces(plan.encoder.keep_pieces, tokenizer))
        names.append(plan.encoder.keep_pieces)
    full = tokenizer.vocab_size
    kept, before, after = prune(encoder, tokenizer, ids)
    note(f"note: {PRUNE}: {len(kept):,} of {full:,} pieces kept (the special tokens and those of "
         f"{', '.join(names)}); encoder parameters {_count(before)} -> {_count(after)}")


def _count(n):
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n:,}"


# ----------------------------------------------------------------------- load
def load(folder, key_path="Predictor", *, reader=None, model_kwargs=None, model_args=None, config=None,
         allow_pickle=True):
    """The model saved in the ``best/`` ``folder``, rebuilt from its own config.

    ``reader``: a reader to load the saved state into (default: built from the
    saved config); ``model_kwargs``: the model section to build with (default:
    the saved one); ``model_args(labels)``: the model arguments to build with,
    or None for the saved ones; ``config``: the param tree the bundle carries
    (default: the saved one); ``allow_pickle``: whether the weights of a ``best/`` saved before safetensors
    (a pickle) are loaded, with a note on how to re-save them (the command line, the Predictor), or refused
    (the server, unless started with --trust-pickled-weights): see :func:`weights`."""
    check(folder, key_path)
    saved = read_json(os.path.join(folder, CONFIG_FILE), "config of a best/ folder")
    model_class, reader_class, saved_kwargs, reader_kwargs = classes(saved, os.path.join(folder, CONFIG_FILE))
    reader = reader if reader is not None else reader_class(**reader_kwargs)
    reader.load_state(read_json(os.path.join(folder, READER_STATE_FILE), "reader state"))  # before labels: a scheme
    labels = read_json(os.path.join(folder, LABELS_FILE), "labels of a best/ folder")
    args = model_args(labels) if model_args else None
    if args is None:
        args = read_json(os.path.join(folder, MODEL_ARGS_FILE), "model arguments")
    reader.saved_model_args(args)
    encoder, tokenizer = load_encoder(os.path.join(folder, ENCODER_DIR))
    model = model_class(encoder=encoder, **args, **(saved_kwargs if model_kwargs is None else model_kwargs))
    model.set_state_dict(weights(folder, key_path, allow_pickle))
    return Bundle(model, reader, tokenizer, labels, args, config if config is not None else saved,
                  info=read_json(os.path.join(folder, INFO_FILE), "best step"))


def classes(config, source):
    """``(model class, reader class, model kwargs, reader kwargs)`` of a saved param tree
    (``source`` names its file in messages)."""
    model_section = dict(config.get("model", {}))
    data_section = dict(config.get("dataset_reader", {}))
    try:
        model_class = MODELS.get(model_section.pop("type", None), "model.type")
        reader_class = READERS.get(data_section.pop("type", None) or model_class.READERS[0],
                                   "dataset_reader.type")
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    model_section.pop("encoder", None)
    _, reader_kwargs = DatasetConfig.split_section(data_section)
    return model_class, reader_class, model_section, reader_kwargs


# -------------------------------------------------------------------- weights
_NOTED = set()  # the folders whose pickle was noted, once each in a process


def weights(folder, key_path="Predictor", allow_pickle=True):
    """The state dict of the ``best/`` ``folder``: its safetensors (plain arrays: reading them runs no code);
    for a ``best/`` saved before them, its pickle, loaded with a note on how to re-save it when
    ``allow_pickle``, else refused in one line (unpickling runs whatever code the file holds)."""
    path = check_pickle(folder, key_path, allow_pickle)
    if os.path.basename(path) == MODEL_FILE:
        return load_tensors(path)
    if folder not in _NOTED:
        _NOTED.add(folder)
        note(f"note: {path}: the weights are a pickle (a best/ saved before appzoo wrote safetensors), loaded "
             f"because you run it yourself; unpickling runs whatever code the file holds: re-save it as "
             f"safetensors with python run_trainer.py --resave {folder}")
    return load_weights(path)


def check_pickle(folder, key_path="Predictor", allow_pickle=True):
    """The weights file of the ``best/`` ``folder``; ConfigError, before anything is read, for a pickle when not
    ``allow_pickle`` (the server: unpickling runs whatever code the file holds)."""
    path = weights_file(folder)
    if os.path.basename(path) != MODEL_FILE and not allow_pickle:
        raise ConfigError(f"{key_path}: {path}: the weights are a pickle (a best/ saved before appzoo wrote "
                          f"safetensors) and unpickling runs whatever code the file holds, so the server does not "
                          f"load it: re-save it as safetensors where you trust it (python run_trainer.py --resave "
                          f"{folder}), or start the server with --trust-pickled-weights")
    return path


def resave(folder):
    """Write the pickled weights of the ``best/`` ``folder`` (one you trust: they are unpickled) as its
    safetensors, then remove the pickle; returns the new file's path."""
    check(folder, "--resave")
    path = weights_file(folder)
    if os.path.basename(path) == MODEL_FILE:
        raise ConfigError(f"--resave: {folder} holds its weights as safetensors already ({MODEL_FILE})")
    target = os.path.join(folder, MODEL_FILE)
    tmp = f"{target}.tmp-{os.getpid()}"
    try:
        save_tensors(load_weights(path), tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    os.remove(path)
    return target


# ---------------------------------------------------------------------- check
def check(folder, key_path="trainer.init_from", max_seq_len=None):
    """Raise a one-line error unless ``folder`` is a complete ``best/`` folder
    whose encoder and weights look sound and take ``max_seq_len`` tokens."""
    if not os.path.isdir(folder):
        if os.path.exists(folder):  # a file (a data file, a param file) where best/ was meant
            raise ConfigError(f"{key_path}: {folder!r} is a file, not a best/ folder of an appzoo run (give "
                              f"<output_dir>/best)")
        if os.path.islink(folder):  # cp -r of a run's best, which is a link to its hidden .best-step-N folder
            raise ConfigError(f"{key_path}: {folder!r} is a link to {os.readlink(folder)!r}, which is not there: a "
                              f"run's best is a link to a hidden folder beside it, so copy it with cp -rL (or the "
                              f"whole run folder with cp -a)")
        raise ConfigError(f"{key_path}: {folder!r} does not exist")
    if not os.path.isfile(os.path.join(folder, LABELS_FILE)):
        inner = os.path.join(folder, BY_KEY["best"].name)
        hint = f"; it is a run folder: use {inner!r}" if os.path.isfile(os.path.join(inner, LABELS_FILE)) else ""
        raise ConfigError(f"{key_path}: {folder!r} is not a best/ folder of an appzoo run (no {LABELS_FILE}){hint}")
    if not os.path.exists(os.path.join(folder, MARKER)):
        raise ConfigError(f"{key_path}: {folder!r} is an incomplete best/ folder (no {MARKER} marker: "
                          f"the save was interrupted)")
    missing = [name for name in FILES if not os.path.isfile(os.path.join(folder, name))]
    missing += [] if weights_file(folder) else [MODEL_FILE]
    if missing:
        raise ConfigError(f"{key_path}: {folder}: missing {', '.join(missing)}")
    encoder = os.path.join(folder, ENCODER_DIR)
    check_saved_encoder(encoder)
    check_state_file(weights_file(folder))
    limit = saved_max_positions(encoder)
    if max_seq_len is not None and limit is not None and max_seq_len > limit:
        raise ConfigError(f"dataset_reader.max_seq_len: {max_seq_len} is above the encoder's "
                          f"max_position_embeddings {limit} ({os.path.join(encoder, 'config.json')}); set it to "
                          f"{limit} or less")


def saved_config(folder):
    """The param tree a ``best/`` folder (checked by :func:`check`) was trained with."""
    saved = read_json(os.path.join(folder, CONFIG_FILE), "config of a best/ folder")
    return {"model": {}, "dataset_reader": {}, **saved}


def check_fits(folder, model_type, reader_type, reader_class, reader_kwargs):
    """Plan time: the model saved in ``folder`` is loaded into the same model type,
    read by the same reader with the same
    :attr:`~appzoo.task.reader.DatasetReader.MODEL_KEYS`."""
    saved = saved_config(folder)
    saved_model = saved.get("model", {}).get("type")
    saved_reader = saved.get("dataset_reader", {}).get("type")
    if saved_model != model_type:
        raise ConfigError(f"trainer.init_from: {folder!r} holds a {saved_model!r} model (read by "
                          f"{saved_reader!r}); this param file builds model.type {model_type!r}: use a param file "
                          f"of that model, or train this one from model.encoder")
    if saved_reader != reader_type:
        raise ConfigError(f"trainer.init_from: {folder!r} was trained with dataset_reader.type "
                          f"{saved_reader!r}; this param file reads {reader_type!r}")
    defaults = {name: p.default for name, p in inspect.signature(reader_class.__init__).parameters.items()}
    for key in reader_class.MODEL_KEYS:
        was = saved.get("dataset_reader", {}).get(key, defaults.get(key))
        now = reader_kwargs.get(key, defaults.get(key))
        if was != now:
            raise ConfigError(f"dataset_reader.{key}: {json.dumps(now)}, but the model in trainer.init_from "
                              f"{folder!r} was trained with {json.dumps(was)}; a model is loaded with the value "
                              f"it was trained with")

