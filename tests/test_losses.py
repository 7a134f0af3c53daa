"""Numerics of appzoo.losses against independent NumPy float64 references.

Each reference below is written from the paper's formula, not from the
implementation: loops and direct exp/log where the inputs are small enough.
"""
import numpy as np
import paddle
import pytest

from appzoo import losses as L

IGN = -100
RTOL = 1e-5

# ------------------------------------------------------------------ inputs
X = np.array([[1.5, -0.3, 0.2, 2.0],
              [0.1, 0.4, -1.2, 0.0],
              [-2.0, 3.0, 0.5, -0.5],
              [0.7, 0.7, -0.1, 1.1]])
Y = np.array([3, 1, IGN, 0])                                  # int labels, one ignored
MH = np.array([[1., 0., 0., 1.],
               [0., 0., 0., 0.],
               [0., 1., IGN, 0.],
               [1., 1., 1., 0.]])                             # multi-hot, one entry ignored
MH_ROW_IGNORED = MH.copy()
MH_ROW_IGNORED[1] = IGN                                        # for losses with one value per row
X3 = X.reshape(2, 2, 4)                                        # token-level: [batch, seq, C]
Y3 = Y.reshape(2, 2)


def t(a, grad=False, dtype="float64"):
    out = paddle.to_tensor(np.asarray(a, dtype=dtype))
    out.stop_gradient = not grad
    return out


def ti(a):
    return paddle.to_tensor(np.asarray(a, dtype="int64"))


def val(x):
    return x.numpy()


# ------------------------------------------------------------------ numpy references
def np_log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def np_log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def ref_ce(x, y, w=None, eps=0.0):
    C = x.shape[-1]
    out = []
    for row, label in zip(x.reshape(-1, C), y.reshape(-1)):
        if label == IGN:
            out.append(0.0)
            continue
        lp = np_log_softmax(row)
        target = np.full(C, eps / C)
        target[label] += 1 - eps
        ww = np.ones(C) if w is None else np.asarray(w)
        out.append(-(ww * target * lp).sum())
    return np.array(out).reshape(y.shape)


def ref_bce(x, y, pw=1.0):
    return -(pw * y * np_log_sigmoid(x) + (1 - y) * np_log_sigmoid(-x))


def ref_focal_softmax(x, y, gamma, alpha=None):
    C = x.shape[-1]
    out = []
    for row, label in zip(x.reshape(-1, C), y.reshape(-1)):
        if label == IGN:
            out.append(0.0)
            continue
        p = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
        a = 1.0 if alpha is None else (alpha if np.isscalar(alpha) else alpha[label])
        out.append(-a * (1 - p[label]) ** gamma * np.log(p[label]))
    return np.array(out).reshape(y.shape)


def ref_torchvision_sigmoid_focal(x, y, gamma=2.0, alpha=0.25):
    # torchvision.ops.sigmoid_focal_loss, transcribed.
    p = np_sigmoid(x)
    ce = ref_bce(x, y)
    p_t = p * y + (1 - p) * (1 - y)
    loss = ce * (1 - p_t) ** gamma
    if alpha >= 0:
        loss = (alpha * y + (1 - alpha) * (1 - y)) * loss
    return loss


def ref_dice_softmax(x, y, alpha, smooth, square=True):
    C = x.shape[-1]
    out = []
    for row, label in zip(x.reshape(-1, C), y.reshape(-1)):
        if label == IGN:
            out.append(0.0)
            continue
        p = np.exp(row) / np.exp(row).sum()
        pt = (1 - p) ** alpha * p
        yy = np.eye(C)[label]
        den = pt ** 2 + yy ** 2 + smooth if square else pt + yy + smooth
        out.append(np.mean(1 - (2 * pt * yy + smooth) / den))
    return np.array(out).reshape(y.shape)


def ref_ghm_sigmoid(x, y, valid, bins, acc=None, momentum=0.0):
    """mmdetection's GHMC.forward, transcribed (with a loop over bins)."""
    edges = np.arange(bins + 1) / bins
    edges[-1] += 1e-6
    g = np.abs(np_sigmoid(x) - y)
    tot = max(valid.sum(), 1.0)
    w = np.zeros_like(x)
    n = 0
    for i in range(bins):
        inds = (g >= edges[i]) & (g < edges[i + 1]) & valid
        num = inds.sum()
        if num > 0:
            if momentum > 0:
                acc[i] = momentum * acc[i] + (1 - momentum) * num
                w[inds] = tot / acc[i]
            else:
                w[inds] = tot / num
            n += 1
    if n > 0:
        w = w / n
    return (w * ref_bce(x, y) * valid).sum() / tot


def ref_multilabel_ce(s, y, valid):
    out = []
    for row, yy, vv in zip(s, y, valid):
        neg = row[(yy == 0) & vv]
        pos = row[(yy == 1) & vv]
        out.append(np.log(1 + np.exp(neg).sum()) + np.log(1 + np.exp(-pos).sum()))
    return np.array(out)


def ref_circle(sp, sn, m, gamma):
    out = []
    for p, n in zip(sp, sn):
        ap = np.maximum(1 + m - p, 0)
        an = np.maximum(n + m, 0)
        pos = np.exp(-gamma * ap * (p - (1 - m))).sum()
        neg = np.exp(gamma * an * (n - m)).sum()
        out.append(np.log(1 + pos * neg))
    return np.array(out)


def np_cos_matrix(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return a @ b.T


def ref_vse(q, p, neg, margin, hardest):
    cand = p if neg is None else np.concatenate([p, neg])
    S = np_cos_matrix(q, cand)
    N = len(q)
    out = []
    for i in range(N):
        c1 = [max(0, margin + S[i, j] - S[i, i]) for j in range(S.shape[1]) if j != i]
        c2 = [max(0, margin + S[j, i] - S[i, i]) for j in range(N) if j != i]
        agg = (lambda c: max(c) if c else 0.0) if hardest else (lambda c: sum(c))
        out.append(agg(c1) + agg(c2))
    return np.array(out)


# ------------------------------------------------------------------ helpers
def fd_grad(fn, array, eps=1e-6):
    """Central finite differences of the scalar ``fn(array)`` (numpy in, float out)."""
    grad = np.zeros_like(array)
    for idx in np.ndindex(array.shape):
        hi, lo = array.copy(), array.copy()
        hi[idx] += eps
        lo[idx] -= eps
        grad[idx] = (fn(hi) - fn(lo)) / (2 * eps)
    return grad


def check_grad(loss_fn, array, fd_fn=None):
    """The analytic gradient of ``loss_fn(tensor)`` equals finite differences."""
    x = t(array, grad=True)
    loss_fn(x).backward()
    if fd_fn is None:
        def fd_fn(a):
            with paddle.no_grad():
                return float(loss_fn(t(a)))
    np.testing.assert_allclose(x.grad.numpy(), fd_grad(fd_fn, array), rtol=1e-5, atol=1e-7)


def assert_finite_with_grad(loss_fn, *arrays, expect_zero=False):
    xs = [t(a, grad=True) for a in arrays]
    loss = loss_fn(*xs)
    loss.backward()
    assert np.isfinite(val(loss)).all()
    if expect_zero:
        assert float(loss) == 0.0
    for x in xs:
        assert x.grad is not None and np.isfinite(x.grad.numpy()).all()


# one entry per classification loss: (name, function, kwargs, labels); used for shared properties
CLASSIFICATION_CASES = [
    ("ce", L.cross_entropy_loss, {"label_smoothing": 0.1}, Y),
    ("bce", L.binary_cross_entropy_loss, {}, MH),
    ("focal_softmax", L.focal_loss, {"gamma": 2.0, "alpha": [0.1, 0.2, 0.3, 0.4]}, Y),
    ("focal_sigmoid", L.focal_loss, {"mode": "sigmoid"}, MH),
    ("dice", L.dice_loss, {}, Y),
    ("dice_sigmoid", L.dice_loss, {"mode": "sigmoid"}, MH),
    ("ghm", L.ghm_loss, {"bins": 3}, MH),  # 3: no g = |p - y| on a bin edge, where FD would jump
    ("ghm_softmax", L.ghm_loss, {"bins": 4, "mode": "softmax"}, Y),
    ("multilabel_ce", L.multilabel_ce_loss, {}, MH_ROW_IGNORED),
    ("kl", L.kl_div_loss, {}, None),
]
SOFT = np.exp(np_log_softmax(np.array([[0.3, 0.1, -1.0, 2.0], [0., 0., 0., 0.],
                                       [IGN, IGN, IGN, IGN], [1.0, -3.0, 0.5, 0.2]])))
SOFT[2] = IGN


def labels_for(case_labels):
    if case_labels is None:
        return t(SOFT)
    return ti(case_labels) if case_labels.ndim == 1 else t(case_labels)


def n_valid(case_labels, kind):
    if case_labels is None:
        return 3
    if case_labels.ndim == 1:
        return (case_labels != IGN).sum()
    return (case_labels != IGN).sum() if kind == "element" else (case_labels != IGN).any(-1).sum()


# ------------------------------------------------------------------ cross-entropy
def test_ce_matches_reference_with_weights_smoothing_and_ignore():
    w = [0.5, 2.0, 1.0, 3.0]
    got = L.cross_entropy_loss(t(X3), ti(Y3), class_weights=w, label_smoothing=0.2, reduction="none")
    np.testing.assert_allclose(val(got), ref_ce(X3, Y3, w, 0.2), rtol=RTOL)
    mean = L.cross_entropy_loss(t(X3), ti(Y3), class_weights=w, label_smoothing=0.2)
    np.testing.assert_allclose(float(mean), ref_ce(X3, Y3, w, 0.2).sum() / 3, rtol=RTOL)


def test_ce_soft_targets_equal_index_labels_for_one_hot():
    onehot = np.eye(4)[[3, 1, 0, 0]]
    onehot[2] = IGN
    got = L.cross_entropy_loss(t(X), t(onehot), label_smoothing=0.1, reduction="none")
    np.testing.assert_allclose(val(got), ref_ce(X, Y, None, 0.1), rtol=RTOL)


def test_ce_from_probabilities():
    probs = np.exp(np_log_softmax(X))
    got = L.cross_entropy_loss(t(probs), ti(Y), from_logits=False, reduction="none")
    np.testing.assert_allclose(val(got), ref_ce(X, Y), rtol=RTOL)


def test_ce_balanced_weights_match_sklearn():
    from sklearn.utils.class_weight import compute_class_weight
    counts = [10, 3, 1, 6]
    labels = np.repeat(np.arange(4), counts)
    expected = compute_class_weight("balanced", classes=np.arange(4), y=labels)
    layer = L.build_loss({"name": "ce", "class_weights": "balanced"}, class_counts=counts)
    np.testing.assert_allclose(layer.class_weights, expected, rtol=1e-12)
    got = layer(t(X), ti(Y))
    np.testing.assert_allclose(float(got), ref_ce(X, Y, expected).sum() / 3, rtol=RTOL)


# ------------------------------------------------------------------ bce
def test_bce_multi_hot_with_pos_weight_and_ignored_entry():
    pw = [1.0, 2.0, 0.5, 3.0]
    got = L.binary_cross_entropy_loss(t(X), t(MH), pos_weight=pw, reduction="none")
    valid = MH != IGN
    expected = np.where(valid, ref_bce(X, np.where(valid, MH, 0), np.array(pw)), 0)
    np.testing.assert_allclose(val(got), expected, rtol=RTOL)
    mean = L.binary_cross_entropy_loss(t(X), t(MH), pos_weight=pw)
    np.testing.assert_allclose(float(mean), expected.sum() / valid.sum(), rtol=RTOL)


def test_bce_index_labels_are_one_hot_and_single_logit_takes_0_1_labels():
    got = L.binary_cross_entropy_loss(t(X), ti(Y), reduction="sum")
    rows = Y != IGN
    np.testing.assert_allclose(float(got), ref_bce(X[rows], np.eye(4)[Y[rows]]).sum(), rtol=RTOL)
    one = X[:, :1]
    got1 = L.binary_cross_entropy_loss(t(one), ti([1, 0, IGN, 1]), reduction="none")
    np.testing.assert_allclose(val(got1)[:, 0], [*ref_bce(one[[0, 1], 0], np.array([1., 0.])), 0.0,
                                                 ref_bce(one[3, 0], 1.0)], rtol=RTOL)


# ------------------------------------------------------------------ focal
@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_focal_softmax_matches_reference(gamma):
    alpha = [0.1, 0.2, 0.3, 0.4]
    got = L.focal_loss(t(X3), ti(Y3), gamma=gamma, alpha=alpha, reduction="none")
    np.testing.assert_allclose(val(got), ref_focal_softmax(X3, Y3, gamma, alpha), rtol=RTOL)


def test_focal_softmax_gamma_zero_is_cross_entropy_exactly():
    ce = L.cross_entropy_loss(t(X), ti(Y), class_weights=[1., 2., 3., 4.], reduction="none")
    focal = L.focal_loss(t(X), ti(Y), gamma=0.0, alpha=[1., 2., 3., 4.], reduction="none")
    np.testing.assert_allclose(val(focal), val(ce), rtol=1e-12)


@pytest.mark.parametrize("gamma,alpha", [(2.0, 0.25), (1.5, 0.6), (2.0, -1.0)])
def test_focal_sigmoid_is_torchvision(gamma, alpha):
    y = (MH == 1).astype(float)
    got = L.focal_loss(t(X), t(y), gamma=gamma, alpha=alpha, mode="sigmoid", reduction="none")
    np.testing.assert_allclose(val(got), ref_torchvision_sigmoid_focal(X, y, gamma, alpha), rtol=RTOL)


def test_focal_sigmoid_gamma_zero_is_bce_and_normalizers():
    y = (MH == 1).astype(float)
    bce = L.binary_cross_entropy_loss(t(X), t(y), reduction="none")
    focal = L.focal_loss(t(X), t(y), gamma=0.0, alpha=-1, mode="sigmoid", reduction="none")
    np.testing.assert_allclose(val(focal), val(bce), rtol=1e-12)
    ref = ref_torchvision_sigmoid_focal(X, y)
    by_pos = L.focal_loss(t(X), t(y), mode="sigmoid", normalizer="num_positive")
    np.testing.assert_allclose(float(by_pos), ref.sum() / y.sum(), rtol=RTOL)
    summed = L.focal_loss(t(X), t(y), mode="sigmoid", normalizer="sum")
    np.testing.assert_allclose(float(summed), ref.sum(), rtol=RTOL)


# ------------------------------------------------------------------ dice
@pytest.mark.parametrize("alpha,square", [(1.0, True), (0.5, False), (0.0, True)])
def test_dice_softmax_matches_reference(alpha, square):
    got = L.dice_loss(t(X3), ti(Y3), alpha=alpha, smooth=0.5, square_denominator=square, reduction="none")
    np.testing.assert_allclose(val(got), ref_dice_softmax(X3, Y3, alpha, 0.5, square), rtol=RTOL)


def test_dice_alpha_zero_is_plain_soft_dice():
    p = np_sigmoid(X)
    y = (MH == 1).astype(float)
    plain = 1 - (2 * p * y + 1.0) / (p ** 2 + y ** 2 + 1.0)
    got = L.dice_loss(t(X), t(y), alpha=0.0, mode="sigmoid", reduction="none")
    np.testing.assert_allclose(val(got), plain, rtol=RTOL)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.1])
def test_self_adjusting_dice_bottoms_out_short_of_certainty(alpha):
    """(1-p)^a p peaks at p = 1/(1+a): there a positive's sigmoid loss is lowest. With the softmax
    over two classes the two terms meet at p = 0.5 for a = 1 (symmetry), which ties a binary decision;
    that is how dice collapsed on MRPC (docs/losses.md)."""
    p = np.linspace(0.005, 0.995, 199)
    got = val(L.dice_loss(t(np.log(p / (1 - p))), t(np.ones_like(p)), alpha=alpha, mode="sigmoid", reduction="none"))
    assert abs(p[int(np.argmin(got))] - 1 / (1 + alpha)) <= 0.005
    logits = np.stack([np.zeros_like(p), np.log(p / (1 - p))], axis=1)  # softmax gives p to class 1
    labels = np.ones(len(p), dtype=np.int64)
    got = val(L.dice_loss(t(logits), ti(labels), alpha=alpha, reduction="none"))
    low = p[int(np.argmin(got))]
    assert low == p[int(np.argmin(ref_dice_softmax(logits, labels, alpha, 1.0, True)))] and low < 0.95
    if alpha == 1.0:
        assert abs(low - 0.5) <= 0.005


# ------------------------------------------------------------------ ghm
def test_ghm_matches_mmdetection_reference():
    valid = MH != IGN
    y = np.where(valid, MH, 0)
    got = L.ghm_loss(t(X), t(MH), bins=4)
    np.testing.assert_allclose(float(got), ref_ghm_sigmoid(X, y, valid, 4), rtol=RTOL)


def test_ghm_one_bin_is_bce():
    got = L.ghm_loss(t(X), t(MH), bins=1)
    np.testing.assert_allclose(float(got), float(L.binary_cross_entropy_loss(t(X), t(MH))), rtol=1e-12)


def test_ghm_momentum_state_follows_reference_and_not_in_eval():
    valid = MH != IGN
    y = np.where(valid, MH, 0)
    layer = L.build_loss({"name": "ghm", "bins": 3, "momentum": 0.5})
    acc = np.zeros(3)
    for step, x in enumerate([X, X * 2.0, -X]):
        expected = ref_ghm_sigmoid(x, y, valid, 3, acc, 0.5)
        np.testing.assert_allclose(float(layer(t(x), t(MH))), expected, rtol=RTOL, err_msg=f"step {step}")
    np.testing.assert_allclose(layer.acc_counts.numpy(), acc, rtol=1e-6)
    assert "acc_counts" in layer.state_dict()
    layer.eval()
    layer(t(X), t(MH))
    np.testing.assert_allclose(layer.acc_counts.numpy(), acc, rtol=1e-6)


def test_ghm_softmax_weights_gold_class_ce():
    rows = Y != IGN
    lp = np_log_softmax(X[rows])
    nll = -lp[np.arange(rows.sum()), Y[rows]]
    g = 1 - np.exp(-nll)
    bins = np.minimum((g * 2).astype(int), 1)
    counts = np.bincount(bins, minlength=2)
    n = (counts > 0).sum()
    w = len(g) / (counts[bins] * n)
    got = L.ghm_loss(t(X), ti(Y), bins=2, mode="softmax")
    np.testing.assert_allclose(float(got), (w * nll).sum() / len(g), rtol=RTOL)


# ------------------------------------------------------------------ multilabel_ce, kl, ohem
def test_multilabel_ce_matches_reference():
    valid = MH != IGN
    got = L.multilabel_ce_loss(t(X), t(MH), reduction="none")
    np.testing.assert_allclose(val(got), ref_multilabel_ce(X, MH, valid), rtol=RTOL)


def test_kl_matches_reference_and_zero_for_equal_distributions():
    q = SOFT
    p = np.exp(np_log_softmax(X))
    rows = [0, 1, 3]
    expected = np.zeros(4)
    expected[rows] = (q[rows] * (np.log(q[rows]) - np.log(p[rows]))).sum(-1)
    got = L.kl_div_loss(t(X), t(q), reduction="none")
    np.testing.assert_allclose(val(got), expected, rtol=RTOL)
    same = L.kl_div_loss(t(X[rows]), t(p[rows]))
    np.testing.assert_allclose(float(same), 0.0, atol=1e-12)
    # zero target entries contribute 0 (0 log 0 = 0) and keep the gradient finite
    hard = np.eye(4)[[0, 1, 2]]
    assert_finite_with_grad(lambda x: L.kl_div_loss(x, t(hard)), X[:3])


def test_ohem_keeps_hardest_elements():
    per = ref_ce(X3, Y3).reshape(-1)
    valid = Y3.reshape(-1) != IGN
    layer = L.build_loss({"name": "ohem", "base": {"name": "ce"}, "ratio": 0.5})
    kept = np.sort(per[valid])[::-1][:2]  # ceil(0.5 * 3) = 2
    np.testing.assert_allclose(float(layer(t(X3), ti(Y3))), kept.mean(), rtol=RTOL)
    layer = L.build_loss({"name": "ohem", "base": {"name": "ce"}, "ratio": 0.1, "min_kept": 3})
    np.testing.assert_allclose(float(layer(t(X3), ti(Y3))), per[valid].mean(), rtol=RTOL)


# ------------------------------------------------------------------ shared classification properties
@pytest.mark.parametrize("name,fn,kw,labels", CLASSIFICATION_CASES, ids=[c[0] for c in CLASSIFICATION_CASES])
def test_classification_reductions(name, fn, kw, labels):
    y = labels_for(labels)
    none = val(fn(t(X), y, reduction="none", **kw))
    total = float(fn(t(X), y, reduction="sum", **kw))
    mean = float(fn(t(X), y, reduction="mean", **kw))
    np.testing.assert_allclose(total, none.sum(), rtol=1e-10)
    elementwise = none.shape == X.shape
    expected_count = n_valid(labels, "element" if elementwise else "row")
    assert expected_count < none.size  # the batch has an ignored element, so the mean must skip it
    np.testing.assert_allclose(mean, total / expected_count, rtol=1e-10)
    with pytest.raises(ValueError, match="reduction"):
        fn(t(X), y, reduction="avg", **kw)


@pytest.mark.parametrize("name,fn,kw,labels", CLASSIFICATION_CASES, ids=[c[0] for c in CLASSIFICATION_CASES])
def test_classification_gradients_match_finite_differences(name, fn, kw, labels):
    y = labels_for(labels)
    check_grad(lambda x: fn(x, y, **kw), X.copy())


@pytest.mark.parametrize("name,fn,kw,labels", CLASSIFICATION_CASES, ids=[c[0] for c in CLASSIFICATION_CASES])
def test_classification_extreme_logits_are_finite(name, fn, kw, labels):
    y = labels_for(labels)
    extreme = np.sign(X) * 1e4
    for dtype in ("float64", "float32"):
        x = t(extreme, grad=True, dtype=dtype)
        loss = fn(x, y.astype(dtype) if labels is None or labels.ndim > 1 else y, **kw)
        loss.backward()
        assert np.isfinite(float(loss)) and np.isfinite(x.grad.numpy()).all(), dtype


@pytest.mark.parametrize("name,fn,kw,labels", CLASSIFICATION_CASES, ids=[c[0] for c in CLASSIFICATION_CASES])
def test_classification_nothing_valid_gives_zero(name, fn, kw, labels):
    if labels is None or labels.ndim > 1:
        ignored = t(np.full_like(X, IGN))
    else:
        ignored = ti(np.full(len(X), IGN))
    assert_finite_with_grad(lambda x: fn(x, ignored, **kw), X, expect_zero=True)
    empty_labels = t(np.zeros((0, 4))) if labels is None or labels.ndim > 1 else ti(np.zeros(0))
    assert_finite_with_grad(lambda x: fn(x, empty_labels, **kw), np.zeros((0, 4)), expect_zero=True)


def test_ohem_nothing_valid_and_layer_matches_function():
    layer = L.build_loss({"name": "ohem", "base": {"name": "focal"}})
    assert_finite_with_grad(lambda x: layer(x, ti([IGN] * 4)), X, expect_zero=True)
    check_grad(lambda x: layer(x, ti(Y)), X.copy())
    loss, valid = L.FocalLoss().elementwise(t(X), ti(Y))
    np.testing.assert_allclose(float(layer(t(X), ti(Y))), float(L.ohem_loss(loss, valid)), rtol=1e-12)


# ------------------------------------------------------------------ pair losses
SP = np.array([[0.9, 0.5], [0.2, 0.7], [-0.1, 0.3]])             # [N=3, P=2]
SN = np.array([[0.1, 0.6, -0.2], [0.4, 0.3, 0.8], [0.0, -0.5, 0.2]])  # [N=3, K=3]


def test_circle_matches_reference_and_closed_form():
    got = L.circle_loss(t(SP), t(SN), margin=0.25, scale=4.0, reduction="none")
    np.testing.assert_allclose(val(got), ref_circle(SP, SN, 0.25, 4.0), rtol=RTOL)
    big = L.circle_loss(t(SP), t(SN), margin=0.25, scale=1e4)  # exp would overflow; logsumexp does not
    assert np.isfinite(float(big)) and float(big) > 0


def test_circle_gradient_treats_weights_as_constants():
    ap = np.maximum(1 + 0.25 - SP, 0)

    def fixed_alpha(sp):
        pos = np.exp(-4.0 * ap * (sp - 0.75)).sum(-1)
        an = np.maximum(SN + 0.25, 0)
        neg = np.exp(4.0 * an * (SN - 0.25)).sum(-1)
        return np.log1p(pos * neg).mean()

    check_grad(lambda sp: L.circle_loss(sp, t(SN), scale=4.0), SP.copy(), fd_fn=fixed_alpha)


def test_pairwise_hinge_and_nce_match_reference():
    hinge = [np.mean([max(0, 0.5 - p + n) for p in SP[i] for n in SN[i]]) for i in range(3)]
    np.testing.assert_allclose(val(L.pairwise_hinge_loss(t(SP), t(SN), margin=0.5, reduction="none")),
                               hinge, rtol=RTOL)
    nce = [sum(np.log(1 + np.exp(-p)) for p in SP[i]) + sum(np.log(1 + np.exp(n)) for n in SN[i])
           for i in range(3)]
    np.testing.assert_allclose(val(L.nce_loss(t(SP), t(SN), reduction="none")), nce, rtol=RTOL)
    flat = L.pairwise_hinge_loss(t(SP[:, 0]), t(SN[:, 0]), margin=0.5, reduction="none")  # [N] and [N]
    np.testing.assert_allclose(val(flat), np.maximum(0, 0.5 - SP[:, 0] + SN[:, 0]), rtol=RTOL)


PAIR_CASES = [
    ("circle", L.circle_loss, {"scale": 4.0}),
    ("pairwise_hinge", L.pairwise_hinge_loss, {"margin": 0.5}),
    ("nce", L.nce_loss, {}),
]


@pytest.mark.parametrize("name,fn,kw", PAIR_CASES, ids=[c[0] for c in PAIR_CASES])
def test_pair_reductions_extremes_and_empty(name, fn, kw):
    none = val(fn(t(SP), t(SN), reduction="none", **kw))
    assert none.shape == (3,)
    np.testing.assert_allclose(float(fn(t(SP), t(SN), reduction="sum", **kw)), none.sum(), rtol=1e-10)
    np.testing.assert_allclose(float(fn(t(SP), t(SN), **kw)), none.mean(), rtol=1e-10)
    with pytest.raises(ValueError, match="reduction"):
        fn(t(SP), t(SN), reduction="avg", **kw)
    if name != "circle":  # circle's alphas are detached; its gradient has its own test
        check_grad(lambda sp: fn(sp, t(SN), **kw), SP.copy())
    assert_finite_with_grad(lambda p, n: fn(p, n, **kw), SP * 1e4, SN * 1e4)
    assert_finite_with_grad(lambda p, n: fn(p, n, **kw), np.zeros((0, 2)), np.zeros((0, 3)), expect_zero=True)
    if name != "nce":  # nce has no pairs to form: positives alone still have a loss
        assert_finite_with_grad(lambda p, n: fn(p, n, **kw), SP, np.zeros((3, 0)), expect_zero=True)


# ------------------------------------------------------------------ embedding losses
Q = np.array([[1.0, 0.2, -0.3], [0.1, 1.0, 0.4], [-0.5, 0.3, 1.0], [0.6, -0.7, 0.2]])
P = Q + np.array([[0.1, -0.2, 0.3], [0.5, 0.1, -0.4], [0.2, 0.2, 0.2], [-0.3, 0.4, 0.1]])
NEG = np.array([[0.3, 0.9, -0.1], [-1.0, 0.2, 0.5], [0.4, 0.4, -0.8], [0.2, -0.1, 0.9]])


@pytest.mark.parametrize("hardest", [False, True])
@pytest.mark.parametrize("with_negatives", [False, True])
def test_vse_hinges_match_reference(hardest, with_negatives):
    fn = L.max_hinge_loss if hardest else L.sum_hinge_loss
    neg = NEG[:2] if with_negatives else None
    got = fn(t(Q), t(P), None if neg is None else t(neg), margin=0.3, reduction="none")
    np.testing.assert_allclose(val(got), ref_vse(Q, P, neg, 0.3, hardest), rtol=RTOL)


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_triplet_matches_reference(distance):
    if distance == "euclidean":
        d = lambda a, b: np.linalg.norm(a - b, axis=1)  # noqa: E731
    else:
        d = lambda a, b: 1 - (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)  # noqa: E731
    expected = np.maximum(0, d(Q, P) - d(Q, NEG) + 0.8)
    got = L.triplet_loss(t(Q), t(P), t(NEG), margin=0.8, distance=distance, reduction="none")
    np.testing.assert_allclose(val(got), expected, rtol=RTOL)
    assert (expected > 0).any() and (expected == 0).any() or distance == "cosine"


@pytest.mark.parametrize("symmetric", [False, True])
def test_infonce_matches_reference(symmetric):
    S = np_cos_matrix(Q, np.concatenate([P, NEG[:2]])) / 0.1
    forward = -np.diag(np_log_softmax(S))
    if symmetric:
        forward = 0.5 * (forward - np.diag(np_log_softmax(S[:, :4].T)))
    got = L.infonce_loss(t(Q), t(P), t(NEG[:2]), temperature=0.1, symmetric=symmetric, reduction="none")
    np.testing.assert_allclose(val(got), forward, rtol=RTOL)
    dot = L.infonce_loss(t(Q), t(P), temperature=1.0, normalize=False, reduction="none")
    np.testing.assert_allclose(val(dot), -np.diag(np_log_softmax(Q @ P.T)), rtol=RTOL)


EMB_CASES = [
    ("sum_hinge", L.sum_hinge_loss, {}),
    ("max_hinge", L.max_hinge_loss, {}),
    ("triplet", L.triplet_loss, {"distance": "euclidean"}),
    ("triplet_cos", L.triplet_loss, {"distance": "cosine", "margin": 0.5}),
    ("infonce", L.infonce_loss, {"symmetric": True}),
]


@pytest.mark.parametrize("name,fn,kw", EMB_CASES, ids=[c[0] for c in EMB_CASES])
def test_embedding_reductions_gradients_extremes_empty(name, fn, kw):
    n = t(NEG)
    none = val(fn(t(Q), t(P), n, reduction="none", **kw))
    assert none.shape == (4,)
    np.testing.assert_allclose(float(fn(t(Q), t(P), n, reduction="sum", **kw)), none.sum(), rtol=1e-10)
    np.testing.assert_allclose(float(fn(t(Q), t(P), n, **kw)), none.mean(), rtol=1e-10)
    with pytest.raises(ValueError, match="reduction"):
        fn(t(Q), t(P), n, reduction="avg", **kw)
    check_grad(lambda q: fn(q, t(P), n, **kw), Q.copy())
    assert_finite_with_grad(lambda q, p, ng: fn(q, p, ng, **kw), Q * 1e4, P * 1e4, NEG * 1e4)
    zeros = np.zeros((0, 3))
    assert_finite_with_grad(lambda q, p, ng: fn(q, p, ng, **kw), zeros, zeros, zeros, expect_zero=True)
    if not name.startswith("triplet"):  # one query, no other rows: no negatives at all
        assert_finite_with_grad(lambda q, p: fn(q, p, **kw), Q[:1], P[:1], expect_zero=True)


# ------------------------------------------------------------------ scored losses (cosent)
COS = np.array([0.9, 0.2, -0.4, 0.5, 0.1])      # the cosine of each labelled pair
COS_Y = np.array([1, 0, 0, 1, 0])                # binary labels
COS_GRADED = np.array([4.5, 1.0, 0.0, 3.2, 1.0])  # STS-like scores, one tie


def ref_cosent(s, y, lam):
    """Su 2022: log(1 + sum over (i, j) with y_i > y_j of exp(lam * (s_j - s_i))), by direct loops."""
    total = 0.0
    for i in range(len(s)):
        for j in range(len(s)):
            if y[i] > y[j]:
                total += np.exp(lam * (s[j] - s[i]))
    return np.log1p(total)


@pytest.mark.parametrize("labels", [COS_Y, COS_GRADED], ids=["binary", "graded"])
def test_cosent_matches_reference_gradient_and_layer(labels):
    for lam in (1.0, 20.0):
        got = L.cosent_loss(t(COS), ti(labels) if labels is COS_Y else t(labels), scale=lam)
        assert got.shape == []  # one loss for the batch: there is no reduction to choose
        np.testing.assert_allclose(float(got), ref_cosent(COS, labels, lam), rtol=RTOL)
    check_grad(lambda s: L.cosent_loss(s, t(labels), scale=5.0), COS.copy())
    layer = L.build_loss({"name": "cosent"}, family="scored")
    assert layer.scale == 20.0
    np.testing.assert_allclose(float(layer(t(COS), t(labels))), ref_cosent(COS, labels, 20.0), rtol=RTOL)


def test_cosent_extremes_and_nothing_to_order():
    assert_finite_with_grad(lambda s: L.cosent_loss(s, t(COS_Y)), COS * 1e4)
    assert_finite_with_grad(lambda s: L.cosent_loss(s, t(COS_Y)), -COS * 1e4)
    big = L.cosent_loss(t(-COS * 1e4), t(COS_Y))  # exp would overflow; logsumexp does not
    np.testing.assert_allclose(float(big), 20.0 * 1e4 * (0.9 - -0.4), rtol=1e-6)  # the worst ordered pair
    for labels in ([1, 1, 1, 1, 1], [0, 0, 0, 0, 0]):  # one label: no ordered pair
        assert_finite_with_grad(lambda s: L.cosent_loss(s, t(labels)), COS, expect_zero=True)
    assert_finite_with_grad(lambda s: L.cosent_loss(s, t([1])), COS[:1], expect_zero=True)
    assert_finite_with_grad(lambda s: L.cosent_loss(s, t(np.zeros(0))), np.zeros(0), expect_zero=True)
    with pytest.raises(ValueError, match="scale must be > 0, got 0"):
        L.cosent_loss(t(COS), t(COS_Y), scale=0)
    with pytest.raises(ValueError, match=r"scores \[N\] and labels \[N\]"):
        L.cosent_loss(t(COS), t(COS_Y[:3]))


# ------------------------------------------------------------------ layers and metadata
def test_every_registered_loss_has_family_target_and_a_layer_that_matches_its_function():
    for name in L.LOSSES.names():
        cls = L.LOSSES.get(name, "loss")
        assert cls.FAMILY in L.FAMILIES, name
        if cls.FAMILY == "classification":
            assert cls.TARGET in ("index", "multi_hot", "both"), name
        assert "See " in cls.__doc__, name
    assert L.losses_for("pair") == ["circle", "nce", "pairwise_hinge"]
    assert L.losses_for("scored") == ["cosent"]
    layer = L.build_loss({"name": "focal", "gamma": 1.0, "alpha": [1, 2, 3, 4]})
    np.testing.assert_allclose(float(layer(t(X), ti(Y))),
                               float(L.focal_loss(t(X), ti(Y), gamma=1.0, alpha=[1, 2, 3, 4])), rtol=1e-12)
    layer = L.build_loss({"name": "circle", "scale": 4.0})
    np.testing.assert_allclose(float(layer(t(SP), t(SN))), ref_circle(SP, SN, 0.25, 4.0).mean(), rtol=RTOL)
