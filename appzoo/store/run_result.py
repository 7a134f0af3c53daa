"""``metrics.json``, what a run measured, as one typed value (HF's ``TrainOutput``, PaddleNLP's
``PredictionOutput``): the one module that spells its keys (tests/test_architecture.py holds it).

The modes of a run fill a :class:`RunResult` (:mod:`appzoo.run.modes`); the reports, the run record, the
sweeps and the searches read one with :meth:`RunResult.from_json` or :func:`read`. A file keeps its bytes:
:meth:`RunResult.to_json` writes the keys of the file it was read from in their order, then new ones in the
order of :data:`KEYS` (the order a run has always written them), and keeps keys it does not know.
"""
import dataclasses
import os

from appzoo.params.trainer import Do
from appzoo.utils import files

#: attribute -> key of metrics.json, in the order a run writes them
KEYS = {"best": "best", "train": "train", "floor": "floor", "dev": "dev", "test": "test", "export": "export",
        "skipped_lines": "skipped_lines", "wall_time_s": "wall_time_s", "evaluated_with": "evaluated_with",
        "evals": "eval"}
#: the evaluated splits, each a dict of the reader's metrics
SPLITS = ("dev", "test")
#: in a split's metrics: a lower precision's comparison with fp32 (appzoo.reports.fidelity)
VS_FP32 = "vs_fp32"


@dataclasses.dataclass
class RunResult:
    """What metrics.json holds. ``best``: the best checkpoint (``step``, ``metric``, ``value``, maybe
    ``note``); ``train``: the steps, epochs and parameter groups trained; ``floor``: what the untrained
    encoder scores (:mod:`appzoo.task.floor`); ``dev``, ``test``: the metrics of the run's own eval;
    ``evaluated_with``: the engine and precision they came from; ``evals``: later evals beside them, by
    engine label; ``export``: where the graph went; ``skipped_lines``: per data file; ``wall_time_s``."""

    best: dict = None
    train: dict = None
    floor: dict = None
    dev: dict = None
    test: dict = None
    export: dict = None
    skipped_lines: dict = None
    wall_time_s: float = None
    evaluated_with: dict = None
    evals: dict = None
    extra: dict = dataclasses.field(default_factory=dict)  # keys this version does not know, kept
    order: tuple = ()  # the keys of the file it was read from, in their order

    # ---- the file
    def to_json(self):
        present = {key: getattr(self, name) for name, key in KEYS.items() if getattr(self, name) is not None}
        present.update(self.extra)
        keys = [k for k in self.order if k in present]
        keys += [k for k in (*KEYS.values(), *self.extra) if k in present and k not in keys]
        return {k: present[k] for k in keys}

    @classmethod
    def from_json(cls, data):
        names = {key: name for name, key in KEYS.items()}
        known = {names[k]: v for k, v in data.items() if k in names}
        return cls(**known, extra={k: v for k, v in data.items() if k not in names}, order=tuple(data))

    # ---- what the readers ask
    def split(self, split):
        """The metrics of ``split`` ("dev" or "test"), or None."""
        return getattr(self, split) if split in SPLITS else None

    def set_split(self, split, metrics):
        setattr(self, split, metrics)

    def splits(self):
        """``{split: metrics}`` of the splits the run evaluated, dev first."""
        return {s: self.split(s) for s in SPLITS if self.split(s) is not None}

    @property
    def steps(self):
        return (self.train or {}).get("steps")

    @property
    def parameter_groups(self):
        return (self.train or {}).get("parameter_groups")

    @staticmethod
    def train_entry(steps, epochs, groups):
        """The ``train`` entry: the steps and epochs trained and the parameter groups (appzoo.run.param_groups)."""
        return {"steps": steps, "epochs_completed": epochs, "parameter_groups": groups}

    def complete(self, do):
        """Whether the file holds everything a run of the modes ``do`` writes (a finished run)."""
        if self.wall_time_s is None or (Do(do).trains and self.train is None):
            return False
        return not Do(do).evaluates or bool(self.splits())

    def aside(self, label, engine):
        """Move this run's dev, test and wall time into ``evals[label]``, with the ``engine`` they came from:
        an eval beside the run's own metrics, which stay as they were."""
        entry = dict(engine)
        for name in ("dev", "test", "wall_time_s"):
            if getattr(self, name) is not None:
                entry[KEYS[name]] = getattr(self, name)
                setattr(self, name, None)
        self.evals = {**(self.evals or {}), label: entry}

    def merged_into(self, saved):
        """``saved`` (the run's file as it was) with what this result measured put in: its keys keep their
        places, new ones go after them."""
        merged = {**saved.to_json(), **self.to_json()}
        return RunResult.from_json(merged)


def against_fp32(split_metrics):
    """A split's comparison with fp32 (:mod:`appzoo.reports.fidelity`), or None."""
    return (split_metrics or {}).get(VS_FP32)


def set_against_fp32(split_metrics, comparison):
    split_metrics[VS_FP32] = comparison


def aside_entries(result):
    """``[(label, engine, {split: metrics})]`` of the evals beside the run's own."""
    out = []
    for label, entry in (result.evals or {}).items():
        engine = {k: v for k, v in entry.items() if k not in (*SPLITS, KEYS["wall_time_s"])}
        out.append((label, engine, {s: entry[s] for s in SPLITS if s in entry}))
    return out


def read(path, what="metrics of the run"):
    """The RunResult of ``path``; an empty one where there is no file."""
    return RunResult.from_json(files.read_json(path, what)) if os.path.exists(path) else RunResult()
