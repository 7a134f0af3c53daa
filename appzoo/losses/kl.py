"""KL divergence to soft targets (distillation, label distributions), and the soft loss of a distilled run."""
from typing import Annotated

import paddle.nn.functional as F

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import (
    ClassificationLoss, IgnoreIndex, Reduction, check_range, check_reduction, classification_targets, log_probs, reduce_loss,
)
from appzoo.registry import LOSSES


def _kl_elementwise(logits, targets, from_logits, temperature, ignore_index):
    kind, q, valid = classification_targets(logits, targets, ignore_index)
    if kind != "multi_hot":
        raise ValueError(f"kl takes float target distributions shaped like the logits {logits.shape}, "
                         f"got {targets.shape} {targets.dtype}")
    row_valid = valid.all(axis=-1)
    scaled = logits / temperature if from_logits and temperature != 1.0 else logits
    logp = log_probs(scaled, from_logits)
    # Paddle's fused kernel: q (log q - log p) where q > 0, else 0 (0 log 0 = 0, and
    # ignored rows, whose ignore_index entries are < 0, give 0 before the reduction
    # drops them), gradient -q; one pass instead of six over [..., C].
    loss = F.kl_div(logp, q, reduction="none").sum(axis=-1)
    return (loss if temperature == 1.0 else loss * (temperature ** 2)), row_valid


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


def distillation_loss(logits, teacher_logits, *, temperature=2.0, mask=None):
    """The soft loss of knowledge distillation (Hinton et al. 2015, "Distilling the Knowledge in a
    Neural Network"): ``T^2 KL(softmax(t / T) || softmax(s / T))`` per row, averaged over the rows that count.

    Args:
        logits: the student's ``[..., C]`` logits ``s``.
        teacher_logits: the teacher's ``[..., C]`` logits ``t``, a constant (no gradient flows to them).
        temperature: ``T`` > 0 (default 2); ``T^2`` keeps the gradients' scale as ``T`` changes.
        mask: ``[...]`` bool, the rows that count (a tagger's words, not its padding); None: every row.
            No row counting gives 0, never NaN.
    """
    check_range("temperature", temperature, 0.0, low_open=True)
    targets = F.softmax(teacher_logits.astype("float32").detach() / temperature, axis=-1)
    logp = F.log_softmax(logits.astype("float32") / temperature, axis=-1)
    loss = F.kl_div(logp, targets, reduction="none").sum(axis=-1) * (temperature ** 2)
    return reduce_loss(loss, "mean", mask)


@LOSSES.register("kl")
class KLDivLoss(ClassificationLoss):
    """See kl_div_loss."""

    TARGET = "multi_hot"
    ACTIVATION = "softmax"  # a target distribution over the classes

    @check_args()
    def __init__(self, from_logits: Annotated[bool, Key("the inputs are logits (true) or probabilities")] = True,
                 temperature: Annotated[float, Key("divides the logits (distillation temperature)", gt=0)] = 1.0,
                 ignore_index: IgnoreIndex = -100, reduction: Reduction = "mean"):
        super().__init__()
        self.from_logits, self.temperature = from_logits, temperature
        self.ignore_index, self.reduction = ignore_index, reduction

    def elementwise(self, logits, targets):
        return _kl_elementwise(logits, targets, self.from_logits, self.temperature, self.ignore_index)
