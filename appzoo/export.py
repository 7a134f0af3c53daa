"""Export a model's ``forward`` as a static graph (``<run>/inference/``), and convert it to ONNX.

The graph ends at the model's raw outputs (``logits`` or ``scores``); the
model's own ``decode`` runs on the host on every engine (:mod:`appzoo.engines`).
"""
import contextlib
import io
import os
import warnings

from appzoo import bundle
from appzoo.errors import RunError
from appzoo.files import swap_in

ONNX_FILE = "model.onnx"


def graph_files(folder):
    """``(graph, params)`` of an exported folder: ``model.json`` under Paddle
    3.x's PIR, ``model.pdmodel`` under the old IR; None when not exported."""
    for name in ("model.json", "model.pdmodel"):
        if os.path.isfile(os.path.join(folder, name)) and os.path.isfile(os.path.join(folder, "model.pdiparams")):
            return os.path.join(folder, name), os.path.join(folder, "model.pdiparams")
    return None


def export_is_current(folder, best):
    """True when ``folder`` holds a static graph saved after ``best/`` was."""
    files = graph_files(folder)
    marker = os.path.join(best, bundle.MARKER)
    return files is not None and os.path.getmtime(files[1]) >= os.path.getmtime(marker)


def export(model, folder):
    """The model's ``forward`` as a static graph for ``model.input_spec()``,
    written under a temporary name and swapped into ``folder`` whole."""
    import paddle

    tmp = f"{folder}.tmp-{os.getpid()}"
    model.eval()
    with warnings.catch_warnings():  # paddle explains, at every save, what it does by design with both
        for message in _JIT_NOTES:
            warnings.filterwarnings("ignore", message=message)
        static = paddle.jit.to_static(model.forward, input_spec=model.input_spec(), full_graph=True)
        paddle.jit.save(static, os.path.join(tmp, "model"))
    swap_in(tmp, folder)
    return folder


#: What ``paddle.jit.save`` says about saving a function and a dict of outputs (flattened by key, as
#: :mod:`appzoo.engines` reads them back).
_JIT_NOTES = ("What you save is a function", "Found 'dict' in given outputs")


def onnx_model(folder):
    """``folder/model.onnx``, converted from the static graph by paddle2onnx
    when missing or older than the graph."""
    graph, params = graph_files(folder)
    target = os.path.join(folder, ONNX_FILE)
    if os.path.isfile(target) and os.path.getmtime(target) >= os.path.getmtime(params):
        return target
    import paddle2onnx

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            data = paddle2onnx.export(graph, params, save_file=None, opset_version=11, auto_upgrade_opset=True)
    except Exception as e:  # paddle2onnx logs the cause and leaves its result unset
        raise RunError(f"{graph}: paddle2onnx could not convert the graph to ONNX ({type(e).__name__}: "
                       f"{str(e).strip()[:200]}); use engine 'paddle_inference'") from None
    tmp = f"{target}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, target)
    return target
