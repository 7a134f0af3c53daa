"""The trainer on its own: a toy paddle model and a toy reader, no ERNIE, no CLI, no files.

Batches, best-model selection, early stopping and an exact resume, through
appzoo.run.trainer.Trainer directly; what it emits is recorded by a callback
(writing best/ and checkpoints is the run folder's job: test_reliability.py).
"""
import numpy as np
import paddle
import pytest

from appzoo.store.bundle import Bundle
from appzoo.run.callbacks import Callback
from appzoo.task.reader import DatasetReader
from appzoo.task.model import TaskModel
from appzoo.run.trainer import Trainer
from appzoo.params.trainer import TrainerConfig
from conftest import crash_after_step


class ToyTokenizer:
    pad_token_id = 0


class Recorder(Callback):
    """Keeps what the trainer emits: each best model (its info and weights) and each checkpoint."""

    def __init__(self):
        self.best, self.checkpoints = [], []

    def on_best(self, trainer, info):
        self.best.append((info, {k: v.numpy().copy() for k, v in trainer.model.state_dict().items()}))

    def on_checkpoint(self, trainer, checkpoint):
        self.checkpoints.append(_copy(checkpoint))  # as saving and loading it would
        return f"step-{trainer.state.global_step}"

    def on_restore_best(self, trainer):  # a best model that an earlier process emitted
        if self.best:
            trainer.model.set_state_dict(self.best[-1][1])


def _copy(value):
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value.numpy().copy() if isinstance(value, paddle.Tensor) else value


class ToyModel(TaskModel):
    """Logistic regression on the largest of a padded sequence of numbers. Its
    ``forward`` takes ``x`` and ``labels``; the batch also carries ``ids``,
    which the trainer must leave out."""

    def __init__(self):
        super().__init__()
        self.encoder = paddle.nn.Linear(1, 2)
        self.seen = []  # the keyword names of each forward call

    def forward(self, x, labels=None):
        self.seen.append(sorted(k for k, v in (("x", x), ("labels", labels)) if v is not None))
        logits = self.encoder(x.astype("float32").max(axis=1, keepdim=True))  # padding (0) never wins
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = paddle.nn.functional.cross_entropy(logits, labels)
        return out

    def decode(self, outputs, batch):
        return {"probs": paddle.nn.functional.softmax(outputs["logits"], axis=-1)}


class ToyReader(DatasetReader):
    """Examples ``{"x": [numbers], "label": 0/1}``; its score is a scripted
    sequence per evaluation (``scores``), to steer best selection and early stopping."""

    default_metric = "score"

    def __init__(self, scores=None):
        super().__init__()
        self.scores = list(scores or [])
        self.evaluations = 0

    def encode(self, examples, tokenizer, labels, max_seq_len, split):
        return [{"x": e["x"], "ids": len(e["x"]), "labels": e["label"]} for e in examples]

    def decode(self, examples, features, outputs, labels):
        return [{"label": int(np.argmax(p))} for p in outputs["probs"]]

    def evaluate(self, examples, predictions, labels):
        accuracy = float(np.mean([p["label"] == e["label"] for e, p in zip(examples, predictions)]))
        score = self.scores[self.evaluations] if self.evaluations < len(self.scores) else accuracy
        self.evaluations += 1
        return {"score": score, "accuracy": accuracy}


def data(n=40, seed=0):
    rng = np.random.RandomState(seed)
    examples = []
    for i in range(n):
        label = i % 2
        length = 1 + rng.randint(6)
        examples.append({"x": (rng.rand(length) + 2 * label).round(3).tolist(), "label": label})
    return examples


def trainer(tmp_path, reader=None, **config):
    paddle.seed(0)
    settings = dict(output_dir=str(tmp_path), max_steps=8, batch_size=4, eval_steps=2, logging_steps=2,
                    learning_rate=0.1, progress_bar=False, plots=False)
    settings.update(config)
    trained = Bundle(ToyModel(), reader or ToyReader(), ToyTokenizer(), ["0", "1"], {}, {})
    return Trainer(trained, TrainerConfig(**settings), callbacks=[Recorder()])


def recorder(t):
    return next(c for c in t.callbacks if isinstance(c, Recorder))


def split(reader):
    examples = data()
    features = reader.encode(examples, None, None, None, "train")
    return features, (examples[:12], features[:12])


def test_batches_are_padded_and_the_model_gets_only_its_forward_keys(tmp_path):
    t = trainer(tmp_path, max_steps=2, eval_steps=0)
    features, dev = split(t.reader)
    batch = t.reader.collate(features[:3], pad_id=0)
    assert set(batch) == {"x", "ids", "labels"}
    assert batch["x"].shape == (3, max(len(f["x"]) for f in features[:3]))
    assert batch["labels"].dtype == np.int64
    t.train(features, dev)
    assert t.model.seen and all(keys == ["labels", "x"] for keys in t.model.seen)  # never "ids"


def test_one_forward_key_filter_for_training_and_the_dygraph_engine():
    """appzoo.task.inputs.forward_inputs: the trainer keeps labels, a prediction drops them; a forward(**kwargs)
    takes every key."""
    from appzoo.task.inputs import forward_inputs

    class Named:
        def forward(self, x, labels=None):
            pass

    class Open:
        def forward(self, **kwargs):
            pass

    batch = {"x": 1, "ids": 2, "labels": 3}
    assert forward_inputs(Named())(batch) == {"x": 1, "labels": 3}
    assert forward_inputs(Named(), labels=False)(batch) == {"x": 1}
    assert forward_inputs(Open())(batch) == batch
    assert forward_inputs(Open(), labels=False)(batch) == {"x": 1, "ids": 2}


def test_every_step_trains_on_a_batch_and_the_loss_goes_down(tmp_path):
    t = trainer(tmp_path, max_steps=30, eval_steps=0, logging_steps=5)
    features, dev = split(t.reader)
    state = t.train(features, dev)
    assert state.global_step == 30 and state.finished
    losses = [row["loss"] for row in t.history if "loss" in row]
    assert len(losses) >= 6 and losses[-1] < losses[0]
    assert t.evaluate(*dev, split="dev")["accuracy"] == 1.0


def test_the_best_evaluation_is_kept_and_restored(tmp_path):
    reader = ToyReader(scores=[0.2, 0.9, 0.5, 0.4])  # evaluations at steps 2, 4, 6, 8
    t = trainer(tmp_path, reader)
    features, dev = split(reader)
    state = t.train(features, dev)
    assert (state.best_metric, state.best_step) == (0.9, 4)
    emitted = recorder(t).best
    assert [info["step"] for info, _ in emitted] == [2, 4]  # each new best, once
    assert emitted[-1][0] == {"step": 4, "metric": "score", "value": 0.9}
    for name, value in t.model.state_dict().items():  # the model ends with the best weights
        np.testing.assert_array_equal(value.numpy(), emitted[-1][1][name])
    assert not (tmp_path / "best").exists()  # the trainer writes no file


def test_lower_is_better_for_a_loss_metric(tmp_path):
    reader = ToyReader(scores=[0.5, 0.3, 0.4, 0.6])
    t = trainer(tmp_path, reader, metric_for_best="score", greater_is_better=False)
    features, dev = split(reader)
    assert t.train(features, dev).best_step == 4


def test_early_stopping_after_patience_evaluations_without_improvement(tmp_path):
    reader = ToyReader(scores=[0.5, 0.6, 0.6, 0.1, 0.9, 0.9])
    t = trainer(tmp_path, reader, max_steps=12, patience=2)
    features, dev = split(reader)
    state = t.train(features, dev)
    assert state.should_stop and state.finished
    assert state.global_step == 8 and reader.evaluations == 4  # 0.6 at step 4, then two evaluations no better
    assert state.best_step == 4


def test_resume_continues_exactly_where_the_run_stopped(tmp_path, monkeypatch):
    straight = trainer(tmp_path / "straight", eval_steps=4)
    features, dev = split(straight.reader)
    straight.train(features, dev)

    crashed = trainer(tmp_path / "resumed", eval_steps=4)
    with crash_after_step(monkeypatch, 5), pytest.raises(RuntimeError, match="simulated crash"):
        crashed.train(features, dev)
    checkpoint = recorder(crashed).checkpoints[-1]
    assert checkpoint["state"]["global_step"] == 4  # the last evaluation's checkpoint; step 5 is lost
    assert crashed.checkpoint == "step-4"  # where the callback said it went

    resumed = trainer(tmp_path / "resumed", eval_steps=4)
    recorder(resumed).best = list(recorder(crashed).best)  # what best/ held
    state = resumed.train(features, dev, resume=checkpoint)
    assert state.global_step == 8 and state.finished
    for name, value in straight.model.state_dict().items():
        np.testing.assert_allclose(resumed.model.state_dict()[name].numpy(), value.numpy(), rtol=1e-6)


def test_predict_gives_one_prediction_per_example_in_order(tmp_path):
    t = trainer(tmp_path, max_steps=30, eval_steps=0)
    features, dev = split(t.reader)
    t.train(features, dev)
    examples = data(n=9, seed=1)
    predictions, loss = t.predict(examples, t.reader.encode(examples, None, None, None, "test"))
    assert [p["label"] for p in predictions] == [e["label"] for e in examples]
    assert loss is not None and np.isfinite(loss)


def test_fewer_examples_than_a_batch_still_train(tmp_path):
    t = trainer(tmp_path, max_steps=1, eval_steps=0)
    features, _ = split(t.reader)
    assert t.train(features[:1], None).global_step == 1


def test_gradient_accumulation_equals_one_big_batch(tmp_path):
    """Two micro-batches of 4 make the step one batch of 8 makes (the random
    sampler cuts one permutation, so the 8 are the same examples)."""
    weights = []
    for name, size, k in (("big", 8, 1), ("accumulated", 4, 2)):
        t = trainer(tmp_path / name, max_steps=3, eval_steps=0, batch_size=size, gradient_accumulation_steps=k,
                    sampler="random")
        features, _ = split(t.reader)
        t.train(features, None)
        weights.append({n: v.numpy() for n, v in t.model.state_dict().items()})
    for name, value in weights[0].items():
        np.testing.assert_allclose(weights[1][name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_clipping_gives_the_weights_paddles_global_norm_clip_gives(tmp_path):
    """The trainer clips with the norm its non-finite check reads (one pass
    over the gradients); the weights are the bits paddle's ClipGradByGlobalNorm
    in the optimizer gives, and differ from unclipped ones."""
    def with_paddle_clip(t):
        def build_optimizer(total):
            Trainer.build_optimizer(t, total)
            clip = paddle.nn.ClipGradByGlobalNorm(0.05)
            t.optimizer._grad_clip = clip
            for group in t.optimizer._param_groups:  # paddle clips a parameter group with the group's own
                group["grad_clip"] = clip
        t.build_optimizer = build_optimizer
        t.config.max_grad_norm = 0  # the trainer only measures the norm
        return t

    weights = []
    for name, make in (("trainer", lambda t: t), ("paddle", with_paddle_clip), ("none", None)):
        t = trainer(tmp_path / name, max_steps=3, eval_steps=0, sampler="random",
                    max_grad_norm=0.05 if make else 0)
        t = make(t) if make else t
        features, _ = split(t.reader)
        t.train(features, None)
        weights.append({n: v.numpy() for n, v in t.model.state_dict().items()})
    for name, value in weights[0].items():
        np.testing.assert_array_equal(weights[1][name], value, err_msg=name)
    assert any((weights[2][n] != v).any() for n, v in weights[0].items())


def test_amp_keys_validate():
    from appzoo.errors import ConfigError

    assert TrainerConfig(amp="off").amp == "off"
    with pytest.raises(ConfigError, match=r"trainer\.amp: expected one of 'off', 'bf16', 'fp16', got 'bf17'"):
        TrainerConfig(amp="bf17")


def test_amp_on_cpu_is_refused_at_plan_time():
    from appzoo.params.param_file import load_param_file
    from appzoo.errors import ConfigError
    from appzoo.run.plan import validate

    config = load_param_file("examples/cls_ernie_fc_ch.json")
    config["trainer"].update({"amp": "bf16", "device": "cpu"})
    with pytest.raises(ConfigError, match=r"trainer\.amp: 'bf16' needs a GPU: paddle's autocast has no effect on CPU"):
        validate(config)


def test_length_grouped_batches_weigh_a_per_token_loss_by_its_tokens(tmp_path):
    class TokenReader(ToyReader):
        def loss_targets(self, feature):
            return len(feature["x"])

    t = trainer(tmp_path, TokenReader(), max_steps=1, eval_steps=0, sampler="by_length")
    t.model.LOSS_PER = "token"
    features, _ = split(t.reader)
    t.train(features, None)
    mean = sum(len(f["x"]) for f in features) / len(features)
    assert t.sampler.tokens_per_batch == pytest.approx(4 * mean)
    assert t.sampler.loss_share(features[:4]) == pytest.approx(sum(len(f["x"]) for f in features[:4]) / (4 * mean))
    plain = trainer(tmp_path / "plain", max_steps=1, eval_steps=0, sampler="by_length")
    plain.train(features, None)
    assert plain.sampler.loss_share(features[:4]) == 1.0  # a per-example loss is not reweighted
