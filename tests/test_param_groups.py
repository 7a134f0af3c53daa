"""A learning rate per parameter group (appzoo/run/param_groups.py): trainer.head_learning_rate,
crf_learning_rate and layerwise_decay, checked against an independent NumPy AdamW; exact resume with groups;
the default's one group; each refusal's message."""
import numpy as np
import paddle
import pytest

from appzoo.errors import ConfigError
from appzoo.params.trainer import TrainerConfig
from appzoo.run import param_groups
from appzoo.run.trainer import Trainer
from appzoo.store.bundle import Bundle
from appzoo.task.model import TaskModel, encode
from conftest import crash_after_step
from test_trainer import Recorder, ToyModel, ToyReader, ToyTokenizer, recorder, split

NO_DECAY = ("bias", "norm", "layer_norm", "LayerNorm")


def tiny_encoder(layers=2):
    from paddlenlp.transformers import ErnieConfig, ErnieModel

    paddle.seed(0)
    return ErnieModel(ErnieConfig(vocab_size=30, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=32, pad_token_id=0,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


class Scores(paddle.nn.Layer):
    """A CRF's stand-in: one score per class, added to the logits."""

    def __init__(self, classes):
        super().__init__()
        self.transitions = self.create_parameter([classes], default_initializer=paddle.nn.initializer.Uniform(-.1, .1))


class Tagger(TaskModel):
    """A tiny ERNIE, a linear head and a 'CRF' (declared by CRF, as a task model does): three kinds of group."""

    CRF = "crf"

    def __init__(self, encoder, classes=3):
        super().__init__()
        self.encoder = encoder
        self.classifier = paddle.nn.Linear(16, classes)
        self.crf = Scores(classes)

    def forward(self, input_ids, labels=None):
        _, pooled, _ = encode(self.encoder, input_ids)
        logits = self.classifier(pooled) + self.crf.transitions
        return {"logits": logits, "loss": paddle.nn.functional.cross_entropy(logits, labels)}


def config(**keys):
    settings = dict(output_dir="unused", learning_rate=1e-3, weight_decay=0.1, max_grad_norm=0.0,
                    warmup_steps=2, progress_bar=False, plots=False)
    return TrainerConfig(**{**settings, **keys})


def optimizer_for(model, cfg, total):
    trainer = Trainer(Bundle(model, ToyReader(), ToyTokenizer(), ["a", "b", "c"], {}, {}), cfg)
    trainer.build_optimizer(total)
    return trainer


def batches(steps, seed=0):
    rng = np.random.RandomState(seed)
    return [(paddle.to_tensor(rng.randint(1, 30, size=(4, 6))), paddle.to_tensor(rng.randint(0, 3, size=4)))
            for _ in range(steps)]


def train_steps(trainer, model, steps):
    """``steps`` optimizer steps as the trainer takes them (clipping off); the gradients of each, by name."""
    grads = []
    for input_ids, labels in batches(steps):
        model(input_ids, labels)["loss"].backward()
        grads.append({n: p.grad.numpy().astype("float64") for n, p in model.named_parameters()
                      if p.grad is not None})
        trainer.optimizer.step()
        trainer.scheduler.step()
        trainer.optimizer.clear_grad()
    return grads


def numpy_adamw(weights, grads, peaks, cfg, total):
    """Paddle's AdamW in float64: decoupled decay ``p *= 1 - lr * coeff`` (not on biases and norms), then Adam with
    Paddle's bias correction ``lr * sqrt(1 - b2^t) / (1 - b1^t)`` and ``eps * sqrt(1 - b2^t)``; ``lr`` the group's
    peak times LinearDecayWithWarmup's factor of the step."""
    b1, b2, eps, warmup = 0.9, 0.999, cfg.adam_epsilon, cfg.warmup_steps
    p = {n: w.astype("float64") for n, w in weights.items()}
    m = {n: np.zeros_like(w) for n, w in p.items()}
    v = {n: np.zeros_like(w) for n, w in p.items()}
    for t, step in enumerate(grads, 1):
        s = t - 1  # the schedule's step when this update is taken
        factor = s / warmup if s < warmup else max(0.0, (total - s) / (total - warmup))
        for n, g in step.items():
            lr = peaks[n] * factor
            if not any(k in n for k in NO_DECAY):
                p[n] = p[n] * (1 - lr * cfg.weight_decay)
            m[n] = b1 * m[n] + (1 - b1) * g
            v[n] = b2 * v[n] + (1 - b2) * g * g
            corrected = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
            p[n] = p[n] - corrected * m[n] / (np.sqrt(v[n]) + eps * np.sqrt(1 - b2 ** t))
    return p


def test_each_group_trains_at_its_own_peak_rate_as_numpy_adamw_does():
    cfg = config(head_learning_rate=1e-2, crf_learning_rate=0.1, layerwise_decay=0.5)
    model = Tagger(tiny_encoder(layers=2))
    trainer = optimizer_for(model, cfg, total=5)
    rows = param_groups.rows(trainer.groups)
    assert [(r["name"], r["peak_learning_rate"]) for r in rows] == [
        ("embeddings", 1e-3 * 0.5 ** 3), ("encoder layer 1", 1e-3 * 0.5), ("encoder layer 2", 1e-3),
        ("encoder other", 1e-3), ("head", 1e-2), ("crf", 0.1)]
    assert [r["holds"] for r in rows] == [["encoder.embeddings"], ["encoder.encoder.layers.0"],
                                          ["encoder.encoder.layers.1"], ["encoder.pooler"], ["classifier"], ["crf"]]
    assert rows[-1]["parameters"] == 3 and rows[-2]["parameters"] == 16 * 3 + 3
    assert sum(r["parameters"] for r in rows) == sum(int(np.prod(p.shape)) for p in model.parameters())
    # layer 2 and the pooler share a multiple: one Paddle group; the multiples are of the schedule's rate
    assert sorted(g["learning_rate"] for g in trainer.optimizer._param_groups) == pytest.approx([0.125, 0.5, 1, 10, 100])

    peaks = {}
    for group in trainer.groups:
        peaks.update({n: group.peak for n in group.names})
    before = {n: p.numpy().copy() for n, p in model.named_parameters()}
    grads = train_steps(trainer, model, 4)
    expected = numpy_adamw(before, grads, peaks, cfg, total=5)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.numpy(), expected[name], rtol=1e-5, atol=1e-7, err_msg=name)
        assert not np.array_equal(p.numpy(), before[name]), name  # every group moved


def test_the_default_is_one_group_and_the_same_bits_as_plain_adamw():
    cfg = config()
    grouped, plain = Tagger(tiny_encoder()), Tagger(tiny_encoder())
    plain.set_state_dict(grouped.state_dict())
    trainer = optimizer_for(grouped, cfg, total=5)
    assert [(g["learning_rate"], len(g["params"])) for g in trainer.optimizer._param_groups] == \
        [(1.0, len(grouped.parameters()))]
    assert [(r["name"], r["peak_learning_rate"]) for r in param_groups.rows(trainer.groups)] == \
        [("encoder", 1e-3), ("head", 1e-3), ("crf", 1e-3)]

    reference = optimizer_for(plain, cfg, total=5)  # its schedule, and today's AdamW over the plain list
    decay = {p.name for n, p in plain.named_parameters() if not any(k in n for k in NO_DECAY)}
    reference.optimizer = paddle.optimizer.AdamW(
        learning_rate=reference.scheduler, parameters=plain.parameters(), weight_decay=cfg.weight_decay,
        epsilon=cfg.adam_epsilon, apply_decay_param_fun=lambda name: name in decay, grad_clip=None)
    train_steps(trainer, grouped, 3)
    train_steps(reference, plain, 3)
    for (name, a), b in zip(grouped.named_parameters(), plain.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_frozen_parameters_stay_out_of_the_optimizer_down_to_the_head_alone():
    model = Tagger(tiny_encoder())
    for p in model.encoder.embeddings.parameters():
        p.stop_gradient = True
    trainer = optimizer_for(model, config(layerwise_decay=0.5), total=5)
    rows = param_groups.rows(trainer.groups)
    assert [r["name"] for r in rows] == ["encoder layer 1", "encoder layer 2", "encoder other", "head", "crf",
                                         "frozen"]
    assert rows[-1]["peak_learning_rate"] == 0.0 and rows[-1]["holds"] == ["encoder.embeddings"]
    optimised = {id(p) for g in trainer.optimizer._param_groups for p in g["params"]}
    assert not any(id(p) in optimised for p in model.encoder.embeddings.parameters())
    before = model.encoder.embeddings.word_embeddings.weight.numpy().copy()
    train_steps(trainer, model, 2)
    np.testing.assert_array_equal(model.encoder.embeddings.word_embeddings.weight.numpy(), before)

    for p in model.encoder.parameters():  # the whole encoder frozen: the head and the CRF still train
        p.stop_gradient = True
    trainer = optimizer_for(model, config(head_learning_rate=1e-2), total=5)
    assert [r["name"] for r in param_groups.rows(trainer.groups)] == ["head", "crf", "frozen"]
    assert [len(g["params"]) for g in trainer.optimizer._param_groups] == [3]
    train_steps(trainer, model, 1)


class HeadedToy(ToyModel):
    """test_trainer's toy with a head and a CRF stand-in outside its encoder."""

    CRF = "crf"

    def __init__(self):
        super().__init__()
        self.encoder = paddle.nn.Linear(1, 4)
        self.classifier = paddle.nn.Linear(4, 2)
        self.crf = Scores(2)

    def forward(self, x, labels=None):
        hidden = paddle.tanh(self.encoder(x.astype("float32").max(axis=1, keepdim=True)))
        logits = self.classifier(hidden) + self.crf.transitions
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = paddle.nn.functional.cross_entropy(logits, labels)
        return out


def toy_trainer(tmp_path, **keys):
    paddle.seed(0)
    settings = dict(output_dir=str(tmp_path), max_steps=8, batch_size=4, eval_steps=4, logging_steps=2,
                    learning_rate=0.01, head_learning_rate=0.1, crf_learning_rate=0.5, progress_bar=False, plots=False)
    trained = Bundle(HeadedToy(), ToyReader(), ToyTokenizer(), ["0", "1"], {}, {})
    return Trainer(trained, TrainerConfig(**{**settings, **keys}), callbacks=[Recorder()])


def test_a_resumed_run_with_groups_ends_with_the_weights_of_a_straight_one(tmp_path, monkeypatch):
    straight = toy_trainer(tmp_path / "straight")
    features, dev = split(straight.reader)
    straight.train(features, dev)
    assert len(straight.optimizer._param_groups) == 3

    crashed = toy_trainer(tmp_path / "resumed")
    with crash_after_step(monkeypatch, 5), pytest.raises(RuntimeError, match="simulated crash"):
        crashed.train(features, dev)
    checkpoint = recorder(crashed).checkpoints[-1]
    assert checkpoint["state"]["global_step"] == 4

    resumed = toy_trainer(tmp_path / "resumed")
    recorder(resumed).best = list(recorder(crashed).best)
    resumed.train(features, dev, resume=checkpoint)
    for name, value in straight.model.state_dict().items():
        np.testing.assert_array_equal(resumed.model.state_dict()[name].numpy(), value.numpy(), err_msg=name)


def test_a_key_that_names_no_parameter_is_refused_with_its_path_value_and_why(tmp_path):
    plain = Bundle(ToyModel(), ToyReader(), ToyTokenizer(), ["0", "1"], {}, {})  # everything is its encoder
    for keys, message in (
            ({"crf_learning_rate": 0.01}, r"^trainer\.crf_learning_rate: 0\.01 names no parameter: this model "
                                          r"\(ToyModel\) has no CRF$"),
            ({"head_learning_rate": 0.02}, r"^trainer\.head_learning_rate: 0\.02 names no parameter: this model "
                                           r"\(ToyModel\) has no parameter outside model\.encoder$"),
            ({"layerwise_decay": 0.8}, r"^trainer\.layerwise_decay: 0\.8 names no parameter: this model's encoder "
                                       r"\(Linear\) has no transformer layers to find")):
        with pytest.raises(ConfigError, match=message):
            param_groups.groups(plain.model, config(**keys))
    for value in (0, 1.5):
        with pytest.raises(ConfigError, match=r"^trainer\.layerwise_decay: must be in \(0, 1\], got"):
            config(layerwise_decay=value)
    with pytest.raises(ConfigError, match=r"^trainer\.head_learning_rate: must be > 0, got -1"):
        config(head_learning_rate=-1)


def test_the_plan_refuses_a_crf_rate_for_a_model_without_a_crf_and_takes_it_for_one_with(tmp_path):
    from appzoo.params.param_file import load_param_file
    from appzoo.run.plan import validate

    config_ = load_param_file("examples/ner_ernie_fc_ch.json")
    config_["trainer"].update(output_dir=str(tmp_path / "fc"), crf_learning_rate=0.01)
    with pytest.raises(ConfigError, match=r"^trainer\.crf_learning_rate: 0\.01 names no parameter: this model "
                                          r"\(ErnieFcSeqLabel\) has no CRF$"):
        validate(config_)
    config_["model"]["type"] = "ErnieCrfSeqLabel"
    config_["model"].pop("loss")
    assert validate(config_).trainer.crf_learning_rate == 0.01


def test_a_run_whose_model_has_no_head_refuses_head_learning_rate_before_writing(tmp_path, capsys):
    from conftest import cli

    out = tmp_path / "run"
    code = cli("examples/mtch_ernie_siamese_infonce.json", str(out), "--set", "trainer.head_learning_rate=0.01",
               "--set", "trainer.progress_bar=false")
    assert code == 2 and not out.exists()
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].endswith("trainer.head_learning_rate: 0.01 names no parameter: this model "
                              "(ErnieMatchingSiamesePairwise) has no parameter outside model.encoder"), lines


def test_the_crf_tagger_declares_its_crf_and_the_softmax_tagger_none():
    from tasks.sequence_labeling.model import ErnieCrfSeqLabel, ErnieFcSeqLabel

    model = ErnieCrfSeqLabel(tiny_encoder(layers=1), num_labels=3)
    rows = param_groups.rows(param_groups.groups(model, config(crf_learning_rate=0.5)))
    assert [(r["name"], r["holds"], r["parameters"], r["peak_learning_rate"]) for r in rows[1:]] == [
        ("head", ["classifier"], 16 * 3 + 3, 1e-3), ("crf", ["crf"], 3 * 3 + 3 + 3, 0.5)]
    assert ErnieFcSeqLabel.CRF is None
