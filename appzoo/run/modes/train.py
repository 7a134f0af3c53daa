"""``--do train``: the trainer's run (resumed from a checkpoint where asked), its best step and the floor it
had to beat, into the metrics."""
import time

from appzoo.run import param_groups
from appzoo.store.run_result import RunResult
from appzoo.task.model import frozen_embedder
from appzoo.utils import files
from appzoo.utils.progress import note


class Train:
    name = "train"
    reads = ("train", "dev")
    writes = ("config", "train_log", "best", "checkpoints", "vdl", "teacher")  # teacher/: a distilled run's cache
    main_only = False  # data-parallel: every rank trains

    def run(self, ctx):
        plan, p, folder, trainer = ctx.plan, ctx.prepared, ctx.folder, ctx.trainer
        if trainer.is_main and not ctx.resume_from:
            files.write_json(folder.config, plan.config)
        resume = folder.load_checkpoint(ctx.resume_from) if ctx.resume_from else None
        resume_step = resume["state"]["global_step"] if resume else None
        if trainer.is_main and resume:  # the log up to the checkpoint: no row twice, the plots show the whole run
            rows = [r for r in files.read_jsonl(folder.train_log) if r.get("step", 0) <= resume_step]
            files.write_jsonl(folder.train_log, rows)
            trainer.history = rows
        trainer.state.train_sha256 = files.file_sha256(plan.data.train)
        dev = (p.splits["dev"], p.features["dev"]) if "dev" in p.splits else None
        floor, floor_seconds = _floor(plan, p) if trainer.is_main else (None, 0)  # a checkpoint loads in train()
        state = trainer.train(_training_features(plan, p, trainer), dev, resume=resume)
        if resume and state.finished and state.global_step == resume_step:
            note(f"note: the run in {plan.trainer.output_dir} had finished (step {state.global_step}); "
                 f"trainer.resume trains no further")
        if state.finished and trainer.is_main and not plan.trainer.keep_optimizer_state:
            freed = folder.drop_optimizer_state()  # what only a longer resumed run would read: twice the model
            if freed:
                note(f"note: training finished: checkpoints/ keeps the model and the schedule, not the optimizer's "
                     f"state ({freed / 1e6:.1f} MB; trainer.keep_optimizer_state keeps it)")
        result = ctx.result
        result.best = {"step": state.best_step if dev else state.global_step,
                       "metric": trainer.metric if dev else None, "value": state.best_metric}
        undertrained = dev and best_is_last(state, trainer.history, trainer.metric)
        if undertrained and trainer.is_main:
            result.best["note"] = undertrained
            note(f"note: {undertrained}")
        result.train = RunResult.train_entry(state.global_step, state.epoch, param_groups.rows(trainer.groups))
        if floor is not None:
            final = _at_best(state, trainer.history, floor)
            result.floor = {**floor.to_json(final), "seconds": floor_seconds}
            if floor.verdict(final):
                note(f"warning: {floor.verdict(final)}")


def _training_features(plan, p, trainer):
    """The training features, and after them a distilled run's transfer inputs labelled by its teacher."""
    if p.teacher is None or not p.teacher.transfer:
        return p.features["train"]
    trained, labelled = p.bundle, p.teacher.labelled_transfer(trainer.is_main)
    return trained.reader.encode(p.splits["train"] + labelled, trained.tokenizer, trained.labels,
                                 plan.data.max_seq_len, "train and transfer")


def _floor(plan, p):
    """``(floor, seconds)``: the run's :class:`~appzoo.task.floor.Floor` as its reader declares it, measured
    now on the encoder as built, and the seconds it took (part of wall_time_s, so said apart); None for an
    encoder from scratch (random: there is nothing to beat) or from init_from (trained already), where the
    reader declares none, and with trainer.floor false."""
    if not plan.trainer.floor or plan.init_from or plan.encoder is None or plan.encoder.pretrained is None:
        return None, 0
    started, trained = time.time(), p.bundle
    embed = frozen_embedder(trained.model.base_encoder(), trained.tokenizer, plan.data.max_seq_len,
                            plan.trainer.eval_batch_size)
    floor = trained.reader.floor(p.splits, embed)
    if floor is not None:
        note(f"note: floor ({floor.said}): {floor.split} {floor.metric} {floor.value:.4f}")
    return floor, round(time.time() - started, 1)


def _at_best(state, history, floor):
    """The run's value of the floor's metric on its split at the best checkpoint (None: never evaluated)."""
    key = f"{floor.split}_{floor.metric}"
    rows = [row for row in history if key in row]
    if not rows:
        return None
    at_best = [row[key] for row in rows if row["step"] == state.best_step]
    return at_best[-1] if at_best else rows[-1][key]


def best_is_last(state, history, metric):
    """A note when the best model is that of the last of several dev
    evaluations: the metric was still improving when training stopped."""
    evaluations = [row["step"] for row in history if f"dev_{metric}" in row]
    if len(evaluations) < 2 or state.best_step != evaluations[-1]:
        return None
    return (f"the best checkpoint is the last evaluated step ({state.best_step}): dev {metric} was still "
            f"improving, so the model may be under-trained (try more trainer.epochs or trainer.max_steps)")
