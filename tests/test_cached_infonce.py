"""GradCache (``cache_mini_batch_size`` on infonce / sum_hinge / max_hinge):
the encoder's gradients and the loss equal those of the plain loss."""
import json

import numpy as np
import paddle
import pytest
from conftest import cli, read_jsonl

from appzoo.errors import ConfigError
from appzoo.losses import build_loss
from appzoo.registry import MODELS

CACHED = ["infonce", "sum_hinge", "max_hinge"]
BATCH, MINI = 11, 4  # 11 rows in mini-batches of 4: the last one holds 3


@pytest.fixture(autouse=True)
def float64():
    """float64 weights: the cached and plain losses sum in different orders, so
    float32 rounding (~1e-4 relative on a few near-cancelling entries) would
    hide what rtol 1e-5 checks."""
    before = paddle.get_default_dtype()
    paddle.set_default_dtype("float64")
    yield
    paddle.set_default_dtype(before)


def ernie(dropout):
    from paddlenlp.transformers import ErnieConfig, ErnieModel

    paddle.seed(0)
    return ErnieModel(ErnieConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=32, pad_token_id=0,
                                  hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout))


def ids(rows, cols, seed):
    out = np.random.RandomState(seed).randint(5, 40, size=(rows, cols))
    out[::3, -2:] = 0  # some padding
    return paddle.to_tensor(out, dtype="int64")


def model(loss, dropout, **kwargs):
    m = MODELS.get("ErnieMatchingSiamesePairwise", "m")(ernie(dropout), loss=loss, **kwargs)
    m.train()
    return m


def gradients(m):
    return {name: p.grad.numpy().copy() for name, p in m.named_parameters() if p.grad is not None}


def cached_step(m, q, p, n=None, seed=7):
    """The trainer's way: back-propagate every part, the loss comes detached."""
    paddle.seed(seed)
    out = m(q, positive_input_ids=p, negative_input_ids=n)
    assert out["loss"].stop_gradient
    for part in out["loss_parts"]:
        part.backward()
    return float(out["loss"]), gradients(m)


def assert_same(expected, got):
    (loss_a, grads_a), (loss_b, grads_b) = expected, got
    np.testing.assert_allclose(loss_b, loss_a, rtol=1e-5)
    assert grads_a.keys() == grads_b.keys() and len(grads_a) > 10  # every encoder parameter has a gradient
    for name in grads_a:
        np.testing.assert_allclose(grads_b[name], grads_a[name], rtol=1e-5, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("negatives", [False, True], ids=["in_batch", "labelled"])
@pytest.mark.parametrize("name", CACHED)
def test_cached_gradients_equal_the_plain_loss_without_dropout(name, negatives):
    q, p = ids(BATCH, 7, 0), ids(BATCH, 9, 1)
    n = ids(BATCH, 6, 2) if negatives else None
    plain = model({"name": name}, dropout=0.0)
    out = plain(q, positive_input_ids=p, negative_input_ids=n)
    out["loss"].backward()
    expected = float(out["loss"]), gradients(plain)
    cached = model({"name": name, "cache_mini_batch_size": MINI}, dropout=0.0)
    assert_same(expected, cached_step(cached, q, p, n))


def chunked_reference(m, q, p, seed=7):
    """The plain loss over embeddings made with a graph in the mini-batches
    (and the order) GradCache embeds them in, so with the same dropout masks."""
    paddle.seed(seed)
    q_emb = paddle.concat([m._embed(q[i:i + MINI]) for i in range(0, BATCH, MINI)])
    p_emb = paddle.concat([m._embed(p[i:i + MINI]) for i in range(0, BATCH, MINI)])
    loss = m.loss_fn(q_emb, p_emb)
    loss.backward()
    return float(loss), gradients(m)


@pytest.mark.parametrize("name", CACHED)
def test_cached_gradients_with_dropout_reuse_the_masks_of_the_first_pass(name, monkeypatch):
    q, p = ids(BATCH, 7, 0), ids(BATCH, 9, 1)
    cfg = {"name": name, "cache_mini_batch_size": MINI}
    reference = model(cfg, dropout=0.3)
    expected = chunked_reference(reference, q, p)
    assert_same(expected, cached_step(model(cfg, dropout=0.3), q, p))
    # without restoring the RNG state the second pass draws other masks: the test would notice
    monkeypatch.setattr(paddle, "set_rng_state", lambda state: None)
    loss, grads = cached_step(model(cfg, dropout=0.3), q, p)
    assert not all(np.allclose(grads[k], expected[1][k], rtol=1e-5) for k in grads)


def test_dropout_masks_differ_per_mini_batch_and_rng_continues():
    """The parts restore the RNG state after the first pass, so what runs
    next draws as if the model had embedded once."""
    m = model({"name": "infonce", "cache_mini_batch_size": MINI}, dropout=0.3)
    paddle.seed(3)
    out = m(ids(BATCH, 7, 0), positive_input_ids=ids(BATCH, 9, 1))
    after_first_pass = paddle.get_rng_state()
    for part in out["loss_parts"]:
        part.backward()
    a = paddle.rand([4]).numpy()
    paddle.set_rng_state(after_first_pass)
    np.testing.assert_array_equal(paddle.rand([4]).numpy(), a)


def test_no_cache_outside_training_gradients():
    m = model({"name": "infonce", "cache_mini_batch_size": MINI}, dropout=0.0)
    with paddle.no_grad():
        out = m(ids(BATCH, 7, 0), positive_input_ids=ids(BATCH, 9, 1))
    assert "loss_parts" not in out and out["scores"].shape == [BATCH]


@pytest.mark.parametrize("cfg, kwargs, message", [
    ({"name": "infonce", "cache_mini_batch_size": 0}, {},
     r"model\.loss\.cache_mini_batch_size: must be >= 1, got 0"),
    ({"name": "sum_hinge", "cache_mini_batch_size": 2.5}, {}, r"model\.loss\.cache_mini_batch_size"),
    ({"name": "max_hinge", "cache_mini_batch_size": 4, "reduction": "none"}, {},
     r"model\.loss\.cache_mini_batch_size: needs a scalar loss"),
    ({"name": "triplet", "cache_mini_batch_size": 4}, {}, r"model\.loss\.cache_mini_batch_size: unknown key"),
    ({"name": "circle", "cache_mini_batch_size": 4}, {}, r"model\.loss\.cache_mini_batch_size: unknown key"),
])
def test_cache_config_errors(cfg, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        MODELS.get("ErnieMatchingSiamesePairwise", "m").check_config({"loss": cfg, **kwargs}, {})


def test_cache_refused_with_data_parallel(monkeypatch):
    monkeypatch.setattr(paddle.distributed, "get_world_size", lambda: 2)
    with pytest.raises(ConfigError, match=r"model\.loss\.cache_mini_batch_size: GradCache .* data-parallel"):
        MODELS.get("ErnieMatchingSiamesePairwise", "m").check_config(
            {"loss": {"name": "infonce", "cache_mini_batch_size": 4}}, {"negatives": "in_batch"})


def test_loss_layer_takes_the_key_and_computes_the_plain_loss():
    loss = build_loss({"name": "infonce", "cache_mini_batch_size": 4})
    assert loss.cache_mini_batch_size == 4
    q, p = paddle.randn([5, 8]), paddle.randn([5, 8])
    np.testing.assert_allclose(float(loss(q, p)), float(build_loss({"name": "infonce"})(q, p)), rtol=1e-6)


@pytest.mark.slow
def test_cli_two_steps_with_cache_train_like_the_plain_loss(tmp_path):
    """Through the trainer: 2 steps cached and plain give the same logged
    losses, so the same first update."""
    config = json.load(open("configs/ernie_tiny.json"))
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    encoder = tmp_path / "ernie_nodrop.json"
    encoder.write_text(json.dumps(config))
    losses = {}
    for name, loss in (("plain", {"name": "infonce"}), ("cached", {"name": "infonce", "cache_mini_batch_size": 3})):
        out = tmp_path / name
        assert cli("examples/mtch_ernie_siamese_infonce.json", str(out), "--set", f"model.loss={json.dumps(loss)}",
                   "--set", f"model.encoder={json.dumps({'config': str(encoder)})}",
                   "--set", "trainer.max_steps=2", "--set", "trainer.batch_size=8",
                   "--set", "trainer.logging_steps=1",
                   "--set", "trainer.do=[\"train\"]", "--set", "dataset_reader.dev=null") == 0
        losses[name] = [row["loss"] for row in read_jsonl(out / "train_log.jsonl") if "loss" in row]
    assert len(losses["cached"]) >= 2
    np.testing.assert_allclose(losses["cached"], losses["plain"], rtol=1e-4)
