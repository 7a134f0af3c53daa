"""InfoNCE / in-batch softmax contrastive loss (van den Oord et al. 2018)."""
from typing import Annotated

import paddle

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import (
    EmbeddingLoss, Normalize, Reduction, check_range, check_reduction, embedding_inputs, gold_log_prob, reduce_loss,
    similarity, zero_loss,
)
from appzoo.losses.grad_cache import CacheMiniBatchSize, check_cache
from appzoo.registry import LOSSES


def infonce_loss(query, positive, negative=None, *, temperature=0.05, normalize=True, symmetric=False,
                 reduction="mean"):
    """InfoNCE with in-batch negatives: van den Oord et al. 2018 ("CPC"), as
    used by SimCSE (Gao et al. 2021) and DPR (Karpukhin et al. 2020).

    ``S = sim(query, [positive; negative]) / T``; per query i:
    ``loss_i = -log softmax(S_i)_i`` (every other positive and every hard
    negative is a negative). ``symmetric``: average with the positive-to-query
    direction ``-log softmax(S[:, :N]^T_i)_i`` (CLIP).

    Args: ``query``, ``positive`` ``[N, D]``; ``negative`` ``[M, D]`` or None;
    ``temperature`` ``T`` > 0 (default 0.05, SimCSE's); ``normalize``: cosine
    (default True) or dot product; ``reduction``: ``"mean"`` over queries,
    ``"sum"``, ``"none"`` (``[N]``).
    """
    check_range("temperature", temperature, 0.0, low_open=True)
    check_reduction(reduction)
    embedding_inputs(query, positive, negative)
    n = query.shape[0]
    if n == 0:
        return reduce_loss(paddle.zeros([0], query.dtype) + zero_loss(query, positive, negative), reduction)
    candidates = positive if negative is None else paddle.concat([positive, negative], axis=0)
    logits = similarity(query, candidates, normalize) / temperature
    target = paddle.arange(n, dtype="int64")
    loss = -gold_log_prob(logits, target)
    if symmetric:
        back = logits[:, :n].transpose([1, 0])
        loss = 0.5 * (loss - gold_log_prob(back, target))
    return reduce_loss(loss, reduction)


@LOSSES.register("infonce")
class InfoNCELoss(EmbeddingLoss):
    """See infonce_loss."""

    @check_args()
    def __init__(self, temperature: Annotated[float, Key("divides the similarities", gt=0)] = 0.05,
                 normalize: Normalize = True,
                 symmetric: Annotated[bool, Key("also the loss from the positives to the queries")] = False,
                 reduction: Reduction = "mean", cache_mini_batch_size: CacheMiniBatchSize = None):
        super().__init__()
        self.temperature, self.normalize, self.symmetric = temperature, normalize, symmetric
        self.reduction = reduction
        self.cache_mini_batch_size = check_cache(cache_mini_batch_size, reduction)  # read by the model

    def forward(self, query, positive, negative=None):
        return infonce_loss(query, positive, negative, temperature=self.temperature, normalize=self.normalize,
                            symmetric=self.symmetric, reduction=self.reduction)
