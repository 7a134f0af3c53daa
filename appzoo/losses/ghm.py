"""GHM-C, the gradient harmonizing classification loss (Li et al. 2019)."""
from typing import Annotated, Literal

import paddle
import paddle.nn.functional as F

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import (
    ClassificationLoss, IgnoreIndex, LossParamError, Reduction, check_choice, check_range, check_reduction, classification_targets,
    gold_log_prob, reduce_loss,
)
from appzoo.losses.cross_entropy import bce_elementwise, bce_targets
from appzoo.registry import LOSSES


def _check_ghm(bins, momentum, mode, reduction):
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise LossParamError("bins", f"must be an integer >= 1, got {bins!r}")
    check_range("momentum", momentum, 0.0, 1.0, high_open=True)
    check_choice("mode", mode, ("sigmoid", "softmax"))
    check_reduction(reduction)


def _ghm_base(logits, labels, mode, ignore_index):
    """``(base loss, gradient norm g = |p - y|, valid)`` per element."""
    if mode == "sigmoid":
        targets, valid = bce_targets(logits, labels, ignore_index)
        loss = bce_elementwise(logits, targets)
        g = paddle.abs(F.sigmoid(logits.detach()) - targets)
        return loss, g, valid
    kind, targets, valid = classification_targets(logits, labels, ignore_index)
    if kind != "index":
        raise ValueError("ghm in mode 'softmax' takes class-index labels")
    logp_gold = gold_log_prob(logits, targets)
    g = -paddle.expm1(logp_gold.detach())  # 1 - p_gold
    return -logp_gold, g, valid


def ghm_weights(g, valid, bins, acc_counts=None, momentum=0.0):
    """GHM-C weights ``tot / (count_b * n)`` for each element's bin, all on device.

    ``count_b`` is the number of valid elements whose ``g`` falls in bin b (or
    its exponential moving average ``acc_counts`` when ``momentum > 0``; that
    tensor is updated in place), ``n`` the number of non-empty bins and ``tot``
    the number of valid elements. Returns ``(weights, new acc_counts)``.
    """
    valid = paddle.broadcast_to(valid, g.shape)
    index = paddle.clip(paddle.floor(g * bins), 0, bins - 1).astype("int64")
    valid_f = valid.astype(g.dtype)
    counts = paddle.bincount(index.flatten(), weights=valid_f.flatten(), minlength=bins).astype(g.dtype)
    nonempty = counts > 0
    if momentum > 0 and acc_counts is not None:
        acc = acc_counts.astype(g.dtype)
        acc = paddle.where(nonempty, momentum * acc + (1.0 - momentum) * counts, acc)
        acc_counts = acc.astype(acc_counts.dtype)
        counts = acc
    tot = paddle.clip(valid_f.sum(), min=1.0)
    n = paddle.clip(nonempty.astype(g.dtype).sum(), min=1.0)
    per_bin = paddle.where(nonempty, tot / (paddle.where(nonempty, counts, paddle.ones_like(counts)) * n),
                           paddle.zeros_like(counts))
    return paddle.gather(per_bin, index.flatten()).reshape(g.shape), acc_counts


def ghm_loss(logits, labels, *, bins=10, mode="sigmoid", ignore_index=-100, reduction="mean"):
    """GHM-C loss, Li et al. 2019, "Gradient Harmonized Single-stage Detector".

    ``loss = sum_i w_i BCE_i / tot``: each element's loss is weighted by
    ``w_i = tot / (count_b(i) * n)``, where ``g = |p - y|`` (the gradient norm of
    BCE w.r.t. the logit) is binned into ``bins`` equal bins on [0, 1],
    ``count_b`` counts the valid elements in bin b, ``n`` is the number of
    non-empty bins and ``tot`` the number of valid elements. Frequent
    (easy, or outlier) gradient norms are down-weighted. With ``bins=1`` the
    weights are all 1 and the loss is BCE.

    ``mode="sigmoid"`` (default, the paper's form): element-wise over
    ``[..., C]``, labels as for ``bce``. ``mode="softmax"``: softmax CE on the
    gold class with ``g = 1 - p_gold``; int labels ``[...]``.
    This function is stateless; :class:`GHMLoss` keeps the moving-average bin
    counts (``momentum``) across steps. Weights are not differentiated.
    ``reduction``: ``"mean"`` (= the formula above), ``"sum"`` or ``"none"``.
    """
    _check_ghm(bins, 0.0, mode, reduction)
    loss, g, valid = _ghm_base(logits, labels, mode, ignore_index)
    w, _ = ghm_weights(g, valid, bins)
    return reduce_loss(w * loss, reduction, valid)


@LOSSES.register("ghm")
class GHMLoss(ClassificationLoss):
    """See ghm_loss. ``momentum`` in [0, 1) keeps an EMA of the bin counts in the
    ``acc_counts`` buffer (saved with the model's state dict; updated only in
    training mode), as the paper's implementation does."""

    TARGET = "both"
    ACTIVATION = ("softmax", "sigmoid")  # chosen by ``mode``

    @check_args()
    def __init__(self, bins: Annotated[int, Key("gradient-norm bins of the density estimate", ge=1)] = 10,
                 momentum: Annotated[float, Key("EMA of the bin counts across batches (0: this batch "
                                                "only)", ge=0, lt=1)] = 0.75,
                 mode: Annotated[Literal["sigmoid", "softmax"], Key(
                     "sigmoid per class (GHM-C as published) or softmax over the classes")] = "sigmoid",
                 ignore_index: IgnoreIndex = -100, reduction: Reduction = "mean"):
        super().__init__()
        self.bins, self.momentum, self.mode = bins, momentum, mode
        self.ACTIVATION = mode
        self.ignore_index, self.reduction = ignore_index, reduction
        self.register_buffer("acc_counts", paddle.zeros([bins], dtype="float32"), persistable=True)

    def elementwise(self, logits, labels):
        loss, g, valid = _ghm_base(logits, labels, self.mode, self.ignore_index)
        with paddle.no_grad():
            w, acc = ghm_weights(g, valid, self.bins, self.acc_counts if self.momentum > 0 else None,
                                 self.momentum)
            if self.training and self.momentum > 0:
                paddle.assign(acc, self.acc_counts)
        return w * loss, valid
