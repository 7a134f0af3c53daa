"""Sequence labeling end to end: the NER examples train, evaluate, predict and export."""
import glob
import json
import os

import pytest

import run_trainer
from appzoo.params.param_file import apply_overrides, load_param_file
from appzoo.run.plan import validate
from conftest import read_json, read_jsonl

FAST = ["--set", "trainer.max_steps=2", "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false"]


def _rows(folder):
    return read_jsonl(os.path.join(folder, "predictions.jsonl"))


def _predict_tokens():
    sentences, tokens = [], []
    with open("data/ner/predict.txt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                tokens.append(line.rstrip("\n"))
            elif tokens:
                sentences.append(tokens)
                tokens = []
    return sentences + ([tokens] if tokens else [])


@pytest.mark.slow
def test_fc_example_train_eval_predict_export_and_reload(tmp_path):
    out = str(tmp_path / "fc")
    argv = ["--param_path", "examples/ner_ernie_fc_ch.json", "--set", f"trainer.output_dir={out}",
            "--do", "train,eval,predict,export", *FAST]
    assert run_trainer.main(argv) == 0
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    assert metrics["best"]["metric"] == "micro_f1"
    assert {"micro_f1", "macro_f1", "token_accuracy", "per_type"} <= set(metrics["test"])
    assert set(metrics["test"]["per_type"]) <= {"PER", "ORG", "LOC", "PROD"}
    rows = _rows(out)
    expected = _predict_tokens()
    assert [r["tokens"] for r in rows] == expected  # long sentences included: windows are merged back
    assert all(len(r["tags"]) == len(r["tokens"]) for r in rows)
    assert any(len(r["tokens"]) > 64 for r in rows)
    for row in rows:
        for entity in row["entities"]:
            assert 0 <= entity["start"] < entity["end"] <= len(row["tokens"])
            assert entity["text"] == "".join(row["tokens"][entity["start"]:entity["end"]])
    assert os.path.isfile(os.path.join(out, "inference", "model.pdiparams"))

    # predicting again from best/ alone gives the same tags
    os.remove(os.path.join(out, "predictions.jsonl"))
    assert run_trainer.main(["--param_path", "examples/ner_ernie_fc_ch.json", "--set", f"trainer.output_dir={out}",
                             "--do", "predict", *FAST]) == 0
    assert [r["tags"] for r in _rows(out)] == [r["tags"] for r in rows]


@pytest.mark.slow
def test_crf_example_decodes_only_sequences_the_scheme_allows(tmp_path, monkeypatch):
    """A 2-step model tags (nearly) everything O, which is valid anyway; so predict again with
    emissions that favour I- tags everywhere, with which no BIO sentence may start. The
    constrained Viterbi must turn each sentence into one valid entity, B- then I-s."""
    import paddle

    from tasks.sequence_labeling.model import ErnieCrfSeqLabel
    from tasks.sequence_labeling.schemes import invalid_position

    out = str(tmp_path / "crf")
    argv = ["--param_path", "examples/ner_ernie_crf_ch.json", "--set", f"trainer.output_dir={out}", *FAST]
    assert run_trainer.main(argv) == 0
    tags = read_json(os.path.join(out, "best", "labels.json"))
    inside = paddle.to_tensor([20.0 if tag.startswith("I-") else 0.0 for tag in tags])
    emissions = ErnieCrfSeqLabel.emissions
    monkeypatch.setattr(ErnieCrfSeqLabel, "emissions", lambda self, *args: emissions(self, *args) + inside)
    assert run_trainer.main([*argv, "--do", "predict"]) == 0
    rows = [r for r in _rows(out) if 2 <= len(r["tokens"]) <= 62]  # longer ones are decoded in windows
    assert len(rows) >= 10
    for row in rows:
        assert invalid_position(row["tags"], "BIO") is None, row["tags"]
        assert [(e["start"], e["end"]) for e in row["entities"]] == [(0, len(row["tokens"]))], row["tags"]


@pytest.mark.parametrize("name", ["ner_ernie_fc_ch", "ner_ernie_fc_with_dice", "ner_ernie_fc_with_focal",
                                  "ner_ernie_crf_ch"])
def test_examples_validate(name):
    from appzoo.params.param_file import load_param_file
    from appzoo.run.plan import validate

    plan = validate(load_param_file(f"examples/{name}.json"), name)
    assert plan.reader_class.__name__ == "SequenceLabelingReader"


def test_unknown_dev_tag_stops_the_run_with_file_and_line(tmp_path, capsys):
    train = tmp_path / "train.txt"
    train.write_text("张\tB-PER\n三\tI-PER\n来\tO\n", encoding="utf-8")
    dev = tmp_path / "dev.txt"
    dev.write_text("李\tB-PER\n\n四\tB-LOC\n", encoding="utf-8")
    with open("examples/ner_ernie_fc_ch.json", encoding="utf-8") as f:
        config = json.load(f)
    config["dataset_reader"].update(train=str(train), dev=str(dev), test=None, predict=None)
    config["dataset_reader"] = {k: v for k, v in config["dataset_reader"].items() if v is not None}
    config["trainer"]["output_dir"] = str(tmp_path / "out")
    param = tmp_path / "param.json"
    param.write_text(json.dumps(config), encoding="utf-8")
    argv = ["--param_path", str(param), *FAST]
    assert run_trainer.main(argv) == 2
    assert f"error: {dev}:3: tag 'B-LOC' is not in the label set" in capsys.readouterr().err


def test_bad_reader_key_is_a_config_error(capsys):
    argv = ["--param_path", "examples/ner_ernie_crf_ch.json", "--set", "dataset_reader.schem=BIO", *FAST]
    assert run_trainer.main(argv) == 2
    err = capsys.readouterr().err
    assert "dataset_reader.schem: unknown key" in err and "did you mean 'scheme'?" in err


NER_EXAMPLES = sorted(glob.glob("examples/ner_*.json"))


@pytest.mark.parametrize("path", NER_EXAMPLES)
def test_format_spans_by_set_on_every_ner_example(path):
    """--set dataset_reader.format=spans is all it takes: the examples pin no column that only conll reads."""
    config = load_param_file(path)
    apply_overrides(config, ["dataset_reader.format=spans", "trainer.output_dir=output/never-written"])
    assert validate(config, path).reader_kwargs["format"] == "spans"


def test_spans_example_runs_its_audit(tmp_path, capsys):
    rows = [{"text": "张三在上海。", "label": {"PER": {"张三": [[0, 1]]}, "LOC": {"上海": [[3, 4]]}}},
            {"text": "李四去北京。", "label": [[0, 2, "PER"], [3, 5, "LOC"]]}]
    data = tmp_path / "train.json"
    data.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    argv = ["--param_path", "examples/ner_ernie_crf_ch.json", "--do", "audit", "--set", "dataset_reader.format=spans",
            "--set", f"dataset_reader.train={data}", "--set", f"dataset_reader.dev={data}",
            "--set", "dataset_reader.test=null", "--set", "dataset_reader.predict=null",
            "--set", f"trainer.output_dir={tmp_path / 'out'}", "--set", "trainer.progress_bar=false"]
    assert run_trainer.main(argv) == 0
    assert read_json(tmp_path / "out" / "audit.json")["splits"]["train"]["labels"] == {"PER": 2, "LOC": 2}
