"""Logit-adjusted softmax cross-entropy (``logit_adjusted_ce``, Menon et al.
2021) and its tau = 1 case, balanced softmax (``balanced_softmax``, Ren et al. 2020)."""
import math
from typing import Annotated, Optional, Sequence

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import (
    ClassificationLoss, IgnoreIndex, LossParamError, Reduction, as_class_tensor, check_range, check_reduction,
    reduce_loss,
)
from appzoo.losses.cross_entropy import _ce_elementwise
from appzoo.registry import LOSSES


def log_prior(class_counts, param, who=""):
    """``log(n_c / sum(n))`` per class from the training label counts; ``who``
    starts the messages (``param`` is the key they are raised under)."""
    if class_counts is None:
        raise LossParamError(param, f"{who}needs the training label counts (class_counts), but none were given")
    counts = [int(c) for c in class_counts]
    empty = [i for i, c in enumerate(counts) if c <= 0]
    if not counts or empty:
        raise LossParamError(param, f"{who}needs every class in the training labels (log of its share); "
                             f"class(es) {empty} have none (class_counts={counts})")
    total = sum(counts)
    return [math.log(c / total) for c in counts]


def _adjusted(logits, prior, tau):
    return logits if tau == 0 else logits + tau * as_class_tensor(prior, logits, "class_counts")


def logit_adjusted_ce_loss(logits, labels, *, class_counts, tau=1.0, ignore_index=-100, reduction="mean"):
    """Logit-adjusted softmax cross-entropy, Menon et al. 2021, "Long-tail
    learning via logit adjustment" (the loss form, eq. 10).

    ``loss = -log softmax(logits + tau * log pi)_y`` with the class prior
    ``pi_c = n_c / sum(n)`` from the training label counts. Rare classes get
    their logit lowered during training, so the model must score them higher
    to be right: a larger margin for the tail. Predict with the plain
    ``argmax(logits)``; the adjustment is part of the loss only.
    ``tau = 1`` is balanced softmax (Ren et al. 2020); ``tau = 0`` is ce.

    Args:
        logits: ``[..., C]`` scores.
        labels: int ``[...]`` class indices, or float ``[..., C]`` target
            distributions (a row holding ``ignore_index`` is ignored).
        class_counts: ``C`` training label counts, each > 0 (unless tau = 0).
        tau: >= 0, default 1.
        ignore_index: label value of positions to leave out (default -100).
        reduction: ``"mean"`` over valid positions, ``"sum"`` or ``"none"``.
    """
    check_range("tau", tau, 0.0)
    check_reduction(reduction)
    prior = None if tau == 0 else log_prior(class_counts, "tau")
    loss, valid = _ce_elementwise(_adjusted(logits, prior, tau), labels, None, 0.0, ignore_index, True)
    return reduce_loss(loss, reduction, valid)


class _PriorAdjustedCE(ClassificationLoss):
    """What the two registered losses share: ce on ``logits + tau * log prior``."""

    TARGET = "both"
    ACTIVATION = "softmax"
    NEEDS_COUNTS = True

    def __init__(self, tau, prior, ignore_index, reduction):
        super().__init__()
        self.tau, self.prior, self.ignore_index, self.reduction = tau, prior, ignore_index, reduction

    def elementwise(self, logits, labels):
        return _ce_elementwise(_adjusted(logits, self.prior, self.tau), labels, None, 0.0, self.ignore_index, True)


@LOSSES.register("logit_adjusted_ce")
class LogitAdjustedCELoss(_PriorAdjustedCE):
    """See logit_adjusted_ce_loss; the prior comes from ``class_counts``."""

    @check_args()
    def __init__(self, tau: Annotated[float, Key(
                     "add tau * log(class share in the training labels) to the logits in the loss (1: balanced "
                     "softmax; 0: ce)", ge=0)] = 1.0,
                 ignore_index: IgnoreIndex = -100, reduction: Reduction = "mean",
                 class_counts: Optional[Sequence[int]] = None):
        super().__init__(tau, None if tau == 0 else log_prior(class_counts, "tau"), ignore_index, reduction)


@LOSSES.register("balanced_softmax")
class BalancedSoftmaxLoss(_PriorAdjustedCE):
    """Balanced softmax, Ren et al. 2020, "Balanced Meta-Softmax for
    Long-Tailed Visual Recognition": ``-log softmax(logits + log n)_y``.
    See logit_adjusted_ce_loss: this is its tau = 1 (no tau key)."""

    @check_args()
    def __init__(self, ignore_index: IgnoreIndex = -100, reduction: Reduction = "mean",
                 class_counts: Optional[Sequence[int]] = None):
        super().__init__(1.0, log_prior(class_counts, "name", "'balanced_softmax' "), ignore_index, reduction)
