"""KL divergence to soft targets (distillation, label distributions)."""
from typing import Literal

import paddle

from appzoo.losses.base import (
    ClassificationLoss, check_range, check_reduction, classification_targets, log_probs, reduce_loss,
)
from appzoo.registry import LOSSES


def _kl_elementwise(logits, targets, from_logits, temperature, ignore_index):
    kind, q, valid = classification_targets(logits, targets, ignore_index)
    if kind != "multi_hot":
        raise ValueError(f"kl takes float target distributions shaped like the logits {logits.shape}, "
                         f"got {targets.shape} {targets.dtype}")
    row_valid = valid.all(axis=-1)
    q = paddle.where(paddle.broadcast_to(row_valid.unsqueeze(-1), q.shape), q, paddle.zeros_like(q))
    scaled = logits / temperature if from_logits and temperature != 1.0 else logits
    logp = log_probs(scaled, from_logits)
    positive = q > 0
    # q log q with 0 log 0 = 0; log of 1 where q == 0 keeps the gradient finite.
    logq = paddle.log(paddle.where(positive, q, paddle.ones_like(q)))
    return (q * (logq - logp)).sum(axis=-1) * (temperature ** 2), row_valid


def kl_div_loss(logits, targets, *, from_logits=True, temperature=1.0, ignore_index=-100, reduction="mean"):
    """KL divergence ``KL(q || p) = sum_c q_c (log q_c - log p_c)`` per row.

    Args:
        logits: ``[..., C]`` scores (``p = softmax(logits / T)``), or
            probabilities when ``from_logits=False``.
        targets: float ``[..., C]`` distributions ``q`` (rows summing to 1);
            a row holding ``ignore_index`` is left out.
        temperature: ``T`` > 0 (default 1), applied to the logits; the loss is
            multiplied by ``T^2`` to keep gradient scale (Hinton et al. 2015,
            "Distilling the Knowledge in a Neural Network").
        reduction: ``"mean"`` over valid rows (torch's ``batchmean``),
            ``"sum"`` or ``"none"`` (``[...]``).
    """
    check_range("temperature", temperature, 0.0, low_open=True)
    check_reduction(reduction)
    loss, valid = _kl_elementwise(logits, targets, from_logits, temperature, ignore_index)
    return reduce_loss(loss, reduction, valid)


@LOSSES.register("kl")
class KLDivLoss(ClassificationLoss):
    """See kl_div_loss."""

    TARGET = "multi_hot"

    def __init__(self, from_logits: bool = True, temperature: float = 1.0, ignore_index: int = -100,
                 reduction: Literal["mean", "sum", "none"] = "mean"):
        super().__init__()
        check_range("temperature", temperature, 0.0, low_open=True)
        self.from_logits, self.temperature = from_logits, temperature
        self.ignore_index, self.reduction = ignore_index, check_reduction(reduction)

    def elementwise(self, logits, targets):
        return _kl_elementwise(logits, targets, self.from_logits, self.temperature, self.ignore_index)
