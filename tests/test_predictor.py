"""The Predictor API and trainer.inference_engine give what ``--do predict`` gives.

One short run per model (tests/serving.py, shared with the serving tests); each engine then
predicts the run's predict file, from raw inputs through ``Predictor`` and
through ``--do predict --set trainer.inference_engine=...``. Labels, tags and
entity spans must be identical, probabilities and scores within 1e-4.

The onnxruntime cases skip, saying so, where onnxruntime is not installed
(requirements.txt installs it).
"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

import run_trainer
from appzoo import Predictor
from appzoo.errors import ConfigError, DataError
from serving import FAST, assert_same_rows, raw_inputs

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("served")]  # every test predicts with a trained run of each task

EXAMPLES = {
    "classification": "examples/cls_ernie_fc_ch.json",
    "ner_crf": "examples/ner_ernie_crf_ch.json",
    "ner_softmax": "examples/ner_ernie_fc_ch.json",
    "matching_pointwise": "examples/mtch_ernie_fc_pointwise_ch.json",
    "matching_siamese": "examples/mtch_ernie_siamese_infonce.json",
}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
ENGINES = ["dygraph", "paddle_inference",
           pytest.param("onnxruntime", marks=pytest.mark.skipif(
               not HAVE_ORT, reason="onnxruntime is not installed (pip install -r requirements.txt)"))]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


#: this module's task names -> those of the runs shared with the serving tests (conftest ``served_runs``)
SHARED = {"classification": "cls", "ner_crf": "ner_crf", "ner_softmax": "ner_softmax",
          "matching_pointwise": "pointwise", "matching_siamese": "inbatch"}


@pytest.fixture(scope="module")
def runs(served_runs):
    """task -> output folder of a short run (train, eval, predict on dygraph) of EXAMPLES[task]."""
    return {task: served_runs[SHARED[task]] for task in EXAMPLES}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("task", list(EXAMPLES))
def test_predictor_matches_do_predict(runs, task, engine):
    expected = read_jsonl(os.path.join(runs[task], "predictions.jsonl"))
    predictor = Predictor(os.path.join(runs[task], "best"), engine=engine, batch_size=16)
    assert_same_rows(predictor.predict(raw_inputs(expected)), expected)


FRESH_PROCESS = """
import json, os, sys
from appzoo import Predictor

best, inputs = sys.argv[1], json.load(open(sys.argv[2], encoding="utf-8"))
registered_before = "tasks" in sys.modules
rows = Predictor(best).predict(inputs)
print(json.dumps({"rows": rows, "tasks_imported_before_use": registered_before,
                  "tasks_imported": "tasks" in sys.modules, "omp": os.environ.get("OMP_NUM_THREADS")}))
"""


def test_a_fresh_python_elsewhere_predicts_without_importing_tasks_and_quietly(runs, tmp_path):
    """What a user's script does: the repository on PYTHONPATH only, run from another folder, no
    ``import tasks``. The registries load the task readers and models on first use; paddle's
    import-time warnings (ccache, OMP_NUM_THREADS > 1) stay unprinted, and the process's
    OMP_NUM_THREADS stays the user's."""
    expected = read_jsonl(os.path.join(runs["classification"], "predictions.jsonl"))
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps(raw_inputs(expected)), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "2"}  # > 1: what paddle warns about at import
    child = subprocess.run([sys.executable, "-c", FRESH_PROCESS, os.path.join(runs["classification"], "best"),
                            str(inputs)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    assert child.stderr == ""
    result = json.loads(child.stdout)
    assert not result["tasks_imported_before_use"] and result["tasks_imported"]
    assert result["omp"] == "2"
    assert_same_rows(result["rows"], expected)


@pytest.mark.parametrize("engine", ENGINES[1:])
@pytest.mark.parametrize("task", ["ner_crf", "matching_siamese"])
def test_do_predict_and_eval_on_an_engine(runs, task, engine):
    out = runs[task]
    expected = read_jsonl(os.path.join(out, "predictions.jsonl"))
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        before = json.load(f)
    assert run_trainer.main(["--param_path", EXAMPLES[task], "--set", f"trainer.output_dir={out}", *FAST,
                             "--do", "eval,predict", "--set", f"trainer.inference_engine={engine}"]) == 0
    assert_same_rows(read_jsonl(os.path.join(out, "predictions.jsonl")), expected)
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        after = json.load(f)
    assert {k: after[k] for k in ("dev", "test")} == {k: before[k] for k in ("dev", "test")}  # the run's own
    entry = after["eval"][f"{engine}/fp32"]  # beside them: this engine's
    assert (entry["engine"], entry["precision"]) == (engine, "fp32")
    for split in ("dev", "test"):
        for key, value in before[split].items():
            if isinstance(value, float) and key != "loss":  # the graphs take no labels: no loss
                assert entry[split][key] == pytest.approx(value, abs=1e-4), (split, key)


@pytest.mark.parametrize("engine", ["dygraph", "paddle_inference"])
@pytest.mark.parametrize("task", list(EXAMPLES))
def test_an_empty_predict_file_gives_empty_predictions(runs, task, engine, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    out = tmp_path / "out"
    assert run_trainer.main(["--param_path", EXAMPLES[task], "--set", f"trainer.output_dir={out}", *FAST,
                             "--do", "predict", "--set", f"trainer.init_from={os.path.join(runs[task], 'best')}",
                             "--set", f"dataset_reader.predict={empty}",
                             "--set", f"trainer.inference_engine={engine}"]) == 0
    assert (out / "predictions.jsonl").read_text(encoding="utf-8") == ""
    assert f"note: {empty} has no rows to predict; predictions.jsonl is empty" in "".join(capsys.readouterr())


def test_raw_texts_for_sequence_labeling(runs, capsys, monkeypatch):
    """A text without spaces is read as characters, one with spaces is split on them."""
    from appzoo.utils import progress

    monkeypatch.setattr(progress, "ENABLED", True)  # as in a fresh process (runs set it from their config)
    predictor = Predictor(os.path.join(runs["ner_crf"], "best"))
    capsys.readouterr()
    chars, words = predictor.predict(["张三在北京", "John lives in Paris"])
    assert "".join(capsys.readouterr()) == "", "no bars unless progress_bar=True"
    Predictor(os.path.join(runs["ner_crf"], "best"), progress_bar=True).predict(["张三在北京"])
    assert "tokenize predict" in "".join(capsys.readouterr())
    assert chars["tokens"] == list("张三在北京") and words["tokens"] == ["John", "lives", "in", "Paris"]
    assert len(chars["tags"]) == 5 and all("start" in e and "end" in e for e in chars["entities"])


def test_bad_inputs_and_engines_are_one_line_errors(runs, monkeypatch):
    from appzoo.params.trainer import TrainerConfig

    best = os.path.join(runs["classification"], "best")
    with pytest.raises(ConfigError, match=r"engine: 'paddle_infer' is not an inference engine; did you mean "
                                          r"'paddle_inference'"):
        Predictor(best, engine="paddle_infer")
    with pytest.raises(DataError, match=r"input 1: expected a non-empty text \(a string\), got 3"):
        Predictor(best).predict(["fine", 3])
    with pytest.raises(DataError, match=r"^inputs: expected a list of inputs, got one str; for one input, "
                                        r"pass \[input\]"):
        Predictor(best).predict("one text")
    for blank in ("\u200b", " \u2060\ufeff ", "\u200c\t"):  # invisible format characters: refused like "   "
        with pytest.raises(DataError, match=r"^input 1: \".*\" is blank \(only whitespace and invisible format "
                                            r"characters such as U\+200B\); expected a non-empty text$"):
            Predictor(best).predict(["fine", blank])
    assert Predictor(best).predict([]) == []
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(ConfigError, match=r"^trainer\.inference_engine: .* not installed \(pip install onnxruntime\)$"):
        TrainerConfig(inference_engine="onnxruntime")


def test_a_corrupt_exported_graph_is_one_line_naming_the_file_and_the_fix(runs, tmp_path, capsys):
    """inference/model.pdiparams damaged after the export (newer than best/, so it is not re-exported)."""
    import shutil

    from appzoo.errors import UserError

    out = str(tmp_path / "run")
    shutil.copytree(runs["classification"], out, symlinks=True)
    assert run_trainer.main(["--param_path", EXAMPLES["classification"], "--set", f"trainer.output_dir={out}",
                             *FAST, "--do", "export"]) == 0
    params = os.path.join(out, "inference", "model.pdiparams")
    with open(params, "r+b") as f:
        f.truncate(os.path.getsize(params) // 3)
    with pytest.raises(UserError, match=r"model\.pdiparams: Paddle Inference cannot load the exported graph .*"
                                        r"export it again with --do export$"):
        Predictor(os.path.join(out, "best"), engine="paddle_inference")
    capsys.readouterr()
    before = open(os.path.join(out, "predictions.jsonl"), encoding="utf-8").read()
    assert run_trainer.main(["--param_path", EXAMPLES["classification"], "--set", f"trainer.output_dir={out}",
                             *FAST, "--do", "predict", "--set", "trainer.inference_engine=paddle_inference"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and params in err[0] and "--do export" in err[0]
    assert open(os.path.join(out, "predictions.jsonl"), encoding="utf-8").read() == before


def _older_than(folder, stamp):
    """Set every file and folder under ``folder`` an hour before ``stamp`` (what ``cp -a`` of an older model keeps)."""
    old = stamp - 3600
    for base, dirs, names in os.walk(folder):
        for name in dirs + names:
            os.utime(os.path.join(base, name), (old, old))
    os.utime(folder, (old, old))


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed (pip install -r requirements.txt)")
def test_a_best_replaced_by_an_older_copy_of_another_model_is_exported_again(runs, tmp_path, capsys):
    """``cp -a`` of another model over best/ keeps its older timestamps: the export is still newer than
    every file of best/, yet it is of the previous model. The graph engines (and int8's cache) must answer
    with the new model, as dygraph does; so must ``--do predict`` on a graph engine."""
    import shutil

    from appzoo.utils.files import load_tensors, save_tensors

    out = tmp_path / "run"
    shutil.copytree(runs["classification"], out, symlinks=True)
    best, inference = str(out / "best"), out / "inference"
    inputs = raw_inputs(read_jsonl(os.path.join(out, "predictions.jsonl")))
    old = Predictor(best, engine="paddle_inference").predict(inputs)
    Predictor(best, engine="onnxruntime").predict(inputs)
    old_int8 = Predictor(best, engine="onnxruntime", precision="int8").predict(inputs)
    exported = sorted(os.listdir(inference))
    assert [n for n in exported if n.startswith("model.int8-")], exported

    other = tmp_path / "other"  # another model: the classifier's weights negated
    shutil.copytree(best, other, copy_function=shutil.copy2)
    weights = load_tensors(str(other / "model.safetensors"))
    last = [k for k, v in weights.items() if len(v.shape) == 2][-1]
    weights[last] = -weights[last]
    save_tensors(weights, str(other / "model.safetensors"))
    _older_than(other, min(os.path.getmtime(inference / name) for name in exported))
    shutil.copytree(other, best, copy_function=shutil.copy2, dirs_exist_ok=True)  # cp -a other/. run/best/
    newest = max(os.path.getmtime(os.path.join(base, n)) for base, _, names in os.walk(os.path.realpath(best))
                 for n in names)
    assert newest < min(os.path.getmtime(inference / name) for name in exported), "the premise: best/ looks older"

    expected = Predictor(best, engine="dygraph").predict(inputs)
    assert max(abs(a["probs"][k] - b["probs"][k]) for a, b in zip(old, expected) for k in a["probs"]) > 0.1
    for engine in ("paddle_inference", "onnxruntime"):
        assert_same_rows(Predictor(best, engine=engine).predict(inputs), expected)
    new_int8 = Predictor(best, engine="onnxruntime", precision="int8").predict(inputs)
    int8_files = [n for n in os.listdir(inference) if n.startswith("model.int8-")]
    assert len(int8_files) == 1 and int8_files[0] not in exported, (exported, int8_files)
    gap = max(abs(a["probs"][k] - b["probs"][k]) for a, b in zip(new_int8, expected) for k in a["probs"])
    assert gap < 0.05, "int8 of the new model: within rounding of its fp32"
    assert max(abs(a["probs"][k] - b["probs"][k]) for a, b in zip(old_int8, expected) for k in a["probs"]) > 0.1

    shutil.copytree(os.path.join(runs["classification"], "best"), best, copy_function=shutil.copy2,
                    dirs_exist_ok=True)  # the first model back, older than the export just made
    assert run_trainer.main(["--param_path", EXAMPLES["classification"], "--set", f"trainer.output_dir={out}", *FAST,
                             "--do", "predict", "--set", "trainer.inference_engine=paddle_inference"]) == 0
    assert_same_rows(read_jsonl(os.path.join(out, "predictions.jsonl")), old)
    capsys.readouterr()


@pytest.mark.parametrize("engine", ENGINES)
def test_one_predictor_shared_by_four_threads_answers_each_its_own_inputs(runs, engine):
    """Each thread predicts its own inputs, at its own batch size, all at once and again: each gets what
    the same Predictor gives those inputs on one thread (Paddle Inference's handles are per predictor)."""
    import threading

    texts = raw_inputs(read_jsonl(os.path.join(runs["classification"], "predictions.jsonl")))
    texts = (texts * 4)[:60]
    predictor = Predictor(os.path.join(runs["classification"], "best"), engine=engine, batch_size=8)
    inputs = [texts[:1], texts[1:8], texts[8:27], texts[27:60]]  # 1, 7, 19 and 33 inputs: batches of 1 to 8
    expected = [predictor.predict(x) for x in inputs]
    start, got, failed = threading.Barrier(4), [[] for _ in inputs], []

    def work(i):
        try:
            start.wait(30)
            for _ in range(5):
                got[i].append(predictor.predict(inputs[i]))
        except Exception as e:  # noqa: BLE001  (reported below, with the thread it came from)
            failed.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failed == []
    for i, answers in enumerate(got):
        assert len(answers) == 5
        for rows in answers:
            assert_same_rows(rows, expected[i], atol=1e-5)
