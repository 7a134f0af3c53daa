"""Small callbacks of the trainer: logging, choosing and saving the best model, checkpoints, early stopping.

The trainer emits; callbacks act. Hooks: ``on_log(trainer, row)``,
``on_evaluate(trainer, metrics)``, ``on_best(trainer, info)`` (a new best
model is in ``trainer.bundle``), ``on_checkpoint(trainer, checkpoint)`` (what
a resume needs; returns where it went, or None) and
``on_restore_best(trainer)`` (put back a best model this process did not see).
They read and write ``trainer.state``; the trainer acts on ``should_stop``.
Only the callbacks given a :class:`~appzoo.store.archive.RunFolder` write into it.
"""
import json
import os

from appzoo.errors import ConfigError
from appzoo.metrics import scalars


class Callback:
    def on_log(self, trainer, row):
        pass

    def on_evaluate(self, trainer, metrics):
        pass

    def on_best(self, trainer, info):
        pass

    def on_checkpoint(self, trainer, checkpoint):
        return None

    def on_restore_best(self, trainer):
        pass


class JsonlLogger(Callback):
    """Appends each log row to ``train_log.jsonl`` (main process only)."""

    def __init__(self, path):
        self.path = path

    def on_log(self, trainer, row):
        if trainer.is_main:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


class KeepBest(Callback):
    """Keeps the model as the best one (:meth:`Trainer.save_best`) whenever the chosen dev metric improves."""

    def on_evaluate(self, trainer, metrics):
        if trainer.metric not in metrics:
            raise ConfigError(
                f"trainer.metric_for_best: {trainer.metric!r} is not a dev metric of this task "
                f"(available: {', '.join(sorted(scalars(metrics)))})"
            )
        value = float(metrics[trainer.metric])
        if trainer.improved(value):
            trainer.state.best_metric = value
            trainer.state.best_step = trainer.state.global_step
            trainer.state.bad_evals = 0
            trainer.save_best()
        else:
            trainer.state.bad_evals += 1


class SaveBest(Callback):
    """Writes ``best/`` of the run folder at each new best model (main process),
    and reads it back for a resumed run whose best predates this process."""

    def __init__(self, folder):
        self.folder = folder

    def on_best(self, trainer, info):
        if trainer.is_main:
            self.folder.save_best(trainer.bundle, info)

    def on_restore_best(self, trainer):
        if os.path.isdir(self.folder.best):
            trainer.bundle.restore(self.folder.best)


class SaveCheckpoints(Callback):
    """Writes ``checkpoints/step-N`` of the run folder with the run's resolved
    ``config``, keeping the ``keep`` newest (main process)."""

    def __init__(self, folder, config, keep):
        self.folder, self.config, self.keep = folder, config, keep

    def on_checkpoint(self, trainer, checkpoint):
        if not trainer.is_main:
            return None
        return self.folder.save_checkpoint(trainer.state.global_step, **checkpoint, config=self.config,
                                           keep=self.keep)


class EarlyStopping(Callback):
    """Stops after ``patience`` evaluations in a row without improvement (0: never)."""

    def __init__(self, patience):
        self.patience = patience

    def on_evaluate(self, trainer, metrics):
        if self.patience and trainer.state.bad_evals >= self.patience:
            trainer.state.should_stop = True


class VisualDLLogger(Callback):
    """``trainer.visualdl``: writes the train loss, the learning rate and the
    dev metrics of each log row to ``<output_dir>/vdl/`` for VisualDL
    (``visualdl --logdir <output_dir>/vdl``), from the main process only."""

    TESTED = "2.5.3"  # with paddlepaddle 3.3.1, numpy 1.26.4, protobuf 7.36.2
    TAGS = {"loss": "train/loss", "lr": "train/learning_rate"}

    def __init__(self, logdir):
        self.logdir = logdir
        self.writer = None

    @classmethod
    def check_installed(cls):
        """Plan time: the optional package is there (found without importing it)."""
        import importlib.util

        if importlib.util.find_spec("visualdl") is None:
            raise ConfigError(f"trainer.visualdl: true needs the visualdl package: "
                              f"pip install visualdl=={cls.TESTED}")

    def on_log(self, trainer, row):
        if not trainer.is_main:
            return
        if self.writer is None:
            from visualdl import LogWriter

            self.writer = LogWriter(logdir=self.logdir)

        for key, value in scalars(row).items():
            tag = self.TAGS.get(key) or (f"dev/{key[4:]}" if key.startswith("dev_") else None)
            if tag:
                self.writer.add_scalar(tag=tag, value=float(value), step=row["step"])
        self.writer.flush()  # a run can end (or be killed) at any log
