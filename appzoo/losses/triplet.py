"""Triplet margin loss (Schroff et al. 2015)."""
from typing import Annotated, Literal

import paddle
import paddle.nn.functional as F

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import (
    EmbeddingLoss, Margin, Reduction, check_choice, check_range, check_reduction, embedding_inputs, l2_normalize, reduce_loss, zero_loss,
)
from appzoo.registry import LOSSES


def _distance(a, b, distance):
    if distance == "cosine":
        return 1.0 - (l2_normalize(a) * l2_normalize(b)).sum(axis=-1)
    squared = paddle.square(a - b).sum(axis=-1)  # not ** 2: Paddle's CPU pow kernel is ~10x slower
    # sqrt has no finite gradient at 0; below 1e-12 the distance is treated as a constant 1e-6.
    return paddle.sqrt(paddle.clip(squared, min=1e-12))


def triplet_loss(query, positive, negative, *, margin=1.0, distance="euclidean", reduction="mean"):
    """Triplet margin loss, Schroff et al. 2015, "FaceNet":
    ``max(0, d(a, p) - d(a, n) + margin)`` per row.

    Args: ``query`` (anchors), ``positive``, ``negative``: ``[N, D]`` each,
    row-aligned (``negative`` is required). ``distance``: ``"euclidean"``
    (default, L2) or ``"cosine"`` (``1 - cos``). ``margin`` >= 0 (default 1.0,
    as torch's TripletMarginLoss; about 0.2 suits cosine). ``reduction``:
    ``"mean"`` over rows, ``"sum"``, ``"none"`` (``[N]``).
    """
    check_range("margin", margin, 0.0)
    check_choice("distance", distance, ("euclidean", "cosine"))
    check_reduction(reduction)
    if negative is None:
        raise ValueError("triplet loss needs negative embeddings [N, D], one per anchor")
    embedding_inputs(query, positive, negative)
    if negative.shape[0] != query.shape[0]:
        raise ValueError(f"triplet loss needs one negative per anchor: query {query.shape}, negative {negative.shape}")
    if query.shape[0] == 0:
        return reduce_loss(paddle.zeros([0], query.dtype) + zero_loss(query, positive, negative), reduction)
    loss = F.relu(_distance(query, positive, distance) - _distance(query, negative, distance) + margin)
    return reduce_loss(loss, reduction)


@LOSSES.register("triplet")
class TripletLoss(EmbeddingLoss):
    """See triplet_loss."""

    @check_args()
    def __init__(self, margin: Margin = 1.0,
                 distance: Annotated[Literal["euclidean", "cosine"], Key(
                     "distance between embeddings: euclidean, or 1 - cosine")] = "euclidean",
                 reduction: Reduction = "mean"):
        super().__init__()
        self.margin, self.distance, self.reduction = margin, distance, reduction

    def forward(self, query, positive, negative=None):
        return triplet_loss(query, positive, negative, margin=self.margin, distance=self.distance,
                            reduction=self.reduction)
