"""Multi-label softmax cross-entropy (Su Jianlin 2020)."""

import paddle

from appzoo.params.keys import check_args
from appzoo.losses.base import (
    ClassificationLoss, IgnoreIndex, Reduction, check_reduction, classification_targets, reduce_loss,
)
from appzoo.losses.cross_entropy import bce_targets
from appzoo.registry import LOSSES


def _logsumexp_with_zero(scores, keep):
    """``log(1 + sum_{keep} exp(scores))`` along the last axis; ``keep`` may be all False
    (None: keep every score, masked ones already ``-inf``)."""
    # logsumexp over [scores, 0] by hand: shift by m = max(max kept score, 0), which is
    # finite even when nothing is kept; masked scores are -inf before exp, so their
    # gradient is 0 (no large constants). ~1.7x faster than concat + paddle.logsumexp.
    masked = scores if keep is None else paddle.where(keep, scores, paddle.full_like(scores, float("-inf")))
    shift = paddle.clip(masked.max(axis=-1, keepdim=True), min=0.0).detach()
    total = paddle.exp(-shift) + paddle.exp(masked - shift).sum(axis=-1, keepdim=True)
    return (shift + paddle.log(total)).squeeze(-1)


def _mlce_index(logits, index):
    """The loss for one positive (``index``) per row, without a one-hot target.

    The negatives are every class but the gold one: its score is replaced by
    ``-inf`` with put_along_axis (no gradient, as the mask's ``where`` gives,
    at a third of the cost on CPU); the positive term has one score per row.
    """
    index = index.unsqueeze(-1)
    negatives = paddle.put_along_axis(logits, index, paddle.full(index.shape, float("-inf"), logits.dtype), axis=-1)
    gold = paddle.take_along_axis(logits, index, axis=-1)
    return _logsumexp_with_zero(negatives, None) + _logsumexp_with_zero(-gold, None)


def _mlce_elementwise(logits, labels, ignore_index):
    kind = None
    if isinstance(labels, paddle.Tensor) and labels.shape == logits.shape[:-1] and logits.shape[-1] > 1:
        kind, index, valid = classification_targets(logits, labels, ignore_index)
    if kind == "index":
        # ignored rows computed as class 0 (finite), then dropped by the reduction
        return _mlce_index(logits, index), valid
    targets, valid = bce_targets(logits, labels, ignore_index)
    positive = paddle.logical_and(valid, targets > 0.5)
    negative = paddle.logical_and(valid, targets <= 0.5)
    loss = _logsumexp_with_zero(logits, negative) + _logsumexp_with_zero(-logits, positive)
    return loss, valid.any(axis=-1)


def multilabel_ce_loss(logits, labels, *, ignore_index=-100, reduction="mean"):
    """Multi-label softmax cross-entropy, Su Jianlin 2020
    ("将'softmax+交叉熵'推广到多标签分类问题", https://kexue.fm/archives/7359).

    Per row: ``log(1 + sum_{j in neg} e^{s_j}) + log(1 + sum_{i in pos} e^{-s_i})``,
    each term a ``logsumexp`` with a 0 appended (masked classes are ``-inf``,
    no large constants). It pushes positive scores above 0 and negative scores
    below 0, so predict label j where ``s_j > 0``; unlike BCE its scale does not
    grow with the number of classes.

    Args: ``logits [..., C]``; labels float multi-hot ``[..., C]`` (entries
    equal to ``ignore_index`` count as neither positive nor negative) or int
    class indices ``[...]`` (one positive per row). ``reduction``:
    ``"mean"`` over rows with a valid entry, ``"sum"``, ``"none"`` (``[...]``).
    """
    check_reduction(reduction)
    loss, valid = _mlce_elementwise(logits, labels, ignore_index)
    return reduce_loss(loss, reduction, valid)


@LOSSES.register("multilabel_ce")
class MultiLabelCELoss(ClassificationLoss):
    """See multilabel_ce_loss."""

    TARGET = "both"
    ACTIVATION = "sigmoid"  # each class's logit against 0, i.e. sigmoid against 0.5

    @check_args()
    def __init__(self, ignore_index: IgnoreIndex = -100, reduction: Reduction = "mean"):
        super().__init__()
        self.ignore_index, self.reduction = ignore_index, reduction

    def elementwise(self, logits, labels):
        return _mlce_elementwise(logits, labels, self.ignore_index)
