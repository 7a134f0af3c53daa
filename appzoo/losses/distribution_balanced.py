"""Distribution-balanced loss (``distribution_balanced``, Wu et al. 2020;
its NLP setting, Huang et al. 2021) for multi-label heads."""
import math
from typing import Annotated, Optional, Sequence

import paddle
import paddle.nn.functional as F

from appzoo.params.keys import Key, check_args
from appzoo.losses.base import (
    ClassificationLoss, IgnoreIndex, LossParamError, Reduction, as_class_tensor, check_range, check_reduction,
    reduce_loss, safe_pow,
)
from appzoo.losses.cross_entropy import bce_elementwise, bce_targets
from appzoo.registry import LOSSES

WHO = "'distribution_balanced' "


def class_statistics(class_counts, train_size, init_bias):
    """``(1 / n_i, bias_i)`` per class from the training label counts ``n``
    and the number of training examples ``N``: ``bias_i = -init_bias *
    log(N / n_i - 1)``, the logit of the class's prior, scaled."""
    if class_counts is None:
        raise LossParamError("name", f"{WHO}needs the training label counts (class_counts), but none were given")
    if train_size is None:
        raise LossParamError("name", f"{WHO}needs the number of training examples (train_size), but none was "
                             "given: this model's reader does not supply it, or the model was saved before "
                             "train_size was recorded")
    counts = [int(c) for c in class_counts]
    empty = [i for i, c in enumerate(counts) if c <= 0]
    if not counts or empty:
        raise LossParamError("name", f"{WHO}needs every class in the training labels (it weighs by 1 / count); "
                             f"class(es) {empty} have none (class_counts={counts})")
    over = [i for i, c in enumerate(counts) if c > train_size]
    if over:
        raise LossParamError("name", f"{WHO}got class(es) {over} counted more often than there are training "
                             f"examples (train_size={train_size}, class_counts={counts})")
    everywhere = [i for i, c in enumerate(counts) if c == train_size]
    if init_bias > 0 and everywhere:
        raise LossParamError("init_bias", f"needs every class absent from some training example (log(N / n - 1)); "
                             f"class(es) {everywhere} are in all {train_size} (set init_bias to 0)")
    bias = [0.0 if init_bias == 0 else -init_bias * math.log(train_size / c - 1.0) for c in counts]
    return [1.0 / c for c in counts], bias


def _db_elementwise(logits, labels, freq_inv, bias, alpha, gamma, neg_scale, map_alpha, map_beta, map_gamma,
                    ignore_index):
    targets, valid = bce_targets(logits, labels, ignore_index)
    y = paddle.where(valid, targets, paddle.zeros_like(targets))
    freq_inv = as_class_tensor(freq_inv, logits, "class_counts")
    # re-balanced weight: r_ki = (1 / n_i) / sum_j y_kj / n_j, mapped to sigmoid(beta (r - mu)) + alpha;
    # a row with no positive has r = inf, whose limit is 1 + alpha
    repeat_rate = (y * freq_inv).sum(axis=-1, keepdim=True)
    has_positive = repeat_rate > 0
    r = freq_inv / paddle.where(has_positive, repeat_rate, paddle.ones_like(repeat_rate))
    weight = paddle.where(has_positive, F.sigmoid(map_beta * (r - map_gamma)) + map_alpha,
                          paddle.full_like(r, 1.0 + map_alpha))
    # negative-tolerant regularisation: prior bias, negatives' logits scaled by lambda and their weight by 1 / lambda
    z = (logits + as_class_tensor(bias, logits, "class_counts")) * (y + neg_scale * (1.0 - y))
    weight = weight * (y + (1.0 - y) / neg_scale)
    ce = bce_elementwise(z, y)
    one_minus_pt = -paddle.expm1(-ce)  # 1 - exp(-BCE), accurate when the BCE is small
    alpha_t = alpha * y + (1.0 - alpha) * (1.0 - y)
    return alpha_t * safe_pow(one_minus_pt, gamma) * weight * ce, valid


def distribution_balanced_loss(logits, labels, *, class_counts, train_size, alpha=0.5, gamma=2.0, init_bias=0.05,
                               neg_scale=2.0, map_alpha=0.1, map_beta=10.0, map_gamma=0.9, ignore_index=-100,
                               reduction="mean"):
    """Distribution-balanced loss, Wu et al. 2020, "Distribution-Balanced Loss
    for Multi-Label Classification in Long-Tailed Datasets", as Huang et al.
    2021 ("Balancing Methods for Multi-label Text Classification with
    Long-Tailed Class Distribution") run it for text (Roche/BalancedLossNLP,
    ``ResampleLoss`` with ``DBloss``'s settings, the defaults here).

    With ``n_i`` the training examples labelled i and ``N`` all of them:

    * re-balanced weight ``w_ki = sigmoid(map_beta (r_ki - map_gamma)) + map_alpha``,
      ``r_ki = (1 / n_i) / sum_j (y_kj / n_j)`` (how much more often example k
      is drawn for class i under class-balanced sampling than at random; an
      example with no positive gets ``1 + map_alpha``, the limit);
    * negative-tolerant regularisation: ``z = x - init_bias log(N / n_i - 1)``;
      a negative's logit is multiplied by ``neg_scale`` (lambda) and its
      weight divided by it;
    * focal: ``loss = alpha_t (1 - p_t)^gamma w BCE(z, y)``, ``p_t = exp(-BCE(z, y))``,
      ``alpha_t = alpha`` for positives and ``1 - alpha`` for negatives
      (the focal term is differentiated, as in the reference code).

    Args:
        logits: ``[..., C]`` scores.
        labels: as for ``bce`` (float multi-hot ``[..., C]`` with ``ignore_index``
            entries left out; int class indices are one-hot). Ignored entries
            count as non-positive in ``r``.
        class_counts: ``n_i``, each in [1, N]. train_size: ``N``.
        alpha: in [0, 1], default 0.5. gamma: >= 0, default 2.
        init_bias: >= 0, default 0.05 (needs every ``n_i < N``). neg_scale: > 0, default 2.
        map_alpha: >= 0, default 0.1. map_beta: >= 0, default 10. map_gamma: default 0.9.
        reduction: ``"mean"`` over valid elements (as the reference's mean over
            all), ``"sum"`` or ``"none"``.
    """
    _check_db(alpha, gamma, init_bias, neg_scale, map_alpha, map_beta, map_gamma)
    check_reduction(reduction)
    freq_inv, bias = class_statistics(class_counts, train_size, init_bias)
    loss, valid = _db_elementwise(logits, labels, freq_inv, bias, alpha, gamma, neg_scale, map_alpha, map_beta,
                                  map_gamma, ignore_index)
    return reduce_loss(loss, reduction, valid)


def _check_db(alpha, gamma, init_bias, neg_scale, map_alpha, map_beta, map_gamma):
    check_range("alpha", alpha, 0.0, 1.0)
    check_range("gamma", gamma, 0.0)
    check_range("init_bias", init_bias, 0.0)
    check_range("neg_scale", neg_scale, 0.0, low_open=True)
    check_range("map_alpha", map_alpha, 0.0)
    check_range("map_beta", map_beta, 0.0)
    check_range("map_gamma", map_gamma)


@LOSSES.register("distribution_balanced")
class DistributionBalancedLoss(ClassificationLoss):
    """See distribution_balanced_loss; built from ``class_counts`` and ``train_size``."""

    TARGET = "both"
    ACTIVATION = "sigmoid"
    NEEDS_COUNTS = True

    @check_args()
    def __init__(self, alpha: Annotated[float, Key("focal weight of the positives (negatives: 1 - alpha)",
                                                   ge=0, le=1)] = 0.5,
                 gamma: Annotated[float, Key("focal exponent of (1 - p_t)", ge=0)] = 2.0,
                 init_bias: Annotated[float, Key("kappa: add -kappa * log(N / n_i - 1) to class i's logit "
                                                 "(0: no prior bias)", ge=0)] = 0.05,
                 neg_scale: Annotated[float, Key("lambda: negatives' logits times lambda, their weight over "
                                                 "lambda", gt=0)] = 2.0,
                 map_alpha: Annotated[float, Key("alpha of the weight map sigmoid(beta (r - mu)) + alpha",
                                                 ge=0)] = 0.1,
                 map_beta: Annotated[float, Key("beta of the weight map sigmoid(beta (r - mu)) + alpha",
                                                ge=0)] = 10.0,
                 map_gamma: Annotated[float, Key("mu of the weight map sigmoid(beta (r - mu)) + alpha")] = 0.9,
                 ignore_index: IgnoreIndex = -100, reduction: Reduction = "mean",
                 class_counts: Optional[Sequence[int]] = None, train_size: Optional[int] = None):
        super().__init__()
        _check_db(alpha, gamma, init_bias, neg_scale, map_alpha, map_beta, map_gamma)
        self.freq_inv, self.bias = class_statistics(class_counts, train_size, init_bias)
        self.alpha, self.gamma, self.neg_scale = alpha, gamma, neg_scale
        self.map_alpha, self.map_beta, self.map_gamma = map_alpha, map_beta, map_gamma
        self.ignore_index, self.reduction = ignore_index, reduction

    def elementwise(self, logits, labels):
        return _db_elementwise(logits, labels, self.freq_inv, self.bias, self.alpha, self.gamma, self.neg_scale,
                               self.map_alpha, self.map_beta, self.map_gamma, self.ignore_index)
