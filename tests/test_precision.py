"""Low precisions label as fp32 does: int8 on onnxruntime (dynamic, and static calibrated on the dev set)
and bf16 on paddle_inference (where the CPU has bf16 instructions), on the sample test sets.

The models are the short runs the serving tests share (tests/serving.py: 30 steps at a high learning
rate); each labels its test set with varied labels (checked), so agreement is not that of a model that
answers one label. Pointwise matching is left out: from scratch on the sample pairs it needs hundreds of
steps to rank at all (dev AUC 0.50 after 60), and such a model's scores sit within 0.002 of its
threshold, where any rounding flips a label; its trained example is measured in
benchmarks/predict_engines.py. Units (:func:`appzoo.inference.prediction.label_units`): a label (classification,
matching), each label's yes or no (multi-label: whole label sets are printed too), a tag (sequence
labeling). The exact agreement of each case is printed (``-rA`` shows it) and must be at
least 98%. A precision an engine cannot run is refused in one line that names why and what to use
instead (never a silent fp32).
"""
import os
import re

import pytest

import run_trainer
from appzoo import Predictor
from appzoo.params.inference import BF16_FLAGS, check_precision
from appzoo.env import cpu_flags
from appzoo.errors import ConfigError, DataError, UserError
from appzoo.inference.prediction import agreement, label_units
from serving import TASKS

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("served")]

TESTED = ["cls", "multilabel", "ner_crf", "ner_softmax", "pairwise", "inbatch"]
HAVE_BF16 = bool(set(BF16_FLAGS) & cpu_flags())
CASES = [("onnxruntime", "int8", "dynamic"), ("onnxruntime", "int8", "static"),
         pytest.param("paddle_inference", "bf16", "dynamic", marks=pytest.mark.skipif(
             not HAVE_BF16, reason=f"this CPU reports neither {' nor '.join(BF16_FLAGS)}"))]


@pytest.fixture(scope="module")
def trained(served_runs):
    """task -> (best folder, test file, the fp32 (dygraph) rows of its test set)."""
    out = {}
    for task in TESTED:
        best = os.path.join(served_runs[task], "best")
        predictor = Predictor(best, engine="dygraph")
        test = predictor.bundle.config["dataset_reader"]["test"]
        out[task] = (best, test, rows(predictor, test))
    return out


def rows(predictor, path):
    """``predictions.jsonl``'s rows of the examples of ``path``, as ``predictor`` labels them."""
    reader = predictor.reader
    examples = reader.read(path, "test")
    features = reader.encode(examples, predictor.tokenizer, predictor.labels, predictor.max_seq_len, "test")
    predictions, _ = predictor.predict_features(examples, features)
    return reader.prediction_rows(examples, predictions, predictor.labels)


@pytest.mark.parametrize("engine, precision, quantization", CASES)
@pytest.mark.parametrize("task", TESTED)
def test_a_low_precision_labels_as_fp32_does(trained, task, engine, precision, quantization, record_property):
    best, test, expected = trained[task]
    assert len(set(label_units(expected))) > 1, f"{task}: the fp32 model gives one label only; train it longer"
    predictor = Predictor(best, engine=engine, precision=precision, quantization=quantization,
                          calibration_examples=64)
    got = rows(predictor, test)
    share = agreement(got, expected)
    record_property("agreement", share)
    sets = ""
    if "labels" in expected[0]:
        same = sum(a["labels"] == b["labels"] for a, b in zip(got, expected)) / len(expected)
        sets = f"; {same:.2%} of {len(expected)} label sets"
    print(f"{task} {engine} {precision} {quantization}: {share:.2%} of {len(label_units(expected))} labels as "
          f"fp32{sets}")
    assert share >= 0.98


def test_static_int8_is_cached_next_to_the_export_and_reused(trained):
    """The cache's name carries the dev set it was calibrated on and the model it is of (the start of the
    export's source key), so a file of other data or another model is never taken for it."""
    from appzoo.inference.graph_files import KEY_LENGTH, exported_key
    from appzoo.inference.quantize import file_name, made_with, settings
    from appzoo.utils.files import file_sha256

    best, test, _ = trained["cls"]
    folder = os.path.join(os.path.dirname(best), "inference")
    predictor = Predictor(best, engine="onnxruntime", precision="int8", quantization="static", calibration_examples=64)
    dev = file_sha256(predictor.bundle.config["dataset_reader"]["dev"])[:8]
    made = settings(predictor.spec, dev)
    assert made["calibration"] == f"dev64-{dev}" and made["sensitivity"] == f"dev128-{dev}"
    cached = os.path.join(folder, file_name(exported_key(folder)[:KEY_LENGTH], made))
    assert os.path.basename(cached).startswith(f"model.int8-static-{exported_key(folder)[:KEY_LENGTH]}-")
    assert made_with(cached)["settings"] == made and made_with(cached)["kept_fp32"]
    stamp = os.path.getmtime(cached)
    Predictor(best, engine="onnxruntime", precision="int8", quantization="static", calibration_examples=64)
    assert os.path.getmtime(cached) == stamp
    assert not [name for name in os.listdir(folder) if ".tmp-" in name or name.endswith(".folded")]


def test_dynamic_int8_away_from_the_dev_set_quantizes_every_matmul_and_says_so(trained, monkeypatch, capsys):
    """A best/ served where its dev file is not (another machine): keep_fp32 'auto' has nothing to measure on,
    so every MatMul is quantized, as before the sensitivity pass, with a note; static int8 still refuses."""
    best, test, _ = trained["cls"]
    best, dev = os.path.abspath(best), Predictor(best).bundle.config["dataset_reader"]["dev"]
    monkeypatch.chdir(os.path.dirname(best))  # the run folder: the relative dev path finds no file
    capsys.readouterr()
    predictor = Predictor(best, engine="onnxruntime", precision="int8")
    assert predictor.spec.keep_fp32 == "none" and predictor.spec.evaluated_with()["keep_fp32"] == "none"
    assert capsys.readouterr().out == (
        f"note: quantize_keep_fp32: 'auto' measures int8 on the model's dev set, and its dataset_reader.dev "
        f"({dev!r}) is not a file here: every MatMul is quantized (as 'none'); run from the folder the model was "
        f"trained in to keep the most sensitive ones in fp32\n")
    assert predictor.predict(["央行宣布降准"])[0]["label"] in predictor.labels
    with pytest.raises(DataError, match=rf"^quantization: 'static' calibrates on the model's dev set, and its "
                                        rf"dataset_reader.dev \({re.escape(repr(dev))}\) is not a file here; "):
        Predictor(best, engine="onnxruntime", precision="int8", quantization="static")


def test_eval_in_int8_is_added_beside_the_runs_fp32_metrics(served_runs, tmp_path, capsys):
    """The check the docs recommend: the run's own metrics (dygraph, fp32, with the loss) stay, the int8
    eval is added under eval/onnxruntime/int8 naming its engine and precision, and report.md says which
    numbers came from which; the run's predictions/, errors.md and report.html stay those of its own eval."""
    import json
    import shutil

    out = str(tmp_path / "run")
    shutil.copytree(served_runs["cls"], out, symlinks=True)

    def read(name):
        with open(os.path.join(out, name), encoding="utf-8") as f:
            return f.read()

    kept = {name: read(name) for name in ("report.html", "errors.md", "predictions/test.jsonl")}
    before = json.loads(read("metrics.json"))
    assert before["evaluated_with"] == {"engine": "dygraph", "precision": "fp32"}
    assert "Evaluated on the Paddle model (engine dygraph), fp32." in read("report.md")
    args = ["--param_path", TASKS["cls"][0], "--set", f"trainer.output_dir={out}", "--set", "trainer.plots=false",
            "--set", "trainer.progress_bar=false", "--do", "eval"]
    assert run_trainer.main([*args, "--set", "trainer.inference_engine=onnxruntime",
                             "--set", "trainer.inference_precision=int8"]) == 0
    after = json.loads(read("metrics.json"))
    assert {k: v for k, v in after.items() if k != "eval"} == {k: v for k, v in before.items() if k != "eval"}
    assert "loss" in after["dev"] and "loss" in after["test"]
    entry = after["eval"]["onnxruntime/int8"]
    assert {k: entry[k] for k in ("engine", "precision", "quantization")} == {
        "engine": "onnxruntime", "precision": "int8", "quantization": "dynamic"}
    for split in ("dev", "test"):  # beside fp32 (the dygraph model) on the same split: the run's own numbers
        against = entry[split]["vs_fp32"]
        assert against["fp32"] == pytest.approx(before[split][against["metric"]])
        assert against["value"] == entry[split][against["metric"]]
        assert set(against["per_class"]) == set(before[split]["per_class"])
        assert against["macro_f1"]["change"] == pytest.approx(
            100 * (entry[split]["macro_f1"] - before[split]["macro_f1"]), abs=1e-3)
    for split in ("dev", "test"):  # the graphs take no labels: no loss
        assert "loss" not in entry[split] and entry[split]["accuracy"] == pytest.approx(before[split]["accuracy"],
                                                                                       abs=0.05)
    report = read("report.md")
    assert "Evaluated on the Paddle model (engine dygraph), fp32." in report
    assert "## test on onnxruntime, int8 (dynamic quantization)" in report
    assert f"| accuracy | {entry['test']['accuracy']:.4f} |" in report.split("## test on onnxruntime")[1]
    assert "Against fp32 (the dygraph model) on the same test set:" in report.split("## test on onnxruntime")[1]
    assert {name: read(name) for name in kept} == kept

    assert run_trainer.main(args) == 0  # the run's own engine again: its numbers are updated, the int8 entry kept
    again = json.loads(read("metrics.json"))
    assert again["eval"] == after["eval"] and again["evaluated_with"] == before["evaluated_with"]
    assert again["test"]["accuracy"] == before["test"]["accuracy"] and "loss" in again["test"]
    capsys.readouterr()


def test_a_truncated_onnx_or_int8_model_is_one_line_naming_it(served_runs, tmp_path, capsys):
    """Cut after it was written (a full disk, a partial copy): the file looks made, so it is loaded, and
    ONNX Runtime (or its quantizer, for model.onnx) refuses it: one line naming it and the way out, exit 2."""
    import shutil

    from appzoo.inference.graph_files import KEY_LENGTH, exported_key
    from bad_input_harness import truncate

    out = str(tmp_path / "run")
    shutil.copytree(served_runs["cls"], out, symlinks=True)
    best, folder = os.path.join(out, "best"), os.path.join(out, "inference")
    int8 = os.path.basename(Predictor(best, engine="onnxruntime", precision="int8").engine.path)
    assert int8.startswith(f"model.int8-{exported_key(folder)[:KEY_LENGTH]}-")
    truncate(int8)(folder)
    fix = "the file is truncated or corrupt: export it again with --do export"
    with pytest.raises(UserError, match=rf"^{re.escape(os.path.join(folder, int8))}: ONNX Runtime cannot load the "
                                        rf"exported graph \(.*\); {fix}$"):
        Predictor(best, engine="onnxruntime", precision="int8")
    capsys.readouterr()
    assert run_trainer.main(["--param_path", TASKS["cls"][0], "--set", f"trainer.output_dir={out}", "--do", "eval",
                             "--set", "trainer.progress_bar=false", "--set", "trainer.inference_engine=onnxruntime",
                             "--set", "trainer.inference_precision=int8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and os.path.join(folder, int8) in err[0] and err[0].endswith(fix), err

    os.remove(os.path.join(folder, int8))  # quantized again from model.onnx, which is cut too
    truncate("model.onnx")(folder)
    with pytest.raises(UserError, match=rf"^{re.escape(os.path.join(folder, 'model.onnx'))}: "
                                        rf"onnxruntime\.quantization cannot load the exported graph \(.*\); {fix}$"):
        Predictor(best, engine="onnxruntime", precision="int8")
    assert not [name for name in os.listdir(folder) if name == int8 or ".tmp-" in name]


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
    from appzoo.params.serve import ServeConfig

    with pytest.raises(ConfigError, match=r"^serve\.precision: 'bf16' is not available on onnxruntime"):
        ServeConfig.from_section({"engine": "onnxruntime", "precision": "bf16"})


def test_one_inference_spec_is_checked_once_under_each_sections_key_paths(trained):
    """The trainer and serve sections and the Predictor's keywords build one InferenceSpec and check it with one
    check, each naming its own keys; the Predictor takes a spec checked elsewhere, or its keywords, not both."""
    from appzoo.params.inference import InferenceSpec
    from appzoo.params.serve import ServeConfig
    from appzoo.params.trainer import TrainerConfig

    assert TrainerConfig(inference_engine="onnxruntime", inference_precision="int8", num_threads=2).inference == \
        InferenceSpec("onnxruntime", "int8", "dynamic", 256, 2)
    assert ServeConfig(threads=3).inference(1) == InferenceSpec("onnxruntime", "fp32", "dynamic", 256, 1)
    assert InferenceSpec("onnxruntime", "int8", "static", 64).evaluated_with() == \
        {"engine": "onnxruntime", "precision": "int8", "quantization": "static", "calibration_examples": 64,
         "keep_fp32": "auto", "sensitivity_examples": 128}
    assert InferenceSpec("onnxruntime", "int8", keep_fp32=["MatMul.0"]).evaluated_with() == \
        {"engine": "onnxruntime", "precision": "int8", "quantization": "dynamic", "keep_fp32": ["MatMul.0"]}
    with pytest.raises(ConfigError, match=r"^serve\.precision: 'int8' needs a graph engine"):
        ServeConfig(engine="dygraph", precision="int8")
    best = trained["cls"][0]
    with pytest.raises(ConfigError, match=r"^quantization: 'statc' is not a quantization; did you mean 'static'\? "
                                          r"\(accepted: dynamic, static\)$"):
        Predictor(best, engine="onnxruntime", precision="int8", quantization="statc")
    with pytest.raises(ConfigError, match=r"^num_threads: must be >= 1, got 0$"):
        Predictor(best, num_threads=0)
    with pytest.raises(TypeError, match=r"give spec or its keywords \(engine\), not both"):
        Predictor(best, engine="onnxruntime", spec=InferenceSpec())
    assert Predictor(best, spec=InferenceSpec()).spec == InferenceSpec()


@pytest.mark.skipif(not HAVE_BF16, reason=f"this CPU reports neither {' nor '.join(BF16_FLAGS)}")
def test_a_graph_paddle_cannot_run_in_bf16_is_refused_at_load_in_one_line(trained, monkeypatch):
    """Paddle 3.3.1's bf16 passes fail on the all-MiniLM-L6-v2 graphs at the first batch (RuntimeError:
    std::exception); the Predictor runs one at load, so the refusal comes there, naming the way out."""
    from appzoo.inference import engines

    def refuse(self, arrays):
        raise RuntimeError("std::exception")

    monkeypatch.setattr(engines._PaddleInference, "run", refuse)
    best = trained["cls"][0]
    with pytest.raises(UserError) as e:
        Predictor(best, engine="paddle_inference", precision="bf16")
    graph = os.path.join(os.path.dirname(best), "inference", "model.json")
    assert str(e.value) == (f"{graph}: Paddle Inference 3.3.1 cannot run this graph in bf16 (RuntimeError: "
                            f"std::exception); use precision 'fp32', or engine 'onnxruntime' with precision 'int8'")


def test_the_engine_table_is_the_engines_a_param_file_may_name():
    from appzoo.inference import engines
    from appzoo.params import inference

    assert list(engines.BY_NAME) == list(inference.ENGINES)


def test_an_engine_is_one_row_of_the_table_and_its_name(trained, monkeypatch):
    """The newcomer's map (docs/architecture.md): a new engine is a class in engines.BY_NAME and its row of
    params/inference.py's CAPABILITIES; the Predictor then runs on it, as a param file names it."""
    from appzoo.inference import engines
    from appzoo.params import inference

    calls = []

    class Counting(engines.BY_NAME["dygraph"]):
        def __call__(self, batch, tensors):
            calls.append(len(next(iter(batch.values()))))
            return super().__call__(batch, tensors)

    monkeypatch.setitem(engines.BY_NAME, "counting", Counting)
    monkeypatch.setitem(inference.CAPABILITIES, "counting", inference.Capabilities("the Paddle model, counted"))
    best, test, expected = trained[TESTED[0]]
    predictor = Predictor(best, engine="counting")
    assert rows(predictor, test) == expected and sum(calls) == len(expected)
