"""The runs of a sweep: each planned before the first starts, then run, resumed,
skipped or left to another worker; the results rewritten after every run."""
import dataclasses
import functools
import json
import os
from typing import List, Optional

from appzoo.errors import ConfigError, UserError
from appzoo.experiments import jobs
from appzoo.experiments.backends import LOCAL
from appzoo.experiments.jobs import Job
from appzoo.experiments.variants import check_trains, fresh, plan_variant, variant
from appzoo.store.archive import RunFolder
from appzoo.store.resolve import changed_keys
from appzoo.sweep import page
from appzoo.sweep.plots import plot
from appzoo.sweep.settings import Setting, grid, parse_axes
from appzoo.sweep.summary import complete, markdown, summarise
from appzoo.utils import files
from appzoo.utils.progress import note, progress


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


# ------------------------------------------------------------------ planning
def plan_sweep(config, param_path, specs, seeds=1, do=None, command=None):
    """Validate every run of the grid; returns a :class:`Sweep`. Writes nothing."""
    if not isinstance(seeds, int) or seeds < 1:
        raise ConfigError(f"--seeds: must be >= 1, got {seeds}")
    check_trains("sweep", do)
    settings = grid(parse_axes(specs))
    base = plan_variant(fresh(config), param_path, do)  # output_dir and seed as resolved
    check_trains("sweep", base.do, "trainer.do")
    root = os.path.join(base.trainer.output_dir, "sweep")
    seed_list = [base.trainer.seed + i for i in range(seeds)]
    _check_extends_results(root, settings, seed_list)
    runs = []
    for setting in settings:
        for seed in seed_list:
            folder = os.path.join(root, setting.name, f"seed-{seed}")
            run_config = variant(config, setting.overrides, output_dir=folder, seed=seed)
            state = run_state(folder, do if do is not None else base.do)
            plan = _plan_run(run_config, state, param_path, do, setting.name)
            runs.append(SweepRun(setting, seed, folder, plan, state, run_config))
    return Sweep(root, settings, runs, seed_list, base.metric, base.greater, command, param_path)


def _check_extends_results(root, settings, seeds):
    """The results of the sweep already in ``root`` are rewritten only by a
    grid that keeps all their settings and seeds (the same or an extension):
    a smaller or another grid would replace the table of the first."""
    path = os.path.join(root, "sweep.json")
    if not os.path.exists(path):
        return
    old = files.read_json(path, "results of a sweep")
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
    run_config = variant(run_config, {}, resume=state == "resume", overwrite_output_dir=state in (*ENDED, "redo"))
    plan = plan_variant(run_config, param_path, do, f"sweep setting {name!r}")
    _check_same_settings(plan.trainer.output_dir, plan)
    return plan


#: run states a sweep does not run again
ENDED = ("done", "diverged")


def run_state(folder, do):
    """What a run folder holds: "done" (a complete metrics.json), "diverged"
    (:attr:`RunFolder.diverged`), "resume" (a checkpoint), "redo" (a saved model but
    none of these) or "new"."""
    path = RunFolder(folder).metrics
    if os.path.exists(path):
        try:
            metrics = files.read_json(path)
        except UserError:
            metrics = {}
        if complete(metrics, do):
            return "done"
    if os.path.exists(RunFolder(folder).diverged):
        return "diverged"
    run = RunFolder(folder)
    if run.latest_checkpoint():
        return "resume"
    return "redo" if run.has_run() else "new"


def _check_same_settings(folder, plan):
    """A run folder left by a sweep with other settings is not reused silently."""
    path = RunFolder(folder).config
    if not os.path.exists(path):
        return
    changed = changed_keys(files.read_json(path, "config of a sweep run"), plan.config, plan.defaults)
    if changed:
        key, old, new = changed[0]
        raise ConfigError(f"sweep: {folder} was run with {key}={json.dumps(old)}, this sweep says "
                          f"{json.dumps(new)}; give the sweep another trainer.output_dir")


# ------------------------------------------------------------------- running
def run_sweep(sweep, backend=LOCAL):
    """Run what is not done yet; returns the summary written to sweep.json.

    Each run's state is read again just before it starts, and a run whose
    folder another live process holds is left to it, so the same sweep command
    started in two terminals shares the runs (two workers); the last one to
    finish writes the complete results. ``backend``: where the runs run
    (:mod:`appzoo.experiments.backends`: one after another in this process, or Ray tasks)."""
    todo = [r for r in sweep.runs if r.state not in ENDED]
    if len(todo) < len(sweep.runs):
        diverged = sum(r.state == "diverged" for r in sweep.runs)
        note(f"sweep: {len(sweep.runs) - len(todo)} of {len(sweep.runs)} runs already ended"
             f"{f' ({diverged} diverged)' if diverged else ''}; skipped")
    enabled = sweep.runs[0].plan.trainer.progress_bar
    bar = progress(total=len(sweep.runs), initial=len(sweep.runs) - len(todo), desc="sweep", unit="run",
                   disable=not enabled)
    elsewhere = []

    def ended(job, holder):
        r = job.handle
        if holder is None:
            bar.update(1)
            write_results(sweep)
        else:
            note(f"sweep: {r.setting.name} seed {r.seed} is held by {holder}; left to it")
            elsewhere.append(r)

    try:
        backend.run((Job(f"sweep: {r.setting.name} seed {r.seed}", functools.partial(_work, sweep, r), r,
                         task="_sweep_task") for r in todo), ended)
    finally:
        bar.close()
    if elsewhere:
        note(f"sweep: {len(elsewhere)} run(s) were left to another worker; the results are complete once it "
             f"finishes (or run this command again)")
    return write_results(sweep)


def _work(sweep, r, threads=None):
    """A run's job: in a Ray task, with that task's threads where the param file names none."""
    if threads and not r.plan.trainer.num_threads:  # in the plan, and in the config a re-plan starts from
        r.plan.trainer.num_threads = r.config["trainer"]["num_threads"] = threads
    return run_one(sweep, r)


def run_one(sweep, r):
    """Run ``r`` unless another worker holds or ended it; returns None, or who holds its folder."""
    holder = RunFolder(r.folder).in_use()
    if holder is not None:
        return holder
    state = run_state(r.folder, r.plan.do)
    if state in ENDED:
        note(f"sweep: {r.setting.name} seed {r.seed} was ended by another worker; skipped")
        return None
    if state != r.state:  # another worker started it and stopped: resume or redo its folder
        r.plan, r.state = _plan_run(r.config, state, sweep.param_path, r.plan.do, r.setting.name), state
    note(f"sweep: {'resuming' if r.state == 'resume' else 'running'} {r.setting.name} seed {r.seed} "
         f"-> {r.folder}")
    outcome = jobs.run(r.plan, {"seed": r.seed}, "the same --sweep command continues the sweep, and this run "
                                                 "from that checkpoint")
    if outcome.state == jobs.IN_USE:  # taken between the check and the lock
        return "another run"
    if outcome.state == jobs.FAILED:  # the data or the disk: every other run would meet it too
        raise outcome.error
    if outcome.state == jobs.DIVERGED:
        note(f"sweep: {r.setting.name} seed {r.seed} diverged ({outcome.error}); recorded in "
             f"{RunFolder(r.folder).diverged}, and the sweep goes on")
    return None


def write_results(sweep):
    summary = summarise(sweep)
    os.makedirs(sweep.root, exist_ok=True)
    files.write_json(os.path.join(sweep.root, "sweep.json"), summary)
    files.write_text(os.path.join(sweep.root, "sweep.md"), markdown(summary))
    plot(summary, os.path.join(sweep.root, "sweep.png"))
    page.write(sweep.root, summary)
    return summary
