"""build_loss: every kind of config error names the full key path and the value."""
import pytest

from appzoo.errors import ConfigError
from appzoo.losses import LOSSES, build_loss, losses_for


def test_unknown_key_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"model\.loss\.gama: unknown key for 'focal'.*did you mean 'gamma'"):
        build_loss({"name": "focal", "gama": 2.0})


def test_wrong_type():
    with pytest.raises(ConfigError, match=r"model\.loss\.gamma: expected a number, got 'two'"):
        build_loss({"name": "focal", "gamma": "two"})
    with pytest.raises(ConfigError, match=r"model\.loss\.bins: expected an integer, got 2\.5"):
        build_loss({"name": "ghm", "bins": 2.5})
    with pytest.raises(ConfigError, match=r"model\.loss\.alpha: expected .*'balanced'.*got 'balance'"):
        build_loss({"name": "focal", "alpha": "balance"})


@pytest.mark.parametrize("cfg,message", [
    ({"name": "focal", "gamma": -1}, r"model\.loss\.gamma: must be >= 0, got -1$"),
    ({"name": "ce", "label_smoothing": 1.0}, r"model\.loss\.label_smoothing: must be in \[0, 1\), got 1\.0"),
    ({"name": "ghm", "momentum": 1.0}, r"model\.loss\.momentum: must be in \[0, 1\), got 1\.0"),
    ({"name": "ghm", "bins": 0}, r"model\.loss\.bins: must be >= 1, got 0"),
    ({"name": "dice", "smooth": 0}, r"model\.loss\.smooth: must be > 0, got 0"),
    ({"name": "infonce", "temperature": 0.0}, r"model\.loss\.temperature: must be > 0, got 0\.0"),
    ({"name": "circle", "scale": -3}, r"model\.loss\.scale: must be > 0, got -3"),
    ({"name": "ohem", "base": {"name": "ce"}, "ratio": 1.5}, r"model\.loss\.ratio: must be in \(0, 1\], got 1\.5"),
    ({"name": "ce", "class_weights": [1.0, -2.0]}, r"model\.loss\.class_weights\[1\]: must be >= 0, got -2\.0"),
    ({"name": "focal", "mode": "sigmoid", "alpha": 1.5}, r"model\.loss\.alpha: must be <= 1, got 1\.5"),
    ({"name": "focal", "normalizer": "num_positive"}, r"model\.loss\.normalizer: only applies in mode 'sigmoid'"),
])
def test_out_of_range(cfg, message):
    with pytest.raises(ConfigError, match=message):
        build_loss(cfg)


def test_unknown_and_missing_name():
    with pytest.raises(ConfigError, match=r"model\.loss\.name: 'focall' is not a registered loss; "
                                          r"did you mean 'focal'\? \(available: asl, balanced_softmax, bce, ce, circle"):
        build_loss({"name": "focall"})
    with pytest.raises(ConfigError, match=r"model\.loss\.name: required key is missing \(available: asl, "):
        build_loss({"gamma": 2.0})
    with pytest.raises(ConfigError, match=r"model\.loss: expected an object"):
        build_loss("focal")


def test_balanced_needs_class_counts():
    with pytest.raises(ConfigError, match=r"model\.loss\.alpha: is 'balanced'.*class_counts"):
        build_loss({"name": "focal", "alpha": "balanced"})
    with pytest.raises(ConfigError, match=r"model\.loss\.class_weights: is 'balanced'.*class\(es\) \[1\]"):
        build_loss({"name": "ce", "class_weights": "balanced"}, class_counts=[5, 0, 2])
    with pytest.raises(ConfigError, match=r"model\.loss\.class_weights: has 2 entries but .* 3 classes"):
        build_loss({"name": "ce", "class_weights": [1.0, 2.0]}, class_counts=[5, 1, 2])
    with pytest.raises(ConfigError, match=r"model\.loss\.alpha: 'balanced' only applies with mode 'softmax'"):
        build_loss({"name": "focal", "mode": "sigmoid", "alpha": "balanced"}, class_counts=[1, 2])
    # class_counts is supplied by the trainer, never a user key
    with pytest.raises(ConfigError, match=r"model\.loss\.class_counts: unknown key"):
        build_loss({"name": "ce", "class_counts": [1, 2]})


def test_family_mismatch_lists_what_fits():
    with pytest.raises(ConfigError, match=r"model\.loss\.name: 'circle' does not fit a classification model "
                                          r"\(losses that fit: asl, balanced_softmax, bce, ce, dice, "
                                          r"distribution_balanced, focal, ghm, kl, logit_adjusted_ce, multilabel_ce, "
                                          r"ohem\)"):
        build_loss({"name": "circle"}, family="classification")
    with pytest.raises(ConfigError, match=r"task\.loss\.name: 'ce' does not fit a embedding model"):
        build_loss({"name": "ce"}, key_path="task.loss", family="embedding")
    assert type(build_loss({"name": "infonce"}, family="embedding")).__name__ == "InfoNCELoss"
    assert type(build_loss({"name": "circle"}, family=("pair", "embedding"))).__name__ == "CircleLoss"
    with pytest.raises(ConfigError, match=r"'ce' does not fit a pair or embedding model \(losses that fit: circle, infonce, max_hinge, nce, pairwise_hinge, sum_hinge, triplet\)"):
        build_loss({"name": "ce"}, family=("pair", "embedding"))
    with pytest.raises(ValueError, match="family"):
        losses_for("ranking")


def test_bad_reduction():
    with pytest.raises(ConfigError, match=r"model\.loss\.reduction: expected one of 'mean', 'sum', 'none', got 'avg'"):
        build_loss({"name": "ce", "reduction": "avg"})


def test_ohem_base_is_validated_under_its_own_key_path():
    with pytest.raises(ConfigError, match=r"model\.loss\.base\.gama: unknown key for 'focal'.*'gamma'"):
        build_loss({"name": "ohem", "base": {"name": "focal", "gama": 1}})
    with pytest.raises(ConfigError, match=r"model\.loss\.base\.name: 'circle' does not fit a classification"):
        build_loss({"name": "ohem", "base": {"name": "circle"}})
    with pytest.raises(ConfigError, match=r"model\.loss\.base\.reduction: must not be set \(got 'sum'\)"):
        build_loss({"name": "ohem", "base": {"name": "ce", "reduction": "sum"}})
    with pytest.raises(ConfigError, match=r"model\.loss\.base: required key for 'ohem' is missing"):
        build_loss({"name": "ohem"})
    layer = build_loss({"name": "ohem", "base": {"name": "ce", "class_weights": "balanced"}}, class_counts=[1, 3])
    assert layer.base.class_weights == [2.0, 2.0 / 3.0]


def test_every_loss_builds_from_its_defaults():
    for name in LOSSES.names():
        cfg = {"name": name, "base": {"name": "ce"}} if name == "ohem" else {"name": name}
        # counts for the losses built on the training labels (logit_adjusted_ce, distribution_balanced)
        assert build_loss(cfg, class_counts=[1, 2], train_size=4).FAMILY in ("classification", "pair", "embedding", "scored")
