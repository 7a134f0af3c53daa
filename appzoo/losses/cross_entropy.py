"""Softmax cross-entropy (``ce``) and sigmoid binary cross-entropy (``bce``)."""
from typing import Annotated, List, Literal, Optional, Sequence, Union

import paddle
import paddle.nn.functional as F

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import (
    ClassificationLoss, IgnoreIndex, Reduction, Weight, as_class_tensor, check_range, check_reduction,
    classification_targets, gather_last, gold_log_prob, log_probs, per_class_weights, reduce_loss,
)
from appzoo.registry import LOSSES


def _ce_elementwise(logits, labels, class_weights, label_smoothing, ignore_index, from_logits):
    kind, targets, valid = classification_targets(logits, labels, ignore_index)
    w = None if class_weights is None else as_class_tensor(class_weights, logits, "class_weights")
    if kind == "index" and from_logits and label_smoothing == 0:
        nll = -gold_log_prob(logits, targets)
        if w is not None:
            nll = nll * paddle.gather(w, targets.flatten()).reshape(targets.shape)
        return nll, valid
    logp = log_probs(logits, from_logits)
    if kind == "index":
        # -sum_c w_c y'_c log p_c with y' = (1 - eps) one_hot + eps / C, without building y'.
        nll = -gather_last(logp, targets)
        if w is not None:
            nll = nll * paddle.gather(w, targets.flatten()).reshape(targets.shape)
        if label_smoothing > 0:
            smooth = -(logp if w is None else logp * w).mean(axis=-1)
            nll = (1.0 - label_smoothing) * nll + label_smoothing * smooth
        return nll, valid
    if label_smoothing > 0:
        targets = (1.0 - label_smoothing) * targets + label_smoothing / logits.shape[-1]
    weighted = targets if w is None else targets * w
    row_valid = valid.all(axis=-1)
    return -(weighted * logp).sum(axis=-1), row_valid


def cross_entropy_loss(logits, labels, *, class_weights=None, label_smoothing=0.0,
                       ignore_index=-100, from_logits=True, reduction="mean"):
    """Softmax cross-entropy with class weights and label smoothing.

    ``loss_i = -sum_c w_c y'_c log p_c``, ``p = softmax(logits)``,
    ``y' = (1 - eps) y + eps / C`` (Szegedy et al. 2016, label smoothing).

    Args:
        logits: ``[..., C]`` scores, or probabilities when ``from_logits=False``
            (their log is clamped at -100, as torch's BCELoss does).
        labels: int ``[...]`` class indices, or float ``[..., C]`` target
            distributions (a row holding ``ignore_index`` is ignored).
        class_weights: ``[C]`` weights ``w_c`` (default: all 1).
        label_smoothing: ``eps`` in [0, 1), default 0.
        ignore_index: label value of positions to leave out (default -100).
        reduction: ``"mean"`` over valid positions (an unweighted mean of the
            weighted losses, unlike torch's weighted mean), ``"sum"`` or ``"none"``.
    """
    check_range("label_smoothing", label_smoothing, 0.0, 1.0, high_open=True)
    check_reduction(reduction)
    loss, valid = _ce_elementwise(logits, labels, class_weights, label_smoothing, ignore_index, from_logits)
    return reduce_loss(loss, reduction, valid)


@LOSSES.register("ce")
class CrossEntropyLoss(ClassificationLoss):
    """See cross_entropy_loss. ``class_weights="balanced"`` or
    ``{"effective_number": beta}`` uses ``class_counts``."""

    TARGET = "both"
    ACTIVATION = "softmax"

    @check_args()
    def __init__(self, class_weights: Annotated[Union[List[Weight], Literal["balanced"], dict, None], Key(
                     "per-class weights: a list (one per class), 'balanced' (n / (classes * count) from the "
                     "training labels) or {\"effective_number\": beta} (beta in [0, 1): (1 - beta) / "
                     "(1 - beta ** count), summing to the number of classes); null: all 1")] = None,
                 label_smoothing: Annotated[float, Key("mix this much of the uniform distribution into the "
                                                       "target", ge=0, lt=1)] = 0.0,
                 ignore_index: IgnoreIndex = -100,
                 from_logits: Annotated[bool, Key("the inputs are logits (true) or probabilities")] = True,
                 reduction: Reduction = "mean",
                 class_counts: Optional[Sequence[int]] = None):
        super().__init__()
        self.reduction = reduction
        weights = per_class_weights("class_weights", class_weights, class_counts)
        if isinstance(weights, float):
            weights = None if weights == 1.0 else weights
        self.class_weights = weights
        self.label_smoothing = label_smoothing
        self.ignore_index = ignore_index
        self.from_logits = from_logits

    def elementwise(self, logits, labels):
        return _ce_elementwise(logits, labels, self.class_weights, self.label_smoothing,
                               self.ignore_index, self.from_logits)


def bce_targets(logits, labels, ignore_index):
    """Per-element float targets and validity for the sigmoid losses.

    Accepts float targets shaped like the logits, int labels with one logit per
    example (``[..., 1]`` logits, 0/1 labels ``[...]``), and int class indices
    with C > 1 logits (one-hot, so a sigmoid loss fits a multi-class model).
    """
    if not isinstance(labels, paddle.Tensor):
        labels = paddle.to_tensor(labels)
    if labels.shape == logits.shape:
        if labels.dtype in (paddle.int64, paddle.int32):
            valid = labels != ignore_index
            return paddle.where(valid, labels, paddle.zeros_like(labels)).astype(logits.dtype), valid
        targets = labels.astype(logits.dtype)
        return targets, targets != ignore_index
    if logits.shape[-1] == 1 and labels.shape == logits.shape[:-1]:
        labels = labels.unsqueeze(-1)
        valid = labels != ignore_index
        return paddle.where(valid, labels, paddle.zeros_like(labels)).astype(logits.dtype), valid
    kind, targets, valid = classification_targets(logits, labels, ignore_index)
    if kind == "index":
        return F.one_hot(targets, logits.shape[-1]).astype(logits.dtype), valid.unsqueeze(-1)
    return targets, valid


def bce_elementwise(logits, targets, pos_weight=None):
    """Per-element sigmoid cross-entropy of ``logits`` against float
    ``targets`` of the same shape (from :func:`bce_targets`); ``pos_weight``
    weighs the positive term (a number or a ``[C]`` tensor)."""
    # -[pw y log sigmoid(x) + (1 - y) log sigmoid(-x)] rewritten with one softplus
    # (-log sigmoid(x) = softplus(-x) = softplus(x) - x), as torch does; ~2x fewer passes.
    if pos_weight is None:
        return F.softplus(logits) - targets * logits
    return (1.0 - targets) * logits + (1.0 + (pos_weight - 1.0) * targets) * F.softplus(-logits)


def binary_cross_entropy_loss(logits, labels, *, pos_weight=None, ignore_index=-100, reduction="mean"):
    """Sigmoid binary / multi-label cross-entropy, element-wise over ``[..., C]``.

    ``loss = -[pw_c y log sigmoid(x) + (1 - y) log sigmoid(-x)]``.

    Args:
        logits: ``[..., C]`` scores (C = 1 for a binary model).
        labels: float ``[..., C]`` (multi-)hot or soft targets; int 0/1
            ``[...]`` with C = 1; or int class indices ``[...]`` with C > 1,
            which are one-hot encoded. Entries equal to ``ignore_index`` (or
            rows whose class index is ``ignore_index``) are left out.
        pos_weight: weight ``pw`` of the positive term, a number or ``[C]``
            (default 1); > 1 raises recall.
        reduction: ``"mean"`` over valid elements, ``"sum"`` or ``"none"``.
    """
    check_reduction(reduction)
    targets, valid = bce_targets(logits, labels, ignore_index)
    pw = pos_weight
    if isinstance(pw, (list, tuple)):
        pw = as_class_tensor(pw, logits, "pos_weight")
    return reduce_loss(bce_elementwise(logits, targets, pw), reduction, valid)


@LOSSES.register("bce")
class BinaryCrossEntropyLoss(ClassificationLoss):
    """See binary_cross_entropy_loss."""

    TARGET = "both"
    ACTIVATION = "sigmoid"

    @check_args()
    def __init__(self, pos_weight: Annotated[Union[Weight, List[Weight], None], Key(
                     "weight of the positive targets: one number, or one per class (null: 1)")] = None,
                 ignore_index: IgnoreIndex = -100, reduction: Reduction = "mean"):
        super().__init__()
        self.pos_weight = per_class_weights("pos_weight", pos_weight, None)
        self.ignore_index = ignore_index
        self.reduction = reduction

    def elementwise(self, logits, labels):
        targets, valid = bce_targets(logits, labels, self.ignore_index)
        pw = self.pos_weight
        if isinstance(pw, list):
            pw = as_class_tensor(pw, logits, "pos_weight")
        return bce_elementwise(logits, targets, pw), valid
