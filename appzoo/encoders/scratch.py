"""An ERNIE trained from scratch: its config file, checked key by key, and a
vocabulary built from the training texts."""
import collections
import inspect
import math
import os
import re

from appzoo.encoders.checks import read_json_object
from appzoo.errors import ConfigError
from appzoo.registry import did_you_mean

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
POSITIVE_SIZES = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                  "max_position_embeddings", "type_vocab_size", "task_type_vocab_size")
DROPOUTS = ("hidden_dropout_prob", "attention_probs_dropout_prob")


def ernie_defaults():
    """ErnieConfig's own keys and their defaults (its signature, without **kwargs)."""
    from paddlenlp.transformers import ErnieConfig

    params = inspect.signature(ErnieConfig.__init__).parameters.values()
    return {p.name: p.default for p in params
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def read_scratch_config(path):
    """Read and check a from-scratch ERNIE config file; returns the keyword
    arguments for ``ErnieConfig`` (without ``vocab_size``, which the built
    vocabulary sets). Each problem is a ConfigError naming ``file:line: key``."""
    text, settings = read_json_object(path, "", ConfigError, duplicates=True)
    defaults = ernie_defaults()
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


def build_scratch_encoder(spec, texts, work_dir):
    """``(ErnieModel, ErnieTokenizer)`` with random weights and a vocabulary of
    ``texts``, written into ``work_dir``."""
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
