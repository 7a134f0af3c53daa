"""Selective int8 (appzoo.inference.quantize) on a small ONNX graph made here: the groups of the sensitivity pass,
the nodes kept in fp32, and an int8 cache whose name carries its settings, so that a stale one is never reused.

The graph is two blocks of a transformer's shape: x @ W1 -> LayerNormalization -> @ W2 @ W3 -> LayerNormalization
-> @ W4, where W3 has one large weight: the block that int8 hurts most, which ``keep_fp32: auto`` keeps.
"""
import json
import os

import numpy as np
import pytest

from appzoo.env import VNNI_FLAGS, has_vnni
from appzoo.errors import ConfigError, UserError
from appzoo.inference import quantize
from appzoo.params.inference import InferenceSpec

HIDDEN = 16
KEY = "ab12cd34ef56" * 5  # the export's source key (exported_from.json)


def _graph(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {f"W{i}": rng.normal(0, 0.3, (HIDDEN, HIDDEN)).astype(np.float32) for i in range(1, 5)}
    weights["W3"][0, :] *= 60  # an outlier row: per-channel scales take it in every column of this MatMul
    inits = [numpy_helper.from_array(w, name) for name, w in weights.items()]
    inits += [numpy_helper.from_array(np.ones(HIDDEN, np.float32), "gamma"),
              numpy_helper.from_array(np.zeros(HIDDEN, np.float32), "beta")]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h1"], name="MatMul.0"),
             helper.make_node("LayerNormalization", ["h1", "gamma", "beta"], ["n1"], name="LayerNorm_0", axis=-1),
             helper.make_node("MatMul", ["n1", "W2"], ["h2"], name="MatMul.1"),
             helper.make_node("MatMul", ["h2", "W3"], ["h3"], name="MatMul.2"),
             helper.make_node("LayerNormalization", ["h3", "gamma", "beta"], ["n2"], name="LayerNorm_1", axis=-1),
             helper.make_node("MatMul", ["n2", "W4"], ["logits"], name="MatMul.3")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", HIDDEN])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", HIDDEN])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


@pytest.fixture
def folder(tmp_path):
    """An export folder (as appzoo.inference.export leaves it) whose model.onnx is the graph above."""
    (tmp_path / "model.json").write_text("{}")
    (tmp_path / "model.pdiparams").write_bytes(b"")
    (tmp_path / "exported_from.json").write_text(json.dumps({"sha256": KEY}))
    _graph(str(tmp_path / "model.onnx"))
    return str(tmp_path)


def batches(n):
    rng = np.random.default_rng(1)
    return [{"x": rng.normal(0, 1, (n, HIDDEN)).astype(np.float32)}]


DEV = ("0123abcd", batches)


def int8_files(folder):
    return sorted(name for name in os.listdir(folder) if name.startswith("model.int8-"))


def test_the_weight_matmuls_are_grouped_at_each_normalization(folder):
    import onnx

    groups = quantize.weight_matmuls(onnx.load(os.path.join(folder, "model.onnx")))
    assert groups == [("up to LayerNorm_0", ["MatMul.0"]), ("up to LayerNorm_1", ["MatMul.1", "MatMul.2"]),
                      ("after LayerNorm_1", ["MatMul.3"])]


def test_auto_keeps_the_groups_int8_hurts_most_in_fp32_and_records_why(folder, monkeypatch):
    monkeypatch.setattr(quantize, "KEPT_GROUPS", 1)
    path = quantize.onnx_int8(folder, InferenceSpec("onnxruntime", "int8", sensitivity_examples=32), DEV)
    record = quantize.made_with(path)
    errors = {g["group"]: g["error"] for g in record["groups"]}
    assert max(errors, key=errors.get) == "up to LayerNorm_1", errors  # the block with the outlier weight
    assert record["kept_fp32"] == ["MatMul.1", "MatMul.2"]
    assert record["settings"]["sensitivity"] == "dev32-0123abcd" and record["settings"]["per_channel"] is True
    import onnx

    quantized = {n.name for n in onnx.load(path).graph.node if n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul")}
    ops = {n.name: n.op_type for n in onnx.load(path).graph.node}
    assert ops.get("MatMul.1") == "MatMul" and ops.get("MatMul.2") == "MatMul"  # left in fp32
    assert quantized and not {"MatMul.1", "MatMul.2"} & quantized


def test_a_stale_int8_cache_is_never_reused(folder):
    """Each setting is in the file's name: the same settings reuse the file, another setting makes its own
    (the old one, damaged here, would fail to load if it were taken); the old one is left as it was."""
    none = InferenceSpec("onnxruntime", "int8", keep_fp32="none")
    first = quantize.onnx_int8(folder, none, flags=VNNI_FLAGS)
    stamp = os.path.getmtime(first)
    assert quantize.onnx_int8(folder, none, flags=VNNI_FLAGS) == first and os.path.getmtime(first) == stamp
    with open(first, "wb") as f:
        f.write(b"stale")
    made = set()
    for spec, dev, flags in [(InferenceSpec("onnxruntime", "int8", keep_fp32=["MatMul.3"]), None, VNNI_FLAGS),
                             (none, None, ("avx2",)),  # no VNNI: reduce_range
                             (InferenceSpec("onnxruntime", "int8", sensitivity_examples=8), DEV, VNNI_FLAGS),
                             (InferenceSpec("onnxruntime", "int8", sensitivity_examples=9), DEV, VNNI_FLAGS),
                             (InferenceSpec("onnxruntime", "int8", sensitivity_examples=8), ("99999999", batches),
                              VNNI_FLAGS)]:
        path = quantize.onnx_int8(folder, spec, dev, flags=flags)
        assert path != first and path not in made
        assert quantize.made_with(path)["settings"] == quantize.settings(spec, dev and dev[0], flags)
        made.add(path)
    assert len(int8_files(folder)) == 6
    with open(first, "rb") as f:
        assert f.read() == b"stale"
    assert not [name for name in os.listdir(folder) if ".tmp-" in name or ".group-" in name]


def test_the_name_changes_with_the_onnxruntime_version_and_the_model(monkeypatch):
    import onnxruntime

    spec = InferenceSpec("onnxruntime", "int8", keep_fp32="none")
    made = quantize.settings(spec, flags=VNNI_FLAGS)
    assert made == {"quantization": "dynamic", "ops": ["MatMul"], "per_channel": True, "reduce_range": False,
                    "keep_fp32": "none", "onnxruntime": onnxruntime.__version__}
    name = quantize.file_name("k" * 12, made)
    assert name.startswith("model.int8-kkkkkkkkkkkk-") and name.endswith(".onnx")
    assert quantize.file_name("j" * 12, made) != name
    monkeypatch.setattr(onnxruntime, "__version__", "0.0.1")
    assert quantize.file_name("k" * 12, quantize.settings(spec, flags=VNNI_FLAGS)) != name


def test_reduce_range_only_without_vnni():
    assert not has_vnni(("avx2", "avx512f")) and has_vnni(("avx512_vnni",)) and has_vnni(("avx_vnni",))
    assert has_vnni(("amx_int8",))
    spec = InferenceSpec("onnxruntime", "int8", keep_fp32="none")
    assert quantize.settings(spec, flags=("avx2",))["reduce_range"] is True
    assert quantize.settings(spec, flags=("avx2", "avx512_vnni"))["reduce_range"] is False


def test_a_node_to_keep_that_the_graph_lacks_is_one_line(folder):
    spec = InferenceSpec("onnxruntime", "int8", keep_fp32=["MatMul.7"])
    with pytest.raises(UserError) as e:
        quantize.onnx_int8(folder, spec)
    assert str(e.value) == (f"quantize_keep_fp32: 'MatMul.7' is not a MatMul with a weight in "
                            f"{os.path.join(folder, 'model.onnx')}; did you mean 'MatMul.3'? (it has 4: MatMul.0, "
                            f"MatMul.1, MatMul.2, MatMul.3)")
    assert int8_files(folder) == []


@pytest.mark.parametrize("keep, message", [
    ("autoo", "trainer.quantize_keep_fp32: 'autoo' is not a mode; did you mean 'auto'? (accepted: 'auto', 'none', "
              "or a list of ONNX node names such as [\"MatMul.7\"])"),
    (3, "trainer.quantize_keep_fp32: expected a string or a list, each a string, got 3"),
    (["MatMul.1", " "], "trainer.quantize_keep_fp32[1]: ' ' is not a node name (expected the name of a MatMul of "
                        "the exported model.onnx)"),
    (["MatMul.1", "MatMul.1"], "trainer.quantize_keep_fp32[1]: 'MatMul.1' is named twice"),
])
def test_a_bad_keep_fp32_is_one_line_naming_the_key(keep, message):
    from appzoo.params.trainer import TrainerConfig

    with pytest.raises(ConfigError) as e:
        TrainerConfig(inference_engine="onnxruntime", inference_precision="int8", quantize_keep_fp32=keep)
    assert str(e.value) == message


def test_a_bad_sensitivity_sample_is_one_line_naming_the_key():
    from appzoo.params.trainer import TrainerConfig

    with pytest.raises(ConfigError) as e:
        TrainerConfig(sensitivity_examples=0)
    assert str(e.value) == "trainer.sensitivity_examples: must be >= 1, got 0"


def test_the_sections_build_the_spec_with_the_new_keys():
    from appzoo.params.trainer import TrainerConfig

    spec = TrainerConfig(inference_engine="onnxruntime", inference_precision="int8", quantize_keep_fp32=["MatMul.1"],
                         sensitivity_examples=16).inference
    assert (spec.keep_fp32, spec.sensitivity_examples) == (["MatMul.1"], 16) and not spec.needs_dev()
    assert InferenceSpec("onnxruntime", "int8").needs_dev() and not InferenceSpec("onnxruntime", "fp32").needs_dev()
    assert InferenceSpec("onnxruntime", "int8", "static", keep_fp32="none").needs_dev()
