"""VSE++ hinge losses over the in-batch similarity matrix (Faghri et al. 2018)."""

import paddle
import paddle.nn.functional as F

from appzoo.params.keys import check_args
from appzoo.losses.base import (
    EmbeddingLoss, Margin, Normalize, Reduction, check_range, check_reduction, embedding_inputs, max_last, reduce_loss, similarity, zero_loss,
)
from appzoo.losses.grad_cache import CacheMiniBatchSize, check_cache
from appzoo.registry import LOSSES


def _vse_masked(query, positive, negative, normalize):
    """``(S with its diagonal S_ii set to -inf, diag [N, 1])``, ``S = sim(query, [positive; negative])``.

    A hinge ``[m + S_ij - S_ii]_+`` of a masked entry is ``relu(-inf) = 0`` with
    zero gradient, so no second mask is needed on the costs.
    """
    embedding_inputs(query, positive, negative)
    candidates = positive if negative is None else paddle.concat([positive, negative], axis=0)
    sim = similarity(query, candidates, normalize)  # [N, N + M]
    n = query.shape[0]
    diag = paddle.diagonal(sim[:, :n]).unsqueeze(-1)  # s(i, i)
    off = paddle.eye(n, sim.shape[1], dtype="int32") == 0
    return paddle.where(off, sim, paddle.full_like(sim, float("-inf"))), diag


def _vse_loss(costs, query, positive, negative, margin, normalize, reduction):
    """The part both VSE losses share: the checks, the empty batch (0), the masked scores; ``costs(masked,
    diag, n, margin)`` gives each query's cost."""
    check_range("margin", margin, 0.0)
    check_reduction(reduction)
    if query.shape[0] == 0:
        return reduce_loss(paddle.zeros([0], query.dtype) + zero_loss(query, positive, negative), reduction)
    masked, diag = _vse_masked(query, positive, negative, normalize)
    return reduce_loss(costs(masked, diag, query.shape[0], margin), reduction)


def sum_hinge_loss(query, positive, negative=None, *, margin=0.2, normalize=True, reduction="mean"):
    """VSE0 sum-of-hinges loss, Faghri et al. 2018, "VSE++: Improving
    Visual-Semantic Embeddings with Hard Negatives", eq. 1.

    With ``S = sim(query, [positive; negative])``, per query i:
    ``sum_{j != i} [m + S_ij - S_ii]_+ + sum_{j != i} [m + S_ji - S_ii]_+``
    (the second sum is over queries, for positive i; hard negatives add
    columns to the first sum only).

    Args: ``query``, ``positive`` ``[N, D]``, ``negative`` ``[M, D]`` or None;
    ``margin`` >= 0 (default 0.2, the paper's); ``normalize``: cosine
    similarity (default True) or raw dot product; ``reduction``: ``"mean"``
    over queries, ``"sum"``, ``"none"`` (``[N]``). A batch of fewer than 2
    with no hard negatives has no pairs and gives 0.
    """
    return _vse_loss(_sum_of_hinges, query, positive, negative, margin, normalize, reduction)


def _sum_of_hinges(masked, diag, n, margin):
    cost_query = F.relu(margin + masked - diag)
    cost_positive = F.relu(margin + masked[:, :n] - diag.transpose([1, 0]))  # column i: positive i vs wrong queries
    return cost_query.sum(axis=1) + cost_positive.sum(axis=0)


def max_hinge_loss(query, positive, negative=None, *, margin=0.2, normalize=True, reduction="mean"):
    """VSE++ max-of-hinges loss, Faghri et al. 2018, eq. 2: as
    :func:`sum_hinge_loss` but each sum is replaced by its largest term (the
    hardest negative per query and per positive). Same arguments."""
    return _vse_loss(_max_of_hinges, query, positive, negative, margin, normalize, reduction)


def _max_of_hinges(masked, diag, n, margin):
    # the hinge is monotone in S_ij: take the hardest negative's score, then one hinge per row / column
    cost_query = F.relu(margin + max_last(masked, 1) - diag.squeeze(-1))
    cost_positive = F.relu(margin + max_last(masked[:, :n], 0) - diag.squeeze(-1))
    return cost_query + cost_positive


class _VSELoss(EmbeddingLoss):
    _fn = None

    @check_args()
    def __init__(self, margin: Margin = 0.2, normalize: Normalize = True, reduction: Reduction = "mean",
                 cache_mini_batch_size: CacheMiniBatchSize = None):
        super().__init__()
        self.margin = margin
        self.normalize = normalize
        self.reduction = reduction
        self.cache_mini_batch_size = check_cache(cache_mini_batch_size, reduction)  # read by the model

    def forward(self, query, positive, negative=None):
        return type(self)._fn(query, positive, negative, margin=self.margin, normalize=self.normalize,
                              reduction=self.reduction)


@LOSSES.register("sum_hinge")
class SumHingeLoss(_VSELoss):
    """See sum_hinge_loss."""

    _fn = staticmethod(sum_hinge_loss)


@LOSSES.register("max_hinge")
class MaxHingeLoss(_VSELoss):
    """See max_hinge_loss."""

    _fn = staticmethod(max_hinge_loss)
