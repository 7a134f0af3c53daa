"""int8 ONNX models of an export: which MatMuls stay in fp32, and a cached file whose name carries how it was made.

``onnxruntime.quantization`` quantizes the MatMuls with a weight (an initializer) of ``model.onnx``
(:func:`appzoo.inference.graph_files.onnx_model`): ``dynamic`` (int8 weights, a scale per output channel, each
batch's activations scaled as it runs) or ``static`` (QDQ, activation ranges calibrated on dev examples).
``reduce_range`` (7-bit weights) only on a CPU without VNNI (:func:`appzoo.env.has_vnni`), where 8-bit
weights can saturate the 16-bit sums of its int8 multiply-adds.

Which MatMuls stay fp32 (``keep_fp32`` of :class:`~appzoo.params.inference.InferenceSpec`):

* ``auto``: the sensitivity pass (:func:`sensitivities`). The MatMuls are cut into groups at each
  normalization node (``LayerNormalization``, ``SkipLayerNormalization``), so that in a BERT encoder a group
  is one layer's attention (Q, K, V, output) or its feed-forward; each group alone is quantized dynamically
  and run on ``sensitivity_examples`` dev examples, and its error is the squared change of the model's
  outputs against fp32 over their variance (under ``static`` too: the groups are ranked by their dynamic int8,
  which needs no calibration per group). The :data:`KEPT_GROUPS` groups of largest error stay fp32
  (quantization errors of transformers concentrate in a few blocks; Intel's static BERT keeps
  ``layer.9.output.dense`` in fp32 for the same reason).
* ``none``: every MatMul with a weight is quantized.
* a list of node names: those stay fp32 (a name that is not such a MatMul is refused in one line).

The file is ``model.int8-[static-]<key>-<settings>.onnx`` next to the export: ``<key>`` begins the export's
source key and ``<settings>`` hashes :func:`settings` (quantization, ops, per-channel, reduce_range, the
``keep_fp32`` asked for, the dev examples and dev file it calibrated or measured on, the onnxruntime
version), so a file made with other settings is never reused. What was chosen (the groups, their errors,
the nodes kept fp32) is in the file's own metadata (``appzoo.int8``: :func:`made_with` reads it).
"""
import hashlib
import json
import os

import numpy as np

from appzoo.env import has_vnni
from appzoo.errors import UserError
from appzoo.inference.graph_files import KEY_LENGTH, exported_key, onnx_model, quiet_logs, unreadable, written
from appzoo.registry import did_you_mean
from appzoo.utils.files import file_sha256

#: The op types quantized (the MatMuls of the projections and the feed-forward; the fused Gemm of a head is not).
OPS = ("MatMul",)
#: The op types that end a group of MatMuls in the sensitivity pass.
NORMS = ("LayerNormalization", "SkipLayerNormalization")
#: Groups ``keep_fp32: auto`` leaves in fp32: the most sensitive ones.
KEPT_GROUPS = 2
#: The metadata key of an int8 file that records how it was made.
META_KEY = "appzoo.int8"


def settings(spec, dev_digest=None, flags=None):
    """What an int8 file of ``spec`` (an :class:`~appzoo.params.inference.InferenceSpec`) is made with; its hash
    names the file. ``dev_digest``: the start of the dev file's sha256 (where the spec reads it:
    :meth:`~appzoo.params.inference.InferenceSpec.needs_dev`); ``flags``: the CPU's (its own when None)."""
    import onnxruntime

    keep = spec.keep_fp32
    out = {"quantization": spec.quantization, "ops": list(OPS), "per_channel": True,
           "reduce_range": not has_vnni(flags), "keep_fp32": keep if isinstance(keep, str) else sorted(keep),
           "onnxruntime": onnxruntime.__version__}
    if spec.quantization == "static":
        out["calibration"] = f"dev{spec.calibration_examples}-{dev_digest}"
    if keep == "auto":
        out["sensitivity"] = f"dev{spec.sensitivity_examples}-{dev_digest}"
    return out


def file_name(key, made):
    """``model.int8-[static-]<key>-<settings hash>.onnx`` of the export key ``key`` and :func:`settings` ``made``."""
    digest = hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()[:8]
    return f"model.int8-{'static-' if made['quantization'] == 'static' else ''}{key}-{digest}.onnx"


def onnx_int8(folder, spec, dev=None, flags=None):
    """The int8 model of ``folder``'s export for ``spec``, made when missing (:func:`file_name`), and reused after.
    ``dev``: ``(digest, batches)`` where the spec reads the dev set: the start of its file's sha256 and
    ``batches(n)``, collated batches of ``n`` dev examples."""
    source = onnx_model(folder)
    key = (exported_key(folder) or file_sha256(source))[:KEY_LENGTH]
    made = settings(spec, dev and dev[0], flags)
    target = os.path.join(folder, file_name(key, made))
    if os.path.isfile(target):
        return target
    try:
        record = {"settings": made, **keep_fp32(source, spec, made, dev)}
        with written(target) as tmp:
            if spec.quantization == "dynamic":
                quantize(source, tmp, made, exclude=record["kept_fp32"])
            else:
                _quantize_static(source, tmp, made, record["kept_fp32"], dev[1](spec.calibration_examples))
            _record(tmp, record)
    except UserError:
        raise
    except Exception as e:  # onnx and protobuf raise DecodeError, ValueError, ... for a damaged model.onnx
        if _loads(source):
            raise
        raise unreadable(source, "onnxruntime.quantization", e) from None
    return target


def made_with(path):
    """The record of how the int8 file ``path`` was made (``settings``, ``groups``, ``kept_fp32``), or None."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    found = [p.value for p in model.metadata_props if p.key == META_KEY]
    return json.loads(found[0]) if found else None


def weight_matmuls(model):
    """Groups of the quantizable nodes of an ONNX ``model``: ``[(label, [node names])]`` in graph order, a group
    ending at each normalization node (labelled ``up to <its name>``; the last, after every normalization:
    ``after <the last one's name>``)."""
    weights = {init.name for init in model.graph.initializer}
    groups, current, last = [], [], None
    for node in model.graph.node:
        if node.op_type in OPS and len(node.input) > 1 and node.input[1] in weights:
            current.append(node.name)
        elif node.op_type in NORMS:
            if current:
                groups.append((f"up to {node.name}", current))
            current, last = [], node.name
    if current:
        groups.append((f"after {last}" if last else "all", current))
    return groups


def keep_fp32(source, spec, made, dev):
    """``{"groups": [{"group", "nodes", "error"}], "kept_fp32": [node names]}`` of ``spec.keep_fp32`` on the
    model ``source`` (see the module docstring); errors only for ``auto``."""
    import onnx

    groups = weight_matmuls(onnx.load(source, load_external_data=False))
    nodes = [name for _, names in groups for name in names]
    if spec.keep_fp32 == "none":
        return {"groups": [{"group": g, "nodes": names} for g, names in groups], "kept_fp32": []}
    if spec.keep_fp32 != "auto":
        for name in spec.keep_fp32:
            if name not in nodes:
                raise UserError(f"quantize_keep_fp32: {name!r} is not a MatMul with a weight in {source}"
                                f"{did_you_mean(name, nodes)} (it has {len(nodes)}: "
                                f"{', '.join(nodes[:6])}{', ...' if len(nodes) > 6 else ''})")
        return {"groups": [{"group": g, "nodes": names} for g, names in groups], "kept_fp32": list(spec.keep_fp32)}
    errors = sensitivities(source, groups, list(dev[1](spec.sensitivity_examples)), made)
    ranked = sorted(range(len(groups)), key=lambda i: -errors[i])[:KEPT_GROUPS]
    return {"groups": [{"group": g, "nodes": names, "error": errors[i]} for i, (g, names) in enumerate(groups)],
            "kept_fp32": [name for i in sorted(ranked) for name in groups[i][1]]}


def sensitivities(source, groups, batches, made):
    """The error of each group of ``groups`` (:func:`weight_matmuls`) quantized alone (dynamic), on the collated
    ``batches``: sum of squared differences of the float outputs from fp32's, over their sum of squares about
    the mean (0: the same outputs; 1: as far off as a constant)."""
    reference = _outputs(source, batches)
    scale = sum(float(((r - r.mean()) ** 2).sum()) for r in reference) or 1.0
    errors = []
    for _, names in groups:
        tmp = f"{source}.group-{os.getpid()}"
        try:
            quantize(source, tmp, made, only=names)
            got = _outputs(tmp, batches)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        errors.append(sum(float(((g - r) ** 2).sum()) for g, r in zip(got, reference)) / scale)
    return errors


def quantize(source, target, made, *, exclude=(), only=None):
    """Dynamic int8 of ``source`` into ``target`` with :func:`settings` ``made``: every weight MatMul but
    ``exclude``, or only the nodes ``only``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with quiet_logs():
        quantize_dynamic(source, target, weight_type=QuantType.QInt8, op_types_to_quantize=list(OPS),
                         per_channel=made["per_channel"], reduce_range=made["reduce_range"],
                         nodes_to_quantize=only, nodes_to_exclude=list(exclude))


def _outputs(path, batches):
    """The float outputs of the model ``path`` on each batch, as one flat list of arrays."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    out = []
    for batch in batches:
        for value in session.run(None, {name: np.ascontiguousarray(batch[name]) for name in names}):
            if np.issubdtype(value.dtype, np.floating):
                out.append(value.astype(np.float64))
    return out


def _record(path, record):
    """Write ``record`` into the metadata of the ONNX file ``path``, in place."""
    import onnx

    model = onnx.load(path)
    entry = model.metadata_props.add()
    entry.key, entry.value = META_KEY, json.dumps(record)
    onnx.save(model, path)


def _loads(path):
    """Whether ONNX Runtime loads the model file ``path``."""
    import onnxruntime as ort

    try:
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception:
        return False
    return True


def _quantize_static(source, target, made, exclude, batches):
    """Static int8 (QDQ: int8 weights per channel, uint8 activations) of the weight MatMuls but ``exclude``,
    ranges by min-max over the calibration batches."""
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    inputs = [i.name for i in ort.InferenceSession(source, providers=["CPUExecutionProvider"]).get_inputs()]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = ({name: batch[name] for name in inputs} for batch in batches)

        def get_next(self):
            return next(self.feeds, None)

    with quiet_logs():
        quantize_static(source, target, Reader(), quant_format=QuantFormat.QDQ, op_types_to_quantize=list(OPS),
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        per_channel=made["per_channel"], reduce_range=made["reduce_range"],
                        nodes_to_exclude=list(exclude), calibrate_method=CalibrationMethod.MinMax)
