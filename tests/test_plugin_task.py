"""A task of its own, as a plugin package would add one: a reader, a model and a loss registered under names no
built-in one has, whose prediction rows have fields of their own names. It trains with the one trainer,
and a server answers it by the serving shape its reader declares (appzoo/task/serving.py): ``/models``,
``/models/{name}/predict``, KServe V2 metadata and inference, and the try-it page in a real browser.

Keyword spotting: a text in; the keyword it is about (``keyword``, a label) and how sure the model is
(``confidence``, a score) out. Its rows have no ``label``, ``probs`` or ``score`` field, so nothing in the
server can answer it by assuming a built-in task's shape.
"""
import os

import numpy as np
import pytest

import serving
from conftest import write

pytestmark = pytest.mark.slow

READER, MODEL = "keyword_spotting", "KeywordSpotter"  # names of this test's own
TRAIN = "".join(f"{text}\t{keyword}\n" for text, keyword in [
    ("the match ended in a late goal", "sport"), ("the striker scored twice", "sport"),
    ("a goal in the final minute", "sport"), ("the team won the cup", "sport"),
    ("shares fell on the market", "money"), ("the bank raised its rates", "money"),
    ("the market closed higher", "money"), ("prices and rates rose", "money")] * 2)
ENCODER = '{"model_type": "ernie", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, ' \
          '"intermediate_size": 32, "max_position_embeddings": 64, "type_vocab_size": 2, "pad_token_id": 0}'


def keyword_task():
    """The reader and model classes of the plugin task (built here: paddle is imported by then)."""
    from appzoo.data.encoding import encode_texts
    from appzoo.task.model import Dropout, LossSection, PooledClassifier
    from appzoo.task.reader import DatasetReader
    from appzoo.task.serving import Field, Serving

    class KeywordReader(DatasetReader):
        """``text<TAB>keyword`` lines; a prediction row is the text, its keyword and the confidence."""

        default_metric = "accuracy"

        def read(self, path, split):
            with self.open_data(path) as source:
                rows = [line.rstrip("\n").split("\t") for _, line in source]
            return [{"text": r[0], "label": r[1] if len(r) > 1 else None} for r in rows]

        def read_inputs(self, inputs):
            return [{"text": text, "label": None} for text in inputs]

        def build_labels(self, train_examples):
            return sorted({e["label"] for e in train_examples})

        def model_args(self, labels, train_examples):
            return {"num_labels": len(labels)}

        def metric_names(self):
            return ["accuracy", "loss"]

        def texts(self, examples):
            return (e["text"] for e in examples)

        def encode(self, examples, tokenizer, labels, max_seq_len, split):
            encoded = encode_texts(tokenizer, [e["text"] for e in examples], max_seq_len=max_seq_len, split=split)
            features = [{"input_ids": i, "token_type_ids": t}
                        for i, t in zip(encoded["input_ids"], encoded["token_type_ids"])]
            for feature, example in zip(features, examples):
                if example["label"] is not None:
                    feature["labels"] = labels.index(example["label"])
            return features

        def decode(self, examples, features, outputs, labels):
            return [{"keyword": labels[int(np.argmax(p))], "confidence": float(np.max(p))} for p in outputs["probs"]]

        def evaluate(self, examples, predictions, labels):
            right = [e["label"] == p["keyword"] for e, p in zip(examples, predictions)]
            return {"accuracy": sum(right) / max(len(right), 1)}

        def prediction_rows(self, examples, predictions, labels):
            return [{"text": e["text"], "keyword": p["keyword"], "confidence": round(p["confidence"], 6)}
                    for e, p in zip(examples, predictions)]

        def serving(self, labels):
            return Serving("text", (Field("keyword", "label"), Field("confidence", "score")), "keyword spotting")

    class KeywordSpotter(PooledClassifier):
        READERS = (READER,)
        MODEL_ARGS = ("encoder", "num_labels")

        def __init__(self, encoder, num_labels, loss: LossSection = None, dropout: Dropout = 0.0):
            super().__init__(encoder, num_labels, loss=loss, dropout=dropout)

    return KeywordReader, KeywordSpotter


LOSS = "brier"  # a loss of this test's own, as a plugin package would add one (docs/architecture.md's map)


def brier_loss():
    """The Brier score of the softmax, ``sum_c (p_c - y_c)^2`` per example (Brier 1950): a classification loss
    no built-in one is, added as the map says: one class registered under its name."""
    import paddle.nn.functional as F

    from appzoo.losses.base import ClassificationLoss, Reduction, classification_targets
    from appzoo.params.keys import check_args

    class BrierLoss(ClassificationLoss):
        TARGET = "index"

        @check_args()
        def __init__(self, reduction: Reduction = "mean"):
            super().__init__()
            self.reduction = reduction

        def elementwise(self, logits, labels):
            _, targets, valid = classification_targets(logits, labels, -100)
            gold = F.one_hot(targets, logits.shape[-1]).astype(logits.dtype)  # an ignored one: 0 here, not counted
            return ((F.softmax(logits, axis=-1) - gold) ** 2).sum(axis=-1), valid

    return BrierLoss


@pytest.fixture(scope="module")
def registered():
    """The plugin task in the registries for this module's tests only (a name registers once per process,
    and other tests list the registries)."""
    from appzoo.registry import LOSSES, MODELS, READERS

    reader, model = keyword_task()
    assert READER not in READERS and MODEL not in MODELS and LOSS not in LOSSES  # loads the built-in ones first
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(READERS._items, READER, reader)
        patch.setitem(MODELS._items, MODEL, model)
        patch.setitem(LOSSES._items, LOSS, brier_loss())
        yield reader


@pytest.fixture(scope="module")
def run(registered, tmp_path_factory):
    """A few steps of training, eval and predict of the plugin task: its run folder."""
    import json

    import run_trainer

    tmp = tmp_path_factory.mktemp("plugin")
    data = write(tmp, "train.tsv", TRAIN)
    param = write(tmp, "keywords.json", json.dumps({
        "dataset_reader": {"type": READER, "train": data, "dev": data, "predict": data, "max_seq_len": 16},
        "model": {"type": MODEL, "encoder": {"config": write(tmp, "encoder.json", ENCODER)}, "loss": {"name": LOSS}},
        "trainer": {"output_dir": str(tmp / "out"), "max_steps": 12, "batch_size": 8, "learning_rate": 0.01,
                    "metric_for_best": "accuracy", "progress_bar": False, "plots": False}}))
    assert run_trainer.main(["--param_path", param, "--do", "train,eval,predict"]) == 0
    return str(tmp / "out")


@pytest.fixture(scope="module")
def base(run):
    with serving.live_server({"kw": os.path.join(run, "best")}) as (url, _):
        yield url


def test_the_plugin_task_is_listed_with_its_declared_shape(base):
    status, _, listed = serving.request(base, "GET", "/models")
    assert status == 200 and listed["ready"]
    (model,) = listed["models"]
    assert model["name"] == "kw" and model["task"] == READER and model["input"] == "text"
    assert model["description"] == "keyword spotting" and model["labels"] == ["money", "sport"]
    assert model["outputs"] == [{"name": "keyword", "kind": "label"}, {"name": "confidence", "kind": "score"}]
    assert not model["multi_label"] and "threshold" not in model


def test_predict_answers_its_declared_fields(base, run):
    from conftest import read_jsonl

    expected = read_jsonl(os.path.join(run, "predictions.jsonl"))[:4]
    status, _, answer = serving.request(base, "POST", "/models/kw/predict", {"inputs": [r["text"] for r in expected]})
    assert status == 200, answer
    serving.assert_same_rows(answer["predictions"], expected)


def test_v2_metadata_and_infer_list_exactly_its_declared_outputs(base):
    status, _, meta = serving.request(base, "GET", "/v2/models/kw")
    assert status == 200, meta
    assert meta["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    assert meta["outputs"] == [{"name": "keyword", "datatype": "BYTES", "shape": [-1]},
                               {"name": "confidence", "datatype": "FP32", "shape": [-1]}]
    assert meta["parameters"] == {"task": READER, "labels": ["money", "sport"]}
    texts = ["the striker scored", "rates rose again"]
    status, _, answer = serving.request(base, "POST", "/v2/models/kw/infer", {"inputs": [
        {"name": "text", "shape": [2], "datatype": "BYTES", "data": texts}]})
    assert status == 200, answer
    rows = serving.request(base, "POST", "/models/kw/predict", {"inputs": texts})[2]["predictions"]
    keyword, confidence = answer["outputs"]
    assert keyword == {"name": "keyword", "datatype": "BYTES", "shape": [2], "data": [r["keyword"] for r in rows]}
    assert confidence["name"] == "confidence" and confidence["datatype"] == "FP32" and confidence["shape"] == [2]
    assert confidence["data"] == pytest.approx([r["confidence"] for r in rows], abs=1e-6)


def test_it_renders_on_the_try_it_page(base):
    import browser

    reason = browser.missing()
    if reason:
        pytest.skip(f"no browser can run here: {reason}")
    from test_serve_page import ask

    driver = browser.chromium(width=960, height=600)
    try:
        row = ask(driver, base, "kw", "the striker scored twice", screenshot="serve_plugin.png")
        assert driver.find_element("id", "meta").text == "keyword spotting · 2 labels · engine dygraph"
        assert driver.find_element("id", "score").text == f"{row['confidence']:.4f}"
        assert driver.find_element("id", "label").text == row["keyword"]
        assert driver.find_element("id", "answer").text == f"confidence {row['confidence']:.4f}: {row['keyword']}"
    finally:
        driver.quit()


def test_a_declared_field_its_rows_lack_fails_loading_in_one_line(registered, run, monkeypatch):
    from appzoo.params.serve import ServeConfig
    from appzoo.serve.app import Models
    from appzoo.serve.metrics import Metrics
    from appzoo.task.serving import Field, Serving

    monkeypatch.setattr(registered, "serving", lambda self, labels: Serving(
        "text", (Field("keyword", "label"), Field("probs", "probs")), "keyword spotting"))
    models = Models({"kw": os.path.join(run, "best")}, ServeConfig(engine="dygraph"), 1, Metrics())
    models.load()
    assert "\n" not in models.error
    assert models.error.endswith(f"reader {READER!r}: serving() declares the output 'probs' (probs), but its "
                                 f"prediction rows have no such field (they have: text, keyword, confidence)")


def test_the_plugin_loss_trained_the_run_and_is_saved_with_its_defaults(run):
    from conftest import read_json

    assert read_json(os.path.join(run, "config.json"))["model"]["loss"] == {"name": LOSS, "reduction": "mean"}
    assert read_json(os.path.join(run, "metrics.json"))["train"]["steps"] == 12


def test_the_brier_loss_is_its_formula():
    import numpy as np
    import paddle

    logits = np.array([[2.0, -1.0, 0.5], [0.0, 0.0, 0.0], [1e4, -1e4, 0.0]])
    labels = np.array([0, 2, 1])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    expected = ((p - np.eye(3)[labels]) ** 2).sum(axis=1)
    loss = brier_loss()(reduction="none")(paddle.to_tensor(logits, "float64"), paddle.to_tensor(labels))
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-6)
