"""The workers of a search: each holds a lock file in ``search/workers/`` for its life, so a trial left
running by a worker that is gone is known at once and queued again; the study lock orders their starts."""
import contextlib
import fcntl
import os
import socket

from appzoo.utils.progress import note


class Worker:
    """This process's lock file in ``search/workers/`` (held for its life), and the study lock."""

    def __init__(self, root):
        self.root = root
        self.folder = os.path.join(root, "workers")
        os.makedirs(self.folder, exist_ok=True)
        with self.study_lock():
            self.index = len(os.listdir(self.folder))
            self.name = f"{self.index:03d}-{socket.gethostname()}-{os.getpid()}.lock"
            self._fd = os.open(os.path.join(self.folder, self.name), os.O_CREAT | os.O_RDWR, 0o644)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    @contextlib.contextmanager
    def study_lock(self):
        fd = os.open(os.path.join(self.root, ".study.lock"), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def alive(self, name):
        """Whether the worker of lock file ``name`` still holds it (a dead one's flock went with it)."""
        if name == self.name:
            return True
        try:
            fd = os.open(os.path.join(self.folder, name), os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops a lock taken just now

    def release(self):
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def requeue_abandoned(study, worker):
    """Trials left running by a worker that is gone: failed, their settings queued again to continue in
    the same folder (the new trial's ``continues`` names the old one). Call under the study lock."""
    from optuna.trial import TrialState

    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = trial.user_attrs.get("worker")  # None: its worker died between ask() and naming itself,
        if owner is not None and worker.alive(owner):  # both under the lock this worker holds now
            continue
        owner = owner or "a worker"
        study.tell(trial.number, state=TrialState.FAIL)
        folder = trial.user_attrs.get("folder")
        study.enqueue_trial(trial.params, user_attrs={"folder": folder, "continues": trial.number})
        note(f"search: trial {trial.number} was left running by {owner}, which is gone; queued again to "
             f"continue from {folder}")
