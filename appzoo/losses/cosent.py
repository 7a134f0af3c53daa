"""CoSENT: a ranking loss on the cosines of labelled pairs (Su 2022)."""
from typing import Annotated

import paddle

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import ScoredLoss, check_range, scored_inputs, zero_loss
from appzoo.registry import LOSSES


def cosent_loss(scores, labels, *, scale=20.0):
    """CoSENT, Su Jianlin 2022, "CoSENT: a more efficient sentence vector
    scheme than Sentence-BERT" (kexue.fm/archives/8847; bojone/CoSENT).

    Over the N labelled pairs of a batch, with ``s_i`` the cosine of pair i
    and ``y_i`` its label (a larger label is a closer pair):
    ``loss = log(1 + sum_{(i, j): y_i > y_j} exp(scale * (s_j - s_i)))``,
    computed as ``logsumexp([0] + [scale * (s_j - s_i) for every such (i, j)])``:
    every pair ranked below a pair with a smaller label costs, and the loss
    only asks for an order, so binary labels and graded ones (STS scores) both fit.

    Args:
        scores: ``[N]`` cosines of the pairs, in [-1, 1].
        labels: ``[N]`` numbers (class indices or scores); only their order counts.
        scale: ``lambda`` (default 20, the paper's), > 0.
    Returns one scalar for the batch: the loss is one sum over its pairs of
    pairs, so there is no per-element loss to reduce. A batch with no two
    labels that differ (one pair, all one label, empty) gives 0.
    """
    check_range("scale", scale, 0.0, low_open=True)
    scores, labels = scored_inputs(scores, labels)
    if scores.shape[0] == 0:
        return zero_loss(scores)
    # diff[i, j] = scale * (s_j - s_i), counted where y_i > y_j; the rest is -inf, i.e. exp() = 0
    diff = scale * (scores.unsqueeze(0) - scores.unsqueeze(1))
    ordered = labels.unsqueeze(1) > labels.unsqueeze(0)
    terms = paddle.where(ordered, diff, paddle.full_like(diff, float("-inf"))).flatten()
    return paddle.logsumexp(paddle.concat([paddle.zeros([1], diff.dtype), terms]), axis=0)


@LOSSES.register("cosent")
class CoSENTLoss(ScoredLoss):
    """See cosent_loss."""

    @check_args()
    def __init__(self, scale: Annotated[float, Key("lambda: multiplies the differences of the cosines", gt=0)] = 20.0):
        super().__init__()
        self.scale = scale

    def forward(self, scores, labels):
        return cosent_loss(scores, labels, scale=self.scale)
