"""A run's floor (appzoo.task.floor): a matcher's zero-shot cosine AUC on dev, measured on the untrained encoder,
written into metrics.json and report.md, and compared with the run's result."""
import dataclasses
import json
import os

import numpy as np
import paddle
import pytest
from sklearn.metrics import roc_auc_score

from appzoo.registry import READERS
from appzoo.task.floor import Floor, from_json
from appzoo.task.model import frozen_embedder
from conftest import cli, read_json

EXAMPLE = "examples/mtch_ernie_fc_pointwise_ch.json"


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    """A one-layer BERT saved as a pretrained folder, its vocabulary the characters of data/match (so the
    texts are not all [UNK]): what the floor needs of a pretrained encoder, built in a second."""
    from paddlenlp.transformers import BertConfig, BertModel, BertTokenizer

    chars = sorted({c for name in ("train", "dev", "test") for line in open(f"data/match/{name}.tsv", encoding="utf-8")
                    for c in line.split("\t")[0] + line.split("\t")[1] if not c.isspace()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, "query", ":"]
    folder = tmp_path_factory.mktemp("bert") / "bert"
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    paddle.seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=64, pad_token_id=0)).save_pretrained(str(folder))
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(str(folder))
    return str(folder)


def test_the_floor_is_the_cosine_auc_of_the_encoders_own_vectors(bert_folder):
    """The reader's floor equals sklearn's AUC of cosines computed here apart: each text run alone (no padding,
    no batch), its token states averaged and normalised in NumPy; with and without e5's prefix."""
    from appzoo.encoders import build_encoder, parse_encoder_spec

    encoder, tokenizer = build_encoder(parse_encoder_spec({"pretrained": bert_folder}), None, None)
    reader = READERS.get("text_matching", "dataset_reader.type")()
    dev = reader.read("data/match/dev.tsv", "dev")[:40]
    floor = reader.floor({"dev": dev}, frozen_embedder(encoder, tokenizer, max_seq_len=64, batch_size=7))
    encoder.eval()

    def vector(text):
        ids = paddle.to_tensor([tokenizer(text)["input_ids"]])
        with paddle.no_grad():
            states = encoder(ids)[0].numpy()[0].astype("float64")
        mean = states.mean(axis=0)
        return mean / np.linalg.norm(mean)

    gold = [int(e["label"] == "1") for e in dev]
    expected = {prefix: roc_auc_score(gold, [vector(prefix + e["text_a"]) @ vector(prefix + e["text_b"]) for e in dev])
                for prefix in ("query: ", "")}
    assert floor.details["with_prefix"] == pytest.approx(expected["query: "], abs=1e-9)
    assert floor.details["without_prefix"] == pytest.approx(expected[""], abs=1e-9)
    assert floor.value == max(expected.values()) and floor.metric == "auc" and floor.split == "dev"
    assert floor.details["uses"] == ("with_prefix" if expected["query: "] >= expected[""] else "without_prefix")
    one_label = [e for e in dev if e["label"] == "1"]
    assert reader.floor({"dev": one_label}, lambda texts: pytest.fail("embedded")) is None  # no AUC to measure


def test_a_floor_in_metrics_json_and_its_verdict():
    floor = Floor("zero-shot cosine", "auc", "dev", 0.65, "how", {"with_prefix": 0.65, "without_prefix": 0.6,
                                                                  "prefix": "query: "})
    entry = floor.to_json(0.6)
    assert json.loads(json.dumps(entry)) == {"name": "zero-shot cosine", "metric": "auc", "split": "dev",
                                             "value": 0.65, "with_prefix": 0.65, "without_prefix": 0.6,
                                             "prefix": "query: ", "how": "how", "final": 0.6, "below": True}
    assert from_json(entry) == floor
    assert "is below its floor" in floor.verdict(0.6) and floor.verdict(0.7) is None and floor.verdict(None) is None
    assert "final" not in floor.to_json(None)


def _param_file(tmp_path, encoder):
    with open(EXAMPLE, encoding="utf-8") as f:
        config = json.load(f)
    config["model"]["encoder"] = encoder
    config["model"]["pooling"] = "mean"
    path = tmp_path / "params.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


FAST = ["--set", "trainer.max_steps=2", "--set", "trainer.eval_steps=2", "--set", "trainer.batch_size=16",
        "--set", "trainer.learning_rate=1e-7", "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false",
        "--do", "train"]


@pytest.mark.slow
def test_a_run_states_its_floor_and_warns_below_it(bert_folder, tmp_path, capsys, monkeypatch):
    """A pretrained run: the floor in metrics.json and report.md. Made unreachable (1.0), one warning line in the
    log (appzoo.utils.progress.note) and in report.md. A from-scratch run has no floor key, nor one with
    trainer.floor false."""
    out = tmp_path / "run"
    assert cli(_param_file(tmp_path, {"pretrained": bert_folder}), str(out), *FAST) == 0
    floor = read_json(out / "metrics.json")["floor"]
    history = [json.loads(line) for line in open(out / "train_log.jsonl", encoding="utf-8")]
    assert floor["final"] == [r["dev_auc"] for r in history if "dev_auc" in r][-1]
    assert floor["below"] == (floor["final"] < floor["value"]) and {"with_prefix", "without_prefix"} <= set(floor)
    assert floor["seconds"] >= 0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert f"Floor (zero-shot cosine, before training): dev auc = {floor['value']:.4f}" in report
    capsys.readouterr()

    reader_class = READERS.get("text_matching", "dataset_reader.type")
    measured = reader_class.floor
    monkeypatch.setattr(reader_class, "floor", lambda self, splits, embed: dataclasses.replace(
        measured(self, splits, embed), value=1.0))
    assert cli(_param_file(tmp_path, {"pretrained": bert_folder}), str(tmp_path / "below"), *FAST) == 0
    logged = capsys.readouterr()
    warnings = [line for line in (logged.out + logged.err).splitlines() if "below its floor" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: the run's dev auc ")
    assert read_json(tmp_path / "below" / "metrics.json")["floor"]["below"] is True
    assert "Warning: the run's dev auc" in (tmp_path / "below" / "report.md").read_text(encoding="utf-8")

    off = tmp_path / "off"
    assert cli(_param_file(tmp_path, {"pretrained": bert_folder}), str(off), *FAST, "--set", "trainer.floor=false") == 0
    assert "floor" not in read_json(off / "metrics.json")

    scratch = tmp_path / "scratch"
    assert cli(_param_file(tmp_path, {"config": "configs/ernie_tiny.json"}), str(scratch), *FAST) == 0
    assert "floor" not in read_json(scratch / "metrics.json")
    assert "Floor" not in (scratch / "report.md").read_text(encoding="utf-8")
