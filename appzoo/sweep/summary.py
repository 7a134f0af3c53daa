"""The results of a sweep: per setting the mean and sample std over seeds of the
key metrics, a verdict against the baseline, and the markdown table."""
import math
import os
import statistics

from appzoo import files

#: Test (or dev) metrics shown next to the metric the best model is chosen on, when a task reports them.
#: Matching reports accuracy at its tuned threshold and at argmax (the published anchors' accuracy).
HEADLINE_METRICS = ("micro_f1", "macro_f1", "f1", "auc", "accuracy", "argmax_accuracy")
#: Written into a run folder whose run stopped on a non-finite loss: the run counts as ended, diverged.
DIVERGED_FILE = "diverged.json"


def complete(metrics, do):
    """Whether a run's ``metrics.json`` holds everything its modes ``do`` write."""
    if "wall_time_s" not in metrics or ("train" in do and "train" not in metrics):
        return False
    return "eval" not in do or "dev" in metrics or "test" in metrics


def verdict(baseline, values, greater_is_better=True):
    """``better``/``worse`` than the baseline only when the gap between the
    means exceeds 2 sample standard deviations (ddof=1) of both settings;
    else ``tie``. With one run on either side the std is undefined:
    ``tie (n=1)``."""
    if not baseline or not values:
        return "n/a"
    if len(baseline) < 2 or len(values) < 2:
        return "tie (n=1)"
    gap = statistics.fmean(values) - statistics.fmean(baseline)
    if abs(gap) > 2 * statistics.stdev(baseline) and abs(gap) > 2 * statistics.stdev(values):
        return "better" if (gap > 0) == greater_is_better else "worse"
    return "tie"


def judge(rows, key, greater_is_better, seeds):
    """Set each summary row's ``verdict`` on ``key`` against the first row
    (:func:`verdict`). A setting with diverged runs is judged by those alone
    (a mean over the runs that survived would flatter it), and nothing is
    judged against a baseline that diverged. Returns ``rows``."""
    base = rows[0]
    for i, row in enumerate(rows):
        if i == 0:
            row["verdict"] = "baseline"
        elif base["diverged"]:
            row["verdict"] = "n/a (the baseline diverged)"
        else:
            row["verdict"] = verdict(run_values(base, key), run_values(row, key), greater_is_better)
        if row["diverged"]:
            share = f"{len(row['diverged'])} of {seeds}"
            row["verdict"] = f"baseline, diverged {share}" if i == 0 else f"diverged {share}"
    return rows


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
    primary = f"test.{sweep.metric}" if f"test.{sweep.metric}" in keys else f"dev.{sweep.metric}"
    return keys, primary


def _value(metrics, key):
    split, name = key.split(".", 1)
    value = metrics.get(split, {}).get(name)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def summarise(sweep):
    """Per setting: the finished runs, mean and sample std of the key metrics, verdicts."""
    finished = {}
    for r in sweep.runs:
        path = os.path.join(r.folder, "metrics.json")
        if os.path.exists(path):
            metrics = files.read_json(path, "metrics of a sweep run")
            if complete(metrics, r.plan.do):
                finished[r.folder] = metrics
    diverged = {}
    for r in sweep.runs:
        path = os.path.join(r.folder, DIVERGED_FILE)
        if r.folder not in finished and os.path.exists(path):
            diverged[r.folder] = files.read_json(path, "divergence record of a sweep run")
    keys, primary = _key_metrics(sweep, list(finished.values()))
    rows = []
    for setting in sweep.settings:
        runs = [r for r in sweep.runs if r.setting is setting and r.folder in finished]
        per_run = [{"seed": r.seed, "folder": r.folder, "wall_time_s": finished[r.folder].get("wall_time_s"),
                    "metrics": {k: _value(finished[r.folder], k) for k in keys}} for r in runs]
        walls = [p["wall_time_s"] for p in per_run if isinstance(p["wall_time_s"], (int, float))]
        rows.append({
            "setting": setting.name, "overrides": setting.overrides, "n": len(per_run),
            "metrics": {k: _stats([p["metrics"][k] for p in per_run if p["metrics"][k] is not None]) for k in keys},
            "wall_time_s": {"mean": statistics.fmean(walls) if walls else None, "total": sum(walls)},
            "runs": per_run,
            "diverged": [{"seed": r.seed, "folder": r.folder, "error": diverged[r.folder].get("error")}
                         for r in sweep.runs if r.setting is setting and r.folder in diverged],
        })
    judge(rows, primary, sweep.greater_is_better, len(sweep.seeds))
    return {"param_path": sweep.param_path, "command": sweep.command, "seeds": sweep.seeds,
            "metric_for_best": sweep.metric, "primary_metric": primary, "key_metrics": keys,
            "greater_is_better": sweep.greater_is_better, "std": "sample standard deviation (ddof=1)",
            "verdict_rule": "better/worse than the baseline (the first setting) only when the gap between the "
                            "means exceeds 2 std of both settings; else tie (tie (n=1) when a setting has one run)",
            "runs_finished": len(finished), "runs_diverged": len(diverged), "runs_planned": len(sweep.runs),
            "environment": environment(),
            "settings": rows}


def environment():
    """Where the runs were made: CPU model, cores, GPU, package versions."""
    import platform
    from importlib import metadata

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
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
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "cores": cores, "gpu": gpu, "versions": versions}


def run_values(row, key):
    """The per-run values of ``key`` in a summary row (runs without it left out)."""
    return [p["metrics"][key] for p in row["runs"] if p["metrics"][key] is not None]


def _fmt(stats):
    if stats["mean"] is None:
        return "–"
    if stats["std"] is None:
        return f"{stats['mean']:.4f}"
    return f"{stats['mean']:.4f} ± {stats['std']:.4f}"


def markdown(summary, heading="#"):
    keys = summary["key_metrics"]
    lines = [f"{heading} Sweep of {summary['param_path']}", ""]
    if summary["command"]:
        lines += [f"Command: `{summary['command']}`", ""]
    diverged = summary.get("runs_diverged")
    said = f" ({diverged} more diverged: a non-finite loss; see their diverged.json)" if diverged else ""
    lines += [f"Seeds {', '.join(map(str, summary['seeds']))}; runs finished {summary['runs_finished']} of "
              f"{summary['runs_planned']}{said}. Cells are mean ± std over seeds, std being the sample standard "
              f"deviation (ddof=1). Verdict on `{summary['primary_metric']}` "
              f"({'higher' if summary['greater_is_better'] else 'lower'} is better) against the first setting: "
              f"better or worse only when the gap between the means exceeds 2 std of both settings, else tie.", "",
              "| setting | n | " + " | ".join(keys) + " | wall per run (s) | verdict |",
              "|---|---|" + "---|" * len(keys) + "---|---|"]
    for row in summary["settings"]:
        wall = row["wall_time_s"]["mean"]
        lines.append(f"| {row['setting']} | {row['n']} | " + " | ".join(_fmt(row["metrics"][k]) for k in keys)
                     + f" | {'–' if wall is None else f'{wall:.1f}'} | {row['verdict']} |")
    return "\n".join(lines) + "\n"
