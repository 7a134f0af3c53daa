"""A run's floor (appzoo.task.floor): a matcher's zero-shot cosine AUC on dev and a classifier's frozen-encoder probe,
measured on the untrained encoder, written into metrics.json and report.md, and compared with the run's result."""
import dataclasses
import json
import os

import numpy as np
import paddle
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, roc_auc_score

from appzoo.registry import READERS
from appzoo.task.floor import Floor, from_json
from appzoo.task.model import frozen_embedder
from conftest import cli, read_json

EXAMPLE = "examples/mtch_ernie_fc_pointwise_ch.json"
CLS_EXAMPLE = "examples/cls_e5_fc_ch.json"
MULTILABEL_EXAMPLE = "examples/cls_ernie_fc_multilabel.json"


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    """A one-layer BERT saved as a pretrained folder, its vocabulary the characters of data/match and data/cls (so
    the texts are not all [UNK]): what the floor needs of a pretrained encoder, built in a second."""
    from paddlenlp.transformers import BertConfig, BertModel, BertTokenizer

    chars = sorted({c for data in ("match", "cls") for name in ("train", "dev", "test")
                    for line in open(f"data/{data}/{name}.tsv", encoding="utf-8")
                    for c in "".join(line.split("\t")[:2 if data == "match" else 1]) if not c.isspace()})
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
        return _vector(encoder, tokenizer, text)

    gold = [int(e["label"] == "1") for e in dev]
    expected = {prefix: roc_auc_score(gold, [vector(prefix + e["text_a"]) @ vector(prefix + e["text_b"]) for e in dev])
                for prefix in ("query: ", "")}
    assert floor.details["with_prefix"] == pytest.approx(expected["query: "], abs=1e-9)
    assert floor.details["without_prefix"] == pytest.approx(expected[""], abs=1e-9)
    assert floor.value == max(expected.values()) and floor.metric == "auc" and floor.split == "dev"
    assert floor.details["uses"] == ("with_prefix" if expected["query: "] >= expected[""] else "without_prefix")
    one_label = [e for e in dev if e["label"] == "1"]
    assert reader.floor({"dev": one_label}, lambda texts: pytest.fail("embedded")) is None  # no AUC to measure


def _vector(encoder, tokenizer, text, max_seq_len=64):
    """``text`` alone through ``encoder`` (no padding, no batch), its token states averaged and normalised in
    NumPy float64."""
    ids = paddle.to_tensor([tokenizer(text, max_length=max_seq_len, truncation=True)["input_ids"]])
    with paddle.no_grad():
        states = encoder(ids)[0].numpy()[0].astype("float64")
    mean = states.mean(axis=0)
    return mean / np.linalg.norm(mean)


def _classification_reader(metric=None, **kwargs):
    reader = READERS.get("text_classification", "dataset_reader.type")(**kwargs)
    reader.tune_metric = metric  # as the runner sets it from trainer.metric_for_best
    return reader


@pytest.mark.parametrize("metric", ["macro_f1", "accuracy", "weighted_f1"])
def test_the_classifiers_floor_is_a_logistic_regression_on_the_encoders_own_vectors(bert_folder, metric):
    """The probe equals scikit-learn's LogisticRegression (C=1, max_iter=1000) fitted here on vectors computed
    apart (each text alone, averaged and normalised in NumPy) of every training text (data/cls: under the caps),
    scored on every dev text in the run's metric when it is accuracy or macro_f1, else in accuracy."""
    from appzoo.encoders import build_encoder, parse_encoder_spec

    encoder, tokenizer = build_encoder(parse_encoder_spec({"pretrained": bert_folder}), None, None)
    reader = _classification_reader(metric)
    splits = {split: reader.read(f"data/cls/{split}.tsv", split) for split in ("train", "dev")}
    floor = reader.floor(splits, frozen_embedder(encoder, tokenizer, max_seq_len=64, batch_size=32))
    encoder.eval()

    vectors = {split: np.stack([_vector(encoder, tokenizer, e["text"]) for e in splits[split]])
               for split in ("train", "dev")}
    gold = {split: [e["label"] for e in splits[split]] for split in ("train", "dev")}
    predicted = LogisticRegression(C=1.0, max_iter=1000).fit(vectors["train"], gold["train"]).predict(vectors["dev"])
    expected = {"accuracy": float(np.mean(predicted == np.array(gold["dev"]))),
                "macro_f1": f1_score(gold["dev"], predicted, average="macro")}
    scored = metric if metric in expected else "accuracy"
    assert floor.metric == scored and floor.split == "dev" and floor.name == "frozen-encoder probe"
    assert floor.value == pytest.approx(expected[scored], abs=1e-9)
    assert floor.details["accuracy"] == pytest.approx(expected["accuracy"], abs=1e-9)
    assert floor.details["macro_f1"] == pytest.approx(expected["macro_f1"], abs=1e-9)
    assert floor.details["train_examples"] == 1200 and floor.details["dev_examples"] == 300
    assert "1200 of the 1200 training examples" in floor.how and "300 of the 300 dev" in floor.how


def test_the_probe_embeds_at_most_its_caps_a_seeded_stratified_sample(monkeypatch):
    """PROBE_TRAIN and PROBE_DEV cap the texts embedded; the training sample keeps each class's share and every
    class (health has 104 of 1,200); the same data gives the same sample, hence the same floor. One training
    class, no dev or multi_label: no floor, nothing embedded."""
    from tasks.text_classification import probe

    monkeypatch.setattr(probe, "PROBE_TRAIN", 40)
    monkeypatch.setattr(probe, "PROBE_DEV", 30)
    reader = _classification_reader("macro_f1")
    splits = {split: reader.read(f"data/cls/{split}.tsv", split) for split in ("train", "dev")}
    embedded = []

    def embed(texts):  # each text's own vector: the same text, the same vector
        embedded.append(list(texts))
        return np.array([[float(len(t) % 4 == k) for k in range(4)] + [len(t) / 100] for t in texts])

    floor = reader.floor(splits, embed)
    assert [len(texts) for texts in embedded] == [40, 30]
    assert floor.details["train_examples"] == 40 and floor.details["dev_examples"] == 30
    assert "40 of the 1200 training examples" in floor.how and "30 of the 300 dev examples" in floor.how
    labels = [e["label"] for e in splits["train"]]
    sample = probe.stratified_sample(labels, 40)
    assert embedded[0] == [splits["train"][i]["text"] for i in sample]
    drawn = [labels[i] for i in sample]
    assert {k: drawn.count(k) for k in set(labels)} == {"finance": 9, "health": 3, "sports": 22, "tech": 6}
    assert reader.floor(splits, embed) == floor and embedded[2] == embedded[0]  # seeded: the same sample again

    assert probe.stratified_sample(["a"] * 50 + ["b"], 10).count(50) == 1  # a class of one is kept
    never = lambda texts: pytest.fail("embedded")  # noqa: E731
    one_class = [e for e in splits["train"] if e["label"] == "sports"]
    assert reader.floor({"train": one_class, "dev": splits["dev"]}, never) is None
    assert reader.floor({"train": splits["train"]}, never) is None
    multi = _classification_reader("micro_f1", multi_label=True)
    ml = {split: multi.read(f"data/cls_multilabel/{split}.tsv", split) for split in ("train", "dev")}
    assert multi.floor(ml, never) is None


def test_a_floor_in_metrics_json_and_its_verdict():
    floor = Floor("zero-shot cosine", "auc", "dev", 0.65, "how", {"with_prefix": 0.65, "without_prefix": 0.6,
                                                                  "prefix": "query: "})
    entry = floor.to_json(0.6)
    assert json.loads(json.dumps(entry)) == {"name": "zero-shot cosine", "metric": "auc", "split": "dev",
                                             "value": 0.65, "with_prefix": 0.65, "without_prefix": 0.6,
                                             "prefix": "query: ", "how": "how", "final": 0.6, "below": True}
    assert from_json(entry) == floor
    assert "is below its floor" in floor.verdict(0.6) and floor.verdict(0.7) is None and floor.verdict(None) is None
    assert "below its floor of 0.6500 (the untrained encoder's zero-shot cosine): " in floor.verdict(0.6)
    assert "final" not in floor.to_json(None)
    probe = Floor("frozen-encoder probe", "accuracy", "dev", 0.5, "how", {"train_examples": 10},
                  phrase="a logistic regression on the untrained encoder's frozen text vectors")
    assert from_json(probe.to_json(0.4)) == probe and probe.to_json(0.4)["phrase"] == probe.phrase
    assert ("below its floor of 0.5000 (a logistic regression on the untrained encoder's frozen text vectors): "
            in probe.verdict(0.4))


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


def _cls_param_file(tmp_path, example, encoder, name):
    with open(example, encoding="utf-8") as f:
        config = json.load(f)
    config["model"]["encoder"] = encoder
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_a_classifiers_run_states_its_probe_floor_and_a_multilabel_one_none(bert_folder, tmp_path):
    """A pretrained single-label classifier's run: the probe in metrics.json (in its metric_for_best, macro_f1, at
    the best checkpoint) and report.md. A multi-label run of the same encoder has no floor."""
    out = tmp_path / "run"
    assert cli(_cls_param_file(tmp_path, CLS_EXAMPLE, {"pretrained": bert_folder}, "cls"), str(out), *FAST) == 0
    floor = read_json(out / "metrics.json")["floor"]
    history = [json.loads(line) for line in open(out / "train_log.jsonl", encoding="utf-8")]
    assert floor["name"] == "frozen-encoder probe" and floor["metric"] == "macro_f1" and floor["split"] == "dev"
    assert floor["final"] == [r["dev_macro_f1"] for r in history if "dev_macro_f1" in r][-1]
    assert floor["train_examples"] == 1200 and floor["dev_examples"] == 300 and floor["seconds"] >= 0
    assert floor["below"] == (floor["final"] < floor["value"])
    report = (out / "report.md").read_text(encoding="utf-8")
    assert f"Floor (frozen-encoder probe, before training): dev macro_f1 = {floor['value']:.4f}" in report

    multi = tmp_path / "multi"
    assert cli(_cls_param_file(tmp_path, MULTILABEL_EXAMPLE, {"pretrained": bert_folder}, "multi"), str(multi),
               *FAST) == 0
    assert "floor" not in read_json(multi / "metrics.json")
