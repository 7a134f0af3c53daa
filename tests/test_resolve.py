"""config.json is the resolved param tree: every default written out, so two runs compare by what ran."""
import pytest

from appzoo.params.param_file import apply_overrides, load_param_file
from appzoo.run.plan import validate
from appzoo.store.resolve import changed_keys, trains_longer

EXAMPLE = "examples/cls_ernie_fc_with_focal.json"


@pytest.fixture
def plan():
    return validate(load_param_file(EXAMPLE), EXAMPLE)


def test_every_section_carries_its_defaults(plan):
    tree = plan.config
    assert tree["trainer"]["adam_epsilon"] == 1e-8 and tree["trainer"]["do"] == plan.do
    assert tree["dataset_reader"]["encoding"] == "utf-8" and tree["dataset_reader"]["on_bad_line"] == "error"
    assert tree["model"]["pooling"] == "cls" and tree["model"]["loss"]["reduction"] == "mean"
    assert tree["model"]["encoder"]["min_freq"] == 1  # the encoder section too
    assert "class_counts" not in tree["model"]["loss"] and "num_labels" not in tree["model"]  # supplied, not keys


def test_a_restated_default_is_no_change_and_a_real_one_is_named(plan):
    config = load_param_file(EXAMPLE)
    apply_overrides(config, ["model.pooling=cls", "trainer.weight_decay=0.01", "model.loss.reduction=mean"])
    assert changed_keys(plan.config, validate(config).config, plan.defaults) == []
    apply_overrides(config, ["trainer.learning_rate=0.1"])
    assert changed_keys(plan.config, validate(config).config, plan.defaults) == [
        ("trainer.learning_rate", 0.0005, 0.1)]


def test_a_tree_saved_before_trees_were_resolved_compares_by_the_defaults(plan):
    old = load_param_file(EXAMPLE)  # as config.json held it: the param file's own keys, trainer resolved
    old["trainer"] = dict(plan.config["trainer"])
    assert changed_keys(old, plan.config, plan.defaults) == []
    config = load_param_file(EXAMPLE)
    apply_overrides(config, ["model.pooling=mean"])
    assert changed_keys(old, validate(config).config, plan.defaults) == [("model.pooling", "cls", "mean")]


@pytest.mark.parametrize("was,now,longer", [
    ({"max_steps": 6}, {"max_steps": 8}, True),
    ({"max_steps": 6}, {"max_steps": 4}, False),
    ({"max_steps": -1, "epochs": 2}, {"max_steps": -1, "epochs": 3}, True),
    ({"max_steps": -1, "epochs": 3}, {"max_steps": -1, "epochs": 2}, False),
    ({"max_steps": -1, "epochs": 3}, {"max_steps": 100, "epochs": 3}, False),  # not known to be longer
])
def test_trains_longer_only_for_more_steps_or_epochs(was, now, longer):
    assert trains_longer({"trainer": was}, {"trainer": now}) is longer
