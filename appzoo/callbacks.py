"""Small callbacks of the trainer: logging, keeping the best model, early stopping.

Two hooks: ``on_log(trainer, row)`` and ``on_evaluate(trainer, metrics)``.
They read and write ``trainer.state``; the trainer acts on ``should_stop``.
"""
import json

from appzoo.errors import ConfigError


class Callback:
    def on_log(self, trainer, row):
        pass

    def on_evaluate(self, trainer, metrics):
        pass


class JsonlLogger(Callback):
    """Appends each log row to ``train_log.jsonl`` (main process only)."""

    def __init__(self, path):
        self.path = path

    def on_log(self, trainer, row):
        if trainer.is_main:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


class BestCheckpoint(Callback):
    """Saves ``best/`` whenever the chosen dev metric improves."""

    def on_evaluate(self, trainer, metrics):
        if trainer.metric not in metrics:
            scalars = sorted(k for k, v in metrics.items() if isinstance(v, (int, float)))
            raise ConfigError(
                f"trainer.metric_for_best: {trainer.metric!r} is not a dev metric of this task "
                f"(available: {', '.join(scalars)})"
            )
        value = float(metrics[trainer.metric])
        if trainer.improved(value):
            trainer.state.best_metric = value
            trainer.state.best_step = trainer.state.global_step
            trainer.state.bad_evals = 0
            trainer.save_best()
        else:
            trainer.state.bad_evals += 1


class EarlyStopping(Callback):
    """Stops after ``patience`` evaluations in a row without improvement (0: never)."""

    def __init__(self, patience):
        self.patience = patience

    def on_evaluate(self, trainer, metrics):
        if self.patience and trainer.state.bad_evals >= self.patience:
            trainer.state.should_stop = True
