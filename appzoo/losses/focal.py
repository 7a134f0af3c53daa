"""Focal loss (Lin et al. 2017), softmax and sigmoid forms."""
from typing import Annotated, List, Literal, Optional, Sequence, Union

import paddle
import paddle.nn.functional as F

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import (
    ClassificationLoss, IgnoreIndex, LossParamError, Mode, Reduction, as_class_tensor, check_choice, check_range,
    check_reduction, classification_targets, from_training_labels, gold_log_prob, per_class_weights, reduce_loss,
    safe_pow,
)
from appzoo.losses.cross_entropy import bce_elementwise, bce_targets
from appzoo.registry import LOSSES

SIGMOID_DEFAULT_ALPHA = 0.25  # torchvision / RetinaNet


def _check_focal(gamma, mode, normalizer, reduction):
    check_range("gamma", gamma, 0.0)
    check_choice("mode", mode, ("softmax", "sigmoid"))
    check_choice("normalizer", normalizer, ("mean", "sum", "num_positive"))
    check_reduction(reduction)
    _check_normalizer(mode, normalizer, reduction)


def _check_normalizer(mode, normalizer, reduction):
    """What the annotations of the keys cannot say: normalizer with mode and reduction."""
    if normalizer != "mean" and reduction != "mean":
        raise LossParamError("normalizer", f"only applies with reduction 'mean', got {normalizer!r} "
                             f"with reduction {reduction!r}")
    if normalizer != "mean" and mode != "sigmoid":
        raise LossParamError("normalizer", f"only applies in mode 'sigmoid', got {normalizer!r}")


def _focal_elementwise(logits, labels, gamma, alpha, mode, ignore_index):
    """``(loss, valid, positive)`` before reduction; ``positive`` marks y == 1 (sigmoid)."""
    if mode == "sigmoid":
        targets, valid = bce_targets(logits, labels, ignore_index)
        ce = bce_elementwise(logits, targets)
        # 1 - p_t = y (1 - p) + (1 - y) p, each factor from a sigmoid, so no cancellation.
        one_minus_pt = targets * F.sigmoid(-logits) + (1.0 - targets) * F.sigmoid(logits)
        loss = ce * safe_pow(one_minus_pt, gamma)
        a = SIGMOID_DEFAULT_ALPHA if alpha is None else alpha
        if isinstance(a, (list, tuple)):
            a = as_class_tensor(a, logits, "alpha")
        elif isinstance(a, paddle.Tensor):
            a = a.astype(logits.dtype)
        if not isinstance(a, (int, float)) or a >= 0:
            loss = (a * targets + (1.0 - a) * (1.0 - targets)) * loss
        return loss, valid, targets > 0.5
    kind, targets, valid = classification_targets(logits, labels, ignore_index)
    w = None
    if alpha is not None:
        w = alpha if isinstance(alpha, (int, float)) else as_class_tensor(alpha, logits, "alpha")
    if kind == "index":
        logp_gold = gold_log_prob(logits, targets)
        # 1 - p = -expm1(log p): accurate when p is close to 1.
        loss = -safe_pow(-paddle.expm1(logp_gold), gamma) * logp_gold
        if w is not None:
            loss = loss * (w if isinstance(w, (int, float)) else
                           paddle.gather(w, targets.flatten()).reshape(targets.shape))
        return loss, valid, None
    logp = F.log_softmax(logits, axis=-1)
    per_class = -safe_pow(-paddle.expm1(logp), gamma) * logp * targets
    if w is not None:
        per_class = per_class * w
    return per_class.sum(axis=-1), valid.all(axis=-1), None


def _focal_reduce(loss, valid, positive, normalizer, reduction):
    if normalizer == "mean":
        return reduce_loss(loss, reduction, valid)
    total = reduce_loss(loss, "sum", valid)
    if normalizer == "sum":
        return total
    num_pos = paddle.logical_and(positive, paddle.broadcast_to(valid, positive.shape))
    return total / paddle.clip(num_pos.astype(loss.dtype).sum(), min=1.0)


def focal_loss(logits, labels, *, gamma=2.0, alpha=None, mode="softmax", normalizer="mean",
               ignore_index=-100, reduction="mean"):
    """Focal loss, Lin et al. 2017, "Focal Loss for Dense Object Detection".

    ``mode="softmax"`` (default): ``loss = -alpha_c (1 - p_c)^gamma log p_c``
    for the gold class c, ``p = softmax(logits)``; with float ``[..., C]``
    targets, ``-sum_c y_c alpha_c (1 - p_c)^gamma log p_c``. ``alpha`` is a
    number, a ``[C]`` list, or None (no weighting).

    ``mode="sigmoid"``: torchvision's ``sigmoid_focal_loss``, element-wise over
    ``[..., C]``: ``loss = alpha_t (1 - p_t)^gamma BCE(x, y)`` with
    ``p_t = p y + (1 - p)(1 - y)``, ``alpha_t = alpha y + (1 - alpha)(1 - y)``;
    ``alpha`` defaults to 0.25 and a negative ``alpha`` disables it. Labels as
    for ``bce`` (int indices are one-hot encoded).

    ``gamma`` >= 0 (default 2); ``gamma = 0`` is (alpha-weighted) CE / BCE.
    ``normalizer`` (sigmoid mode, reduction ``"mean"``): ``"mean"`` over valid
    elements, ``"sum"``, or ``"num_positive"``: the sum divided by the number of
    positive targets (at least 1), as RetinaNet does.
    ``reduction``: ``"mean"`` (over valid elements), ``"sum"``, ``"none"``.
    """
    _check_focal(gamma, mode, normalizer, reduction)
    loss, valid, positive = _focal_elementwise(logits, labels, gamma, alpha, mode, ignore_index)
    return _focal_reduce(loss, valid, positive, normalizer, reduction)


@LOSSES.register("focal")
class FocalLoss(ClassificationLoss):
    """See focal_loss. ``alpha="balanced"`` or ``{"effective_number": beta}``
    (softmax mode) uses ``class_counts``."""

    TARGET = "both"
    ACTIVATION = ("softmax", "sigmoid")  # chosen by ``mode``

    @check_args()
    def __init__(self, gamma: Annotated[float, Key("focusing exponent of (1 - p_t) (0: weighted CE / BCE)",
                                                   ge=0)] = 2.0,
                 alpha: Annotated[Union[float, List[float], Literal["balanced"], dict, None], Key(
                     "softmax: class weight, a number, one per class (>= 0), 'balanced' or "
                     "{\"effective_number\": beta} (as ce's class_weights); sigmoid: weight of the positives, "
                     "<= 1 (< 0 disables; null: 0.25)")] = None,
                 mode: Mode = "softmax",
                 normalizer: Annotated[Literal["mean", "sum", "num_positive"], Key(
                     "sigmoid mode with reduction mean: divide the sum by the valid elements, by 1, or by "
                     "the positive targets (RetinaNet)")] = "mean",
                 ignore_index: IgnoreIndex = -100, reduction: Reduction = "mean",
                 class_counts: Optional[Sequence[int]] = None):
        super().__init__()
        _check_normalizer(mode, normalizer, reduction)
        if mode == "sigmoid":
            if from_training_labels(alpha):
                raise LossParamError("alpha", f"{alpha!r} only applies with mode 'softmax'; in mode "
                                     "'sigmoid' alpha is the positive-class weight in [0, 1] (or < 0 to disable)")
            if isinstance(alpha, (list, tuple)):
                alpha = per_class_weights("alpha", alpha, class_counts, 0.0, 1.0)
            elif alpha is not None:
                check_range("alpha", alpha, high=1.0)
        else:
            alpha = per_class_weights("alpha", alpha, class_counts)
        self.gamma, self.alpha, self.mode = gamma, alpha, mode
        self.ACTIVATION = mode
        self.normalizer, self.ignore_index, self.reduction = normalizer, ignore_index, reduction

    def elementwise(self, logits, labels):
        loss, valid, _ = _focal_elementwise(logits, labels, self.gamma, self.alpha, self.mode,
                                            self.ignore_index)
        return loss, valid

    def forward(self, logits, labels):
        loss, valid, positive = _focal_elementwise(logits, labels, self.gamma, self.alpha, self.mode,
                                                   self.ignore_index)
        return _focal_reduce(loss, valid, positive, self.normalizer, self.reduction)
