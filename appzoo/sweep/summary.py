"""The results of a sweep: per setting the mean and sample std over seeds of the
key metrics and of each class's F1, verdicts against the baseline (chosen on
dev, confirmed on test), and the markdown table."""
import math
import os
import statistics

from appzoo.store.run_result import RunResult
from appzoo.store.archive import RunFolder
from appzoo.utils import files
from appzoo.utils.markdown import literal
from appzoo.env import available_cores, cpu_model

#: Test (or dev) metrics shown next to the metric the best model is chosen on, when a task reports them.
#: Matching reports accuracy at its tuned threshold and at argmax (the published anchors' accuracy).
HEADLINE_METRICS = ("micro_f1", "macro_f1", "f1", "auc", "accuracy", "argmax_accuracy",
                    # beside a tuned decision rule, the same model without it (where a run reports them)
                    "micro_f1_global_threshold", "macro_f1_global_threshold", "macro_f1_before_logit_adjust",
                    "accuracy_before_logit_adjust")


def complete(metrics, do):
    """Whether a run's ``metrics.json`` (its content) holds everything its modes ``do`` write."""
    return RunResult.from_json(metrics).complete(do)


#: Fewer runs than this on either side and a verdict says "too few seeds": two runs give a std, not a judgement.
MIN_SEEDS = 3
VERDICT_RULE = (f"better/worse than the baseline (the first setting) only when both have at least {MIN_SEEDS} "
                f"finished seeds and the gap between the means exceeds 2 std of both settings; else tie, or "
                f"too few seeds. The verdict that chooses a setting is on dev (metric_for_best); the one on test, "
                f"by the same rule, is the confirmation on unseen data")
P_VALUE = ("two-sided Welch's t-test against the baseline (scipy.stats.ttest_ind_from_stats, equal_var=False: "
           "from each side's mean, sample std and number of runs)")


def verdict(baseline, values, greater_is_better=True):
    """``better``/``worse`` than the baseline only when both sides have at
    least :data:`MIN_SEEDS` runs and the gap between the means exceeds 2
    sample standard deviations (ddof=1) of both settings; else ``tie``.
    With fewer runs on either side: ``too few seeds``."""
    return verdict_of_stats(_stats(baseline), _stats(values), greater_is_better)


def welch_p(baseline, values):
    """The two-sided p-value of Welch's t-test (unequal variances) between the
    runs of a setting and of the baseline; None with fewer than 2 runs on a
    side or no spread on either (the test is undefined there)."""
    return welch_p_of_stats(_stats(baseline), _stats(values))


# The rule and the test read only each side's mean, sample std and number of runs: a summary whose per-seed
# values were not kept (an archived one) is judged exactly as the runs themselves would be.
def verdict_of_stats(base, other, greater_is_better=True):
    """:func:`verdict` from ``{"mean", "std", "n"}`` of each side."""
    if not base["n"] or not other["n"]:
        return "n/a"
    if base["n"] < MIN_SEEDS or other["n"] < MIN_SEEDS:
        return "too few seeds"
    gap = other["mean"] - base["mean"]
    if abs(gap) > 2 * base["std"] and abs(gap) > 2 * other["std"]:
        return "better" if (gap > 0) == greater_is_better else "worse"
    return "tie"


def welch_p_of_stats(base, other):
    """:func:`welch_p` from ``{"mean", "std", "n"}`` of each side (scipy's ttest_ind_from_stats)."""
    if base["n"] < 2 or other["n"] < 2 or not base["std"] and not other["std"]:
        return None
    import warnings

    from scipy.stats import ttest_ind_from_stats

    with warnings.catch_warnings():  # nearly equal runs: scipy warns of precision loss, the p-value is still right
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(ttest_ind_from_stats(other["mean"], other["std"], other["n"], base["mean"], base["std"], base["n"],
                                       equal_var=False).pvalue)
    return p if math.isfinite(p) else None


def judge(rows, key, greater_is_better, seeds, field="verdict"):
    """Set each summary row's ``field`` to its verdict on ``key`` against the
    first row (:func:`verdict`) and ``field + "_p"`` to the Welch p-value
    (:func:`welch_p`). A setting with diverged runs is judged by those alone
    (a mean over the runs that survived would flatter it), and nothing is
    judged against a baseline that diverged. Returns ``rows``."""
    base = rows[0]
    for i, row in enumerate(rows):
        row.setdefault("diverged", [])
        p = None
        if i == 0:
            said = "baseline"
        elif base["diverged"]:
            said = "n/a (the baseline diverged)"
        else:
            said = verdict_of_stats(base["metrics"][key], row["metrics"][key], greater_is_better)
            p = welch_p_of_stats(base["metrics"][key], row["metrics"][key])
        if row["diverged"]:
            share = f"{len(row['diverged'])} of {seeds}"
            said, p = (f"baseline, diverged {share}" if i == 0 else f"diverged {share}"), None
        row[field], row[f"{field}_p"] = said, p
    return rows


def judge_summary(summary):
    """Take a summary's verdicts by the current rule: the choosing verdict on
    ``dev.<metric_for_best>`` and, where test was evaluated, the confirmation
    on ``test.<metric_for_best>``. Also re-judges a sweep.json written under an
    older rule (which judged on test). Returns ``summary``."""
    keys, metric = summary["key_metrics"], summary["metric_for_best"]
    selection, confirmation = f"dev.{metric}", f"test.{metric}"
    summary.update(primary_metric=selection, confirmation_metric=confirmation if confirmation in keys else None,
                   min_seeds=MIN_SEEDS, verdict_rule=VERDICT_RULE, p_value=P_VALUE)
    rows, seeds = summary["settings"], len(summary["seeds"])
    if rows:
        judge(rows, selection, summary["greater_is_better"], seeds)
        if summary["confirmation_metric"]:
            judge(rows, confirmation, summary["greater_is_better"], seeds, field="test_verdict")
    return summary


def _stats(values):
    return {"mean": statistics.fmean(values) if values else None,
            "std": statistics.stdev(values) if len(values) > 1 else None, "n": len(values)}


def _key_metrics(sweep, per_run):
    """``dev.<metric_for_best>`` and the headline metrics of test (dev when there is no test)."""
    keys = [f"dev.{sweep.metric}"]
    split = "test" if any("test" in m for m in per_run) else "dev"
    for name in (sweep.metric,) + HEADLINE_METRICS:
        key = f"{split}.{name}"
        if key not in keys and any(isinstance(m.get(split, {}).get(name), (int, float)) for m in per_run):
            keys.append(key)
    return keys


def per_class_f1(per_run):
    """``{split: {class: {"mean", "runs", "zero_in_every_run"}}}`` over the runs' metrics.json:
    ``per_class`` (classification) or ``per_type`` (entity types of sequence labeling)."""
    out = {}
    for split in ("dev", "test"):
        f1s = {}
        for metrics in per_run:
            table = metrics.get(split, {}).get("per_class") or metrics.get(split, {}).get("per_type") or {}
            for name, scores in table.items():
                if isinstance(scores, dict) and isinstance(scores.get("f1"), (int, float)):
                    f1s.setdefault(name, []).append(float(scores["f1"]))
        if f1s:
            out[split] = {name: {"mean": statistics.fmean(v), "runs": len(v), "zero_in_every_run": not any(v)}
                          for name, v in f1s.items()}
    return out


def _value(metrics, key):
    split, name = key.split(".", 1)
    value = metrics.get(split, {}).get(name)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def summarise(sweep):
    """Per setting: the finished runs, mean and sample std of the key metrics, verdicts."""
    finished = {}
    for r in sweep.runs:
        path = RunFolder(r.folder).metrics
        if os.path.exists(path):
            metrics = files.read_json(path, "metrics of a sweep run")
            if complete(metrics, r.plan.do):
                finished[r.folder] = metrics
    diverged = {}
    for r in sweep.runs:
        path = RunFolder(r.folder).diverged
        if r.folder not in finished and os.path.exists(path):
            diverged[r.folder] = files.read_json(path, "divergence record of a sweep run")
    keys = _key_metrics(sweep, list(finished.values()))
    rows = []
    for setting in sweep.settings:
        runs = [r for r in sweep.runs if r.setting is setting and r.folder in finished]
        per_run = [{"seed": r.seed, "folder": r.folder, "wall_time_s": RunResult.from_json(finished[r.folder]).wall_time_s,
                    "metrics": {k: _value(finished[r.folder], k) for k in keys}} for r in runs]
        walls = [p["wall_time_s"] for p in per_run if isinstance(p["wall_time_s"], (int, float))]
        rows.append({
            "setting": setting.name, "overrides": setting.overrides, "n": len(per_run),
            "metrics": {k: _stats([p["metrics"][k] for p in per_run if p["metrics"][k] is not None]) for k in keys},
            "wall_time_s": {"mean": statistics.fmean(walls) if walls else None, "total": sum(walls)},
            "runs": per_run,
            "per_class_f1": per_class_f1([finished[r.folder] for r in runs]),
            "diverged": [{"seed": r.seed, "folder": r.folder, "error": diverged[r.folder].get("error")}
                         for r in sweep.runs if r.setting is setting and r.folder in diverged],
        })
    return judge_summary({
        "param_path": sweep.param_path, "command": sweep.command, "seeds": sweep.seeds,
        "metric_for_best": sweep.metric, "key_metrics": keys,
        "greater_is_better": sweep.greater_is_better, "std": "sample standard deviation (ddof=1)",
        "runs_finished": len(finished), "runs_diverged": len(diverged), "runs_planned": len(sweep.runs),
        "environment": environment(),
        "settings": rows})


def environment():
    """Where the runs were made: CPU model, cores, GPU, package versions."""
    import platform
    from importlib import metadata

    cpu = cpu_model()[0] or platform.processor() or platform.machine()
    versions = {"python": platform.python_version()}
    for package in ("paddlepaddle", "paddlepaddle-gpu", "paddlenlp"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    gpu = None
    import paddle

    if paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count():
        gpu = paddle.device.cuda.get_device_name(0)
    return {"cpu": cpu, "cores": available_cores(), "gpu": gpu, "versions": versions}


def run_values(row, key):
    """The per-run values of ``key`` in a summary row (runs without it left out)."""
    return [p["metrics"][key] for p in row["runs"] if p["metrics"][key] is not None]


def format_stats(stats):
    """``mean ± std`` of a summary cell (– where no run finished), as sweep.md and report.html show it."""
    if stats["mean"] is None:
        return "–"
    if stats["std"] is None:
        return f"{stats['mean']:.4f}"
    return f"{stats['mean']:.4f} ± {stats['std']:.4f}"


def format_p(p):
    """A Welch p-value as the sweep's tables show it."""
    if p is None:
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def markdown(summary, heading="#"):
    keys, primary, confirmation = summary["key_metrics"], summary["primary_metric"], summary.get("confirmation_metric")
    lines = [f"{heading} Sweep of {summary['param_path']}", ""]
    if summary["command"]:
        lines += [f"Command: `{summary['command']}`", ""]
    diverged = summary.get("runs_diverged")
    said = f" ({diverged} more diverged: a non-finite loss; see their diverged.json)" if diverged else ""
    higher = "higher" if summary["greater_is_better"] else "lower"
    rule = (f"Verdict on `{primary}` ({higher} is better), the dev metric a setting is chosen on, against the first "
            f"setting: better or worse only when both have at least {summary.get('min_seeds', MIN_SEEDS)} finished "
            f"seeds and the gap between the means exceeds 2 std of both settings, else tie (too few seeds below "
            f"that). Welch p: two-sided Welch's t-test against the first setting, beside the rule.")
    if confirmation:
        rule += (f" The verdict on `{confirmation}`, by the same rule, is the confirmation on unseen test data, "
                 f"not a reason to choose.")
    header = f"| setting | seeds | {' | '.join(keys)} | wall per run (s) | verdict on {primary} | Welch p |"
    if confirmation:
        header += f" {confirmation} (confirmation) | Welch p |"
    lines += [f"Seeds {', '.join(map(str, summary['seeds']))}; runs finished {summary['runs_finished']} of "
              f"{summary['runs_planned']}{said}. Cells are mean ± std over seeds, std being the sample standard "
              f"deviation (ddof=1). {rule}", "",
              header, "|---|---|" + "---|" * len(keys) + "---|---|---|" + ("---|---|" if confirmation else "")]
    for row in summary["settings"]:
        wall = row["wall_time_s"]["mean"]
        line = (f"| {row['setting']} | {row['n']} | " + " | ".join(format_stats(row["metrics"][k]) for k in keys)
                + f" | {'–' if wall is None else f'{wall:.1f}'} | {row['verdict']} | {format_p(row.get('verdict_p'))} |")
        if confirmation:
            line += f" {row['test_verdict']} | {format_p(row.get('test_verdict_p'))} |"
        lines.append(line)
    return "\n".join(lines + _per_class_tables(summary)) + "\n"


def _per_class_tables(summary):
    """Mean F1 per class (rows) and setting (columns), per split; a class with F1 0 in every run of a setting is
    flagged and named below its table. Class names come from the data: :func:`~appzoo.utils.markdown.literal`."""
    rows = summary["settings"]
    lines = []
    for split in ("dev", "test"):
        tables = [row.get("per_class_f1", {}).get(split, {}) for row in rows]
        names = list(dict.fromkeys(name for table in tables for name in table))
        if not names:
            continue
        lines += ["", f"Per-class F1 on {split}, mean over seeds (⚠: F1 0 in every run of the setting):", "",
                  "| class | " + " | ".join(row["setting"] for row in rows) + " |", "|---|" + "---|" * len(rows)]
        zero = []
        for name in names:
            cells = []
            for row, table in zip(rows, tables):
                cell = table.get(name)
                if cell is None:
                    cells.append("–")
                    continue
                cells.append(f"{cell['mean']:.4f}" + (" ⚠" if cell["zero_in_every_run"] else ""))
                if cell["zero_in_every_run"]:
                    zero.append(f"{literal(name)} under {row['setting']} ({cell['runs']} of {cell['runs']} runs)")
            lines.append(f"| {literal(name)} | " + " | ".join(cells) + " |")
        if zero:
            lines += ["", f"Warning: never predicted correctly on {split} (F1 0 in every run): {'; '.join(zero)}."]
    return lines
