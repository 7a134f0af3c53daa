"""The run folder: its lock, its ``best/`` slot, its checkpoints and the replacing of an older run.

* ``best/`` - a symbolic link to a hidden ``.best-step-N-XXXX/`` folder
  whose files :class:`appzoo.store.bundle.Bundle` writes; a new best is written
  into its own folder, marked complete, and the link is replaced with one
  ``os.replace``, so there is never a moment without a loadable ``best/``.
* ``checkpoints/step-N/`` - what ``trainer.resume`` needs. Written under a
  temporary name and renamed into place; a folder counts only once its
  ``COMPLETE`` marker (written last) is there, so a kill or a full disk
  mid-save leaves the previous checkpoint the latest one.
* A lock, so that one run at a time writes into a folder (:meth:`RunFolder.lock`).
* With ``overwrite_output_dir`` the old run is moved aside into
  ``.replaced/``, not deleted; it is deleted once the new run has saved its
  first ``best/``, and put back when the new run fails before that
  (:meth:`RunFolder.replace_run`, :meth:`RunFolder.recover`). This is
  SQLite's rollback journal in miniature.

The other files of a run (``metrics.json``, ``predictions.jsonl``, ...) are
named by :meth:`RunFolder.path` and written atomically through :mod:`appzoo.utils.files`.
"""
import fcntl
import json
import os
import shutil
import socket
import time
import uuid

from appzoo.store import bundle_files
from appzoo.store.run_files import AUDIT_FILES, BY_KEY, RUN_ARTIFACTS, RUN_FILES
from appzoo.errors import ConfigError, UserError
from appzoo.utils.files import (
    disk_error, fault, load_weights, read_json, remove, save_weights, swap_in, write_json, write_text,
)

OPTIMIZER_FILE = "optimizer.pdopt"
SCHEDULER_FILE = "scheduler.pdparams"
STATE_FILE = "trainer_state.json"
MARKER = bundle_files.MARKER

REPLACED = ".replaced"
JOURNAL = "JOURNAL.json"
LOCK_INFO = ".lock"


# ------------------------------------------------------------------- folder
class FolderInUse(UserError):
    """The output folder is locked by a live process."""


class RunFolder:
    """An output folder: its lock, ``best/``, checkpoints and result files."""

    # Members from the table of run-folder files (appzoo.store.run_files): ``folder.metrics`` is the path of
    # metrics.json, ``folder.best`` that of best/; set below the class.

    def __init__(self, root):
        self.root = root
        self._lock_fd = None

    @classmethod
    def of_best(cls, best):
        """The run folder that the ``best/`` folder ``best`` sits in (``folder.inference``: its export's place)."""
        return cls(os.path.dirname(os.path.abspath(best)))

    def path(self, name):
        return os.path.join(self.root, name)

    def has_run(self):
        """True once a model was saved here (a run that stopped earlier can be redone)."""
        return self.latest_checkpoint() is not None or os.path.exists(os.path.join(self.best, MARKER))

    def foreign_files(self):
        """The files here a run would write over, when no run of this toolkit wrote them: the names of
        :data:`RUN_ARTIFACTS` present (``config.json``, ``report.md``, ``audit.md``, ...) in a folder that is not
        a run's (:meth:`is_a_run`): a user's own folder, whose files are theirs. A run that stopped before its
        first save marked its folder, so the folder may be trained into again."""
        names = [n for n in RUN_ARTIFACTS if os.path.lexists(self.path(n))]
        return [] if not names or self.is_a_run() else names

    def is_a_run(self):
        """Whether a run of this toolkit took this folder: its marker (``.appzoo-run``, written by :meth:`lock`),
        or, for a run from before the marker, what only a run leaves: ``best`` a link to a hidden
        ``.best-step-N-...`` folder, or a complete checkpoint. A ``config.json`` proves nothing: a param file has
        the same sections."""
        if os.path.isfile(self.run_marker) or self.latest_checkpoint() is not None:
            return True
        return os.path.islink(self.best) and os.path.basename(os.readlink(self.best)).startswith(".best-step-")

    # ---- lock ----------------------------------------------------------
    def lock(self):
        """Take the folder for this process (creating it); FolderInUse when a
        live process holds it. The lock is an ``flock`` on the folder itself,
        so a dead holder's lock is gone with it; ``.lock`` only says who."""
        os.makedirs(self.root, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise FolderInUse(f"trainer.output_dir: {self.root!r} is in use by {self._holder()}; wait for it to "
                              f"finish or choose another trainer.output_dir") from None
        self._lock_fd = fd
        write_json(self.path(LOCK_INFO), {"pid": os.getpid(), "host": socket.gethostname(),
                                          "started": time.strftime("%Y-%m-%d %H:%M:%S")})
        if not os.path.exists(self.run_marker):
            write_json(self.run_marker, {"written_by": "appzoo", "first_run": time.strftime("%Y-%m-%d %H:%M:%S")})

    def in_use(self):
        """Who holds the folder's lock (a live process), else None; takes nothing."""
        if self._lock_fd is not None or not os.path.isdir(self.root):
            return None
        fd = os.open(self.root, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        except BlockingIOError:
            return self._holder()
        finally:
            os.close(fd)

    def _holder(self):
        try:
            with open(self.path(LOCK_INFO), encoding="utf-8") as f:
                info = json.load(f)
            return f"another run (pid {info['pid']} on {info['host']}, since {info['started']})"
        except (OSError, ValueError, KeyError):
            return "another run"

    def unlock(self):
        if self._lock_fd is None:
            return
        if os.path.exists(self.path(LOCK_INFO)):
            os.remove(self.path(LOCK_INFO))
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)
        self._lock_fd = None

    # ---- replacing an old run -----------------------------------------
    # best/ stays in place while the new run trains, so the folder always has
    # a model to predict with; everything else of the old run waits in
    # .replaced/, with the name of the old best/ target in .replaced/BEST.
    def replace_run(self):
        """Move every artifact of an older run but ``best/`` into ``.replaced/``,
        after writing down (``.replaced/JOURNAL.json``) what will be moved.
        A folder that holds only an audit (``--do audit`` before the first
        training) holds no run: its audit stays as it is."""
        names = [n for n in RUN_ARTIFACTS if n != BY_KEY["best"].name and os.path.lexists(self.path(n))]
        if set(names) <= set(AUDIT_FILES):  # nothing, or the audit a user ran before training: it stays
            return
        aside = self.path(REPLACED)
        os.makedirs(aside, exist_ok=True)
        write_json(os.path.join(aside, JOURNAL), {"best": self._best_target(), "names": names})
        for name in names:
            fault("replace.aside")
            os.rename(self.path(name), os.path.join(aside, name))

    def _best_target(self):
        return os.readlink(self.best) if os.path.islink(self.best) else None

    def _journal(self):
        try:
            with open(os.path.join(self.path(REPLACED), JOURNAL), encoding="utf-8") as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):  # killed before the journal was complete: nothing moved
            return None

    def commit_replace(self):
        """The new run saved its first best/: the old run can go."""
        aside = self.path(REPLACED)
        if os.path.isdir(aside):
            doomed = f"{aside}-discard-{uuid.uuid4().hex[:6]}"
            os.rename(aside, doomed)
            shutil.rmtree(doomed, ignore_errors=True)

    def rollback_replace(self):
        """The new run failed before saving a best/: put the old run back,
        dropping what the new run wrote. Returns True when there was one."""
        aside = self.path(REPLACED)
        if not os.path.isdir(aside):
            return False
        journal = self._journal()
        if journal is not None:
            for name in RUN_ARTIFACTS:
                moved = os.path.lexists(os.path.join(aside, name))
                # the new run's own files: those the old run did not have, and those it shadows
                if name != BY_KEY["best"].name and (moved or name not in journal["names"]) and os.path.lexists(self.path(name)):
                    remove(self.path(name))
            for name in journal["names"]:
                if os.path.lexists(os.path.join(aside, name)):
                    os.rename(os.path.join(aside, name), self.path(name))
        shutil.rmtree(aside)
        return True

    def recover(self):
        """Finish what a killed run left half-done: a replace whose new run
        never saved a best/ is rolled back, one that did is committed; stray
        temporary files and folders are removed. Returns a note or None."""
        for name in os.listdir(self.root):
            if name.startswith(f"{REPLACED}-discard-") or ".tmp-" in name or name.startswith(".best.link-"):
                remove(self.path(name))
        note = None
        if os.path.isdir(self.path(REPLACED)):
            journal = self._journal()
            if journal is not None and self._best_target() != journal["best"]:
                self.commit_replace()  # the new run got as far as its own best/
            else:
                self.rollback_replace()
                note = (f"note: {self.root}: a run that was replacing this one stopped before it saved a "
                        f"model; the older run is back in place")
        target = self._best_target()
        if target:  # a best/ folder saved by a run killed before it swapped best/ (never in a copied folder)
            for name in os.listdir(self.root):
                if name.startswith(".best-step-") and name != target:
                    remove(self.path(name))
        self._clean_checkpoints()
        return note

    # ---- best/ ----------------------------------------------------------
    def save_best(self, trained, info):
        """Write the :class:`~appzoo.store.bundle.Bundle` ``trained`` as a new ``best/``
        and swap it in; ``info`` is its ``{"step", "metric", "value"}``."""
        name = f".best-step-{info.get('step')}-{uuid.uuid4().hex[:6]}"
        folder = self.path(name)
        tmp = f"{folder}.tmp-{os.getpid()}"
        try:
            os.makedirs(tmp)
            trained.save(tmp, info)
            fault("best.files")
            write_text(os.path.join(tmp, MARKER), "")
            fault("best.marker")
            os.rename(tmp, folder)
            link = self.path(f".best.link-{uuid.uuid4().hex[:6]}")
            os.symlink(name, link)
            fault("best.link")
            previous = self._best_target()
            if os.path.isdir(self.best) and not os.path.islink(self.best):  # a copied folder: best/ is real
                previous = f".best-step-old-{uuid.uuid4().hex[:6]}"
                os.rename(self.best, self.path(previous))
            os.replace(link, self.best)
            fault("best.swap")
        except OSError as e:
            for path in (tmp, folder):
                if os.path.exists(path) and os.path.realpath(self.best) != os.path.realpath(path):
                    remove(path)
            kept = "the previous best/ is intact" if os.path.exists(self.best) else "no best/ was saved yet"
            raise disk_error("the best model", self.root, e, kept) from None
        if previous and previous.startswith(".best-step-") and os.path.isdir(self.path(previous)):
            remove(self.path(previous))
        self.commit_replace()

    # ---- checkpoints ----------------------------------------------------
    def checkpoint_folders(self):
        """Complete checkpoint folders, oldest first."""
        if not os.path.isdir(self.checkpoints):
            return []
        steps = []
        for name in os.listdir(self.checkpoints):
            head, _, step = name.partition("-")
            if head == "step" and step.isdigit() and os.path.exists(
                    os.path.join(self.checkpoints, name, MARKER)):
                steps.append((int(step), name))
        return [os.path.join(self.checkpoints, n) for _, n in sorted(steps)]

    def drop_optimizer_state(self):
        """A finished run's checkpoints without the optimizer's state (the model and the schedule stay, so the
        run can still be resumed, with a fresh optimizer); the bytes freed."""
        freed = 0
        for folder in self.checkpoint_folders():
            path = os.path.join(folder, OPTIMIZER_FILE)
            if os.path.isfile(path):
                freed += os.path.getsize(path)
                os.remove(path)
        return freed

    def latest_checkpoint(self):
        found = self.checkpoint_folders()
        return found[-1] if found else None

    def _clean_checkpoints(self):
        """Remove partial checkpoints (no marker, or a temporary name)."""
        if not os.path.isdir(self.checkpoints):
            return
        complete = set(self.checkpoint_folders())
        for name in os.listdir(self.checkpoints):
            path = os.path.join(self.checkpoints, name)
            if path not in complete:
                remove(path)

    def save_checkpoint(self, step, *, model, optimizer, scheduler, state, reader_state, config, keep):
        """Write ``checkpoints/step-N`` atomically, then keep the ``keep`` newest."""
        os.makedirs(self.checkpoints, exist_ok=True)
        folder = os.path.join(self.checkpoints, f"step-{step}")
        tmp = os.path.join(self.checkpoints, f".step-{step}.tmp-{os.getpid()}")
        previous = self.latest_checkpoint()
        try:
            remove(tmp)
            os.makedirs(tmp)
            save_weights(model, os.path.join(tmp, bundle_files.PICKLED_MODEL_FILE))
            save_weights(optimizer, os.path.join(tmp, OPTIMIZER_FILE))
            save_weights(scheduler, os.path.join(tmp, SCHEDULER_FILE))
            write_json(os.path.join(tmp, STATE_FILE), state)
            write_json(os.path.join(tmp, bundle_files.READER_STATE_FILE), reader_state)
            write_json(os.path.join(tmp, bundle_files.CONFIG_FILE), config)
            fault("checkpoint.files")
            write_text(os.path.join(tmp, MARKER), "")
            fault("checkpoint.marker")
            swap_in(tmp, folder)  # over the same step saved again (an interrupt right after an eval)
            fault("checkpoint.rename")
        except OSError as e:
            remove(tmp)
            kept = (f"the previous checkpoint {previous} is intact" if previous
                    else "no checkpoint was saved yet")
            raise disk_error(f"checkpoint step-{step}", self.checkpoints, e, kept) from None
        for old in self.checkpoint_folders()[:-keep]:
            fault("checkpoint.prune")
            remove(old)
        return folder

    def load_checkpoint(self, folder):
        """The files of a checkpoint, each checked (one line per problem)."""
        if not os.path.exists(os.path.join(folder, MARKER)):
            raise UserError(f"trainer.resume: {folder!r} is not a complete checkpoint folder (no {MARKER} marker)")
        return {"model": load_weights(os.path.join(folder, bundle_files.PICKLED_MODEL_FILE)),
                "optimizer": self._optimizer_of(folder),
                "scheduler": load_weights(os.path.join(folder, SCHEDULER_FILE)),
                "state": read_json(os.path.join(folder, STATE_FILE), "trainer state"),
                "reader_state": read_json(os.path.join(folder, bundle_files.READER_STATE_FILE), "reader state"),
                "config": read_json(os.path.join(folder, bundle_files.CONFIG_FILE), "config of a checkpoint")}

    @staticmethod
    def _optimizer_of(folder):
        """A checkpoint's optimizer state; None where a finished run dropped it (:meth:`drop_optimizer_state`)."""
        path = os.path.join(folder, OPTIMIZER_FILE)
        if not os.path.exists(path) and read_json(os.path.join(folder, STATE_FILE), "trainer state").get("finished"):
            return None
        return load_weights(path)

    @staticmethod
    def checkpoint_meta(folder, key_path="trainer.resume"):
        """``(config, trainer state)`` of a checkpoint folder, without its weights."""
        if not os.path.exists(os.path.join(folder, MARKER)):
            raise ConfigError(f"{key_path}: {folder!r} is not a complete checkpoint folder (no {MARKER} marker; "
                              f"accepted: true, auto, or a checkpoint folder)")
        return (read_json(os.path.join(folder, bundle_files.CONFIG_FILE), "config of a checkpoint"),
                read_json(os.path.join(folder, STATE_FILE), "trainer state"))


def _member(entry):
    return property(lambda folder: folder.path(entry.name), doc=f"{entry.name}: {entry.holds}")


for _entry in RUN_FILES:
    setattr(RunFolder, _entry.key, _member(_entry))
