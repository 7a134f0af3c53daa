"""A run's modes (``--do``), one object each, in the order they run: :data:`MODES`.

Each mode declares the splits it reads (:func:`needed_splits` reads only those), the run-folder files it
writes (keys of :data:`appzoo.store.run_files.RUN_FILES`), whether only the main process runs it, and
``run(ctx)``, which adds to the :class:`~appzoo.run.modes.context.RunContext` they share (Lightning keeps one
loop per file the same way). :func:`run_modes` runs those of a plan and then writes what every run that
trains or evaluates writes: metrics.json, run_record.json, MODEL_CARD.md and the reports.
"""
import dataclasses
import time

from appzoo.reports import card, record, report
from appzoo.run import callbacks as cb
from appzoo.run.modes.audit import Audit
from appzoo.run.modes.context import RunContext, engine_label
from appzoo.run.modes.evaluate import Eval
from appzoo.run.modes.export import Export
from appzoo.run.modes.predict import Predict
from appzoo.run.modes.train import Train
from appzoo.store import run_result
from appzoo.utils import files

#: The modes in the order a run runs them.
MODES = (Audit(), Train(), Eval(), Predict(), Export())
BY_NAME = {mode.name: mode for mode in MODES}
#: What :func:`run_modes` writes after the modes, for a run that trains or evaluates.
WRITES_AFTER = ("metrics", "run_record", "model_card", "report", "report_html", "plots")


def needed_splits(do):
    """The splits the modes of ``do`` read."""
    return {split for name in do for split in BY_NAME[name].reads}


def run_modes(plan, prepared, folder, resume_from, started, callbacks=()):
    """Run the plan's modes in order; returns what this run measured as metrics.json spells it
    (:meth:`RunResult.to_json`; an eval beside the run's own: its own numbers, though the file keeps them under
    ``eval``; a data-parallel rank other than the main one: its own, nothing written)."""
    from appzoo.run.trainer import Trainer  # paddle: loaded by a run's modes; planning needs none

    trainer = Trainer(prepared.bundle, plan.trainer, (plan.metric, plan.greater),
                      [*_callbacks(plan, folder), *callbacks], started,
                      prepared.teacher and prepared.teacher.objective())
    ctx = RunContext(plan, prepared, folder, trainer, resume_from, started)
    for mode in MODES:
        if mode.name in plan.do and (trainer.is_main or not mode.main_only):
            mode.run(ctx)
    result = ctx.result
    if not trainer.is_main:
        return result.to_json()
    result.skipped_lines = {path: n for path, n in ctx.trained.reader.skipped.items() if n} or None
    # the whole run's time: a resumed run counts the processes before it (up to its checkpoint)
    result.wall_time_s = round(trainer.wall_time() if plan.do.trains else time.time() - started, 1)
    _write_metrics_and_report(ctx)
    return result.to_json()


def _callbacks(plan, folder):
    """What the run does with what the trainer emits: the log, best/ and checkpoints in ``folder``."""
    cfg = plan.trainer
    callbacks = [cb.JsonlLogger(folder.train_log), cb.SaveBest(folder),
                 cb.SaveCheckpoints(folder, plan.config, cfg.keep_checkpoints)]
    if cfg.visualdl:
        callbacks.append(cb.VisualDLLogger(folder.vdl))
    return callbacks


def _write_metrics_and_report(ctx):
    """A training run writes metrics.json and report.md afresh; a later eval
    run updates the splits it evaluated and keeps the training record; a
    predict-only or export-only run leaves both alone. The run's own metrics
    (``dev``, ``test``) say what they were evaluated on (``evaluated_with``);
    an eval aside from them (:meth:`RunContext.aside`) is added under
    ``eval``, keyed by :func:`engine_label`, and they are kept as they were. A run that trains or gives the
    run's own metrics writes run_record.json and MODEL_CARD.md (:mod:`appzoo.reports.record`) before the
    reports, which link the card."""
    plan, folder = ctx.plan, ctx.folder
    history = ctx.trainer.history
    result = dataclasses.replace(ctx.result)  # run() returns this run's own numbers, whichever key they are saved under
    aside = ctx.aside()
    if plan.do.evaluates and not aside and result.splits():
        result.evaluated_with = ctx.evaluated_with()
    if not plan.do.trains:
        if not plan.do.evaluates:
            return
        saved = run_result.read(folder.metrics)
        if aside:
            engine = ctx.evaluated_with()
            result.evals = saved.evals
            result.aside(engine_label(engine), engine)
        result = result.merged_into(saved)
        history = files.read_jsonl(folder.train_log)
    content = result.to_json()
    files.fault("metrics")
    files.write_json(folder.metrics, content)
    if not aside:
        facts = record.build(plan, ctx.prepared, result, ctx.described, folder, plan.command)
        record.write(folder, facts)
        card.write(folder, facts)
    report.write(plan.trainer.output_dir, content, history, ctx.trained.labels, plots=plan.trainer.plots,
                 mistakes=ctx.described, html=not aside)
