"""Online hard example mining over any element-wise classification loss."""
import math
from typing import Annotated, Optional, Sequence

import paddle

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import ClassificationLoss, LossParamError, Reduction, check_range, reduce_loss
from appzoo.registry import LOSSES


def ohem_select(loss, valid, ratio, min_kept=0):
    """Mask of the hardest ``max(ceil(ratio * n_valid), min_kept)`` valid elements.

    Reads the k-th largest valid loss as a threshold (``kthvalue``, 5x faster
    than a full sort on CPU) and keeps everything at or above it (ties at the
    threshold are all kept). ``k`` is computed on the host: one sync, as the
    label check of the classification losses already makes.
    """
    valid = paddle.broadcast_to(valid, loss.shape)
    detached = loss.detach()
    flat = paddle.where(valid, detached, paddle.full_like(detached, float("-inf"))).flatten()
    if flat.shape[0] == 0:
        return valid
    n_valid = int(valid.astype("int64").sum())
    k = max(min(max(math.ceil(n_valid * ratio), min_kept), n_valid), 1)
    threshold = -paddle.kthvalue(-flat, k)[0]
    return paddle.logical_and(valid, detached >= threshold)


def ohem_loss(loss, valid, *, ratio=0.25, min_kept=0, reduction="mean"):
    """OHEM, Shrivastava et al. 2016, "Training Region-based Object Detectors
    with Online Hard Example Mining".

    Takes element-wise losses (``reduction="none"`` of any classification
    loss) and their validity mask, keeps the hardest
    ``max(ceil(ratio * n_valid), min_kept)`` valid elements (capped at
    ``n_valid``) and reduces over those: ``"mean"`` over kept elements.
    ``ratio`` in (0, 1] (default 0.25), ``min_kept`` >= 0 (default 0).
    """
    check_range("ratio", ratio, 0.0, 1.0, low_open=True)
    check_range("min_kept", min_kept, 0)
    return reduce_loss(loss, reduction, ohem_select(loss, valid, ratio, min_kept))


@LOSSES.register("ohem")
class OHEMLoss(ClassificationLoss):
    """See ohem_loss. ``base`` is the config of the loss to mine, e.g.
    ``{"name": "ce", "label_smoothing": 0.1}``; it is built with
    :func:`build_loss` under ``<key path>.base`` and must not set ``reduction``."""

    TARGET = "both"
    ACTIVATION = ("softmax", "sigmoid")  # its base's

    @check_args()
    def __init__(self, base: Annotated[dict, Key("the classification loss to mine, e.g. {\"name\": \"ce\"} "
                                                 "(without reduction)")],
                 ratio: Annotated[float, Key("share of the valid elements kept, the hardest", gt=0, le=1)] = 0.25,
                 min_kept: Annotated[int, Key("keep at least this many elements", ge=0)] = 0,
                 reduction: Reduction = "mean",
                 class_counts: Optional[Sequence[int]] = None, train_size: Optional[int] = None,
                 key_path: str = "loss"):
        super().__init__()
        from appzoo.losses.build import build_loss  # build imports this module

        if isinstance(base, dict) and "reduction" in base:
            raise LossParamError("base.reduction", f"must not be set (got {base['reduction']!r}): ohem "
                                 "reduces the kept elements itself; set reduction on the ohem loss")
        if isinstance(base, dict) and base.get("name") == "ohem":
            raise LossParamError("base.name", "must not be 'ohem' (nested ohem)")
        self.base = build_loss(base, f"{key_path}.base", class_counts=class_counts, family="classification",
                               train_size=train_size)
        self.TARGET = self.base.TARGET
        self.ACTIVATION = self.base.ACTIVATION
        self.ratio, self.min_kept, self.reduction = ratio, min_kept, reduction

    def elementwise(self, logits, labels):
        loss, valid = self.base.elementwise(logits, labels)
        return loss, ohem_select(loss, valid, self.ratio, self.min_kept)
