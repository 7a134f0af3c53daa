"""Asymmetric loss (``asl``, Ridnik et al. 2021) for multi-label heads."""
from typing import Annotated

import paddle
import paddle.nn.functional as F

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import (
    ClassificationLoss, IgnoreIndex, Reduction, check_range, check_reduction, reduce_loss, safe_pow,
)
from appzoo.losses.cross_entropy import bce_targets
from appzoo.registry import LOSSES


def _asl_elementwise(logits, labels, gamma_pos, gamma_neg, clip, ignore_index):
    targets, valid = bce_targets(logits, labels, ignore_index)
    # positives: (1 - p)^g+ log p, with 1 - p = sigmoid(-x) and log p = -softplus(-x)
    positive = safe_pow(F.sigmoid(-logits), gamma_pos) * -F.softplus(-logits)
    # negatives: p_m^g- log(1 - p_m), p_m = max(p - m, 0); 1 - p_m = min(sigmoid(-x) + m, 1) >= m
    if clip > 0:
        p_m = F.relu(F.sigmoid(logits) - clip)
        log_not_p_m = paddle.log(paddle.clip(F.sigmoid(-logits) + clip, max=1.0))
    else:
        p_m, log_not_p_m = F.sigmoid(logits), -F.softplus(logits)
    negative = safe_pow(p_m, gamma_neg) * log_not_p_m
    return -(targets * positive + (1.0 - targets) * negative), valid


def asl_loss(logits, labels, *, gamma_pos=0.0, gamma_neg=4.0, clip=0.05, ignore_index=-100, reduction="mean"):
    """Asymmetric loss, Ridnik et al. 2021, "Asymmetric Loss For Multi-Label
    Classification", element-wise over ``[..., C]``:

    ``loss = -[y (1-p)^g+ log p + (1-y) p_m^g- log(1 - p_m)]``,
    ``p = sigmoid(x)``, ``p_m = max(p - m, 0)``.

    A focal loss with separate exponents for positives and negatives (g- > g+
    turns down the many easy negatives of a multi-label task more than the
    few positives) plus a probability margin m that drops negatives with
    ``p <= m`` altogether (and with them, the paper argues, some mislabeled
    negatives). As in the authors' code (Alibaba-MIIL/ASL, ``AsymmetricLoss``)
    the focusing weights are differentiated, not detached. Unlike that code,
    which clamps probabilities at 1e-8 before the log, the log terms are
    computed from the logits (softplus), so a confidently wrong positive
    costs its full log-loss; and ``"mean"`` averages over the valid elements
    (the authors sum).

    Args:
        logits: ``[..., C]`` scores.
        labels: as for ``bce``: float multi-hot ``[..., C]`` (entries equal to
            ``ignore_index`` are left out), 0/1 int labels with C = 1, or int
            class indices (one-hot). Soft targets mix the two terms linearly.
        gamma_pos: g+ >= 0, default 0. gamma_neg: g- >= 0, default 4.
        clip: m in [0, 1), default 0.05; 0 disables the margin.
        reduction: ``"mean"`` over valid elements, ``"sum"`` or ``"none"``.
    """
    _check_asl(gamma_pos, gamma_neg, clip)
    check_reduction(reduction)
    loss, valid = _asl_elementwise(logits, labels, gamma_pos, gamma_neg, clip, ignore_index)
    return reduce_loss(loss, reduction, valid)


def _check_asl(gamma_pos, gamma_neg, clip):
    check_range("gamma_pos", gamma_pos, 0.0)
    check_range("gamma_neg", gamma_neg, 0.0)
    check_range("clip", clip, 0.0, 1.0, high_open=True)


@LOSSES.register("asl")
class AsymmetricLoss(ClassificationLoss):
    """See asl_loss."""

    TARGET = "both"
    ACTIVATION = "sigmoid"

    @check_args()
    def __init__(self, gamma_pos: Annotated[float, Key("focusing exponent of (1 - p) on the positives", ge=0)] = 0.0,
                 gamma_neg: Annotated[float, Key("focusing exponent of p_m on the negatives", ge=0)] = 4.0,
                 clip: Annotated[float, Key("probability margin m: a negative's p is shifted to max(p - m, 0), "
                                            "so negatives with p <= m cost nothing (0: no margin)",
                                            ge=0, lt=1)] = 0.05,
                 ignore_index: IgnoreIndex = -100, reduction: Reduction = "mean"):
        super().__init__()
        _check_asl(gamma_pos, gamma_neg, clip)
        self.gamma_pos, self.gamma_neg, self.clip = gamma_pos, gamma_neg, clip
        self.ignore_index, self.reduction = ignore_index, reduction

    def elementwise(self, logits, labels):
        return _asl_elementwise(logits, labels, self.gamma_pos, self.gamma_neg, self.clip, self.ignore_index)
