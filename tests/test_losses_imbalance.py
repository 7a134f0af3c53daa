"""The imbalance losses (issue 18): logit_adjusted_ce / balanced_softmax,
effective-number class weights, asl and distribution_balanced, against
NumPy float64 references written from the papers' formulas (and, for
distribution_balanced, from the published NLP code's), then their
gradients, extreme logits, the nothing-valid case, every user-facing
message, and how the classification heads build them."""
import numpy as np
import pytest

from appzoo import losses as L
from appzoo.errors import ConfigError
from appzoo.losses import build_loss
from appzoo.task.model import check_classification_loss, classification_loss
from test_losses import IGN, MH, RTOL, X, X3, Y, Y3, assert_finite_with_grad, check_grad, np_log_softmax, t, ti, val

COUNTS = [50, 5, 20, 1]     # training label counts of the 4 classes of X
TRAIN_SIZE = 60             # training examples (multi-label: a class is in at most all of them)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# ------------------------------------------------------------------ numpy references
def ref_logit_adjusted(x, y, counts, tau):
    """Menon et al. 2021, eq. 10: -log softmax(x + tau log pi)_y, pi = n / sum(n)."""
    prior = np.asarray(counts, float) / np.sum(counts)
    C = x.shape[-1]
    out = []
    for row, label in zip(x.reshape(-1, C), y.reshape(-1)):
        out.append(0.0 if label == IGN else -np_log_softmax(row + tau * np.log(prior))[label])
    return np.array(out).reshape(y.shape)


def ref_effective_number(counts, beta):
    """Cui et al. 2019: (1 - beta) / (1 - beta^n), normalised to sum to the number of classes."""
    w = np.array([(1 - beta) / (1 - beta ** n) for n in counts])
    return w / w.sum() * len(counts)


def ref_asl(x, y, gamma_pos, gamma_neg, clip):
    """Ridnik et al. 2021, eq. 7: -[y (1-p)^g+ log p + (1-y) p_m^g- log(1-p_m)], p_m = max(p - m, 0)."""
    p = np_sigmoid(x)
    p_m = np.maximum(p - clip, 0.0)
    pos = (1 - p) ** gamma_pos * np.log(p)
    neg = p_m ** gamma_neg * np.log(1 - p_m)
    return -(y * pos + (1 - y) * neg)


def ref_db(x, y, counts, n, alpha=0.5, gamma=2.0, kappa=0.05, lam=2.0, m_alpha=0.1, m_beta=10.0, mu=0.9):
    """Roche/BalancedLossNLP ResampleLoss with reweight_func='rebalance', focal and
    logit_reg, transcribed with loops (y: 0/1, IGN entries count as 0 and are left
    out afterwards)."""
    counts = np.asarray(counts, float)
    y = np.where(y == IGN, 0.0, y)
    out = np.zeros_like(x)
    for k in range(x.shape[0]):
        repeat_rate = sum(y[k, i] / counts[i] for i in range(len(counts)))
        for i in range(len(counts)):
            if repeat_rate > 0:
                w = np_sigmoid(m_beta * ((1 / counts[i]) / repeat_rate - mu)) + m_alpha
            else:
                w = 1 + m_alpha  # the limit of sigmoid(beta (r - mu)) + alpha as r grows
            z = x[k, i] - kappa * np.log(n / counts[i] - 1)
            if y[k, i] == 0:
                z, w = lam * z, w / lam
            bce = -(y[k, i] * np.log(np_sigmoid(z)) + (1 - y[k, i]) * np.log(1 - np_sigmoid(z)))
            pt = np.exp(-bce)
            a_t = alpha if y[k, i] == 1 else 1 - alpha
            out[k, i] = a_t * (1 - pt) ** gamma * w * bce
    return out


# ------------------------------------------------------------------ logit_adjusted_ce / balanced_softmax
@pytest.mark.parametrize("tau", [0.0, 0.5, 1.0, 2.0])
def test_logit_adjusted_ce_matches_reference(tau):
    got = L.logit_adjusted_ce_loss(t(X3), ti(Y3), class_counts=COUNTS, tau=tau, reduction="none")
    np.testing.assert_allclose(val(got), ref_logit_adjusted(X3, Y3, COUNTS, tau), rtol=RTOL)
    mean = L.logit_adjusted_ce_loss(t(X), ti(Y), class_counts=COUNTS, tau=tau)
    np.testing.assert_allclose(float(mean), ref_logit_adjusted(X, Y, COUNTS, tau).sum() / 3, rtol=RTOL)
    total = L.logit_adjusted_ce_loss(t(X), ti(Y), class_counts=COUNTS, tau=tau, reduction="sum")
    np.testing.assert_allclose(float(total), ref_logit_adjusted(X, Y, COUNTS, tau).sum(), rtol=RTOL)
    layer = build_loss({"name": "logit_adjusted_ce", "tau": tau}, class_counts=COUNTS)
    np.testing.assert_allclose(float(layer(t(X3), ti(Y3))), float(mean), rtol=1e-12)


def test_logit_adjusted_ce_tau_0_is_ce_and_balanced_softmax_is_tau_1():
    np.testing.assert_allclose(float(L.logit_adjusted_ce_loss(t(X), ti(Y), class_counts=None, tau=0.0)),
                               float(L.cross_entropy_loss(t(X), ti(Y))), rtol=1e-12)
    balanced = build_loss({"name": "balanced_softmax"}, class_counts=COUNTS)
    np.testing.assert_allclose(float(balanced(t(X), ti(Y))),
                               float(L.logit_adjusted_ce_loss(t(X), ti(Y), class_counts=COUNTS, tau=1.0)),
                               rtol=1e-12)
    # soft targets: -sum_c q_c log softmax(x + tau log pi)_c; a row of IGN is left out
    q = np.exp(np_log_softmax(X[[0, 1, 3]]))
    soft = np.concatenate([q[:2], np.full((1, 4), IGN), q[2:]])
    prior = np.log(np.asarray(COUNTS, float) / sum(COUNTS))
    expected = -(q * np_log_softmax(X[[0, 1, 3]] + 0.7 * prior)).sum(-1).mean()
    got = L.logit_adjusted_ce_loss(t(X), t(soft), class_counts=COUNTS, tau=0.7)
    np.testing.assert_allclose(float(got), expected, rtol=RTOL)


def test_logit_adjusted_ce_gradient_extremes_and_nothing_valid():
    layer = build_loss({"name": "logit_adjusted_ce", "tau": 1.5}, class_counts=COUNTS)
    check_grad(lambda x: layer(x, ti(Y)), X.copy())
    for dtype in ("float64", "float32"):
        x = t(np.sign(X) * 1e4, grad=True, dtype=dtype)
        loss = layer(x, ti(Y))
        loss.backward()
        assert np.isfinite(float(loss)) and np.isfinite(x.grad.numpy()).all(), dtype
    assert_finite_with_grad(lambda x: layer(x, ti([IGN] * 4)), X, expect_zero=True)
    assert_finite_with_grad(lambda x: layer(x, ti(np.zeros(0))), np.zeros((0, 4)), expect_zero=True)


def test_logit_adjusted_ce_rewards_the_rare_class_margin():
    """The adjusted loss is lower than ce when the gold class is frequent, higher when it is rare."""
    x = np.zeros((2, 4))
    la = L.logit_adjusted_ce_loss(t(x), ti([0, 3]), class_counts=COUNTS, reduction="none")
    ce = L.cross_entropy_loss(t(x), ti([0, 3]), reduction="none")
    assert val(la)[0] < val(ce)[0] and val(la)[1] > val(ce)[1]


# ------------------------------------------------------------------ effective-number weights
@pytest.mark.parametrize("beta", [0.0, 0.9, 0.99, 0.9999])
def test_effective_number_weights_match_reference_and_sum_to_the_classes(beta):
    layer = build_loss({"name": "ce", "class_weights": {"effective_number": beta}}, class_counts=COUNTS)
    np.testing.assert_allclose(layer.class_weights, ref_effective_number(COUNTS, beta), rtol=1e-12)
    np.testing.assert_allclose(sum(layer.class_weights), 4.0, rtol=1e-12)
    explicit = L.cross_entropy_loss(t(X), ti(Y), class_weights=list(ref_effective_number(COUNTS, beta)))
    np.testing.assert_allclose(float(layer(t(X), ti(Y))), float(explicit), rtol=1e-10)
    focal = build_loss({"name": "focal", "alpha": {"effective_number": beta}}, class_counts=COUNTS)
    np.testing.assert_allclose(focal.alpha, ref_effective_number(COUNTS, beta), rtol=1e-12)
    if beta == 0.0:
        assert layer.class_weights == [1.0, 1.0, 1.0, 1.0]


def test_effective_number_inside_ohem_and_at_plan_time():
    layer = build_loss({"name": "ohem", "base": {"name": "ce", "class_weights": {"effective_number": 0.9}}},
                       class_counts=COUNTS)
    np.testing.assert_allclose(layer.base.class_weights, ref_effective_number(COUNTS, 0.9), rtol=1e-12)
    # before any data is read, placeholder counts stand in (as for 'balanced')
    check_classification_loss({"name": "ce", "class_weights": {"effective_number": 0.999}})
    check_classification_loss({"name": "ohem", "base": {"name": "focal", "alpha": {"effective_number": 0.5}}})


# ------------------------------------------------------------------ asl
ASL_SETTINGS = [(0.0, 4.0, 0.05), (1.0, 4.0, 0.05), (0.0, 4.0, 0.0), (2.0, 1.0, 0.2), (0.0, 0.0, 0.0)]
MH_VALID = MH != IGN


@pytest.mark.parametrize("gamma_pos,gamma_neg,clip", ASL_SETTINGS)
def test_asl_matches_reference(gamma_pos, gamma_neg, clip):
    kw = {"gamma_pos": gamma_pos, "gamma_neg": gamma_neg, "clip": clip}
    ref = np.where(MH_VALID, ref_asl(X, np.where(MH_VALID, MH, 0), **kw), 0.0)
    np.testing.assert_allclose(val(L.asl_loss(t(X), t(MH), reduction="none", **kw)), ref, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(float(L.asl_loss(t(X), t(MH), **kw)), ref.sum() / MH_VALID.sum(), rtol=RTOL)
    np.testing.assert_allclose(float(L.asl_loss(t(X), t(MH), reduction="sum", **kw)), ref.sum(), rtol=RTOL)
    # int class indices are one-hot, as for bce; an ignored row is left out
    onehot = np.eye(4)[np.where(Y == IGN, 0, Y)]
    ref_rows = ref_asl(X, onehot, **kw)[Y != IGN]
    np.testing.assert_allclose(float(L.asl_loss(t(X), ti(Y), **kw)), ref_rows.mean(), rtol=RTOL)
    layer = build_loss({"name": "asl", **kw})
    np.testing.assert_allclose(float(layer(t(X), t(MH))), float(L.asl_loss(t(X), t(MH), **kw)), rtol=1e-12)


def test_asl_is_bce_without_focusing_or_margin_and_drops_easy_negatives():
    np.testing.assert_allclose(float(L.asl_loss(t(X), t(MH), gamma_neg=0.0, clip=0.0)),
                               float(L.binary_cross_entropy_loss(t(X), t(MH))), rtol=1e-10)
    easy = L.asl_loss(t([[-4.0, -3.5]]), t([[0.0, 0.0]]), clip=0.05, reduction="none")  # p < 0.05
    assert val(easy).tolist() == [[0.0, 0.0]]


@pytest.mark.parametrize("gamma_pos,gamma_neg,clip", ASL_SETTINGS)
def test_asl_gradient_includes_the_focusing_weight(gamma_pos, gamma_neg, clip):
    """Finite differences of the whole loss: a detached weight would miss its own term."""
    kw = {"gamma_pos": gamma_pos, "gamma_neg": gamma_neg, "clip": clip}
    check_grad(lambda x: L.asl_loss(x, t(MH), **kw), X.copy())


def test_asl_extremes_and_nothing_valid():
    for clip in (0.05, 0.0):
        for dtype in ("float64", "float32"):
            x = t(np.sign(X) * 1e4, grad=True, dtype=dtype)
            loss = L.asl_loss(x, t(MH, dtype=dtype), clip=clip, gamma_pos=1.0)
            loss.backward()
            assert np.isfinite(float(loss)) and np.isfinite(x.grad.numpy()).all(), (clip, dtype)
    assert_finite_with_grad(lambda x: L.asl_loss(x, t(np.full_like(X, IGN))), X, expect_zero=True)
    assert_finite_with_grad(lambda x: L.asl_loss(x, t(np.zeros((0, 4)))), np.zeros((0, 4)), expect_zero=True)


# ------------------------------------------------------------------ distribution_balanced
DB_SETTINGS = [{}, {"gamma": 0.0, "init_bias": 0.0, "neg_scale": 1.0},
               {"alpha": 0.25, "gamma": 1.0, "init_bias": 0.1, "neg_scale": 5.0, "map_alpha": 0.2,
                "map_beta": 3.0, "map_gamma": 0.05}]
DB_NAMES = {"alpha": "alpha", "gamma": "gamma", "init_bias": "kappa", "neg_scale": "lam", "map_alpha": "m_alpha",
            "map_beta": "m_beta", "map_gamma": "mu"}


@pytest.mark.parametrize("kw", DB_SETTINGS)
def test_distribution_balanced_matches_reference(kw):
    ref = np.where(MH_VALID, ref_db(X, MH, COUNTS, TRAIN_SIZE, **{DB_NAMES[k]: v for k, v in kw.items()}), 0.0)
    fn = lambda **more: L.distribution_balanced_loss(t(X), t(MH), class_counts=COUNTS,  # noqa: E731
                                                     train_size=TRAIN_SIZE, **kw, **more)
    np.testing.assert_allclose(val(fn(reduction="none")), ref, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(float(fn()), ref.sum() / MH_VALID.sum(), rtol=RTOL)
    np.testing.assert_allclose(float(fn(reduction="sum")), ref.sum(), rtol=RTOL)
    layer = build_loss({"name": "distribution_balanced", **kw}, class_counts=COUNTS, train_size=TRAIN_SIZE)
    np.testing.assert_allclose(float(layer(t(X), t(MH))), float(fn()), rtol=1e-12)


def test_distribution_balanced_row_without_positives_takes_the_limit_weight():
    """MH's second row has no positive: its weight is 1 + map_alpha (negatives: over neg_scale), not NaN."""
    none = val(L.distribution_balanced_loss(t(X), t(MH), class_counts=COUNTS, train_size=TRAIN_SIZE,
                                            gamma=0.0, init_bias=0.0, neg_scale=1.0, reduction="none"))
    bce = val(L.binary_cross_entropy_loss(t(X[1:2]), t(MH[1:2]), reduction="none"))
    np.testing.assert_allclose(none[1], 0.5 * 1.1 * bce[0], rtol=1e-10)  # alpha_t = 1 - 0.5 for negatives


def test_distribution_balanced_gradient_extremes_and_nothing_valid():
    layer = build_loss({"name": "distribution_balanced"}, class_counts=COUNTS, train_size=TRAIN_SIZE)
    check_grad(lambda x: layer(x, t(MH)), X.copy())
    check_grad(lambda x: layer(x, ti(Y)), X.copy())  # class indices, one-hot
    for dtype in ("float64", "float32"):
        x = t(np.sign(X) * 1e4, grad=True, dtype=dtype)
        loss = layer(x, t(MH, dtype=dtype))
        loss.backward()
        assert np.isfinite(float(loss)) and np.isfinite(x.grad.numpy()).all(), dtype
    assert_finite_with_grad(lambda x: layer(x, t(np.full_like(X, IGN))), X, expect_zero=True)
    assert_finite_with_grad(lambda x: layer(x, t(np.zeros((0, 4)))), np.zeros((0, 4)), expect_zero=True)


# ------------------------------------------------------------------ the heads
def test_softmax_tagging_and_pointwise_heads_take_logit_adjustment():
    """[B, T, C] logits with -100 on padding (the tagging head), [B, C] (classifier, pointwise matcher)."""
    for name in ("logit_adjusted_ce", "balanced_softmax"):
        loss = classification_loss({"name": name}, COUNTS, head="ErnieFcSeqLabel")
        expected = ref_logit_adjusted(X3, Y3, COUNTS, 1.0).sum() / 3
        np.testing.assert_allclose(float(loss(t(X3), ti(Y3))), expected, rtol=RTOL)
        assert check_classification_loss({"name": name}, head="ErnieMatchingFcPointwise").ACTIVATION == "softmax"
    with pytest.raises(ConfigError, match=r"^model\.loss\.name: 'logit_adjusted_ce' trains a softmax over the "
                                          r"labels, but ErnieFcClassification with dataset_reader\.multi_label"):
        check_classification_loss({"name": "logit_adjusted_ce"}, True, "ErnieFcClassification")


def test_multi_label_head_takes_asl_and_distribution_balanced_where_train_size_is_known():
    from tasks.sequence_labeling.model import ErnieFcSeqLabel
    from tasks.text_classification.model import ErnieFcClassification
    from tasks.text_matching.model import ErnieMatchingFcPointwise

    assert "train_size" in ErnieFcClassification.MODEL_ARGS
    check_classification_loss({"name": "asl"}, True, "ErnieFcClassification")
    ErnieFcClassification.check_config({"loss": {"name": "distribution_balanced"}}, {"multi_label": True})
    loss = classification_loss({"name": "distribution_balanced"}, COUNTS, True, train_size=TRAIN_SIZE)
    assert loss.ACTIVATION == "sigmoid"
    message = (r"^model\.loss\.name: 'distribution_balanced' needs the number of training examples \(train_size\), "
               r"but none was given: this model's reader does not supply it, or the model was saved before "
               r"train_size was recorded$")
    with pytest.raises(ConfigError, match=message):
        ErnieMatchingFcPointwise.check_config({"loss": {"name": "distribution_balanced"}}, {})
    with pytest.raises(ConfigError, match=message):
        ErnieFcSeqLabel.check_config({"loss": {"name": "distribution_balanced"}}, {})
    with pytest.raises(ConfigError, match=message):
        classification_loss({"name": "distribution_balanced"}, COUNTS, True)  # an older saved model


# ------------------------------------------------------------------ messages
@pytest.mark.parametrize("cfg,kw,message", [
    ({"name": "logit_adjusted_ce", "tau": -1}, {"class_counts": COUNTS}, r"model\.loss\.tau: must be >= 0, got -1"),
    ({"name": "logit_adjusted_ce"}, {"class_counts": [5, 2, 7, 0]},
     r"model\.loss\.tau: needs every class in the training labels \(log of its share\); class\(es\) \[3\] have "
     r"none \(class_counts=\[5, 2, 7, 0\]\)"),
    ({"name": "logit_adjusted_ce"}, {},
     r"model\.loss\.tau: needs the training label counts \(class_counts\), but none were given"),
    ({"name": "balanced_softmax"}, {"class_counts": [0, 2]},
     r"model\.loss\.name: 'balanced_softmax' needs every class in the training labels \(log of its share\); "
     r"class\(es\) \[0\] have none \(class_counts=\[0, 2\]\)"),
    ({"name": "balanced_softmax", "tau": 2.0}, {"class_counts": COUNTS},
     r"model\.loss\.tau: unknown key for 'balanced_softmax' \(accepted: ignore_index, reduction\)"),
    ({"name": "ce", "class_weights": {"effective_number": 1.0}}, {"class_counts": COUNTS},
     r"model\.loss\.class_weights\.effective_number: must be in \[0, 1\), got 1\.0"),
    ({"name": "focal", "alpha": {"effective_number": -0.5}}, {"class_counts": COUNTS},
     r"model\.loss\.alpha\.effective_number: must be in \[0, 1\), got -0\.5"),
    ({"name": "ce", "class_weights": {"effective_number": "0.9"}}, {"class_counts": COUNTS},
     r"model\.loss\.class_weights\.effective_number: must be a number, got '0\.9'"),
    ({"name": "ce", "class_weights": {"beta": 0.9}}, {"class_counts": COUNTS},
     r"model\.loss\.class_weights: as an object must be \{\"effective_number\": beta\} with beta in \[0, 1\), "
     r"got \{'beta': 0\.9\}"),
    ({"name": "ce", "class_weights": {"effective_number": 0.9}}, {},
     r"model\.loss\.class_weights: is \{\"effective_number\": 0\.9\}, which needs the training label counts "
     r"\(class_counts\), but none were given; pass class_counts or give explicit per-class weights"),
    ({"name": "ce", "class_weights": {"effective_number": 0.9}}, {"class_counts": [3, 0]},
     r"model\.loss\.class_weights: is \{\"effective_number\": 0\.9\}, but class\(es\) \[1\] have no training "
     r"examples \(class_counts=\[3, 0\]\); give explicit per-class weights instead"),
    ({"name": "focal", "mode": "sigmoid", "alpha": {"effective_number": 0.9}}, {"class_counts": COUNTS},
     r"model\.loss\.alpha: \{'effective_number': 0\.9\} only applies with mode 'softmax'; in mode 'sigmoid' "
     r"alpha is the positive-class weight in \[0, 1\] \(or < 0 to disable\)"),
    ({"name": "asl", "clip": 1.0}, {}, r"model\.loss\.clip: must be in \[0, 1\), got 1\.0"),
    ({"name": "asl", "gamma_neg": -1}, {}, r"model\.loss\.gamma_neg: must be >= 0, got -1"),
    ({"name": "distribution_balanced"}, {"class_counts": COUNTS},
     r"model\.loss\.name: 'distribution_balanced' needs the number of training examples \(train_size\)"),
    ({"name": "distribution_balanced"}, {"train_size": 10},
     r"model\.loss\.name: 'distribution_balanced' needs the training label counts \(class_counts\), but none "
     r"were given"),
    ({"name": "distribution_balanced"}, {"class_counts": [4, 0, 1], "train_size": 10},
     r"model\.loss\.name: 'distribution_balanced' needs every class in the training labels \(it weighs by "
     r"1 / count\); class\(es\) \[1\] have none \(class_counts=\[4, 0, 1\]\)"),
    ({"name": "distribution_balanced"}, {"class_counts": [4, 12], "train_size": 10},
     r"model\.loss\.name: 'distribution_balanced' got class\(es\) \[1\] counted more often than there are "
     r"training examples \(train_size=10, class_counts=\[4, 12\]\)"),
    ({"name": "distribution_balanced"}, {"class_counts": [10, 3], "train_size": 10},
     r"model\.loss\.init_bias: needs every class absent from some training example \(log\(N / n - 1\)\); "
     r"class\(es\) \[0\] are in all 10 \(set init_bias to 0\)"),
    ({"name": "distribution_balanced", "neg_scale": 0}, {"class_counts": COUNTS, "train_size": TRAIN_SIZE},
     r"model\.loss\.neg_scale: must be > 0, got 0"),
    ({"name": "distribution_balanced", "alpha": 1.5}, {"class_counts": COUNTS, "train_size": TRAIN_SIZE},
     r"model\.loss\.alpha: must be in \[0, 1\], got 1\.5"),
    ({"name": "distribution_balanced", "train_size": 5}, {},
     r"model\.loss\.train_size: unknown key for 'distribution_balanced'"),
])
def test_messages(cfg, kw, message):
    with pytest.raises(ConfigError, match=rf"^{message}") as err:
        build_loss(cfg, **kw)
    assert "\n" not in str(err.value)


def test_distribution_balanced_without_init_bias_takes_a_class_in_every_example():
    layer = build_loss({"name": "distribution_balanced", "init_bias": 0.0}, class_counts=[10, 3], train_size=10)
    assert layer.bias == [0.0, 0.0]
