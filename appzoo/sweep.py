"""Sweeps: the grid of settings x seeds, run in one process, resumable, summarised.

    python run_trainer.py --param_path X --sweep model.loss.name=ce,focal,dice --seeds 3
    python run_trainer.py --param_path X --sweep 'model.loss=[{"name":"focal","gamma":1},{"name":"dice"}]'

``--sweep KEY=V1,V2`` gives one axis: a JSON list is the list of values, else
the text is split on commas and each value is parsed as JSON when it parses
(as ``--set`` does). ``--sweep 'K1,K2=[[a1,a2],[b1,b2]]'`` is one axis that
sets several keys together, for settings that are not a grid (CRF vs softmax
+ ce vs softmax + dice). Several ``--sweep`` flags make a grid; the first setting
of the grid is the baseline. ``--seeds N`` runs every setting with
``trainer.seed + 0 .. N-1``.

Each run is planned (:func:`appzoo.plan.validate`) before the first one
starts, so a bad key or value stops the sweep with one line and nothing
written. Run ``i`` goes to ``<output_dir>/sweep/<setting>/seed-<seed>/``. The
sweep manages ``trainer.resume`` and ``trainer.overwrite_output_dir`` of its
runs: a run whose ``metrics.json`` is complete is skipped, a run with a
checkpoint is resumed from it, and a run that saved a model but neither is
redone. Stopping a sweep and starting it again with the same command
therefore continues it; a run folder made with other settings is an error.
A run that stops on a non-finite loss (exit 3 on its own) is a result, not
the end of the sweep: it leaves ``diverged.json`` in its folder, counts as
ended, and its setting's verdict says how many of its runs diverged.
Each run's state is read again just before it starts and a run folder
locked by another live process is left to it, so the same command started
twice shares the runs between two workers. A grid may extend the sweep whose
results are in the folder (more settings or seeds); one that leaves some out
is refused, as it would replace that sweep's table.

The results (``sweep.json``, ``sweep.md``, ``sweep.png`` in
``<output_dir>/sweep/``) give per setting the mean and the sample standard
deviation (ddof=1) over seeds of the key metrics, and a verdict against the
baseline (:func:`verdict`). They are rewritten after every run.
"""
import copy
import dataclasses
import itertools
import json
import math
import os
import re
import statistics
from typing import List, Optional

from appzoo import archive
from appzoo.archive import RunFolder
from appzoo.config import SECTIONS, parse_value
from appzoo.errors import ConfigError, DivergedError, UserError
from appzoo.progress import note, progress
from appzoo.registry import did_you_mean

#: Trainer keys the sweep sets for each of its runs.
SET_BY_SWEEP = ("trainer.output_dir", "trainer.seed", "trainer.resume", "trainer.overwrite_output_dir")
#: Test (or dev) metrics shown next to the metric the best model is chosen on, when a task reports them.
#: Matching reports accuracy at its tuned threshold and at argmax (the published anchors' accuracy).
HEADLINE_METRICS = ("micro_f1", "macro_f1", "f1", "auc", "accuracy", "argmax_accuracy")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")
MAX_NAME = 80
#: Written into a run folder whose run stopped on a non-finite loss: the run counts as ended, diverged.
DIVERGED_FILE = "diverged.json"


@dataclasses.dataclass
class Setting:
    name: str  # a readable, filesystem-safe folder name
    overrides: dict  # key path -> value


@dataclasses.dataclass
class SweepRun:
    setting: Setting
    seed: int
    folder: str
    plan: object
    state: str  # "done" (skipped), "resume", "redo" or "new"
    config: dict  # the run's param tree before the sweep's per-state trainer keys


@dataclasses.dataclass
class Sweep:
    root: str  # <output_dir>/sweep
    settings: List[Setting]
    runs: List[SweepRun]
    seeds: List[int]
    metric: str  # the dev metric the best model is chosen on
    greater_is_better: bool
    command: Optional[str] = None
    param_path: str = "<param file>"


# ------------------------------------------------------------------ parsing
def parse_axes(specs):
    """``["KEY=V1,V2", ...]`` -> ``[(key, [values])]``, every mistake one line.

    ``K1,K2=[[a1,a2],[b1,b2]]`` is one axis that sets several keys together
    (settings that are not a grid, e.g. CRF vs softmax + ce vs softmax + dice):
    its key is the tuple ``(K1, K2)`` and each value a list of one value per key.
    """
    axes, taken = [], []
    for spec in specs:
        key, sep, raw = spec.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key:
            raise ConfigError(f"--sweep {spec!r}: expected KEY.PATH=V1,V2,... e.g. model.loss.name=ce,focal")
        keys = [k.strip() for k in key.split(",")]
        for k in keys:
            _check_key(spec, k, taken)
            taken.append(k)
        if raw.startswith("["):
            try:
                values = json.loads(raw)
            except json.JSONDecodeError as e:
                raise ConfigError(f"--sweep {spec!r}: the values start with '[' but are not a JSON list ({e})") \
                    from None
        elif len(keys) > 1:
            raise ConfigError(f"--sweep {spec!r}: an axis of {len(keys)} keys takes a JSON list of lists, one "
                              f"value per key, e.g. '{key}=[[v1, v2], [w1, w2]]'")
        else:
            items = [v.strip() for v in raw.split(",")]
            if any(not v for v in items):
                raise ConfigError(f"--sweep {spec!r}: empty value; give V1,V2,... or a JSON list "
                                  f"(values holding commas need the JSON list)")
            values = [parse_value(v) for v in items]
        if not values:
            raise ConfigError(f"--sweep {spec!r}: no values")
        if len(keys) > 1:
            wrong = [v for v in values if not isinstance(v, list) or len(v) != len(keys)]
            if wrong:
                raise ConfigError(f"--sweep {spec!r}: each value must be a list of {len(keys)} values "
                                  f"({', '.join(keys)}), got {json.dumps(wrong[0])}")
        seen = [json.dumps(v, sort_keys=True) for v in values]
        twice = [text for i, text in enumerate(seen) if text in seen[:i]]
        if twice:
            raise ConfigError(f"--sweep {spec!r}: the value {twice[0]} is given twice")
        axes.append((tuple(keys) if len(keys) > 1 else key, values))
    return axes


def _check_key(spec, key, taken):
    parts = key.split(".")
    if parts[0] not in SECTIONS:
        raise ConfigError(f"--sweep {spec!r}: {parts[0]}: unknown section{did_you_mean(parts[0], SECTIONS)} "
                          f"(accepted: {', '.join(SECTIONS)})")
    if len(parts) < 2 or not all(p.strip() for p in parts):
        raise ConfigError(f"--sweep {spec!r}: {key!r} is not a key path; expected SECTION.KEY, "
                          f"e.g. model.loss.name")
    if key in SET_BY_SWEEP:
        raise ConfigError(f"--sweep {spec!r}: {key} is set by the sweep for each run "
                          f"(use --seeds N for seeds; the runs go under trainer.output_dir/sweep/)")
    clash = [k for k in taken if k == key or k.startswith(key + ".") or key.startswith(k + ".")]
    if clash:
        raise ConfigError(f"--sweep {spec!r}: {key} overlaps another --sweep key {clash[0]}; "
                          f"give each key once")


def _slug(value):
    if isinstance(value, dict):
        return "_".join(f"{k}-{_slug(v)}" for k, v in value.items()) or "empty"
    if isinstance(value, list):
        return "-".join(_slug(v) for v in value) or "empty"
    return value if isinstance(value, str) else json.dumps(value)


def setting_name(overrides):
    """``{"model.loss.name": "focal", "trainer.learning_rate": 0.001}`` ->
    ``loss.name=focal__learning_rate=0.001`` (the section is left out)."""
    if not overrides:
        return "base"
    text = "__".join(f"{key.split('.', 1)[1]}={_slug(value)}" for key, value in overrides.items())
    text = _UNSAFE.sub("_", text).strip("._") or "setting"
    if len(text) > MAX_NAME:
        import hashlib

        digest = hashlib.sha1(json.dumps(overrides, sort_keys=True).encode()).hexdigest()[:8]
        text = f"{text[:MAX_NAME - 9]}-{digest}"
    return text


def grid(axes):
    """The settings, first axis slowest; names made unique."""
    settings, used = [], set()
    for combo in itertools.product(*[values for _, values in axes]):
        overrides = {}
        for (key, _), value in zip(axes, combo):
            overrides.update(zip(key, value) if isinstance(key, tuple) else [(key, value)])
        name = setting_name(overrides)
        base, i = name, 2
        while name.lower() in used:  # case-insensitive file systems
            name, i = f"{base}-{i}", i + 1
        used.add(name.lower())
        settings.append(Setting(name, overrides))
    return settings


def _set(config, key, value):
    node = config
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"--sweep {key}: {'.'.join(parts[:depth + 1])} is {child!r}, not an object")
        node = child
    node[parts[-1]] = copy.deepcopy(value)


# ------------------------------------------------------------------ planning
def plan_sweep(config, param_path, specs, seeds=1, do=None, command=None):
    """Validate every run of the grid; returns a :class:`Sweep`. Writes nothing."""
    from appzoo.plan import validate

    if not isinstance(seeds, int) or seeds < 1:
        raise ConfigError(f"--seeds: must be >= 1, got {seeds}")
    if do is not None and "train" not in do:
        raise ConfigError(f"--sweep: a sweep trains; --do {','.join(do)} has no 'train'")
    settings = grid(parse_axes(specs))
    probe = copy.deepcopy(config)  # the base settings: output_dir and seed as resolved
    probe.setdefault("trainer", {}).update(resume=False, overwrite_output_dir=True)
    base = validate(probe, param_path, do=do)
    if "train" not in base.do:
        raise ConfigError(f"--sweep: a sweep trains; trainer.do {base.do} has no 'train'")
    root = os.path.join(base.trainer.output_dir, "sweep")
    seed_list = [base.trainer.seed + i for i in range(seeds)]
    _check_extends_results(root, settings, seed_list)
    runs = []
    for setting in settings:
        for seed in seed_list:
            folder = os.path.join(root, setting.name, f"seed-{seed}")
            run_config = copy.deepcopy(config)
            for key, value in setting.overrides.items():
                _set(run_config, key, value)
            run_config.setdefault("trainer", {}).update(output_dir=folder, seed=seed)
            state = run_state(folder, do if do is not None else base.do)
            plan = _plan_run(run_config, state, param_path, do, setting.name)
            runs.append(SweepRun(setting, seed, folder, plan, state, run_config))
    greater = base.trainer.greater_is_better
    if greater is None:
        greater = not base.metric.endswith("loss")  # the trainer's rule
    return Sweep(root, settings, runs, seed_list, base.metric, greater, command, param_path)


def _check_extends_results(root, settings, seeds):
    """The results of the sweep already in ``root`` are rewritten only by a
    grid that keeps all their settings and seeds (the same or an extension):
    a smaller or another grid would replace the table of the first."""
    path = os.path.join(root, "sweep.json")
    if not os.path.exists(path):
        return
    old = archive.read_json(path, "results of a sweep")
    old_names = [row.get("setting") for row in old.get("settings", [])]
    names = {s.name for s in settings}
    lost = [name for name in old_names if name not in names]
    old_seeds = old.get("seeds", [])
    lost_seeds = sorted(set(old_seeds) - set(seeds))
    if lost or lost_seeds:
        what = f"setting {lost[0]!r}" if lost else f"seed {lost_seeds[0]}"
        raise ConfigError(f"--sweep: {path} holds the results of a sweep with {what}, which this grid leaves "
                          f"out, so its table would be replaced; keep every setting and seed of that sweep "
                          f"(adding more is fine: {', '.join(old_names)}; seeds {', '.join(map(str, old_seeds))}), "
                          f"or set trainer.output_dir to another folder")


def _plan_run(run_config, state, param_path, do, name):
    from appzoo.plan import validate

    run_config = copy.deepcopy(run_config)
    run_config["trainer"].update(resume=state == "resume", overwrite_output_dir=state in (*ENDED, "redo"))
    try:
        plan = validate(run_config, param_path, do=do)
    except ConfigError as e:
        raise ConfigError(f"sweep setting {name!r}: {e}") from None
    _check_same_settings(plan.trainer.output_dir, plan)
    return plan


#: run states a sweep does not run again
ENDED = ("done", "diverged")


def run_state(folder, do):
    """What a run folder holds: "done" (a complete metrics.json), "diverged"
    (:data:`DIVERGED_FILE`), "resume" (a checkpoint), "redo" (a saved model but
    none of these) or "new"."""
    path = os.path.join(folder, "metrics.json")
    if os.path.exists(path):
        try:
            metrics = archive.read_json(path)
        except UserError:
            metrics = {}
        if _complete(metrics, do):
            return "done"
    if os.path.exists(os.path.join(folder, DIVERGED_FILE)):
        return "diverged"
    run = RunFolder(folder)
    if run.latest_checkpoint():
        return "resume"
    return "redo" if run.has_run() else "new"


def _complete(metrics, do):
    if "wall_time_s" not in metrics or ("train" in do and "train" not in metrics):
        return False
    return "eval" not in do or "dev" in metrics or "test" in metrics


def _check_same_settings(folder, plan):
    """A run folder left by a sweep with other settings is not reused silently."""
    from appzoo.runner import changed_keys

    path = os.path.join(folder, "config.json")
    if not os.path.exists(path):
        return
    changed = changed_keys(archive.read_json(path, "config of a sweep run"), plan.config)
    if changed:
        key, old, new = changed[0]
        raise ConfigError(f"sweep: {folder} was run with {key}={json.dumps(old)}, this sweep says "
                          f"{json.dumps(new)}; give the sweep another trainer.output_dir")


# ------------------------------------------------------------------- running
def run_sweep(sweep):
    """Run what is not done yet; returns the summary written to sweep.json.

    Each run's state is read again just before it starts, and a run whose
    folder another live process holds is left to it, so the same sweep command
    started in two terminals shares the runs (two workers); the last one to
    finish writes the complete results."""
    from appzoo import runner

    todo = [r for r in sweep.runs if r.state not in ENDED]
    if len(todo) < len(sweep.runs):
        diverged = sum(r.state == "diverged" for r in sweep.runs)
        note(f"sweep: {len(sweep.runs) - len(todo)} of {len(sweep.runs)} runs already ended"
             f"{f' ({diverged} diverged)' if diverged else ''}; skipped")
    enabled = sweep.runs[0].plan.trainer.progress_bar
    bar = progress(total=len(sweep.runs), initial=len(sweep.runs) - len(todo), desc="sweep", unit="run",
                   disable=not enabled)
    elsewhere = []
    try:
        for r in todo:
            holder = RunFolder(r.folder).in_use()
            if holder is None:
                state = run_state(r.folder, r.plan.do)
                if state in ENDED:
                    note(f"sweep: {r.setting.name} seed {r.seed} was ended by another worker; skipped")
                    bar.update(1)
                    continue
                if state != r.state:  # another worker started it and stopped: resume or redo its folder
                    r.plan, r.state = _plan_run(r.config, state, sweep.param_path, r.plan.do, r.setting.name), state
                note(f"sweep: {'resuming' if r.state == 'resume' else 'running'} {r.setting.name} seed {r.seed} "
                     f"-> {r.folder}")
                try:
                    runner.run(r.plan)
                except archive.FolderInUse:  # taken between the check and the lock
                    holder = "another run"
                except DivergedError as error:
                    archive.write_json(os.path.join(r.folder, DIVERGED_FILE), {"seed": r.seed, "error": str(error)})
                    note(f"sweep: {r.setting.name} seed {r.seed} diverged ({error}); recorded in its "
                         f"{DIVERGED_FILE}, and the sweep goes on")
                if holder is None:
                    bar.update(1)
                    write_results(sweep)
                    continue
            note(f"sweep: {r.setting.name} seed {r.seed} is held by {holder}; left to it")
            elsewhere.append(r)
    finally:
        bar.close()
    if elsewhere:
        note(f"sweep: {len(elsewhere)} run(s) were left to another worker; the results are complete once it "
             f"finishes (or run this command again)")
    return write_results(sweep)


# ------------------------------------------------------------------- results
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
            metrics = archive.read_json(path, "metrics of a sweep run")
            if _complete(metrics, r.plan.do):
                finished[r.folder] = metrics
    diverged = {}
    for r in sweep.runs:
        path = os.path.join(r.folder, DIVERGED_FILE)
        if r.folder not in finished and os.path.exists(path):
            diverged[r.folder] = archive.read_json(path, "divergence record of a sweep run")
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


def plot(summary, path):
    import matplotlib

    matplotlib.use("Agg")  # files only
    import matplotlib.pyplot as plt

    key = summary["primary_metric"]
    rows = summary["settings"]
    # settings down the y axis (first on top), so long setting names stay readable
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.5 * len(rows)))
    for y, row in enumerate(rows):
        values = run_values(row, key)
        stats = row["metrics"][key]
        if stats["mean"] is not None:
            ax.errorbar([stats["mean"]], [y], xerr=[stats["std"] or 0.0], fmt="o", capsize=5, color="tab:blue")
            ax.plot(values, [y] * len(values), "x", color="tab:gray", alpha=0.7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{row['setting']} ({row['verdict']})" for row in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(f"{key}: mean ± sample std over seeds; x = one run")
    ax.set_title(os.path.basename(summary["param_path"]), fontsize=10)
    tmp = f"{path}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=100, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)


def write_results(sweep):
    summary = summarise(sweep)
    os.makedirs(sweep.root, exist_ok=True)
    archive.write_json(os.path.join(sweep.root, "sweep.json"), summary)
    archive.write_text(os.path.join(sweep.root, "sweep.md"), markdown(summary))
    plot(summary, os.path.join(sweep.root, "sweep.png"))
    return summary
