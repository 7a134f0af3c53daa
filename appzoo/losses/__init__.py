"""The loss library: one file per loss family, every loss registered in LOSSES.

Use :func:`build_loss` to build a loss from its param-file section; each loss
is also a plain function (``focal_loss``) and a thin Layer (``FocalLoss``).
Modules are imported explicitly so that registration order is fixed.
"""
from appzoo.registry import LOSSES
from appzoo.losses.base import FAMILIES, LossParamError, reduce_loss
from appzoo.losses.cross_entropy import (
    BinaryCrossEntropyLoss, CrossEntropyLoss, binary_cross_entropy_loss, cross_entropy_loss,
)
from appzoo.losses.focal import FocalLoss, focal_loss
from appzoo.losses.dice import DiceLoss, dice_loss
from appzoo.losses.ghm import GHMLoss, ghm_loss
from appzoo.losses.multilabel_ce import MultiLabelCELoss, multilabel_ce_loss
from appzoo.losses.kl import KLDivLoss, distillation_loss, kl_div_loss
from appzoo.losses.logit_adjusted import BalancedSoftmaxLoss, LogitAdjustedCELoss, logit_adjusted_ce_loss
from appzoo.losses.asl import AsymmetricLoss, asl_loss
from appzoo.losses.distribution_balanced import DistributionBalancedLoss, distribution_balanced_loss
from appzoo.losses.ohem import OHEMLoss, ohem_loss
from appzoo.losses.circle import CircleLoss, circle_loss
from appzoo.losses.pairwise import NCELoss, PairwiseHingeLoss, nce_loss, pairwise_hinge_loss
from appzoo.losses.vse import MaxHingeLoss, SumHingeLoss, max_hinge_loss, sum_hinge_loss
from appzoo.losses.triplet import TripletLoss, triplet_loss
from appzoo.losses.infonce import InfoNCELoss, infonce_loss
from appzoo.losses.cosent import CoSENTLoss, cosent_loss
from appzoo.losses.build import build_loss, losses_for

__all__ = [
    "LOSSES", "FAMILIES", "LossParamError", "build_loss", "losses_for", "reduce_loss",
    "cross_entropy_loss", "CrossEntropyLoss", "binary_cross_entropy_loss", "BinaryCrossEntropyLoss",
    "focal_loss", "FocalLoss", "dice_loss", "DiceLoss", "ghm_loss", "GHMLoss",
    "multilabel_ce_loss", "MultiLabelCELoss", "kl_div_loss", "KLDivLoss", "distillation_loss", "ohem_loss", "OHEMLoss",
    "logit_adjusted_ce_loss", "LogitAdjustedCELoss", "BalancedSoftmaxLoss", "asl_loss", "AsymmetricLoss",
    "distribution_balanced_loss", "DistributionBalancedLoss",
    "circle_loss", "CircleLoss", "pairwise_hinge_loss", "PairwiseHingeLoss", "nce_loss", "NCELoss",
    "sum_hinge_loss", "SumHingeLoss", "max_hinge_loss", "MaxHingeLoss", "triplet_loss", "TripletLoss",
    "infonce_loss", "InfoNCELoss", "cosent_loss", "CoSENTLoss",
]
