"""``--backend ray``: the trials of a search and the runs of a sweep as Ray tasks.

    python run_trainer.py --param_path X --search ... --backend ray                       # a local cluster
    python run_trainer.py --param_path X --sweep ... --backend ray --address HEAD:6379    # join one

Each trial or run is one task that asks Ray for ``--cpus-per-trial`` CPUs (default 1) and
``--gpus-per-trial`` GPUs (default 0), and trains with that many paddle threads, so a cluster of C CPUs
runs C / cpus trials at once. The driver (this process) keeps the study's bookkeeping: it starts each
trial (:func:`appzoo.search.study.next_trial`), hands its job to a task, and rewrites the results as
tasks end; the tasks write into the same output folder, which on a cluster of several machines must be
a shared file system (as for two workers of one study). Ray is an optional dependency
(``pip install 'appzoo[ray]'``): an 80 MB wheel most users of one machine never need.
"""
import importlib.util
import os
import sys

from appzoo.env import available_cores, configure_cpu, import_paddle_quietly
from appzoo.errors import UserError, first_line
from appzoo.experiments.backends import Backend
from appzoo.utils.progress import note
from appzoo.registry import load_components

RAY_TESTED = "2.60.0"
_READY = []  # this worker process has paddle loaded and the components registered


class Ray(Backend):
    """Each job one Ray task of ``cpus`` CPUs and ``gpus`` GPUs, as many at once as the cluster holds."""
    name = "ray"

    @staticmethod
    def is_available():
        return importlib.util.find_spec("ray") is not None

    def __init__(self, address=None, cpus=1, gpus=0):
        if not cpus > 0:
            raise UserError(f"--cpus-per-trial: must be > 0, got {cpus:g}")
        if not gpus >= 0:
            raise UserError(f"--gpus-per-trial: must be >= 0, got {gpus:g}")
        if not self.is_available():
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
            root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # appzoo/, tasks/
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

    def run(self, jobs, on_done):
        """Keep every slot of the cluster busy with a job until ``jobs`` has none left. A job whose task
        raised: its ``on_failure``, then a UserError goes on up (its one line), anything else is noted and
        the others go on (``on_done(job, None)``)."""
        import ray

        slots = self.connect()
        task = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus, max_retries=0)(_run_job)
        pending, jobs = {}, iter(jobs)
        try:
            while True:
                while len(pending) < slots:
                    job = next(jobs, None)
                    if job is None:
                        break
                    pending[task.options(name=job.task).remote(job.work, os.getcwd(), self.threads)] = job
                if not pending:
                    return
                for job, result, error in _results(pending):
                    if error is not None:
                        if job.on_failure is not None:
                            job.on_failure()
                        if isinstance(error, UserError):
                            raise error
                        note(f"{job.name} failed in its Ray task: {_last_line(error)}")
                    on_done(job, result)
        finally:
            _cancel(pending)


def _results(pending):
    """``(job, result, exception or None)`` of each task as it ends; a UserError inside a task comes out as
    itself (its one line), anything else as the RayTaskError."""
    import ray

    done, _ = ray.wait(list(pending), num_returns=1)
    for ref in done:
        job = pending.pop(ref)
        try:
            result = ray.get(ref)
        except ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            yield job, None, cause if isinstance(cause, BaseException) else error
        else:
            yield job, result, None


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

    configure_cpu(threads)
    import_paddle_quietly()
    load_components()
    _READY.append(True)


def _run_job(work, cwd, threads):
    _set_up(cwd, threads)
    return work(threads=threads)
