"""KServe V2's codec (the Open Inference Protocol): a model's metadata from
the serving shape its reader declares (:mod:`appzoo.task.serving`) and its run's model card, an
inference request's tensors into inputs, prediction rows into output tensors.

Nothing here knows a task: the inputs follow from the declared input kind,
each output's datatype and shape from its field kind (:data:`OUTPUT_CODEC`).
"""
import json
import os

from appzoo.serve.failure import Failure, clip
from appzoo.reports import record
from appzoo.store.archive import RunFolder

#: an input kind -> the names of its V2 input tensors (each BYTES, one text per input)
V2_INPUTS = {"text": ["text"], "text_or_tokens": ["text"], "pair": ["text_a", "text_b"]}
#: a field kind -> its V2 datatype and shape; ``labels`` stands for the model's label count (probs: one
#: probability per label, in the model's label order). Lists and objects (labels, tags, entities) are
#: BYTES of their JSON.
OUTPUT_CODEC = {"label": ("BYTES", [-1]), "labels": ("BYTES", [-1]), "tags": ("BYTES", [-1]),
                "entities": ("BYTES", [-1]), "probs": ("FP32", [-1, "labels"]), "score": ("FP32", [-1])}


def output_shapes(model):
    """``[(name, datatype, shape)]`` of the model's declared outputs, in their order."""
    labels = len(model.predictor.labels)
    out = []
    for field in model.serving.outputs:
        datatype, shape = OUTPUT_CODEC[field.kind]
        out.append((field.name, datatype, [labels if d == "labels" else d for d in shape]))
    return out


def metadata(model):
    """``GET /v2/models/{name}``."""
    listed = [{"name": name, "datatype": datatype, "shape": shape} for name, datatype, shape in output_shapes(model)]
    return {"name": model.name, "versions": ["1"], "platform": "paddle",
            "inputs": [{"name": n, "datatype": "BYTES", "shape": [-1]} for n in V2_INPUTS[model.input_kind]],
            "outputs": listed, "parameters": {"task": model.task, "labels": model.predictor.labels},
            "model_card": model_card(model.best)}


def model_card(best):
    """What the server shows of the model card of the run ``best`` sits in: its run_record.json beside best/,
    without a path of the disk (:func:`appzoo.reports.record.summary`); None for a run of an older version or
    a best/ copied without its run."""
    folder = RunFolder.of_best(best)
    if not os.path.isfile(folder.run_record):
        return None
    return record.summary(record.read(folder))


def outputs(rows, model):
    """The rows as V2 output tensors: numbers as FP32, per-label probabilities
    as FP32 ``[N, labels]`` (in the model's label order), strings as BYTES,
    lists and objects (entities, tags, multi-label labels) as BYTES of their JSON."""
    out = []
    labels = model.predictor.labels
    kinds = {field.name: field.kind for field in model.serving.outputs}
    for name, datatype, shape in output_shapes(model):
        values = [row[name] for row in rows]  # every declared field is in every row (checked when loaded)
        if kinds[name] == "probs":
            data = [float(v[label]) for v in values for label in labels]
        elif datatype == "FP32":
            data = [float(v) for v in values]
        else:
            data = [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in values]
        out.append({"name": name, "datatype": datatype, "shape": [len(rows), *shape[1:]], "data": data})
    return out


def inputs(body, model):
    """``(id, inputs)`` of an inference request: one BYTES tensor of texts
    (``text_a`` and ``text_b`` for matching)."""
    if not isinstance(body, dict):
        raise Failure(422, f"body: expected an inference request object {{\"inputs\": [...]}}, "
                           f"got {type(body).__name__}")
    unknown = [k for k in body if k not in ("id", "parameters", "inputs", "outputs")]
    if unknown:
        raise Failure(422, f"body: unknown field {unknown[0]!r} (accepted: id, parameters, inputs, outputs)")
    request_id = body.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise Failure(422, f"id: expected a string, got {clip(request_id)}")
    tensors = body.get("inputs")
    if not isinstance(tensors, list) or not tensors:
        raise Failure(422, f"inputs: expected a non-empty list of input tensors, got {clip(tensors)}")
    expected = V2_INPUTS[model.input_kind]
    columns = {}
    for i, tensor in enumerate(tensors):
        name, data = _tensor(tensor, i, expected)
        if name in columns:
            raise Failure(422, f"inputs[{i}]: a second tensor named {name!r}")
        columns[name] = data
    missing = [n for n in expected if n not in columns]
    if missing:
        raise Failure(422, f"inputs: missing the tensor {missing[0]!r} (this model takes {', '.join(expected)})")
    if len({len(v) for v in columns.values()}) > 1:
        raise Failure(422, f"inputs: {' and '.join(expected)} have different lengths "
                           f"({', '.join(str(len(columns[n])) for n in expected)})")
    if len(expected) == 1:
        return request_id, columns[expected[0]]
    return request_id, [list(pair) for pair in zip(*(columns[n] for n in expected))]


def _tensor(tensor, i, expected):
    where = f"inputs[{i}]"
    if not isinstance(tensor, dict):
        raise Failure(422, f"{where}: expected a tensor object {{name, shape, datatype, data}}, got {clip(tensor)}")
    unknown = [k for k in tensor if k not in ("name", "shape", "datatype", "data", "parameters")]
    if unknown:
        raise Failure(422, f"{where}: unknown field {unknown[0]!r} (accepted: name, shape, datatype, data, "
                           f"parameters)")
    for key in ("name", "shape", "datatype", "data"):
        if key not in tensor:
            raise Failure(422, f"{where}: missing field {key!r}")
    name, shape, datatype, data = tensor["name"], tensor["shape"], tensor["datatype"], tensor["data"]
    if name not in expected:
        raise Failure(422, f"{where}.name: {clip(name)} is not an input of this model (inputs: "
                           f"{', '.join(expected)})")
    if datatype != "BYTES":
        raise Failure(422, f"{where}.datatype: {clip(datatype)}; texts are BYTES")
    if not (isinstance(shape, list) and shape and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                       for d in shape)):
        raise Failure(422, f"{where}.shape: expected a list of sizes like [2], got {clip(shape)}")
    if not isinstance(data, list):
        raise Failure(422, f"{where}.data: expected a list of strings, got {clip(data)}")
    flat = [v for row in data for v in row] if data and all(isinstance(r, list) for r in data) else data
    size = 1
    for d in shape:
        size *= d
    if size != len(flat) or (len(shape) > 1 and any(d != 1 for d in shape[1:])):
        raise Failure(422, f"{where}.shape: {shape} does not fit {len(flat)} value(s) (use [{len(flat)}])")
    return name, flat
