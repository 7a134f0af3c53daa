"""Export a model's ``forward`` as a static graph (``<run>/inference/``), convert it to ONNX, quantize it.

The graph ends at the model's raw outputs (``logits`` or ``scores``); the
model's own ``decode`` runs on the host on every engine (:mod:`appzoo.inference.engines`).
The folder is written under a temporary name and swapped in whole, each file
in it under a temporary name and renamed into place, so a kill leaves no half
file:

* ``exported_from.json``: what the graph was exported from (:func:`source_key`:
  the sha256 of the ``best/`` folder's contents and of the model section), so
  that :func:`current` re-exports when ``best/`` holds another model, whatever
  its timestamps (a copy made with ``cp -a`` or ``rsync -a``);
* ``model.json`` + ``model.pdiparams``: the static graph (:func:`export`);
* ``model.onnx``: converted by paddle2onnx and fused (:func:`appzoo.inference.graph_files.onnx_model`);
* ``model.int8-<key>-<settings>.onnx`` / ``model.int8-static-<key>-<settings>.onnx``: quantized by
  :mod:`appzoo.inference.quantize`; ``<key>`` begins the export's source key, so a file of another model is
  never reused, and ``<settings>`` hashes how it was quantized, so a file of other settings is never reused.
"""
import hashlib
import json
import os
import warnings

from appzoo.store import bundle_files
from appzoo.store.archive import RunFolder
from appzoo.inference.graph_files import SOURCE_FILE, exported_key
from appzoo.utils.files import swap_in, write_json


def source_key(trained, best):
    """What an export of ``trained`` (a :class:`~appzoo.store.bundle.Bundle` loaded from, or saved as, the
    ``best/`` folder ``best``) is of: the sha256 of best/'s contents (:func:`appzoo.store.bundle_files.digest`) and
    of the model section the model was built with (a run with ``trainer.init_from`` builds the saved
    weights with its own; its ``encoder`` is not used then, so it is left out); None when ``best`` is
    not a folder."""
    if not os.path.isdir(best):
        return None
    section = {k: v for k, v in trained.config.get("model", {}).items() if k != "encoder"}
    model = json.dumps(section, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{bundle_files.digest(best)}\n{model}".encode()).hexdigest()


def current(trained, best, folder=None):
    """The export folder of ``trained`` (see :func:`source_key`), ``folder`` or the ``inference/`` of the run
    folder ``best`` sits in (:meth:`RunFolder.of_best`): exported first unless it holds the graph of this very
    model. The one place that decides whether an export is stale: a content check, made once per call (best/
    hashed, compared with the key the export recorded)."""
    folder = RunFolder.of_best(best).inference if folder is None else folder
    key = source_key(trained, best)
    if key is None or exported_key(folder) != key:
        export(trained.model, folder, key)
    return folder


def export(model, folder, key=None):
    """The model's ``forward`` as a static graph for ``model.input_spec()``,
    written under a temporary name and swapped into ``folder`` whole, with
    ``key`` (:func:`source_key`; None: unknown, exported again when next needed) in its source file."""
    import paddle

    tmp = f"{folder}.tmp-{os.getpid()}"
    model.eval()
    with warnings.catch_warnings():  # paddle explains, at every save, what it does by design with both
        for message in _JIT_NOTES:
            warnings.filterwarnings("ignore", message=message)
        static = paddle.jit.to_static(model.forward, input_spec=model.input_spec(), full_graph=True)
        paddle.jit.save(static, os.path.join(tmp, "model"))
    write_json(os.path.join(tmp, SOURCE_FILE), {"sha256": key})
    swap_in(tmp, folder)
    return folder


#: What ``paddle.jit.save`` says about saving a function and a dict of outputs (flattened by key, as
#: :mod:`appzoo.inference.engines` reads them back).
_JIT_NOTES = ("What you save is a function", "Found 'dict' in given outputs")


