"""From a validated plan to a finished run: plan -> prepare -> modes.

:mod:`appzoo.run.plan` raises everything a param file can get wrong.
:func:`appzoo.run.prepare.prepare` reads the data, the labels, the encoder and
the model, and raises everything the data can get wrong, still without writing
anything. Only then is the output folder locked and the modes run
(:mod:`appzoo.run.modes`): the model written through :mod:`appzoo.store.bundle`,
the folder's slots through :mod:`appzoo.store.archive`, every file atomically
through :mod:`appzoo.utils.files`.
"""
import json
import time

from appzoo.utils.text import clip as cut
from appzoo.utils import files, progress
from appzoo.run import interrupts
from appzoo.store.archive import RunFolder
from appzoo.errors import ConfigError, Interrupted
from appzoo.utils.progress import note
from appzoo.store.resolve import TRAIN_LONGER, changed_keys, trains_longer
from appzoo.params.trainer import AUTO
from appzoo.run.modes import needed_splits, run_modes
from appzoo.run.prepare import prepare


def run(plan, callbacks=()):
    """Execute a validated plan; returns the metrics dict written to metrics.json. ``callbacks``: more
    :class:`~appzoo.run.callbacks.Callback` s for the trainer (a search's report to its trial)."""
    started = time.time()
    _set_up(plan)
    folder = RunFolder(plan.trainer.output_dir)
    import paddle

    is_main = paddle.distributed.get_rank() == 0
    with interrupts.handled():
        resume_from = _resume_point(plan, folder)
        prepared = prepare(plan, needed_splits(plan.do))
        try:
            if not is_main:
                return run_modes(plan, prepared, folder, resume_from, started, callbacks)
            return _main_rank(plan, prepared, folder, resume_from, started, callbacks)
        finally:
            prepared.cleanup()


def _main_rank(plan, prepared, folder, resume_from, started, callbacks):
    """Run the modes in the locked run folder, putting an older run back when the new one saved nothing."""
    folder.lock()
    try:
        message = folder.recover()
        if message:
            note(message)
        if plan.do.trains and not resume_from:
            folder.replace_run()
        try:
            return run_modes(plan, prepared, folder, resume_from, started, callbacks)
        except BaseException as error:
            if folder.rollback_replace() and isinstance(error, Interrupted):
                raise Interrupted(error.signum, f"{error.signal_name}: stopped before the new run saved "
                                                f"a model; the older run in {folder.root} is kept as it "
                                                f"was") from None
            raise
    finally:
        folder.unlock()


def _set_up(plan):
    """Process-wide settings of the run: device, threads, seed, log levels."""
    import paddle
    from paddlenlp.utils.log import logger

    logger.set_level("WARNING")  # paddlenlp logs every config/tokenizer save at INFO
    cfg = plan.trainer
    progress.ENABLED = cfg.progress_bar  # the readers' tokenisation bars too
    if cfg.device == "gpu" and not paddle.is_compiled_with_cuda():
        raise ConfigError("trainer.device: 'gpu', but this paddle is a CPU build "
                          "(install paddlepaddle-gpu, or use 'auto' or 'cpu')")
    if cfg.device == "cpu" or (cfg.device == "auto" and not paddle.is_compiled_with_cuda()):
        paddle.set_device("cpu")
    if cfg.num_threads:
        paddle.base.core.set_num_threads(cfg.num_threads)  # paddle is loaded: OMP_NUM_THREADS is too late
    paddle.seed(cfg.seed)


# ---------------------------------------------------------------------- resume
def _resume_point(plan, folder):
    """The checkpoint ``trainer.resume`` continues from (None: a new run).
    Refuses one made with settings or data that change what is trained."""
    resume = plan.trainer.resume
    if not resume or not plan.do.trains:
        return None
    if resume is True or resume == AUTO:
        checkpoint = folder.latest_checkpoint()
        if checkpoint is None and resume == AUTO:
            return None  # nothing to continue yet: the first start of a job
        if checkpoint is None:
            raise ConfigError(f"trainer.resume: no checkpoint to resume from in {folder.checkpoints!r}")
    else:
        checkpoint = resume
    saved, state = RunFolder.checkpoint_meta(checkpoint)
    longer = TRAIN_LONGER if trains_longer(saved, plan.config) else ()  # the trainer rebuilds the schedule
    changed = changed_keys(saved, plan.config, plan.defaults, may_change=longer)
    if changed:
        key, old, new = changed[0]
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise ConfigError(f"trainer.resume: {checkpoint} was trained with {key}={_short(old)}, this run "
                          f"says {_short(new)}{more}; resume with the same settings, or start a new run in "
                          f"another trainer.output_dir")
    digest = state.get("train_sha256")
    if digest and digest != files.file_sha256(plan.data.train):
        raise ConfigError(f"trainer.resume: dataset_reader.train: {plan.data.train!r} changed since "
                          f"{checkpoint} was saved; resume on the same data, or start a new run")
    return checkpoint


def _short(value, width=60):
    return cut(json.dumps(value, ensure_ascii=False), width)
