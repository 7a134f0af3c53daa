"""Few-step CPU runs of the matching examples: train, eval, predict, reload, export."""
import json
import os

import numpy as np
import pytest

from conftest import cli, read_json, read_jsonl

pytestmark = pytest.mark.slow  # every test trains

FAST = ["--set", "trainer.max_steps=4", "--set", "trainer.eval_steps=2", "--set", "trainer.batch_size=16",
        "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false"]
PAIRWISE = "examples/mtch_ernie_pairwise_simnet_with_circle_loss.json"


def run(example, out, *extra):
    return cli(example, out, *FAST, *extra)


@pytest.fixture(scope="module")
def pairwise(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("pairwise") / "out")
    assert run(PAIRWISE, out) == 0
    return out


def test_pairwise_run_tunes_saves_and_reuses_the_threshold(pairwise):
    state = read_json(os.path.join(pairwise, "best", "reader_state.json"))
    assert state["tuned"] is True
    metrics = read_json(os.path.join(pairwise, "metrics.json"))
    assert metrics["best"]["metric"] == "auc"
    for split in ("dev", "test"):
        assert metrics[split]["threshold"] == state["threshold"]  # dev-tuned, reused for test
        assert 0 <= metrics[split]["auc"] <= 1 and 0 <= metrics[split]["f1"] <= 1
        assert "argmax_f1" not in metrics[split]  # similarity models have no argmax
    assert metrics["dev"]["f1"] == pytest.approx(state["dev_f1"])
    rows = read_jsonl(os.path.join(pairwise, "predictions.jsonl"))
    assert len(rows) == 43 and set(rows[0]) == {"text_a", "text_b", "score", "label"}
    assert all(r["label"] == ("1" if r["score"] >= state["threshold"] else "0") for r in rows)


def test_reloaded_model_predicts_with_the_saved_threshold(pairwise, tmp_path):
    out = str(tmp_path / "again")
    assert run(PAIRWISE, out, "--do", "eval,predict", "--set", f"trainer.init_from={pairwise}/best") == 0
    before, after = read_json(os.path.join(pairwise, "metrics.json")), read_json(os.path.join(out, "metrics.json"))
    assert after["test"]["threshold"] == before["test"]["threshold"]
    assert after["test"]["f1"] == before["test"]["f1"]
    first, again = (read_jsonl(os.path.join(d, "predictions.jsonl")) for d in (pairwise, out))
    assert [r["label"] for r in again] == [r["label"] for r in first]


def test_pairwise_export_scores_pairs_as_the_dygraph_model_does(pairwise):
    """The exported program, run by Paddle Inference on the predict pairs,
    gives the scores the trained (dygraph) model wrote to predictions.jsonl."""
    from paddle import inference

    from appzoo.encoders import load_encoder
    from appzoo.registry import READERS

    assert run(PAIRWISE, pairwise, "--do", "export") == 0
    folder = os.path.join(pairwise, "inference")
    files = os.listdir(folder)
    program = os.path.join(folder, "model.json" if "model.json" in files else "model.pdmodel")
    config = inference.Config(program, os.path.join(folder, "model.pdiparams"))
    config.disable_gpu()
    predictor = inference.create_predictor(config)

    _, tokenizer = load_encoder(os.path.join(pairwise, "best", "encoder"))
    reader = READERS.get("text_matching_pairwise", "reader")()
    examples = reader.read("data/match/predict.tsv", "predict")
    batch = reader.collate(reader.encode(examples, tokenizer, ["0", "1"], 48, "predict"), tokenizer.pad_token_id)
    assert predictor.get_input_names() == ["query_input_ids", "title_input_ids"]
    for name in predictor.get_input_names():
        predictor.get_input_handle(name).copy_from_cpu(batch[name])
    predictor.run()
    [scores] = [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]

    dygraph = [row["score"] for row in read_jsonl(os.path.join(pairwise, "predictions.jsonl"))]
    assert len(dygraph) == len(examples) > 10
    np.testing.assert_allclose(scores, dygraph, atol=2e-6)  # predictions.jsonl rounds to 6 decimals


def test_pointwise_reports_at_threshold_and_argmax(tmp_path):
    out = str(tmp_path / "fc")
    assert run("examples/mtch_ernie_fc_pointwise_with_focal.json", out, "--set", "trainer.max_steps=2") == 0
    metrics = read_json(os.path.join(out, "metrics.json"))
    assert {"loss", "auc", "f1", "threshold", "argmax_accuracy", "argmax_f1"} <= set(metrics["test"])
    row = read_jsonl(os.path.join(out, "predictions.jsonl"))[0]
    assert row["score"] == pytest.approx(row["probs"]["1"], abs=1e-5)


def test_bad_label_in_dev_is_reported_with_file_and_line(tmp_path, capsys):
    dev = tmp_path / "dev.tsv"
    dev.write_text("还款\t怎么还钱\t1\n还款\t怎么开通\tyes\n", encoding="utf-8")
    code = run(PAIRWISE, str(tmp_path / "out"), "--set", f"dataset_reader.dev={dev}")
    assert code == 2
    assert f"error: {dev}:2: label 'yes' is neither the positive label '1' nor the negative label '0'" \
        in capsys.readouterr().err


def test_loss_that_does_not_fit_is_a_config_error(tmp_path, capsys):
    code = run(PAIRWISE, str(tmp_path / "out"), "--set", 'model.loss={"name": "ce"}')
    assert code == 2
    err = capsys.readouterr().err
    assert "error: --set model.loss.name: 'ce' does not fit a pair or embedding model" in err
    assert not (tmp_path / "out").exists()  # refused before the encoder or the output folder


def test_a_cosent_bi_encoder_trains_on_labelled_pairs_and_exports(tmp_path):
    """ErnieMatchingSiameseCosine with cosent through the siamese reader: train, eval, predict and export; its
    scores are cosines and its threshold is tuned on them."""
    params = {"dataset_reader": {"type": "text_matching_siamese", "train": "data/match/train.tsv",
                                 "dev": "data/match/dev.tsv", "test": "data/match/test.tsv",
                                 "predict": "data/match/predict.tsv", "max_seq_len": 48},
              "model": {"type": "ErnieMatchingSiameseCosine", "encoder": {"config": "configs/ernie_tiny.json"},
                        "loss": {"name": "cosent"}},
              "trainer": {"learning_rate": 0.0005, "metric_for_best": "auc"}}
    path = tmp_path / "params.json"
    path.write_text(json.dumps(params), encoding="utf-8")
    out = str(tmp_path / "out")
    assert run(str(path), out, "--do", "train,eval,predict,export") == 0
    metrics = read_json(os.path.join(out, "metrics.json"))
    assert 0 <= metrics["test"]["auc"] <= 1 and "loss" in metrics["dev"] and "floor" not in metrics
    rows = read_jsonl(os.path.join(out, "predictions.jsonl"))
    assert len(rows) == 43 and all(-1 - 1e-5 <= r["score"] <= 1 + 1e-5 for r in rows)
    assert os.path.isdir(os.path.join(out, "inference"))
