"""How an eval in a lower precision compares with fp32 on the same split: the headline metric, macro-F1, each class's F1.

Compression errors concentrate in rare classes (Hooker et al. 2019, 2020), where an average moves little:
so besides the headline metric and macro-F1, every class's F1 change is kept, and a class that loses more
than :data:`DROP_POINTS` F1 points is flagged, in a warning line and in metrics.json (``vs_fp32`` of the
split: :func:`compare`). Classes are those of the split's per-class table (``per_class``; ``per_type``,
the entity types of a tagger); a split without one (a matcher's) is compared on its metrics only.
"""
from appzoo.metrics import scalars

#: F1 points (x 100) a class may lose against fp32 before it is flagged.
DROP_POINTS = 3.0


def per_class_f1(metrics):
    """``{class: F1}`` of a split's metrics (its ``per_class`` or ``per_type`` table), {} without one."""
    table = metrics.get("per_class") or metrics.get("per_type") or {}
    return {name: row["f1"] for name, row in table.items()}


def compare(reference, metrics, metric, drop_points=DROP_POINTS):
    """``metrics`` against ``reference`` (fp32's, of the same split): ``{"metric", "fp32", "value", "change"}``
    of the headline ``metric`` and of ``macro_f1`` (where the split has it), ``per_class``: ``{class: {"fp32",
    "value", "change"}}``, ``worst_class`` (the class of most negative change, or None) and ``flagged`` (the
    classes that lose more than ``drop_points``, the worst first). Changes are in points (x 100)."""
    def change(old, new):
        return {"fp32": old, "value": new, "change": round(100 * (new - old), 4)}

    old, new = scalars(reference), scalars(metrics)
    out = {"metric": metric, "drop_points": drop_points}
    if metric in old and metric in new:  # a loss is not among a graph engine's metrics (its graph takes no labels)
        out.update(change(old[metric], new[metric]))
    if "macro_f1" in old and "macro_f1" in new:
        out["macro_f1"] = change(old["macro_f1"], new["macro_f1"])
    before, after = per_class_f1(reference), per_class_f1(metrics)
    out["per_class"] = {name: change(before[name], after[name]) for name in before if name in after}
    ranked = sorted(out["per_class"], key=lambda name: out["per_class"][name]["change"])
    out["worst_class"] = ranked[0] if ranked else None
    out["flagged"] = [name for name in ranked if out["per_class"][name]["change"] < -drop_points]
    return out


def warnings(comparison, split, engine):
    """One line per flagged class of a :func:`compare` result, naming the split and ``engine`` (its words)."""
    return [f"{split}: class {name!r} loses {-row['change']:.2f} F1 points on {engine} against fp32 "
            f"({row['fp32']:.4f} -> {row['value']:.4f}; flagged above {comparison['drop_points']:g})"
            for name, row in ((n, comparison["per_class"][n]) for n in comparison["flagged"])]


def to_markdown(comparison, literal=str):
    """report.md's lines of a :func:`compare` result: the metric and macro-F1, then every class, worst first.
    ``literal``: how a class name is written (:func:`appzoo.utils.markdown.literal`)."""
    rows = [(comparison["metric"], comparison)] if "change" in comparison else []
    if "macro_f1" in comparison and comparison["metric"] != "macro_f1":
        rows.append(("macro_f1", comparison["macro_f1"]))
    lines = ["| against fp32 | fp32 | this | change (points) |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {row['fp32']:.4f} | {row['value']:.4f} | {row['change']:+.2f} |" for name, row in rows]
    per_class = comparison["per_class"]
    for name in sorted(per_class, key=lambda n: per_class[n]["change"]):
        row = per_class[name]
        mark = " **flagged**" if name in comparison["flagged"] else ""
        lines.append(f"| F1 of {literal(name)} | {row['fp32']:.4f} | {row['value']:.4f} | "
                     f"{row['change']:+.2f}{mark} |")
    return lines
