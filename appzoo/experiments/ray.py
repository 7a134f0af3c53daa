"""``--backend ray``: the trials of a search and the runs of a sweep as Ray tasks.

    python run_trainer.py --param_path X --search ... --backend ray                       # a local cluster
    python run_trainer.py --param_path X --sweep ... --backend ray --address HEAD:6379    # join one

Each trial or run is one task that asks Ray for ``--cpus-per-trial`` CPUs (default 1) and
``--gpus-per-trial`` GPUs (default 0), and trains with that many paddle threads, so a cluster of C CPUs
runs C / cpus trials at once. The driver (this process) keeps the study's bookkeeping: it starts each
trial (:func:`appzoo.search.study.next_trial`), hands its settings to a task, and rewrites the results as
tasks end; the tasks write into the same output folder, which on a cluster of several machines must be
a shared file system (as for two workers of one study). Ray is an optional dependency
(``pip install 'appzoo[ray]'``): an 80 MB wheel most users of one machine never need.
"""
import importlib.util
import os
import sys

from appzoo.env import available_cores
from appzoo.errors import UserError, first_line
from appzoo.utils.progress import note

RAY_TESTED = "2.60.0"
_READY = []  # this worker process has paddle loaded and the components registered


class Backend:
    def __init__(self, address=None, cpus=1, gpus=0):
        if not cpus > 0:
            raise UserError(f"--cpus-per-trial: must be > 0, got {cpus:g}")
        if not gpus >= 0:
            raise UserError(f"--gpus-per-trial: must be >= 0, got {gpus:g}")
        if importlib.util.find_spec("ray") is None:
            raise UserError(f"--backend ray needs the ray package: pip install 'appzoo[ray]' "
                            f"(or pip install ray=={RAY_TESTED})")
        self.address, self.cpus, self.gpus = address, cpus, gpus

    @property
    def threads(self):
        return max(1, int(self.cpus))

    def connect(self):
        """Join ``--address``, or start a local cluster; returns how many tasks fit at once. The connection
        (and a local cluster, with its worker processes that have paddle loaded) stays for the rest of this
        process, so a second search or sweep from Python reuses it; Ray shuts it down at exit."""
        import ray

        if not ray.is_initialized():
            root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # appzoo/ and tasks/
            path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
            env = {"PYTHONPATH": path, "OMP_NUM_THREADS": str(self.threads)}
            # a local cluster gets the cores this process may use (Ray would count the machine's)
            cpus = None if self.address else available_cores()
            try:
                ray.init(address=self.address, num_cpus=cpus, runtime_env={"env_vars": env},
                         include_dashboard=False, logging_level="ERROR", log_to_driver=True)
            except (ConnectionError, ValueError, RuntimeError) as error:
                raise UserError(f"--address {self.address}: cannot join the Ray cluster ({first_line(error)})") \
                    from None
        cpus = ray.cluster_resources().get("CPU", 0)
        slots = int(cpus // self.cpus)
        if slots < 1:
            raise UserError(f"--cpus-per-trial {self.cpus:g}: the Ray cluster has {cpus:g} CPU(s)")
        return slots

    def _remote(self, function):
        import ray

        return ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_retries=0)(function)

    def _results(self, pending):
        """``(key, result, exception or None)`` of each task as it ends; a UserError inside a task comes
        out as itself (its one line), anything else as the RayTaskError."""
        import ray

        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            key = pending.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayTaskError as error:
                cause = getattr(error, "cause", None)
                yield key, None, cause if isinstance(cause, BaseException) else error
            else:
                yield key, result, None

    # ------------------------------------------------------------ a search
    def run_trials(self, search, study, worker, started):
        """Keep every slot of the cluster busy with a trial until the study has its trials."""
        from optuna.trial import TrialState

        from appzoo.search import results
        from appzoo.search.study import next_trial

        slots = self.connect()
        task = self._remote(_trial_task)
        pending, why = {}, None
        try:
            while True:
                while why is None and len(pending) < slots:
                    trial, overrides = next_trial(search, study, worker, started)
                    if trial is None:
                        why = overrides
                        break
                    # the task joins the study with the trial's id (the storage's key of the trial)
                    pending[task.remote(search, trial._trial_id, overrides, os.getcwd(), self.threads)] = trial
                if not pending:
                    return why
                for trial, _, error in self._results(pending):
                    if error is not None:
                        study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
                        if isinstance(error, UserError):
                            raise error
                        note(f"search: trial {trial.number} failed in its Ray task: {_last_line(error)}")
                    results.write(search, study)
        finally:
            _cancel(pending)

    # ------------------------------------------------------------- a sweep
    def run_runs(self, sweep, todo, ended):
        """Run the sweep's runs ``todo`` as tasks; ``ended(run)`` after each (the results rewritten)."""
        slots = self.connect()
        task = self._remote(_sweep_task)
        pending, queue = {}, list(todo)
        try:
            while queue or pending:
                while queue and len(pending) < slots:
                    r = queue.pop(0)
                    pending[task.remote(sweep, sweep.runs.index(r), os.getcwd(), self.threads)] = r
                for r, holder, error in self._results(pending):
                    if isinstance(error, UserError):
                        raise error
                    if error is not None:
                        note(f"sweep: {r.setting.name} seed {r.seed} failed in its Ray task: {_last_line(error)}")
                    ended(r, holder)
        finally:
            _cancel(pending)


def _cancel(pending):
    """Stop the tasks still running when the driver stops early (an error, Ctrl-C)."""
    import ray

    for ref in pending:
        ray.cancel(ref, force=True)


def _last_line(error):
    """What a task's traceback ends with: its exception (Ray's message starts with the whole traceback)."""
    text = str(error).strip().splitlines()
    return text[-1][:200] if text else type(error).__name__


# ------------------------------------------------------------ in the task
def _set_up(cwd, threads):
    """Once per Ray worker process: the driver's folder (relative paths in param files), CPU threads
    before paddle loads, paddle, and the registered components."""
    os.chdir(cwd)
    if _READY:
        return
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    from appzoo.env import configure_cpu, import_paddle_quietly
    from appzoo.registry import load_components

    configure_cpu(threads)
    import_paddle_quietly()
    load_components()
    _READY.append(True)


def _trial_task(search, trial_id, overrides, cwd, threads):
    import optuna

    from appzoo.search.study import load_study, run_trial

    _set_up(cwd, threads)
    study = load_study(search)
    return run_trial(search, study, optuna.trial.Trial(study, trial_id), overrides, threads=threads)


def _sweep_task(sweep, index, cwd, threads):
    from appzoo.sweep.runs import run_one

    _set_up(cwd, threads)
    run = sweep.runs[index]
    if not run.plan.trainer.num_threads:  # in the plan, and in the config a re-plan starts from
        run.plan.trainer.num_threads = run.config["trainer"]["num_threads"] = threads
    return run_one(sweep, run)
