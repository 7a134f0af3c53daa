"""Losses on (positive, negative) score pairs: hinge and NCE."""

import paddle
import paddle.nn.functional as F

from appzoo.params.keys import check_args
from appzoo.losses.base import (
    Margin, PairLoss, Reduction, check_range, check_reduction, pair_inputs, reduce_loss, zero_loss,
)
from appzoo.registry import LOSSES


def _empty(pos, neg):
    return pos.shape[0] == 0 or pos.shape[1] == 0 or neg.shape[1] == 0


def pairwise_hinge_loss(pos_scores, neg_scores, *, margin=1.0, reduction="mean"):
    """Pairwise hinge (margin ranking) loss: ``max(0, margin - s_pos + s_neg)``.

    Each row's P positives are compared with its K negatives; a row's loss is
    the mean over its ``P * K`` pairs. Shapes ``[N]`` or ``[N, P]`` and ``[N]``
    or ``[N, K]``. ``margin`` >= 0 (default 1). ``reduction``: ``"mean"`` over
    rows, ``"sum"``, ``"none"`` (``[N]``). No pairs gives 0.
    """
    check_range("margin", margin, 0.0)
    check_reduction(reduction)
    pos, neg = pair_inputs(pos_scores, neg_scores)
    if _empty(pos, neg):
        return reduce_loss(paddle.zeros([pos.shape[0]], pos.dtype) + zero_loss(pos, neg), reduction)
    loss = F.relu(margin - pos.unsqueeze(-1) + neg.unsqueeze(-2)).mean(axis=[-2, -1])
    return reduce_loss(loss, reduction)


@LOSSES.register("pairwise_hinge")
class PairwiseHingeLoss(PairLoss):
    """See pairwise_hinge_loss."""

    @check_args()
    def __init__(self, margin: Margin = 1.0, reduction: Reduction = "mean"):
        super().__init__()
        self.margin, self.reduction = margin, reduction

    def forward(self, pos_scores, neg_scores):
        return pairwise_hinge_loss(pos_scores, neg_scores, margin=self.margin, reduction=self.reduction)


def nce_loss(pos_scores, neg_scores, *, reduction="mean"):
    """Binary logistic (negative-sampling) loss, Mikolov et al. 2013,
    "Distributed Representations of Words and Phrases" (the NCE simplification).

    Per row: ``sum_i -log sigmoid(s_pos_i) + sum_k -log sigmoid(-s_neg_k)``,
    computed as softplus. Shapes ``[N]`` or ``[N, P]`` and ``[N]`` or
    ``[N, K]``. ``reduction``: ``"mean"`` over rows, ``"sum"``, ``"none"`` (``[N]``).
    """
    check_reduction(reduction)
    pos, neg = pair_inputs(pos_scores, neg_scores)
    if pos.shape[0] == 0:
        return reduce_loss(paddle.zeros([0], pos.dtype) + zero_loss(pos, neg), reduction)
    loss = F.softplus(-pos).sum(axis=-1) + F.softplus(neg).sum(axis=-1)
    return reduce_loss(loss, reduction)


@LOSSES.register("nce")
class NCELoss(PairLoss):
    """See nce_loss."""

    @check_args()
    def __init__(self, reduction: Reduction = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, pos_scores, neg_scores):
        return nce_loss(pos_scores, neg_scores, reduction=self.reduction)
