"""One job: a variant's run through the one ladder of how a run can end, and the unit a backend runs."""
import dataclasses
from typing import Any, Callable, Optional

from appzoo.errors import DivergedError, Interrupted, UserError
from appzoo.run import runner
from appzoo.store.archive import FolderInUse, RunFolder
from appzoo.utils import files

#: How :func:`run` says a run ended.
FINISHED, DIVERGED, IN_USE, FAILED = "finished", "diverged", "in use", "failed"


@dataclasses.dataclass
class Outcome:
    state: str  # one of FINISHED, DIVERGED, IN_USE, FAILED
    metrics: Optional[dict] = None  # FINISHED: what the run returned (metrics.json's content)
    error: Optional[UserError] = None  # the others: why


def run(plan, record=None, advice=None, callbacks=()):
    """Run the plan of one variant; returns its :class:`Outcome`.

    A loss that is not finite is a result of the variant, not the end of the sweep or search: the folder gets
    ``diverged.json`` (``record``, then the error; :attr:`RunFolder.diverged`) and the run counts as ended. A
    folder locked by another process (between the check and the lock) and a user error (the data with these
    settings) are outcomes too, for the strategy to judge.
    A stop with a checkpoint (Ctrl-C, SIGTERM) goes on up with ``advice``, how the same command continues it,
    in place of the run's own (which would continue that one run outside the strategy)."""
    try:
        metrics = runner.run(plan, callbacks=list(callbacks))
    except Interrupted as stop:
        if stop.advice is None or advice is None:
            raise
        raise stop.advising(advice) from None
    except DivergedError as error:
        files.write_json(RunFolder(plan.trainer.output_dir).diverged, {**(record or {}), "error": str(error)})
        return Outcome(DIVERGED, error=error)
    except FolderInUse as error:
        return Outcome(IN_USE, error=error)
    except UserError as error:
        return Outcome(FAILED, error=error)
    return Outcome(FINISHED, metrics)


@dataclasses.dataclass
class Job:
    """What a backend runs: ``work(threads=...)`` in this process or in a Ray task (where it goes pickled),
    and what stays with the driver."""
    name: str  # how a message names it: "sweep: base seed 42", "search: trial 3"
    work: Callable  # work(threads=None) -> result; threads: a Ray task's CPUs
    handle: Any = None  # the driver's own: the sweep's run, the study's trial
    on_failure: Optional[Callable[[], None]] = None  # when work raised in a Ray task, before that is reported
    task: str = "job"  # the Ray task's name, which prefixes its lines: "(_trial_task pid=...)"
