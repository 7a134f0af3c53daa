"""An eval in a lower precision against fp32 on the same split (appzoo.reports.fidelity): the headline metric,
macro-F1 and each class's F1 change, and a flag on a class that loses more than 3 F1 points, on constructed
metrics where one rare class drops and the averages hardly move."""
import pytest

from appzoo.reports import fidelity


def metrics(f1s, accuracy, key="per_class"):
    table = {name: {"precision": f, "recall": f, "f1": f, "support": 10} for name, f in f1s.items()}
    return {"accuracy": accuracy, "macro_f1": sum(f1s.values()) / len(f1s), key: table, "confusion_matrix": [[1]]}


FP32 = metrics({"common": 0.95, "medium": 0.80, "rare": 0.60, "grief": 0.50}, 0.9000)
INT8 = metrics({"common": 0.951, "medium": 0.80, "rare": 0.5695, "grief": 0.49}, 0.8990)


def test_a_class_that_loses_more_than_3_points_is_flagged_and_the_averages_are_compared():
    got = fidelity.compare(FP32, INT8, "accuracy")
    assert got["fp32"] == 0.9 and got["value"] == 0.899 and got["change"] == pytest.approx(-0.1)
    assert got["macro_f1"]["change"] == pytest.approx(100 * (INT8["macro_f1"] - FP32["macro_f1"]), abs=1e-4)
    assert got["macro_f1"]["change"] > -1.0  # the average passes a 1-point bound; the rare class does not
    assert got["per_class"]["rare"] == {"fp32": 0.60, "value": 0.5695, "change": pytest.approx(-3.05)}
    assert got["per_class"]["grief"]["change"] == pytest.approx(-1.0)
    assert got["flagged"] == ["rare"] and got["worst_class"] == "rare"
    assert fidelity.warnings(got, "test", "onnxruntime int8") == [
        "test: class 'rare' loses 3.05 F1 points on onnxruntime int8 against fp32 (0.6000 -> 0.5695; flagged "
        "above 3)"]


def test_exactly_3_points_is_not_flagged_and_the_bound_is_a_parameter():
    at_bound = metrics({"common": 0.95, "medium": 0.80, "rare": 0.57, "grief": 0.50}, 0.9)
    assert fidelity.compare(FP32, at_bound, "accuracy")["flagged"] == []
    assert fidelity.compare(FP32, INT8, "accuracy", drop_points=0.5)["flagged"] == ["rare", "grief"]


def test_a_taggers_entity_types_are_its_classes_and_a_matcher_has_none():
    got = fidelity.compare(metrics({"PER": 0.9, "LOC": 0.8}, 0.9, "per_type"),
                           metrics({"PER": 0.85, "LOC": 0.8}, 0.9, "per_type"), "accuracy")
    assert got["flagged"] == ["PER"]
    matcher = fidelity.compare({"auc": 0.80, "f1": 0.7}, {"auc": 0.79, "f1": 0.7}, "auc")
    assert matcher["per_class"] == {} and matcher["flagged"] == [] and matcher["worst_class"] is None
    assert matcher["change"] == pytest.approx(-1.0) and "macro_f1" not in matcher


def test_a_headline_metric_only_fp32_has_is_left_out():
    """A loss: the graph engines take no labels, so their metrics have none."""
    got = fidelity.compare({"loss": 0.3, **FP32}, INT8, "loss")
    assert "change" not in got and got["flagged"] == ["rare"]
    assert fidelity.to_markdown(got)[2].startswith("| macro_f1 |")


def test_the_report_lines_list_every_class_worst_first_and_mark_the_flagged():
    lines = fidelity.to_markdown(fidelity.compare(FP32, INT8, "accuracy"))
    assert lines[:4] == ["| against fp32 | fp32 | this | change (points) |", "|---|---:|---:|---:|",
                         "| accuracy | 0.9000 | 0.8990 | -0.10 |", "| macro_f1 | 0.7125 | 0.7026 | -0.99 |"]
    assert lines[4] == "| F1 of rare | 0.6000 | 0.5695 | -3.05 **flagged** |"
    assert [line.split(" |")[0] for line in lines[5:]] == ["| F1 of grief", "| F1 of medium", "| F1 of common"]
