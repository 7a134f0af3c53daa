"""Low precisions label as fp32 does: int8 on onnxruntime (dynamic, and static calibrated on the dev set)
and bf16 on paddle_inference (where the CPU has bf16 instructions), on the sample test sets.

Each task's example is trained 30 steps at a high learning rate: enough to label its test set well above
chance with varied labels (checked), so agreement is not that of a model that answers one label. Pointwise
matching is left out: from scratch on the sample pairs it needs hundreds of steps to rank at all (dev AUC
0.50 after 60), and an untrained model's scores sit within 0.002 of its threshold, where any rounding flips a
label; its fully trained example is measured in benchmarks/predict_engines.py. Units:
a label (classification, matching), a label set (multi-label), a tag (sequence labeling). The exact
agreement of each case is printed in the test summary (``-rA``) and must be >= 98%. Where a precision is
refused, the refusal is one line that names why and what to use instead (no silent fp32).
"""
import os

import pytest

import run_trainer
from appzoo import Predictor
from appzoo.engines import BF16_FLAGS, check_precision
from appzoo.env import cpu_flags
from appzoo.errors import ConfigError
from serving import TASKS

pytestmark = pytest.mark.slow

TRAIN = ["--set", "trainer.max_steps=30", "--set", "trainer.learning_rate=0.003", "--set", "trainer.batch_size=32",
         "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false", "--do", "train"]
TESTED = ["cls", "multilabel", "ner_crf", "ner_softmax", "pairwise", "inbatch"]
HAVE_BF16 = bool(set(BF16_FLAGS) & cpu_flags())
CASES = [("onnxruntime", "int8", "dynamic"), ("onnxruntime", "int8", "static"),
         pytest.param("paddle_inference", "bf16", "dynamic", marks=pytest.mark.skipif(
             not HAVE_BF16, reason=f"this CPU reports neither {' nor '.join(BF16_FLAGS)}"))]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """task -> (best folder, test file, fp32 labels of its test set)."""
    root = tmp_path_factory.mktemp("precision")
    out = {}
    for task in TESTED:
        example, extra = TASKS[task]
        run = root / task
        assert run_trainer.main(["--param_path", example, "--set", f"trainer.output_dir={run}", *TRAIN, *extra]) == 0
        best = str(run / "best")
        predictor = Predictor(best, engine="dygraph")
        test = predictor.bundle.config["dataset_reader"]["test"]
        out[task] = (best, test, units(predictor, test))
    return out


def units(predictor, path):
    """The labels ``predictor`` gives the examples of ``path``, one per unit (see the module docstring)."""
    reader = predictor.reader
    examples = reader.read(path, "test")
    features = reader.encode(examples, predictor.tokenizer, predictor.labels, predictor.max_seq_len, "test")
    predictions, _ = predictor.predict_features(examples, features)
    rows = reader.prediction_rows(examples, predictions, predictor.labels)
    if "tags" in rows[0]:
        return [tag for row in rows for tag in row["tags"]]
    return [tuple(row["labels"]) if "labels" in row else row["label"] for row in rows]


@pytest.mark.parametrize("engine, precision, quantization", CASES)
@pytest.mark.parametrize("task", TESTED)
def test_a_low_precision_labels_as_fp32_does(trained, task, engine, precision, quantization, record_property):
    best, test, expected = trained[task]
    assert len(set(expected)) > 1, f"{task}: the fp32 model gives one label only; train it longer"
    predictor = Predictor(best, engine=engine, precision=precision, quantization=quantization,
                          calibration_examples=64)
    got = units(predictor, test)
    agreement = sum(a == b for a, b in zip(got, expected)) / len(expected)
    record_property("agreement", agreement)
    print(f"{task} {engine} {precision} {quantization}: {agreement:.2%} of {len(expected)} labels as fp32")
    assert len(got) == len(expected) and agreement >= 0.98


def test_static_int8_is_cached_next_to_the_export_and_reused(trained):
    best = trained["cls"][0]
    folder = os.path.join(os.path.dirname(best), "inference")
    Predictor(best, engine="onnxruntime", precision="int8", quantization="static", calibration_examples=64)
    cached = os.path.join(folder, "model.int8-static-dev64.onnx")
    stamp = os.path.getmtime(cached)
    Predictor(best, engine="onnxruntime", precision="int8", quantization="static", calibration_examples=64)
    assert os.path.getmtime(cached) == stamp
    assert not [name for name in os.listdir(folder) if ".tmp-" in name or name.endswith(".folded")]


@pytest.mark.parametrize("engine, precision, flags, message", [
    ("dygraph", "int8", None, "trainer.inference_precision: 'int8' needs a graph engine (the Paddle model runs in "
     "fp32); use engine 'onnxruntime' with precision 'int8', or 'paddle_inference' with 'bf16'"),
    ("paddle_inference", "int8", None, "trainer.inference_precision: 'int8' is not available on paddle_inference "
     "(Paddle 3.3.1 quantizes only old-IR programs, and its exports are PIR graphs); use engine 'onnxruntime' "
     "with precision 'int8'"),
    ("onnxruntime", "bf16", None, "trainer.inference_precision: 'bf16' is not available on onnxruntime (its CPU "
     "provider has no bf16 kernels for these graphs); use precision 'int8', or engine 'paddle_inference' with "
     "'bf16'"),
    ("paddle_inference", "bf16", frozenset({"avx2", "avx512f"}), "trainer.inference_precision: 'bf16' needs a CPU "
     "with avx512_bf16 or amx_bf16, and this one reports neither; use precision 'fp32', or engine 'onnxruntime' "
     "with precision 'int8'"),
    ("onnxruntime", "fp16", None, "trainer.inference_precision: 'fp16' is not a precision; did you mean 'bf16'? "
     "(accepted: fp32, bf16, int8)"),
])
def test_a_precision_an_engine_cannot_run_is_one_line_naming_what_to_use(engine, precision, flags, message):
    with pytest.raises(ConfigError) as e:
        check_precision(engine, precision, flags=flags)
    assert str(e.value) == message


def test_precision_keys_are_checked_with_the_engine_in_the_param_file_and_serve(capsys):
    assert run_trainer.main(["--param_path", TASKS["cls"][0], "--do", "eval",
                             "--set", "trainer.inference_precision=int8"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "trainer.inference_precision: 'int8' needs a graph engine (the Paddle model runs in fp32); use engine "
        "'onnxruntime' with precision 'int8', or 'paddle_inference' with 'bf16'")
    from appzoo.serve.config import ServeConfig

    with pytest.raises(ConfigError, match=r"^serve\.precision: 'bf16' is not available on onnxruntime"):
        ServeConfig.from_section({"engine": "onnxruntime", "precision": "bf16"})
