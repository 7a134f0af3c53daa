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
* ``model.onnx``: converted by paddle2onnx, then fused by ONNX Runtime's
  transformer optimizer (LayerNorm, GELU: the same outputs, half the time);
* ``model.int8-<key>-<settings>.onnx`` / ``model.int8-static-<key>-<settings>.onnx``: quantized by
  :mod:`appzoo.inference.quantize`; ``<key>`` begins the export's source key, so a file of another model is
  never reused, and ``<settings>`` hashes how it was quantized, so a file of other settings is never reused.
"""
import contextlib
import hashlib
import io
import json
import logging
import os
import warnings

from appzoo.store import bundle
from appzoo.store.archive import RunFolder
from appzoo.errors import RunError, UserError, first_line
from appzoo.utils.files import file_sha256, read_json, swap_in, write_json

ONNX_FILE = "model.onnx"
SOURCE_FILE = "exported_from.json"
#: hex digits of the source key in the names of the int8 files
KEY_LENGTH = 12


def graph_files(folder):
    """``(graph, params)`` of an exported folder: ``model.json`` under Paddle
    3.x's PIR, ``model.pdmodel`` under the old IR; None when not exported."""
    for name in ("model.json", "model.pdmodel"):
        if os.path.isfile(os.path.join(folder, name)) and os.path.isfile(os.path.join(folder, "model.pdiparams")):
            return os.path.join(folder, name), os.path.join(folder, "model.pdiparams")
    return None


def source_key(trained, best):
    """What an export of ``trained`` (a :class:`~appzoo.store.bundle.Bundle` loaded from, or saved as, the
    ``best/`` folder ``best``) is of: the sha256 of best/'s contents (:func:`appzoo.store.bundle.digest`) and
    of the model section the model was built with (a run with ``trainer.init_from`` builds the saved
    weights with its own; its ``encoder`` is not used then, so it is left out); None when ``best`` is
    not a folder."""
    if not os.path.isdir(best):
        return None
    section = {k: v for k, v in trained.config.get("model", {}).items() if k != "encoder"}
    model = json.dumps(section, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{bundle.digest(best)}\n{model}".encode()).hexdigest()


def exported_key(folder):
    """The source key recorded in an exported ``folder``, or None (not exported, or exported before keys)."""
    path = os.path.join(folder, SOURCE_FILE)
    if graph_files(folder) is None or not os.path.isfile(path):
        return None
    try:
        return read_json(path, "export's source").get("sha256")
    except (UserError, AttributeError):  # damaged: the folder is exported again
        return None


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


def onnx_model(folder):
    """``folder/model.onnx``, converted from the static graph by paddle2onnx and
    fused by ONNX Runtime's transformer optimizer, when missing (an export
    replaces the folder whole, so one there was converted from its graph)."""
    graph, params = graph_files(folder)
    target = os.path.join(folder, ONNX_FILE)
    if os.path.isfile(target):
        return target
    import paddle2onnx

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            data = paddle2onnx.export(graph, params, save_file=None, opset_version=13, auto_upgrade_opset=True)
    except Exception as e:  # paddle2onnx logs the cause and leaves its result unset
        raise RunError(f"{graph}: paddle2onnx could not convert the graph to ONNX ({type(e).__name__}: "
                       f"{str(e).strip()[:200]}); use engine 'paddle_inference'") from None
    with written(target) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
        _fuse(tmp)
    return target


def unreadable(path, engine, error):
    """The one-line error for an exported file that ``engine`` cannot load (truncated or corrupt after it was
    written), naming the file and the way out: the server, eval, predict and the Predictor all give it."""
    return UserError(f"{path}: {engine} cannot load the exported graph ({type(error).__name__}: "
                     f"{first_line(error)}); the file is truncated or corrupt: export it again with --do export")


def _fuse(path):
    """In place: fold paddle2onnx's constants into initializers and infer shapes
    (ONNX Runtime's pre-processing for quantization, which finds weights only as
    initializers), then fuse the decomposed LayerNorm and GELU (ONNX Runtime's
    BERT patterns; nothing changes where none matches)."""
    import onnxruntime as ort
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from onnxruntime.transformers.optimizer import optimize_model

    folded = f"{path}.folded"
    ort.set_default_logger_severity(3)  # its sessions here warn of each unused paddle2onnx constant they drop
    try:
        with quiet_logs():  # symbolic shapes fail on paddle2onnx's Reshapes; ONNX's own inference is enough
            quant_pre_process(path, folded, skip_symbolic_shape=True)
            # opt_level 0: pattern fusions only (higher levels need torch); 0 heads: read from the graph
            optimize_model(folded, model_type="bert", num_heads=0, hidden_size=0, opt_level=0).save_model_to_file(path)
    finally:
        if os.path.exists(folded):
            os.remove(folded)


@contextlib.contextmanager
def quiet_logs():
    """ONNX Runtime's optimizer and quantizer log, through the root logger or loggers that inherit its level,
    a warning for each pattern or op they pass over: by design here, so only errors get through."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


@contextlib.contextmanager
def written(target):
    """A temporary path next to ``target``, renamed onto it when the block succeeds and removed when not."""
    tmp = f"{target}.tmp-{os.getpid()}"
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
