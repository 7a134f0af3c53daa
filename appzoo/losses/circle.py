"""Circle loss, pair form (Sun et al. 2020)."""
from typing import Annotated

import paddle
import paddle.nn.functional as F

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import (
    PairLoss, Reduction, check_range, check_reduction, pair_inputs, reduce_loss, zero_loss,
)
from appzoo.registry import LOSSES


def circle_loss(pos_scores, neg_scores, *, margin=0.25, scale=64.0, reduction="mean"):
    """Circle loss, Sun et al. 2020, "Circle Loss: A Unified Perspective of
    Pair Similarity Optimization", eq. 4 (pair-wise form).

    Per row, with similarities ``s_p`` (positives) and ``s_n`` (negatives):
    ``alpha_p = [1 + m - s_p]_+``, ``alpha_n = [s_n + m]_+`` (not
    differentiated), ``Delta_p = 1 - m``, ``Delta_n = m``;
    ``loss = softplus(logsumexp_j(g alpha_n (s_n - Delta_n))
    + logsumexp_i(-g alpha_p (s_p - Delta_p)))``, i.e.
    ``log(1 + sum exp(neg terms) * sum exp(pos terms))`` without overflow.

    Args:
        pos_scores: ``[N]`` or ``[N, P]`` similarities, meant to be cosines in [-1, 1].
        neg_scores: ``[N]`` or ``[N, K]``.
        margin: ``m`` (default 0.25, the paper's choice for classification-level
            and re-id tasks), >= 0.
        scale: ``g`` (default 64, the paper's re-id setting; it is the inverse
            temperature of cosine scores), > 0.
        reduction: ``"mean"`` over rows, ``"sum"``, ``"none"`` (``[N]``).
    A batch with no positives or no negatives gives 0.
    """
    check_range("margin", margin, 0.0)
    check_range("scale", scale, 0.0, low_open=True)
    check_reduction(reduction)
    pos, neg = pair_inputs(pos_scores, neg_scores)
    if pos.shape[0] == 0 or pos.shape[1] == 0 or neg.shape[1] == 0:
        zero = zero_loss(pos, neg)
        return reduce_loss(paddle.zeros([pos.shape[0]], pos.dtype) + zero, reduction)
    alpha_p = F.relu(1.0 + margin - pos.detach())
    alpha_n = F.relu(neg.detach() + margin)
    logit_p = -scale * alpha_p * (pos - (1.0 - margin))
    logit_n = scale * alpha_n * (neg - margin)
    loss = F.softplus(paddle.logsumexp(logit_n, axis=-1) + paddle.logsumexp(logit_p, axis=-1))
    return reduce_loss(loss, reduction)


@LOSSES.register("circle")
class CircleLoss(PairLoss):
    """See circle_loss."""

    @check_args()
    def __init__(self, margin: Annotated[float, Key("relaxation m: positives are pushed above 1 - m, "
                                                    "negatives below m", ge=0)] = 0.25,
                 scale: Annotated[float, Key("scale gamma of the scores", gt=0)] = 64.0,
                 reduction: Reduction = "mean"):
        super().__init__()
        self.margin, self.scale, self.reduction = margin, scale, reduction

    def forward(self, pos_scores, neg_scores):
        return circle_loss(pos_scores, neg_scores, margin=self.margin, scale=self.scale,
                           reduction=self.reduction)
