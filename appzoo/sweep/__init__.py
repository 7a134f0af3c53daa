"""Sweeps: the grid of settings x seeds, run in one process, resumable, summarised.

    python run_trainer.py --param_path X --sweep model.loss.name=ce,focal,dice --seeds 3
    python run_trainer.py --param_path X --sweep 'model.loss=[{"name":"focal","gamma":1},{"name":"dice"}]'

``--sweep KEY=V1,V2`` gives one axis: a JSON list is the list of values, else
the text is split on commas and each value is parsed as JSON when it parses
(as ``--set`` does). ``--sweep 'K1,K2=[[a1,a2],[b1,b2]]'`` is one axis that
sets several keys together, for settings that are not a grid (CRF vs softmax
+ ce vs softmax + dice). Several ``--sweep`` flags make a grid; the first setting
of the grid is the baseline. ``--seeds N`` runs every setting with
``trainer.seed + 0 .. N-1``.

Each run is planned (:func:`appzoo.run.plan.validate`) before the first one
starts, so a bad key or value stops the sweep with one line and nothing
written. Run ``i`` goes to ``<output_dir>/sweep/<setting>/seed-<seed>/``. The
sweep manages ``trainer.resume`` and ``trainer.overwrite_output_dir`` of its
runs: a run whose ``metrics.json`` is complete is skipped, a run with a
checkpoint is resumed from it, and a run that saved a model but neither is
redone. Stopping a sweep and starting it again with the same command
therefore continues it; a run folder made with other settings is an error.
A run that stops on a non-finite loss (exit 3 on its own) is a result, not
the end of the sweep: it leaves ``diverged.json`` in its folder, counts as
ended, and its setting's verdict says how many of its runs diverged.
Each run's state is read again just before it starts and a run folder
locked by another live process is left to it, so the same command started
twice shares the runs between two workers. A grid may extend the sweep whose
results are in the folder (more settings or seeds); one that leaves some out
is refused, as it would replace that sweep's table.

The results (``sweep.json``, ``sweep.md``, ``sweep.png`` in
``<output_dir>/sweep/``) give per setting the mean and the sample standard
deviation (ddof=1) over seeds of the key metrics, a verdict against the
baseline on dev (:func:`verdict`; the metric the best model is chosen on)
with the Welch p-value beside it, the same on test as the confirmation, and
the mean F1 per class. They are rewritten after every run.

One module per part: the grid (:mod:`~appzoo.sweep.settings`), the runs
(:mod:`~appzoo.sweep.runs`), the results (:mod:`~appzoo.sweep.summary`),
their plot (:mod:`~appzoo.sweep.plots`) and their page (:mod:`~appzoo.sweep.page`).
The floor under it, shared with the search: each run a variant
(:mod:`appzoo.experiments.variants`) run as a job (:mod:`appzoo.experiments.jobs`)
on a backend (:mod:`appzoo.experiments.backends`).
"""
from appzoo.sweep.settings import SET_BY_SWEEP, Setting, grid, parse_axes, setting_name
from appzoo.sweep.summary import (HEADLINE_METRICS, MIN_SEEDS, judge, judge_summary, markdown,
                                  per_class_f1, run_values, summarise, verdict, welch_p)
from appzoo.sweep.plots import plot
from appzoo.sweep.runs import ENDED, Sweep, SweepRun, plan_sweep, run_state, run_sweep, write_results

__all__ = [
    "SET_BY_SWEEP", "Setting", "grid", "parse_axes", "setting_name",
    "HEADLINE_METRICS", "MIN_SEEDS", "judge", "judge_summary", "markdown", "per_class_f1",
    "run_values", "summarise", "verdict", "welch_p", "plot",
    "ENDED", "Sweep", "SweepRun", "plan_sweep", "run_state", "run_sweep", "write_results",
]
