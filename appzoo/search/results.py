"""The results of a search: ``search.json``, ``search.md``, ``search.png`` and ``best-params.json`` in
``<output_dir>/search/``, rewritten after every trial, with the best trial's test metrics once the study
has evaluated it (chosen on dev, reported on test: :func:`appzoo.search.study.finish`)."""
import json
import os
import shlex

from appzoo.store import run_result
from appzoo.store.archive import RunFolder
from appzoo.experiments.variants import variant
from appzoo.utils import files
from appzoo.utils.markdown import cell, literal
from appzoo.utils.fonts import pyplot

STATES = {"COMPLETE": "finished", "PRUNED": "pruned", "FAIL": "failed", "RUNNING": "running",
          "WAITING": "queued"}


def continued(trials):
    """``{number of an abandoned trial: number of the trial that continues it}``."""
    return {t.user_attrs["continues"]: t.number for t in trials if "continues" in t.user_attrs}


def counted(trials):
    """Trials that count against ``search.trials``: all but those abandoned (their requeued twin counts)."""
    gone = continued(trials)
    return [t for t in trials if t.number not in gone]


def summarise(search, study):
    """The study as one dict: the trials in order, the best one, and the counts."""
    trials = study.get_trials(deepcopy=False)
    gone = continued(trials)
    by_key = {d.key: d for d in search.dimensions}
    rows = []
    for t in trials:
        attrs = t.user_attrs
        state = STATES[t.state.name]
        if "diverged" in attrs:
            state = "diverged"
        elif t.number in gone:
            state = "abandoned"
        params = {k: by_key[k].from_param(v) for k, v in t.params.items() if k in by_key}
        rows.append({
            "trial": t.number, "state": state, "params": params,
            "value": t.value if t.value is not None else attrs.get("best_value"),
            "steps": attrs.get("steps"), "pruned_at_step": attrs.get("pruned_at_step"),
            "wall_time_s": attrs.get("wall_time_s"), "cpu_time_s": attrs.get("cpu_time_s"),
            "continues": attrs.get("continues"), "continued_by": gone.get(t.number),
            "error": attrs.get("diverged") or attrs.get("error"), "folder": attrs.get("folder"),
            "worker": attrs.get("worker"),
            "reports": {str(step): value for step, value in sorted(t.intermediate_values.items())},
        })
    finished = [r for r in rows if r["state"] == "finished"]
    best = None
    if finished:
        pick = max if search.greater else min
        best = dict(pick(finished, key=lambda r: r["value"]))
        metrics_path = RunFolder(best["folder"]).metrics
        if os.path.exists(metrics_path):
            result = run_result.read(metrics_path, "metrics of the best trial")
            best["dev"] = _scalars(result.dev)
            best["test"] = _scalars(result.test)
    counts = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    return {
        "param_path": search.param_path, "command": search.command, "metric": search.metric,
        "direction": "maximize" if search.greater else "minimize",
        "space": {d.key: d.text for d in search.dimensions}, "baseline": search.baseline,
        "settings": {"trials": search.settings.trials, "sampler": search.settings.sampler,
                     "pruner": search.settings.pruner, "startup_trials": search.settings.startup_trials},
        "counts": counts, "best": best, "trials": rows,
        "cpu_time_s": round(sum(r["cpu_time_s"] or 0 for r in rows), 1),
        "confirm": _confirm_command(search, best),
    }


def _scalars(metrics):
    if not metrics:
        return None
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _confirm_command(search, best):
    """A sweep of the param file's own settings against the best trial's over seeds: one seed per trial
    and the best of many on dev flatter the winner, so say how to check it."""
    if best is None:
        return None
    keys = list(best["params"])
    if any(search.baseline.get(k) is None for k in keys) or all(search.baseline[k] == best["params"][k]
                                                                  for k in keys):
        return None
    values = [[search.baseline[k] for k in keys], [best["params"][k] for k in keys]]
    return shlex.join(["python", "run_trainer.py", "--param_path", os.path.join(search.root, "best-params.json"),
                       "--sweep", f"{','.join(keys)}={json.dumps(values)}", "--seeds", "5"])


def best_params(search, best):
    """The best trial's settings as a complete param file: the searched param file with them set, and a
    run folder of its own."""
    config = variant(search.base, best["params"], output_dir=os.path.join(search.root, "best-run"))
    trainer = config["trainer"]
    for key in ("resume", "overwrite_output_dir"):
        trainer.pop(key, None)
    return config


def markdown(summary):
    best = summary["best"]
    lines = [f"# Search: {summary['param_path']}", ""]
    if summary["command"]:
        lines += [f"`{summary['command']}`", ""]
    counts = ", ".join(f"{n} {state}" for state, n in summary["counts"].items())
    lines += [f"Trials judged on dev `{summary['metric']}` ({summary['direction']}): {counts}; "
              f"{summary['settings']['sampler']} sampler, {summary['settings']['pruner']} pruner; "
              f"{summary['cpu_time_s']} CPU seconds.", ""]
    lines += ["| searched key | range | param file's value |", "|---|---|---|"]
    lines += [f"| {cell(k)} | {cell(text)} | {cell(json.dumps(summary['baseline'].get(k)))} |"
              for k, text in summary["space"].items()]
    lines.append("")
    if best is None:
        lines += ["No trial has finished yet.", ""]
    else:
        settings = ", ".join(f"{k}={_short(v)}" for k, v in best["params"].items())
        lines += [f"## Best trial: {best['trial']}", "", f"{settings}", "",
                  f"dev {summary['metric']} {best['value']:.4f} (the best of {summary['counts'].get('finished')} "
                  f"finished trials, one seed each: expect less on new data)."]
        if best.get("test"):
            shown = ", ".join(f"{k} {v:.4f}" for k, v in best["test"].items() if k in _HEADLINE)
            lines += ["", f"test (the best trial only, chosen on dev): {shown}"]
        lines += ["", "`best-params.json` is a complete param file with these settings."]
        if summary["confirm"]:
            lines += ["", "Before trusting the gain, compare it with the param file's own settings over seeds:",
                      "", f"    {summary['confirm']}"]
        lines.append("")
    lines += ["## Trials", "", "| trial | state | settings | dev | steps | CPU s | wall s | note |",
              "|---|---|---|---|---|---|---|---|"]
    for r in summary["trials"]:
        settings = ", ".join(f"{k.split('.', 1)[1]}={_short(v)}" for k, v in r["params"].items())
        value = "" if r["value"] is None else f"{r['value']:.4f}"
        notes = []
        if r["pruned_at_step"] is not None:
            notes.append(f"pruned at step {r['pruned_at_step']}")
        if r["continued_by"] is not None:
            notes.append(f"its worker stopped; continued by trial {r['continued_by']}")
        if r["continues"] is not None:
            notes.append(f"continues trial {r['continues']}")
        if r["error"]:  # may quote the data (a label, a line), hence literal below
            notes.append(r["error"])
        lines.append(f"| {r['trial']} | {r['state']} | {cell(settings)} | {value} | {r['steps'] or ''} | "
                     f"{r['cpu_time_s'] or ''} | {r['wall_time_s'] or ''} | {literal('; '.join(notes))} |")
    return "\n".join(lines) + "\n"


def _short(value):
    """A searched value for people: floats to 4 significant digits (search.json keeps them whole)."""
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value)


_HEADLINE = ("accuracy", "macro_f1", "micro_f1", "f1", "auc", "precision", "recall")


def plot(summary, study, path):
    """Left: each trial's dev value and the best so far; right: the searched keys' importances."""
    plt = pyplot()
    fig, (history, importance) = plt.subplots(1, 2, figsize=(12, 4.2))
    colours = {"finished": "tab:blue", "pruned": "tab:orange", "diverged": "tab:red"}  # failed: as diverged
    best, curve = None, []
    pick = max if summary["direction"] == "maximize" else min
    bottom = history.get_xaxis_transform()  # x: the trial, y: a share of the axis's height
    for r in summary["trials"]:
        if r["value"] is not None and r["state"] in colours:
            history.plot([r["trial"]], [r["value"]], "o", color=colours[r["state"]], alpha=0.8)
        elif r["state"] in ("diverged", "failed"):  # no dev value: marked on the axis
            history.plot([r["trial"]], [0.03], "x", color=colours["diverged"], transform=bottom, markersize=9)
        if r["state"] == "finished":
            best = r["value"] if best is None else pick(best, r["value"])
        if best is not None:
            curve.append((r["trial"], best))
    if curve:
        history.step(*zip(*curve), where="post", color="tab:green", label="best so far")
    for state, colour in colours.items():
        history.plot([], [], "x" if state == "diverged" else "o", color=colour,
                     label="diverged or failed (no dev value)" if state == "diverged" else state)
    history.legend(fontsize=8, loc="best")
    history.set_xlabel("trial")
    history.xaxis.get_major_locator().set_params(integer=True)
    history.set_ylabel(f"dev {summary['metric']}")
    history.set_title("optimisation history (a pruned trial: its best dev value before it stopped)", fontsize=10)
    history.grid(alpha=0.3)
    scores = _importances(study)
    if scores:
        names = list(scores)[::-1]
        importance.barh(range(len(names)), [scores[n] for n in names], color="tab:blue")
        importance.set_yticks(range(len(names)))
        importance.set_yticklabels(names, fontsize=8)
        importance.set_xlabel("importance (fANOVA, share of the variance of dev values)")
    else:
        importance.text(0.5, 0.5, "importances need at least 2 finished trials\nwith different settings",
                        ha="center", va="center", transform=importance.transAxes)
        importance.set_axis_off()
    importance.set_title("parameter importances", fontsize=10)
    fig.tight_layout()
    tmp = f"{path}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def _importances(study):
    import optuna
    from optuna.trial import TrialState

    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(finished) < 2 or len({json.dumps(t.params, sort_keys=True) for t in finished}) < 2:
        return None
    try:
        evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
        return optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (RuntimeError, ValueError):  # e.g. every finished trial has the same value
        return None


def write(search, study, summary=None):
    """Rewrite the results from the study as it is now (``summary``: already made of it); returns the
    summary."""
    summary = summary or summarise(search, study)
    os.makedirs(search.root, exist_ok=True)
    files.write_json(os.path.join(search.root, "search.json"), summary)
    files.write_text(os.path.join(search.root, "search.md"), markdown(summary))
    if summary["best"] is not None:
        files.write_json(os.path.join(search.root, "best-params.json"), best_params(search, summary["best"]))
    plot(summary, study, os.path.join(search.root, "search.png"))
    return summary
