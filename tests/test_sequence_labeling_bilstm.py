"""The taggers' optional BiLSTM (``model.lstm_hidden``, BERT-BiLSTM-CRF): it reads each row to its length,
equals paddle's own bidirectional LSTM there, is absent by default, refuses bad values in one line, and a
tiny run with it trains, predicts and exports to graphs that predict as dygraph does."""
import json
import os

import numpy as np
import paddle
import pytest

import run_trainer
from appzoo.errors import ConfigError
from appzoo.params.param_file import apply_overrides, load_param_file
from appzoo.run.plan import validate
from conftest import read_jsonl
from serving import assert_same_rows, raw_inputs
from tasks.sequence_labeling.bilstm import BiLstm, reversed_within_length
from tasks.sequence_labeling.model import ErnieCrfSeqLabel, ErnieFcSeqLabel

FAST = ["--set", "trainer.max_steps=2", "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false"]
EXAMPLES = {ErnieCrfSeqLabel: "examples/ner_ernie_crf_ch.json", ErnieFcSeqLabel: "examples/ner_ernie_fc_ch.json"}


def _encoder():
    from paddlenlp.transformers import ErnieConfig, ErnieModel

    with open("configs/ernie_tiny.json", encoding="utf-8") as f:
        settings = json.load(f)
    return ErnieModel(ErnieConfig(**{**settings, "vocab_size": 50}))


def test_reversed_within_length_leaves_the_padding_in_place():
    mask = paddle.to_tensor([[True, True, True, False], [True, True, True, True], [True, False, False, False]])
    assert reversed_within_length(mask).numpy().tolist() == [[2, 1, 0, 3], [3, 2, 1, 0], [0, 1, 2, 3]]


def test_bilstm_equals_paddles_bidirectional_lstm_with_sequence_length_on_real_positions():
    """Two layers, the weights copied from paddle.nn.LSTM(direction="bidirect"): the same outputs wherever a
    row is real (paddle's op reads each row to its sequence_length; paddle2onnx drops it, hence BiLstm)."""
    paddle.seed(3)
    reference = paddle.nn.LSTM(6, 5, num_layers=2, direction="bidirect")
    ours = BiLstm(6, 5, num_layers=2)
    weights = reference.state_dict()
    for layer in range(2):
        for side, lstms in (("", ours.forward_layers), ("_reverse", ours.backward_layers)):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(lstms[layer], f"{name}_l0").set_value(weights[f"{name}_l{layer}{side}"])
    reference.eval(), ours.eval()
    states = paddle.randn([3, 7, 6])
    lengths = paddle.to_tensor([7, 4, 1], dtype="int64")
    mask = paddle.arange(7).unsqueeze(0) < lengths.unsqueeze(1)
    expected, _ = reference(states, sequence_length=lengths)
    got = ours(states, mask)
    assert got.shape == [3, 7, 10]
    for row, length in enumerate([7, 4, 1]):
        np.testing.assert_allclose(got[row, :length].numpy(), expected[row, :length].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model_class", [ErnieCrfSeqLabel, ErnieFcSeqLabel])
def test_padding_a_row_longer_leaves_its_emissions_at_real_tokens_unchanged(model_class):
    paddle.seed(0)
    model = model_class(_encoder(), 5, lstm_hidden=8, lstm_layers=2)
    model.eval()
    ids = paddle.to_tensor([[1, 7, 8, 9, 2]], dtype="int64")
    positions = paddle.to_tensor([[1, 2, 3]], dtype="int64")
    short = model.emissions(ids, positions).numpy()
    longer = model.emissions(paddle.concat([ids, paddle.zeros([1, 6], "int64")], axis=1),  # pieces padded with 0
                             paddle.concat([positions, paddle.zeros([1, 4], "int64")], axis=1)).numpy()
    assert longer.shape == (1, 7, 5)  # one row of logits per token: what distillation by word reads
    np.testing.assert_allclose(longer[:, :3], short, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model_class", [ErnieCrfSeqLabel, ErnieFcSeqLabel])
@pytest.mark.parametrize("lstm_hidden", [None, 0])
def test_without_lstm_hidden_the_model_has_the_parameters_it_had_before(model_class, lstm_hidden):
    """So a best/ folder saved before the key loads, and a run without it is the run it was."""
    model = model_class(_encoder(), 5, lstm_hidden=lstm_hidden)
    assert model.lstm is None
    head = {name for name in model.state_dict() if not name.startswith("encoder.")}
    assert head == {"classifier.weight", "classifier.bias"} | (
        {"crf.transitions", "crf.start", "crf.end"} if model_class is ErnieCrfSeqLabel else set())
    assert model.classifier.weight.shape == [128, 5]


def test_the_lstm_is_a_head_parameter_outside_the_encoder():
    model = ErnieCrfSeqLabel(_encoder(), 5, lstm_hidden=16)
    lstm = [name for name, _ in model.named_parameters() if "lstm" in name]
    assert lstm and all(name.startswith("lstm.") for name in lstm)
    assert model.classifier.weight.shape == [32, 5]  # both directions


@pytest.mark.parametrize("setting, message", [
    ("model.lstm_hidden=-1", r"^model\.lstm_hidden: must be 0 \(none\) or >= 1, got -1$"),
    ("model.lstm_hidden=1.5", r"^model\.lstm_hidden: expected an integer or null, got 1\.5$"),
    ("model.lstm_layers=0", r"^model\.lstm_layers: must be >= 1, got 0$"),
    ("model.lstm_layers=2", r"^model\.lstm_layers: 2 layers of no BiLSTM; set model\.lstm_hidden \(hidden units "
                            r"per direction\) or leave lstm_layers at 1$"),
])
@pytest.mark.parametrize("example", sorted(EXAMPLES.values()))
def test_bad_lstm_keys_are_one_line_config_errors_at_plan_time(example, setting, message):
    config = load_param_file(example)
    apply_overrides(config, [setting, "trainer.output_dir=output/never-written"])
    with pytest.raises(ConfigError, match=message):
        validate(config, example)


@pytest.mark.slow
@pytest.mark.parametrize("model_class", [ErnieCrfSeqLabel, ErnieFcSeqLabel])
def test_a_tiny_bilstm_run_trains_predicts_and_exports_to_graphs_that_predict_as_dygraph(model_class, tmp_path):
    from appzoo import Predictor

    example, out = EXAMPLES[model_class], str(tmp_path / "run")
    argv = ["--param_path", example, "--set", f"trainer.output_dir={out}", "--set", "model.lstm_hidden=16",
            "--do", "train,predict,export", *FAST]
    assert run_trainer.main(argv) == 0
    with open(os.path.join(out, "best", "config.json"), encoding="utf-8") as f:
        assert json.load(f)["model"]["lstm_hidden"] == 16
    rows = read_jsonl(os.path.join(out, "predictions.jsonl"))
    assert all(len(r["tags"]) == len(r["tokens"]) for r in rows)
    assert any(len(r["tokens"]) > 62 for r in rows)  # windowed rows too
    # the logits of a padded batch of mixed lengths, at real tokens: a 2-step model's tags alone say little
    dygraph = Predictor(os.path.join(out, "best"), engine="dygraph")
    examples = dygraph.reader.read(dygraph.bundle.config["dataset_reader"]["predict"], "predict")
    features = dygraph.reader.encode(examples, dygraph.tokenizer, dygraph.labels, dygraph.max_seq_len, "predict")
    batch = dygraph.reader.collate(features[:16], dygraph.tokenizer.pad_token_id)
    real = batch["positions"] > 0
    assert len(set(real.sum(axis=1))) > 3
    tensors = {key: paddle.to_tensor(value) for key, value in batch.items()}
    expected = dygraph.engine(batch, tensors)["logits"].numpy()
    for engine in ("paddle_inference", "onnxruntime"):
        predictor = Predictor(os.path.join(out, "best"), engine=engine, batch_size=16)
        np.testing.assert_allclose(predictor.engine(batch, tensors)["logits"].numpy()[real], expected[real],
                                   rtol=1e-4, atol=1e-4)
        assert_same_rows(predictor.predict(raw_inputs(rows)), rows)


def test_the_bilstm_crf_benchmark_config_plans_and_builds():
    """Its Weibo files are downloaded by benchmarks/get_data.py, so the sample set stands in for them; the model is
    built on the tiny encoder in place of multilingual-e5-small."""
    path = "benchmarks/configs/ner_weibo_e5_bilstm_crf.json"
    config = load_param_file(path)
    apply_overrides(config, [f"dataset_reader.{split}=data/ner/{split}.txt" for split in ("train", "dev", "test")])
    plan = validate(config, path)
    assert plan.model_class is ErnieCrfSeqLabel and plan.model_kwargs["lstm_hidden"] == 256
    model = plan.model_class(_encoder(), 5, **plan.model_kwargs)
    assert model.classifier.weight.shape == [512, 5]


def test_the_msra_frozen_prefix_benchmark_config_plans_and_builds():
    """MSRA with Step 21's recipe (9 of 12 layers frozen, a rate per group, CRF head): the sample set stands in for
    its downloaded files (dev carved from train, as the param file does), the tiny encoder for multilingual-e5-small."""
    path = "benchmarks/configs/ner_msra_e5_frozen.json"
    config = load_param_file(path)
    apply_overrides(config, [f"dataset_reader.{split}=data/ner/{name}.txt"
                             for split, name in (("train", "train"), ("dev", "train"), ("test", "test"))])
    plan = validate(config, path)
    assert plan.model_class is ErnieCrfSeqLabel and plan.encoder.freeze_layers == 9
    assert (plan.trainer.head_learning_rate, plan.trainer.crf_learning_rate) == (0.003, 0.01)
    plan.model_class(_encoder(), 5, **plan.model_kwargs)  # builds
