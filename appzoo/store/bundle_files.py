"""A trained model's files: their names (``best/``'s and a checkpoint's) and the digest of those defining its graph.

:mod:`appzoo.store.bundle` writes and reads what is in them; :mod:`appzoo.store.archive` stages, marks and
swaps the folders that hold them. Both read the names from here, so the run folder's bookkeeping does not load
the model-building code (the encoders) to know a file's name. A ``best/`` folder holds:

* ``model_state.pdparams``: the whole model's weights;
* ``encoder/``: the encoder's config and tokenizer (its weights are in the model's);
* ``labels.json``, ``model_args.json`` (class counts, tag names, ...),
  ``reader_state.json`` (a tuned threshold, ...), ``config.json`` (the
  resolved param tree) and ``best.json`` (``{"step", "metric", "value"}``);
* ``COMPLETE``: the marker, written last by the run folder.

A checkpoint stores its weights, reader state and config under the same names.
"""
import hashlib
import os

from appzoo.utils.files import file_sha256

MODEL_FILE = "model_state.pdparams"
LABELS_FILE = "labels.json"
MODEL_ARGS_FILE = "model_args.json"
READER_STATE_FILE = "reader_state.json"
CONFIG_FILE = "config.json"
INFO_FILE = "best.json"
ENCODER_DIR = "encoder"
MARKER = "COMPLETE"
FILES = (MODEL_FILE, LABELS_FILE, MODEL_ARGS_FILE, READER_STATE_FILE, CONFIG_FILE, INFO_FILE)


#: The files of a ``best/`` that define its exported graph (the weights, the model's settings, its labels, the
#: encoder's config); the reader state and best.json are left out: they change the host's decoding, not the graph.
GRAPH_FILES = (MODEL_FILE, CONFIG_FILE, MODEL_ARGS_FILE, LABELS_FILE)


def digest(folder):
    """The sha256 of what defines the graph of the ``best/`` ``folder`` (:data:`GRAPH_FILES` and every file of
    ``encoder/``), from the files' contents and names alone: the same for a copy with other timestamps, another
    for any other model. An export records it (:mod:`appzoo.inference.export`), to tell whether it is of this model."""
    total = hashlib.sha256()
    encoder = os.path.join(folder, ENCODER_DIR)
    names = list(GRAPH_FILES)
    for base, dirs, files in os.walk(encoder):
        dirs.sort()
        names += sorted(os.path.relpath(os.path.join(base, name), folder) for name in files)
    for name in names:
        path = os.path.join(folder, name)
        total.update(f"{name}\0{file_sha256(path) if os.path.isfile(path) else '-'}\n".encode())
    return total.hexdigest()
