"""A search: planned (every range checked) before the first trial, then trials run until the study has
``search.trials`` of them, by one worker or several, on this machine or as Ray tasks.

The study is Optuna's, stored in SQLite (``<output_dir>/search/study.db``). Each worker holds a lock
file in ``search/workers/`` for its life and names it on each trial it starts, so a trial left running
by a worker that is gone (killed, or the machine lost) is known at once: it is marked failed and its
settings are queued again, to continue from its folder's last checkpoint (``trainer.resume: auto``).
Starting trials and counting them happen under one file lock (``search/.study.lock``), so two workers
on one folder never start more trials than asked, and never the same queued trial twice
(:mod:`appzoo.search.workers`). A study folder that cannot be used (a corrupt or read-only ``study.db``, a
file where the folder should be) is found while planning, read-only; an SQLite error once the search runs is
one line naming the file too (:mod:`appzoo.search.storage`).
"""
import copy
import dataclasses
import functools
import json
import os
import time
from typing import List, Optional

from appzoo.store.run_result import RunResult
from appzoo.errors import ConfigError, DivergedError, RunError, UserError
from appzoo.experiments import jobs
from appzoo.experiments.backends import LOCAL
from appzoo.experiments.jobs import Job
from appzoo.experiments.variants import check_trains, fresh, get_key, plan_variant, variant
from appzoo.params.search import SearchConfig
from appzoo.run import callbacks as cb
from appzoo.run.plan import validate
from appzoo.search import results
from appzoo.search.space import Dimension, parse_specs
from appzoo.search.storage import STUDY_FILE, check_study_folder, storage_errors
from appzoo.search.workers import Worker, requeue_abandoned
from appzoo.utils.progress import note

STUDY_NAME = "search"
OPTUNA_TESTED = "5.0.0"


@dataclasses.dataclass
class Search:
    root: str  # <output_dir>/search
    base: dict  # the param tree of every trial before its settings (no search section)
    settings: SearchConfig
    dimensions: List[Dimension]
    metric: str  # the dev metric the trials are judged on (trainer.metric_for_best)
    greater: bool
    baseline: dict  # {key: the value the param file itself gives}
    param_path: str = "<param file>"
    command: Optional[str] = None

    @property
    def storage_url(self):
        return f"sqlite:///{os.path.abspath(os.path.join(self.root, STUDY_FILE))}"

    def trial_folder(self, number):
        return os.path.join(self.root, f"trial-{number:04d}")

    def trial_config(self, overrides, folder, threads=None):
        config = variant(self.base, overrides, output_dir=folder, resume="auto", overwrite_output_dir=True,
                         do=["train"])
        if threads and not config["trainer"].get("num_threads"):
            config["trainer"]["num_threads"] = threads
        return config


def check_installed():
    import importlib.util

    if importlib.util.find_spec("optuna") is None:
        raise UserError(f"--search needs the optuna package: pip install optuna=={OPTUNA_TESTED}")


# ------------------------------------------------------------------ planning
def plan_search(config, param_path, specs, trials=None, timeout=None, do=None, command=None):
    """Check the search section, the space and every range's ends against the param file; writes nothing."""
    check_installed()
    if int(os.environ.get("PADDLE_TRAINERS_NUM", "1")) > 1:
        raise UserError("--search runs each trial in one process; start it without paddle.distributed.launch "
                        "(two workers of one study: the same command twice, or --backend ray)")
    check_trains("search", do)
    section = dict(config.get("search") or {})
    if trials is not None:
        section["trials"] = trials
    if timeout is not None:
        section["timeout_s"] = timeout
    settings = SearchConfig.from_section(section)
    dimensions = parse_specs(specs, settings.space)
    base = {k: copy.deepcopy(v) for k, v in config.items() if k != "search"}
    probe = fresh(base, do=None)
    plan = plan_variant(probe, param_path, ["train"])
    if plan.data.dev is None:
        raise ConfigError("--search: trials are judged on dev; set dataset_reader.dev")
    for dimension in dimensions:  # each end of each range, each choice: a bad key or value stops here
        for value in dimension.extremes():
            plan_variant(variant(probe, {dimension.key: value}), param_path, ["train"],
                         f"search {dimension.key}={dimension.text}: with {json.dumps(value)}")
    by_key = {d.key: d for d in dimensions}
    for i, start in enumerate(settings.start_with):
        for key, value in start.items():
            if key not in by_key:
                raise ConfigError(f"search.start_with[{i}].{key}: not a searched key "
                                  f"(searched: {', '.join(by_key)})")
            if not by_key[key].contains(value):
                raise ConfigError(f"search.start_with[{i}].{key}: {json.dumps(value)} is outside "
                                  f"{by_key[key].text}")
    baseline = {d.key: get_key(plan.config, d.key) for d in dimensions}
    root = os.path.join(plan.trainer.output_dir, "search")
    check_study_folder(root)
    return Search(root, base, settings, dimensions, plan.metric, plan.greater, baseline, param_path, command)


# ------------------------------------------------------------- the study
#: What a message about a study that cannot be used says to do.
def _quiet_optuna():
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def sampler(settings, worker_index):
    import optuna

    seed = None if settings.seed is None else settings.seed + worker_index
    if settings.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(n_startup_trials=settings.startup_trials, seed=seed, constant_liar=True)


def pruner(settings):
    import optuna

    if settings.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=settings.startup_trials, n_warmup_steps=0)
    if settings.pruner == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    return optuna.pruners.NopPruner()


def load_study(search, worker_index=0):
    """The study in ``search.root`` (made on the first start); ConfigError when it searches another
    space or metric."""
    import optuna

    _quiet_optuna()
    settings = search.settings
    if settings.seed is None:
        settings = dataclasses.replace(settings, seed=search.base.get("trainer", {}).get("seed", 42))
    storage = optuna.storages.RDBStorage(search.storage_url, engine_kwargs={"connect_args": {"timeout": 60}})
    study = optuna.create_study(study_name=STUDY_NAME, storage=storage, load_if_exists=True,
                                direction="maximize" if search.greater else "minimize",
                                sampler=sampler(settings, worker_index), pruner=pruner(settings))
    space = {d.key: d.text for d in search.dimensions}
    saved = study.user_attrs.get("space")
    if saved is None:
        study.set_user_attr("space", space)
        study.set_user_attr("metric", search.metric)
        for start in settings.start_with:
            by_key = {d.key: d for d in search.dimensions}
            study.enqueue_trial({k: by_key[k].as_param(v) for k, v in start.items()})
    elif saved != space or study.user_attrs.get("metric") != search.metric:
        path = os.path.join(search.root, STUDY_FILE)
        raise ConfigError(f"--search: {path} holds a study of {study.user_attrs.get('metric')} over "
                          f"{json.dumps(saved)}; this search is of {search.metric} over {json.dumps(space)}; "
                          f"search the same space to continue it, or set trainer.output_dir to another folder")
    return study


def next_trial(search, study, worker, started):
    """Start the next trial under the study lock: ``(trial, overrides)``, or ``(None, why)`` when this
    worker is done."""
    from optuna.trial import TrialState

    with worker.study_lock():
        requeue_abandoned(study, worker)
        trials = study.get_trials(deepcopy=False)
        waiting = [t for t in trials if t.state == TrialState.WAITING]
        limit = search.settings.timeout_s
        if limit is not None and time.time() - started >= limit:
            return None, f"the time budget of {limit:g} s is spent"
        if not waiting and len(results.counted(trials)) >= search.settings.trials:
            return None, f"the study has its {search.settings.trials} trials"
        trial = study.ask()
        overrides = {d.key: d.suggest(trial) for d in search.dimensions}
        folder = trial.user_attrs.get("folder") or search.trial_folder(trial.number)
        trial.set_user_attr("folder", folder)
        trial.set_user_attr("worker", worker.name)
        return trial, overrides


# ------------------------------------------------------------------ a trial
class ReportToTrial(cb.Callback):
    """Hands each dev evaluation to the Optuna trial, and stops the training when the pruner says so."""

    def __init__(self, trial):
        self.trial = trial
        self.pruned_at = None

    def on_evaluate(self, trainer, metrics):
        if trainer.metric not in metrics:
            return  # KeepBest says so, with the metrics there are
        step = trainer.state.global_step
        self.trial.report(float(metrics[trainer.metric]), step)
        if step >= trainer.state.total_steps:
            return  # the last evaluation: stopping now saves nothing, and the trial has finished
        if self.trial.should_prune():
            self.pruned_at = step
            trainer.state.should_stop = True


def run_trial(search, study, trial, overrides, threads=None):
    """Train one trial in its folder and tell the study how it ended; returns that state's name."""
    from optuna.trial import TrialState

    folder = trial.user_attrs.get("folder") or search.trial_folder(trial.number)
    shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in overrides.items())
    cpu, wall = time.process_time(), time.time()

    def record(state, value=None, **attrs):
        for key, item in {"cpu_time_s": round(time.process_time() - cpu, 2),
                          "wall_time_s": round(time.time() - wall, 2), **attrs}.items():
            trial.set_user_attr(key, item)
        study.tell(trial, value, state=state)
        return state.name.lower()

    try:
        plan = validate(search.trial_config(overrides, folder, threads), search.param_path)
    except ConfigError as error:  # a combination of values no single range shows (checked ends each alone)
        note(f"search: trial {trial.number} ({shown}) does not validate: {error}; recorded as failed")
        return record(TrialState.FAIL, error=str(error))
    report = ReportToTrial(trial)
    note(f"search: trial {trial.number}: {shown} -> {folder}")
    # stopped, the trial is left running: the next start sees this worker gone and continues it
    outcome = jobs.run(plan, {"trial": trial.number}, f"the same --search command continues the study, and trial "
                                                      f"{trial.number} from that checkpoint", callbacks=[report])
    error = outcome.error
    if outcome.state == jobs.DIVERGED:
        note(f"search: trial {trial.number} diverged ({error}); recorded, and the search goes on")
        return record(TrialState.FAIL, diverged=str(error))
    if error is not None:  # from the data with these settings (a loss that needs every class, say)
        state = record(TrialState.FAIL, error=str(error))
        ended = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
        if not ended or isinstance(error, RunError):  # no trial got through yet: all would fail the same way;
            raise error  # or the disk is full
        note(f"search: trial {trial.number} ({shown}) failed: {error}; recorded, and the search goes on")
        return state
    result = RunResult.from_json(outcome.metrics)
    value = result.best["value"]
    attrs = {"steps": result.steps}
    if report.pruned_at is not None:
        note(f"search: trial {trial.number} pruned at step {report.pruned_at}")
        return record(TrialState.PRUNED, pruned_at_step=report.pruned_at, best_value=value, **attrs)
    if value is None:
        return record(TrialState.FAIL, error="no dev evaluation", **attrs)
    note(f"search: trial {trial.number} finished: dev {search.metric} {value:.4f}")
    return record(TrialState.COMPLETE, float(value), **attrs)


class TrialWork:
    """A trial's job: :func:`run_trial` with the driver's study and trial here; pickled for a Ray task, it
    carries the trial's id (the storage's key of it) and joins the study there, as a connection cannot
    travel."""

    def __init__(self, search, study, trial, overrides):
        self.search, self.study, self.trial, self.overrides = search, study, trial, overrides
        self.trial_id = trial._trial_id

    def __getstate__(self):
        return {"search": self.search, "trial_id": self.trial_id, "overrides": self.overrides}

    def __setstate__(self, state):
        self.__dict__.update(state, study=None, trial=None)

    def __call__(self, threads=None):
        study, trial = self.study, self.trial
        if study is None:
            import optuna

            study = load_study(self.search)
            trial = optuna.trial.Trial(study, self.trial_id)
        return run_trial(self.search, study, trial, self.overrides, threads=threads)


# ----------------------------------------------------------------- running
def run_search(search, backend=LOCAL):
    """Run trials until the study has its trials (or this worker's time is spent); then evaluate the
    best trial on dev and test and write the results. ``backend``: where the trials run
    (:mod:`appzoo.experiments.backends`: one after another in this process, or Ray tasks)."""
    os.makedirs(search.root, exist_ok=True)
    worker = Worker(search.root)
    try:
        with storage_errors(search.root):
            with worker.study_lock():
                study = load_study(search, worker.index)
            why = []
            backend.run(_trial_jobs(search, study, worker, time.time(), why),
                        lambda job, state: results.write(search, study))
            note(f"search: this worker stops: {why[0]}")
            summary = finish(search, study)
    finally:
        worker.release()
    check_some_trial_trained(search, summary)
    return summary


def _trial_jobs(search, study, worker, started, why):
    """Each trial's job, the trial started only when the backend has room for it; ``why`` gets why there
    are no more."""
    from optuna.trial import TrialState

    while True:
        trial, overrides = next_trial(search, study, worker, started)
        if trial is None:
            why.append(overrides)
            return
        yield Job(f"search: trial {trial.number}", TrialWork(search, study, trial, overrides), trial,
                  on_failure=functools.partial(study.tell, trial.number, state=TrialState.FAIL,
                                               skip_if_finished=True), task="_trial_task")


def check_some_trial_trained(search, summary):
    """DivergedError (exit 3, as a run that diverges) when the study has ended and its every trial diverged
    or failed, one at least diverged; UserError (exit 2) when every trial failed: there is no setting to report."""
    ended = [r for r in summary["trials"] if r["state"] != "abandoned"]
    states = [r["state"] for r in ended]
    if ended and all(s == "failed" for s in states):  # no setting trained, none diverged: the settings or data
        raise UserError(f"search: no trial trained: every trial failed ({len(ended)} of {len(ended)}; the first: "
                        f"{ended[0]['error'] or 'no error recorded'}); fix the space or the param file; each "
                        f"trial's error is in {os.path.join(search.root, 'search.md')}")
    if not ended or "diverged" not in states or any(s not in ("diverged", "failed") for s in states):
        return
    diverged = states.count("diverged")
    what = (f"every trial diverged ({diverged} of {len(ended)})" if diverged == len(ended) else
            f"no trial trained: {diverged} of {len(ended)} diverged, the others failed")
    raise DivergedError(f"search: {what}: the training loss or a gradient was not finite; lower "
                        f"trainer.learning_rate (or its searched range), keep trainer.max_grad_norm > 0, or check "
                        f"the data; each trial's error is in {os.path.join(search.root, 'search.md')}")


def finish(search, study):
    """When the study has all its trials and none runs: evaluate the best trial on dev and test (once).
    Then write the results (other workers' trials may have ended since this worker's last)."""
    from optuna.trial import TrialState

    summary = results.summarise(search, study)
    trials = study.get_trials(deepcopy=False)
    open_trials = [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    best = summary["best"]
    if open_trials:
        note(f"search: {len(open_trials)} trial(s) still running or queued; the results are complete once "
             f"they end (or run this command again)")
    elif len(results.counted(trials)) >= search.settings.trials and best is not None and not best.get("test") \
            and _evaluate(search, best):
        summary = results.summarise(search, study)  # with the best trial's test metrics
    return results.write(search, study, summary)


def _evaluate(search, best):
    """Evaluate the best trial's model on dev and test (its metrics.json gets both); False when the
    param file has no test split or another worker is at it."""
    folder = best["folder"]
    config = search.trial_config(best["params"], folder)
    config["trainer"].update(resume=False, do=["eval"])
    plan = validate(config, search.param_path, do=["eval"])
    if plan.data.test is None:
        return False
    note(f"search: evaluating the best trial ({folder}) on dev and test")
    outcome = jobs.run(plan)
    if outcome.state == jobs.IN_USE:
        return False
    if outcome.error is not None:
        raise outcome.error
    return True
