"""A trained model's files: their names (``best/``'s and a checkpoint's) and the digest of those defining its graph.

:mod:`appzoo.store.bundle` writes and reads what is in them; :mod:`appzoo.store.archive` stages, marks and
swaps the folders that hold them. Both read the names from here, so the run folder's bookkeeping does not load
the model-building code (the encoders) to know a file's name. A ``best/`` folder holds:

* ``model.safetensors``: the whole model's weights, as plain arrays (reading them runs no code); a ``best/``
  saved before holds ``model_state.pdparams``, Paddle's pickle, which :mod:`appzoo.store.bundle` loads only
  where the user runs it (the command line, the Predictor) and the server only when told to trust it;
* ``encoder/``: the encoder's config and tokenizer (its weights are in the model's);
* ``labels.json``, ``model_args.json`` (class counts, tag names, ...),
  ``reader_state.json`` (a tuned threshold, ...), ``config.json`` (the
  resolved param tree) and ``best.json`` (``{"step", "metric", "value"}``);
* ``COMPLETE``: the marker, written last by the run folder.

A checkpoint stores its reader state and config under the same names, and its weights (beside the
optimizer's state, a pickle too: a checkpoint is resumed only by the run that wrote it) as
``model_state.pdparams``.
"""
import hashlib
import os

from appzoo.utils.files import file_sha256

MODEL_FILE = "model.safetensors"
PICKLED_MODEL_FILE = "model_state.pdparams"  # a checkpoint's weights; a best/'s before safetensors
LABELS_FILE = "labels.json"
MODEL_ARGS_FILE = "model_args.json"
READER_STATE_FILE = "reader_state.json"
CONFIG_FILE = "config.json"
INFO_FILE = "best.json"
ENCODER_DIR = "encoder"
MARKER = "COMPLETE"
FILES = (LABELS_FILE, MODEL_ARGS_FILE, READER_STATE_FILE, CONFIG_FILE, INFO_FILE)  # and one weights file


def weights_file(folder):
    """The weights file of the ``best/`` ``folder``: its safetensors, else the pickle of a ``best/`` saved
    before them, else None."""
    for name in (MODEL_FILE, PICKLED_MODEL_FILE):
        if os.path.isfile(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return None


#: The files of a ``best/`` that define its exported graph beside its weights (the model's settings, its labels,
#: the encoder's config); the reader state and best.json are left out: they change the host's decoding, not the graph.
GRAPH_FILES = (CONFIG_FILE, MODEL_ARGS_FILE, LABELS_FILE)


def digest(folder):
    """The sha256 of what defines the graph of the ``best/`` ``folder`` (its weights, :data:`GRAPH_FILES` and every
    file of ``encoder/``), from the files' contents and names alone: the same for a copy with other timestamps,
    another for any other model (a ``best/`` saved before safetensors keeps the digest it had). An export records
    it (:mod:`appzoo.inference.export`), to tell whether it is of this model."""
    total = hashlib.sha256()
    encoder = os.path.join(folder, ENCODER_DIR)
    weights = weights_file(folder)
    names = [os.path.basename(weights) if weights else PICKLED_MODEL_FILE, *GRAPH_FILES]
    for base, dirs, files in os.walk(encoder):
        dirs.sort()
        names += sorted(os.path.relpath(os.path.join(base, name), folder) for name in files)
    for name in names:
        path = os.path.join(folder, name)
        total.update(f"{name}\0{file_sha256(path) if os.path.isfile(path) else '-'}\n".encode())
    return total.hexdigest()
