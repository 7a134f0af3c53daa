"""Export a model's ``forward`` as a static graph (``<run>/inference/``), convert it to ONNX, quantize it.

The graph ends at the model's raw outputs (``logits`` or ``scores``); the
model's own ``decode`` runs on the host on every engine (:mod:`appzoo.engines`).
Each file is made when missing or older than the one it comes from, written
under a temporary name and renamed into place, so a kill leaves no half file:

* ``model.json`` + ``model.pdiparams``: the static graph (:func:`export`);
* ``model.onnx``: converted by paddle2onnx, then fused by ONNX Runtime's
  transformer optimizer (LayerNorm, GELU: the same outputs, half the time);
* ``model.int8.onnx`` / ``model.int8-static-<name>.onnx``: quantized by
  ``onnxruntime.quantization``, dynamically or calibrated (:func:`onnx_int8`).
"""
import contextlib
import io
import logging
import os
import warnings

from appzoo import bundle
from appzoo.errors import RunError
from appzoo.files import swap_in

ONNX_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"


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
    """``folder/model.onnx``, converted from the static graph by paddle2onnx and
    fused by ONNX Runtime's transformer optimizer, when missing or older than the graph."""
    graph, params = graph_files(folder)
    target = os.path.join(folder, ONNX_FILE)
    if _is_current(target, params):
        return target
    import paddle2onnx

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            data = paddle2onnx.export(graph, params, save_file=None, opset_version=13, auto_upgrade_opset=True)
    except Exception as e:  # paddle2onnx logs the cause and leaves its result unset
        raise RunError(f"{graph}: paddle2onnx could not convert the graph to ONNX ({type(e).__name__}: "
                       f"{str(e).strip()[:200]}); use engine 'paddle_inference'") from None
    with _written(target) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
        _fuse(tmp)
    return target


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
        with _quiet_logs():  # symbolic shapes fail on paddle2onnx's Reshapes; ONNX's own inference is enough
            quant_pre_process(path, folded, skip_symbolic_shape=True)
            # opt_level 0: pattern fusions only (higher levels need torch); 0 heads: read from the graph
            optimize_model(folded, model_type="bert", num_heads=0, hidden_size=0, opt_level=0).save_model_to_file(path)
    finally:
        if os.path.exists(folded):
            os.remove(folded)


def onnx_int8(folder, calibration=None):
    """The int8 ONNX model of ``folder``, quantized from :func:`onnx_model` by
    ``onnxruntime.quantization`` when missing or older than it, and reused after.

    ``calibration`` None: dynamic quantization (``model.int8.onnx``): int8
    weights (a scale per output channel), each batch's activations scaled as it runs. ``(name, batches)``:
    static (``model.int8-static-<name>.onnx``): activation ranges fixed by
    running ``batches()`` (collated batches) through the fp32 model first."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = onnx_model(folder)
    name = INT8_FILE if calibration is None else f"model.int8-static-{calibration[0]}.onnx"
    target = os.path.join(folder, name)
    if _is_current(target, source):
        return target
    with _written(target) as tmp:
        if calibration is None:
            quantize_dynamic(source, tmp, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"],
                             per_channel=True)  # a scale per output column: GoEmotions macro-F1 -0.8, not -2.1
        else:
            _quantize_static(source, tmp, calibration[1])
    return target


def _quantize_static(source, target, batches):
    """Static int8 (QDQ: int8 weights per channel, uint8 activations) of the MatMuls,
    ranges by min-max over the calibration batches."""
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    inputs = [i.name for i in ort.InferenceSession(source, providers=["CPUExecutionProvider"]).get_inputs()]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = ({name: batch[name] for name in inputs} for batch in batches())

        def get_next(self):
            return next(self.feeds, None)

    with _quiet_logs():
        quantize_static(source, target, Reader(), quant_format=QuantFormat.QDQ, op_types_to_quantize=["MatMul"],
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True,
                        calibrate_method=CalibrationMethod.MinMax)


@contextlib.contextmanager
def _quiet_logs():
    """ONNX Runtime's optimizer and quantizer log, through the root logger or loggers that inherit its level,
    a warning for each pattern or op they pass over: by design here, so only errors get through."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def _is_current(target, source):
    return os.path.isfile(target) and os.path.getmtime(target) >= os.path.getmtime(source)


@contextlib.contextmanager
def _written(target):
    """A temporary path next to ``target``, renamed onto it when the block succeeds and removed when not."""
    tmp = f"{target}.tmp-{os.getpid()}"
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
