"""A few-step CPU run through train, eval, predict, reload, export and resume."""
import json
import os

import numpy as np
import paddle
import pytest

from appzoo.utils.files import load_tensors
from conftest import cli, crash_after_step, read_jsonl

pytestmark = pytest.mark.slow  # every test trains

EXAMPLE = "examples/cls_ernie_fc_with_focal.json"
FAST = ["--set", "trainer.max_steps=6", "--set", "trainer.eval_steps=3", "--set", "trainer.logging_steps=2",
        "--set", "trainer.batch_size=16", "--set", "trainer.progress_bar=false"]


def run(out, *extra):
    return cli(EXAMPLE, out, *FAST, *extra)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("run") / "out")
    assert run(out) == 0
    return out


def test_output_folder_contract(trained):
    for name in ("config.json", "train_log.jsonl", "metrics.json", "predictions.jsonl", "report.md", "report.html",
                 "best/model.safetensors", "best/labels.json", "best/config.json", "best/encoder/vocab.txt",
                 "best/encoder/config.json", "plots/training_curve.png", "plots/confusion_test.png"):
        assert os.path.isfile(os.path.join(trained, name)), name
    assert os.listdir(os.path.join(trained, "checkpoints")) == ["step-6"]  # keep_checkpoints=1

    with open(os.path.join(trained, "config.json"), encoding="utf-8") as f:
        resolved = json.load(f)
    assert resolved["trainer"]["max_steps"] == 6 and resolved["trainer"]["weight_decay"] == 0.01  # defaults filled in
    assert resolved["model"]["loss"]["name"] == "focal"

    with open(os.path.join(trained, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    assert metrics["best"]["metric"] == "macro_f1" and metrics["best"]["step"] in (3, 6)
    for split in ("dev", "test"):
        assert 0 <= metrics[split]["macro_f1"] <= 1 and 0 <= metrics[split]["accuracy"] <= 1
        assert set(metrics[split]["per_class"]) == {"finance", "health", "sports", "tech"}
        assert np.sum(metrics[split]["confusion_matrix"]) == 300

    log = read_jsonl(os.path.join(trained, "train_log.jsonl"))
    assert [r["step"] for r in log if "loss" in r] == [2, 4, 6]
    assert [r["step"] for r in log if "dev_macro_f1" in r] == [3, 6]

    rows = read_jsonl(os.path.join(trained, "predictions.jsonl"))
    assert len(rows) == 40
    assert set(rows[0]) == {"text", "label", "probs"}
    assert rows[0]["label"] == max(rows[0]["probs"], key=rows[0]["probs"].get)
    assert sum(rows[0]["probs"].values()) == pytest.approx(1, abs=1e-4)


def test_reloading_best_reproduces_metrics_and_predictions(trained, tmp_path):
    with open(os.path.join(trained, "metrics.json"), encoding="utf-8") as f:
        before = json.load(f)
    first = read_jsonl(os.path.join(trained, "predictions.jsonl"))
    out = str(tmp_path / "again")
    assert run(out, "--do", "eval,predict", "--set", f"trainer.init_from={trained}/best") == 0
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        after = json.load(f)
    assert after["test"]["macro_f1"] == before["test"]["macro_f1"]
    again = read_jsonl(os.path.join(out, "predictions.jsonl"))
    assert [r["label"] for r in again] == [r["label"] for r in first]
    np.testing.assert_allclose([list(r["probs"].values()) for r in again],
                               [list(r["probs"].values()) for r in first], atol=1e-5)


def test_export_runs_in_paddle_inference(trained):
    assert run(trained, "--do", "export") == 0
    folder = os.path.join(trained, "inference")
    files = os.listdir(folder)
    assert "model.pdiparams" in files and ({"model.json", "model.pdmodel"} & set(files))

    from paddle import inference

    program = os.path.join(folder, "model.json" if "model.json" in files else "model.pdmodel")
    config = inference.Config(program, os.path.join(folder, "model.pdiparams"))
    config.disable_gpu()
    predictor = inference.create_predictor(config)
    ids = np.array([[2, 10, 11, 12, 3, 0], [2, 13, 14, 3, 0, 0]], dtype="int64")
    types = np.zeros_like(ids)
    for name, value in zip(predictor.get_input_names(), (ids, types)):
        predictor.get_input_handle(name).copy_from_cpu(value)
    predictor.run()
    outputs = {n: predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()}
    static_logits = next(v for v in outputs.values() if v.shape == (2, 4))

    from appzoo.encoders import load_encoder
    from tasks.text_classification.model import ErnieFcClassification

    encoder, _ = load_encoder(os.path.join(trained, "best", "encoder"))
    model = ErnieFcClassification(encoder, num_labels=4)
    model.set_state_dict(load_tensors(os.path.join(trained, "best", "model.safetensors")))
    model.eval()
    eager = model(paddle.to_tensor(ids), paddle.to_tensor(types))["logits"].numpy()
    np.testing.assert_allclose(static_logits, eager, rtol=1e-4, atol=1e-5)


def test_resume_after_a_crash_matches_an_uninterrupted_run(tmp_path, monkeypatch):
    """The crashed run is started and continued by one command, ``trainer.resume=auto``, as a cluster job
    that is started again (deploy/): a new run in an empty folder, the newest checkpoint after."""
    args = ["--set", "trainer.max_steps=8", "--set", "trainer.eval_steps=4", "--set", "trainer.keep_checkpoints=3"]
    straight = str(tmp_path / "straight")
    assert run(straight, *args) == 0

    crashed = str(tmp_path / "crashed")
    with crash_after_step(monkeypatch, 5), pytest.raises(RuntimeError, match="simulated crash"):
        run(crashed, *args, "--set", "trainer.resume=auto")
    assert sorted(os.listdir(os.path.join(crashed, "checkpoints"))) == ["step-4"]
    assert run(crashed, *args, "--set", "trainer.resume=auto") == 0

    final = [paddle.load(os.path.join(d, "checkpoints", "step-8", "model_state.pdparams")) for d in (straight, crashed)]
    for name, value in final[0].items():
        np.testing.assert_allclose(final[1][name].numpy(), value.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    logs = [read_jsonl(os.path.join(d, "train_log.jsonl")) for d in (straight, crashed)]
    assert [r["step"] for r in logs[1]] == [r["step"] for r in logs[0]]  # no row twice after the resume
    losses = [{r["step"]: r["loss"] for r in log if "loss" in r} for log in logs]
    assert losses[1][8] == pytest.approx(losses[0][8], rel=1e-5)


def test_same_seed_same_run_different_seed_different_run(tmp_path):
    outs = [str(tmp_path / n) for n in ("a", "b", "c")]
    for out, seed in zip(outs, (1, 1, 2)):
        assert run(out, "--do", "train", "--set", f"trainer.seed={seed}", "--set", "trainer.max_steps=3",
                   "--set", "trainer.eval_steps=0") == 0
    logs = [[r["loss"] for r in read_jsonl(os.path.join(o, "train_log.jsonl")) if "loss" in r] for o in outs]
    assert logs[0] == logs[1]
    assert logs[0] != logs[2]


def test_predict_only_run_keeps_the_training_record(trained):
    with open(os.path.join(trained, "metrics.json"), encoding="utf-8") as f:
        before = json.load(f)
    assert run(trained, "--do", "predict") == 0
    with open(os.path.join(trained, "metrics.json"), encoding="utf-8") as f:
        assert json.load(f) == before
    assert run(trained, "--do", "eval") == 0  # an eval run updates dev/test, keeps best and train
    with open(os.path.join(trained, "metrics.json"), encoding="utf-8") as f:
        after = json.load(f)
    assert after["best"] == before["best"] and after["train"] == before["train"]
    assert after["test"]["macro_f1"] == before["test"]["macro_f1"]


def test_progress_bar_false_silences_every_bar(tmp_path, capsys):
    assert run(str(tmp_path / "quiet"), "--do", "train,eval,predict", "--set", "trainer.max_steps=1") == 0
    captured = capsys.readouterr()
    assert "tokenize" not in captured.err and "train:" not in captured.err and "eval dev" not in captured.err
    assert "note: 3 of 1200 train texts reach max_seq_len=64" in captured.out  # notes still reach the user


def test_overwrite_output_dir_starts_clean(tmp_path):
    out = str(tmp_path / "out")
    assert run(out, "--do", "train", "--set", "trainer.max_steps=6", "--set", "trainer.eval_steps=0") == 0
    assert os.listdir(os.path.join(out, "checkpoints")) == ["step-6"]
    assert run(out, "--do", "train", "--set", "trainer.max_steps=2", "--set", "trainer.eval_steps=0",
               "--set", "trainer.overwrite_output_dir=true") == 0
    assert os.listdir(os.path.join(out, "checkpoints")) == ["step-2"]  # no stale step-6 to resume from
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        assert json.load(f)["train"]["steps"] == 2


def test_resume_auto_in_a_folder_with_a_run_and_no_checkpoint_refuses_to_start_over(trained, tmp_path, capsys):
    """auto continues or starts; it never starts over a run it cannot continue (nothing saved is lost)."""
    import shutil

    out = str(tmp_path / "out")
    shutil.copytree(trained, out, symlinks=True)
    shutil.rmtree(os.path.join(out, "checkpoints"))
    assert run(out, "--set", "trainer.resume=auto") == 2
    assert capsys.readouterr().err.strip().endswith(
        f"trainer.output_dir: {out!r} already holds a run and no checkpoint to continue it from; choose another "
        f"folder, or set trainer.resume=true to continue it or trainer.overwrite_output_dir=true to replace it")
    assert os.path.isdir(os.path.join(out, "best"))


def test_a_misspelt_resume_value_is_one_line_naming_what_is_accepted(tmp_path, capsys):
    assert run(str(tmp_path / "out"), "--set", "trainer.resume=atuo") == 2
    assert capsys.readouterr().err.strip().endswith(
        "trainer.resume: 'atuo' is not a complete checkpoint folder (no COMPLETE marker; accepted: true, auto, "
        "or a checkpoint folder)")
