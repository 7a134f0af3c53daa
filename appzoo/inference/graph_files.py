"""An exported folder's files (``<run>/inference/``): the static graph, its ONNX copy and the source key, found,
converted and written atomically; no model code, so the engines and quantisation read them without loading it.

:mod:`appzoo.inference.export` writes the folder from a trained model; this module names and reads what is in it:

* ``exported_from.json``: what the graph was exported from (the export's source key);
* ``model.json`` + ``model.pdiparams``: the static graph (``model.pdmodel`` under Paddle's old IR);
* ``model.onnx``: converted by paddle2onnx, then fused by ONNX Runtime's
  transformer optimizer (LayerNorm, GELU: the same outputs, half the time).
"""
import contextlib
import io
import logging
import os
import sys
import tempfile

from appzoo.errors import RunError, UserError, first_line
from appzoo.utils.files import read_json

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


def exported_key(folder):
    """The source key recorded in an exported ``folder``, or None (not exported, or exported before keys)."""
    path = os.path.join(folder, SOURCE_FILE)
    if graph_files(folder) is None or not os.path.isfile(path):
        return None
    try:
        return read_json(path, "export's source").get("sha256")
    except (UserError, AttributeError):  # damaged: the folder is exported again
        return None


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
        with contextlib.redirect_stdout(io.StringIO()), _c_output_kept_out():
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
def _c_output_kept_out():
    """Within the block, what C code prints to the process's stdout and stderr (paddle2onnx's "[Paddle2ONNX] ..."
    lines, which Python's own redirection does not reach) goes to a temporary file and is dropped: the
    conversion's outcome is said by the caller, in one line."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


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
