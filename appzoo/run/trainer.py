"""The one trainer every task shares: it trains a :class:`~appzoo.store.bundle.Bundle` and emits what happens.

Tasks plug in through their reader (data in, predictions and metrics out) and
their model (``forward`` returns a dict with ``logits`` and, given labels,
``loss``; ``decode`` turns outputs into predictions). The trainer writes no
file: logging, ``best/`` and checkpoints are callbacks (:mod:`appzoo.run.callbacks`)
that hold the run folder. Everything that must survive a restart lives in
:class:`TrainerState`, saved with each checkpoint.
"""
import contextlib
import dataclasses
import math
import time

import paddle

from appzoo.run import callbacks as cb
from appzoo.run import interrupts, param_groups
from appzoo.inference import prediction
from appzoo.data.sampler import Sampler
from appzoo.errors import DivergedError, Interrupted
from appzoo.metrics import scalars
from appzoo.task.inputs import forward_inputs
from appzoo.utils.progress import note, progress
# the op ClipGradByGlobalNorm sums squares with: same bits, and 10x faster than paddle.square().sum()
from paddle.nn.clip import _squared_l2_norm


@dataclasses.dataclass
class TrainerState:
    """What a resumed run needs to continue exactly where it stopped."""

    epoch: int = 0
    step_in_epoch: int = 0  # batches of ``epoch`` already consumed
    global_step: int = 0
    best_metric: float = None
    best_step: int = None
    bad_evals: int = 0  # evaluations in a row without improvement
    should_stop: bool = False  # early stopping asked for it
    finished: bool = False  # the run trained all it was asked to (or stopped early)
    evaluated_at: int = None  # the step of the last evaluation (and best/ decision)
    train_sha256: str = None  # of the training file: a resume on other data is refused
    wall_time_s: float = 0.0  # the run's time up to this state, over every process that trained it
    total_steps: int = None  # the steps the run was planned for (a resume may ask for more: "train longer")


class Trainer:
    """Trains ``bundle.model`` under ``config`` (a :class:`~appzoo.params.trainer.TrainerConfig`).

    ``metric``: ``(name, greater_is_better)`` of the dev metric that chooses
    the best model (default: :meth:`TrainerConfig.dev_metric`); ``callbacks``:
    what is done with logs, the best model and checkpoints; ``started``: when
    the run began (``time.time()``), for the wall time the state carries;
    ``objective``: what a step back-propagates (:mod:`appzoo.losses.objective`; default: the model's own,
    ``model.objective()``)."""

    def __init__(self, bundle, config, metric=None, callbacks=(), started=None, objective=None):
        self.bundle = bundle
        self.objective = objective or bundle.model.objective()
        self.model, self.reader = bundle.model, bundle.reader
        self.config = config
        self.metric, self.greater = metric or config.dev_metric(bundle.reader)
        self.state = TrainerState()
        self.world_size = paddle.distributed.get_world_size()
        self.rank = paddle.distributed.get_rank()
        self.is_main = self.rank == 0
        self.history = []  # the rows of train_log.jsonl, for plots
        self.checkpoint = None  # where the last checkpoint went, as a callback said
        self._best_weights = None  # the best model's weights, kept in memory to restore at the end
        self._started = started or time.time()
        self._wall_before = 0.0  # wall time of the processes before a resume
        self.callbacks = [cb.KeepBest(), cb.EarlyStopping(config.patience), *callbacks]
        self._inputs = forward_inputs(self.model)  # the batch keys its forward takes
        self._train_model = self.model
        if self.world_size > 1:
            paddle.distributed.init_parallel_env()
            self._train_model = paddle.DataParallel(self.model)

    def wall_time(self):
        """Seconds the run has taken, over every process that trained it."""
        return self._wall_before + time.time() - self._started

    # ------------------------------------------------------------------ train
    def _start(self, train_features, resume):
        """``(total steps, steps per epoch)``: the sampler, the optimizer and its schedule over the run's
        steps, and a checkpoint's state put back."""
        cfg = self.config
        self.sampler = Sampler(cfg, self.reader, train_features, per_token_loss=self.model.LOSS_PER == "token",
                               rank=self.rank, world_size=self.world_size)
        per_epoch = self.sampler.steps_per_epoch()
        total = cfg.max_steps if cfg.max_steps > 0 else per_epoch * cfg.epochs
        self._total = total
        self.build_optimizer(total)
        if resume:
            self._resume(resume)
        self.state.total_steps = total
        return total, per_epoch

    def _run_epoch(self, order, train_features, dev, running, total):
        """The steps of one epoch (``order``, the sampler's) from where the state stands (mid-epoch after a
        resume): each logged, evaluated and checked for an interrupt as the trainer keys say; up to ``total``
        steps, or until asked to stop."""
        cfg = self.config
        for group in order[self.state.step_in_epoch:]:
            running.append(self._train_step([[train_features[i] for i in b] for b in group]))
            self.state.step_in_epoch += 1
            self.state.global_step += 1
            step = self.state.global_step
            self._bar.update(1)
            if step % cfg.logging_steps == 0:
                self._log_loss(running)
            if cfg.eval_steps and step % cfg.eval_steps == 0:
                self._evaluate_and_save(dev)
            self._stop_if_interrupted()
            if step >= total or self.state.should_stop:
                break
        if self.state.step_in_epoch == len(order):  # the epoch ran to its end
            self.state.epoch += 1
            self.state.step_in_epoch = 0

    def train(self, train_features, dev=None, resume=None):
        """Train on features; ``dev`` is ``(examples, features)`` or None;
        ``resume`` what :meth:`appzoo.store.archive.RunFolder.load_checkpoint` read.
        Ends with the best model's weights in ``self.model``."""
        cfg = self.config
        total, per_epoch = self._start(train_features, resume)
        if self.state.finished:  # nothing left to train; count an epoch that its last step ended
            if self.state.step_in_epoch == per_epoch:
                self.state.epoch, self.state.step_in_epoch = self.state.epoch + 1, 0
            self._restore_best()
            return self.state
        self.objective.prepare(train_features, lambda: self.sampler.planned_indices(self.state, total))

        bar = self._bar = progress(total=total, initial=self.state.global_step, desc="train", unit="step",
                                   disable=not (cfg.progress_bar and self.is_main), dynamic_ncols=True)
        running = []
        with interrupts.deferred():
            while self.state.global_step < total and not self.state.should_stop:
                self._run_epoch(self.sampler.epoch(self.state.epoch), train_features, dev, running, total)
                if self.state.global_step >= total or self.state.should_stop:
                    break
                self._log_loss(running)
                if self.state.evaluated_at != self.state.global_step:  # eval_steps may have just done it
                    self._evaluate_and_save(dev)
                self._stop_if_interrupted()
            self._log_loss(running)
            if not self.state.finished:  # the last step was not evaluated (eval_steps did not hit it)
                self._evaluate_and_save(dev)
        bar.close()
        if self.world_size > 1:
            paddle.distributed.barrier()  # rank 0 may still be writing best/ that every rank reloads
        self._restore_best()
        return self.state

    def _stop_if_interrupted(self):
        """Save a checkpoint of the step just done and stop, after Ctrl-C / SIGTERM."""
        signum = interrupts.pending()
        if signum is None:
            return
        if self._saved_at != self.state.global_step:
            self._save_checkpoint()
        name = "Ctrl-C" if signum == 2 else "SIGTERM"
        raise Interrupted(signum, f"{name} at step {self.state.global_step}: checkpoint saved in {self.checkpoint}",
                          advice="continue with --set trainer.resume=true")

    def _restore_best(self):
        """Put the best model's weights back into ``self.model``: from memory, or
        (a resumed run whose best predates this process) as the callbacks do it."""
        if self._best_weights is not None:
            self.model.set_state_dict(self._best_weights)
            self.reader.load_state(self._best_reader_state)
        else:
            self._emit("on_restore_best")

    def build_optimizer(self, total):
        """AdamW (no decay on biases and norms), linear warmup then decay over
        ``total`` steps; the gradients are clipped by :meth:`_clip_gradients`.
        Its parameter groups (:mod:`appzoo.run.param_groups`, listed in
        ``self.groups``) scale the schedule to each group's peak rate; frozen
        parameters are left out."""
        cfg = self.config
        from paddlenlp.transformers import LinearDecayWithWarmup

        self.scheduler = LinearDecayWithWarmup(cfg.learning_rate, total, cfg.warmup_steps or cfg.warmup_proportion)
        no_decay = ("bias", "norm", "layer_norm", "LayerNorm")
        decay = {p.name for n, p in self.model.named_parameters() if not any(k in n for k in no_decay)}
        if cfg.amp == "fp16":
            self.scaler = paddle.amp.GradScaler(init_loss_scaling=2.0 ** 15)
        self.groups = param_groups.groups(self.model, cfg)
        self.optimizer = paddle.optimizer.AdamW(
            learning_rate=self.scheduler, parameters=param_groups.optimizer_groups(self.groups),
            weight_decay=cfg.weight_decay, epsilon=cfg.adam_epsilon,
            apply_decay_param_fun=lambda name: name in decay,
            grad_clip=None,  # _clip_gradients: the non-finite check needs the same norm
        )

    def _log_loss(self, running):
        """Log the mean loss of the steps since the last log (and forget them);
        the only place the loss leaves the device. Averaged over data-parallel ranks."""
        if running:
            mean = paddle.stack(running).mean()
            if self.world_size > 1:
                paddle.distributed.all_reduce(mean)
                mean = mean / self.world_size
            loss = float(mean)
            self._bar.set_postfix(loss=f"{loss:.4f}", lr=f"{self.optimizer.get_lr():.2e}")
            self._log({"step": self.state.global_step, "epoch": self.state.epoch,
                       "loss": loss, "lr": self.optimizer.get_lr(),
                       "elapsed_s": round(self.wall_time(), 2)})
            running.clear()

    def _train_step(self, micro_batches):
        """One optimizer step over ``micro_batches`` (lists of features):
        gradients accumulate, the loss is their mean. Returns the loss tensor.
        What is back-propagated is the objective's: its parts, one by one and
        scaled like the loss (:mod:`appzoo.losses.objective`)."""
        paddle.seed(self.config.seed + self.state.global_step)  # dropout masks survive a resume
        self._train_model.train()
        total = None
        for j, features in enumerate(micro_batches):
            batch = self._to_tensors(self.reader.collate(features, self.bundle.tokenizer.pad_token_id))
            sync = self.world_size == 1 or j == len(micro_batches) - 1
            with contextlib.nullcontext() if sync else self._train_model.no_sync():
                with self._autocast():
                    out = self._train_model(**self._inputs(batch))
                loss, parts = self.objective(out, batch)
                share = self.sampler.loss_share(features) / len(micro_batches)
                for part in parts:
                    part = part.astype("float32") * share
                    (self.scaler.scale(part) if self.scaler else part).backward()
                loss = loss.astype("float32") * share
            total = loss.detach() if total is None else total + loss.detach()
        if self.scaler:  # fp16: an overflow in the scaled gradients only skips the step (and lowers the scale)
            self.scaler.unscale_(self.optimizer)
            self._clip_gradients()
            self._check_finite(total)  # the norm is inf after an overflow, which the scaler handles
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            norm = self._clip_gradients()
            self._check_finite(total, norm)
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.clear_grad()
        return total

    scaler = None

    def _autocast(self):
        """``trainer.amp``: bf16 or fp16 autocast on a GPU (paddle's autocast has no
        effect on CPU; the plan refuses amp there). Losses run in float32
        (appzoo.losses.build_loss)."""
        amp = self.config.amp
        if amp == "off":
            return contextlib.nullcontext()
        return paddle.amp.auto_cast(dtype="bfloat16" if amp == "bf16" else "float16", level="O1")

    @paddle.no_grad()
    def _clip_gradients(self):
        """The gradients' global norm; with ``trainer.max_grad_norm`` > 0 the
        gradients are scaled down to it. One pass over the gradients serves
        the clipping and the non-finite check (a second one was the toolkit's
        main cost over a bare loop: docs/benchmarks.md, "Training speed").
        Computed with the op and in the order of ``paddle.nn.ClipGradByGlobalNorm``:
        the weights are the same bits as when the optimizer clipped."""
        grads = [p.grad for p in self.model.parameters() if not p.stop_gradient and p.grad is not None]
        if not grads:
            return paddle.zeros([1])
        norm = paddle.sqrt(paddle.stack([_squared_l2_norm(g) for g in grads]).sum())
        limit = self.config.max_grad_norm
        if limit > 0:
            limit = paddle.full([1], limit, dtype="float32")
            scale = limit / paddle.maximum(norm, limit)
            for g in grads:
                g.multiply_(scale)
        return norm

    def _check_finite(self, loss, norm=None):
        """Stop before a non-finite loss or gradient norm reaches the weights:
        the last best/ and checkpoint stay as they were."""
        norm = paddle.zeros([1]) if norm is None else norm
        if bool(paddle.isfinite(loss) & paddle.isfinite(norm)):  # one host sync a step
            return
        value, norm = float(loss), float(norm)
        step = self.state.global_step + 1
        what = f"loss {value}" if not math.isfinite(value) else f"gradient norm {norm} (loss {value:.4g})"
        raise DivergedError(
            f"step {step}: the training {what} is not finite, stopped before it reached the weights "
            f"(trainer.learning_rate={self.config.learning_rate:g}); lower trainer.learning_rate, keep "
            f"trainer.max_grad_norm > 0, or check the data; best/ and the checkpoints hold the last good model")

    def _evaluate_and_save(self, dev):
        """Evaluate on dev (when there is one), let the callbacks keep the best
        model or stop the run, and write a checkpoint."""
        self.state.evaluated_at = self.state.global_step
        if dev is None:
            # nothing to choose by: the latest model is the best we know
            self.save_best()
        else:
            metrics = self.evaluate(*dev, split="dev", fit=True)
            self._log({"step": self.state.global_step, "epoch": self.state.epoch,
                       **{f"dev_{k}": v for k, v in scalars(metrics).items()}})
            self._emit("on_evaluate", metrics)
        if self.state.should_stop or self.state.global_step >= self._total:
            self.state.finished = True
        self._save_checkpoint()

    def improved(self, value):
        best = self.state.best_metric
        return best is None or (value > best if self.greater else value < best)

    # ------------------------------------------------------- eval / predict
    def predict(self, examples, features, desc="predict"):
        """Per-example predictions (whatever the reader's ``decode`` returns)
        and the mean loss where the features carry labels, through the one
        prediction loop (:mod:`appzoo.inference.prediction`), shared out over the
        data-parallel ranks."""
        self.model.eval()
        return prediction.predict(self._run, self.bundle, examples, features, **self._loop_options(desc))

    def evaluate(self, examples, features, split, fit=False, with_predictions=False):
        """Metrics of one split; ``fit`` lets the reader tune on it first (dev
        during training: a decision threshold, say); ``with_predictions``:
        ``(metrics, predictions)`` (:func:`appzoo.inference.prediction.evaluate`)."""
        self.model.eval()
        return prediction.evaluate(self._run, self.bundle, examples, features, fit=fit,
                                   with_predictions=with_predictions, **self._loop_options(f"eval {split}"))

    def _run(self, batch, tensors):
        return self.model(**self._inputs(tensors))

    def _loop_options(self, desc):
        return {"batch_size": self.config.eval_batch_size, "rank": self.rank, "world_size": self.world_size,
                "bar": self.config.progress_bar and self.is_main, "desc": desc}

    # ------------------------------------------------------------- saving
    def save_best(self):
        """Keep the current weights as the best model: in memory (every rank),
        and through the callbacks (``on_best``: ``best/``, by the main process)."""
        self._best_weights = {k: v.numpy().copy() for k, v in self.model.state_dict().items()}
        self._best_reader_state = self.reader.state()
        self._emit("on_best", {"step": self.state.global_step, "metric": self.metric,
                               "value": self.state.best_metric})

    _saved_at = None

    def _save_checkpoint(self):
        """Hand what a resume needs to the callbacks (``on_checkpoint``: ``checkpoints/``)."""
        self._saved_at = self.state.global_step
        self.state.wall_time_s = round(self.wall_time(), 1)
        saved = self._emit("on_checkpoint", {
            "model": self.model.state_dict(), "optimizer": self._optimizer_state(),
            "scheduler": self._scheduler_state(), "state": dataclasses.asdict(self.state),
            "reader_state": self.reader.state()})
        self.checkpoint = next((path for path in saved if path), self.checkpoint)

    def _scheduler_state(self):
        """The schedule's state, with fp16's loss-scaler state (the scale and its counters)."""
        state = dict(self.scheduler.state_dict())
        if self.scaler:
            state["grad_scaler"] = self.scaler.state_dict()
        return state

    def _resume(self, saved):
        self.model.set_state_dict(saved["model"])
        if saved["optimizer"] is not None:  # None: a finished run kept no optimizer state (keep_optimizer_state)
            self._load_optimizer_state(saved["optimizer"])
        scheduler = dict(saved["scheduler"])
        scaler = scheduler.pop("grad_scaler", None)
        self.scheduler.set_state_dict(scheduler)
        if self.scaler and scaler:
            self.scaler.load_state_dict(scaler)
        self.state = TrainerState(**saved["state"])
        self._saved_at = self.state.global_step
        self._wall_before = self.state.wall_time_s
        planned = self.state.total_steps
        if planned is None and self.state.finished:  # saved before the length was: it ended where it was planned to
            planned = self.state.global_step
        if planned is not None and planned != self._total:  # train longer: the schedule runs to the new end
            self.scheduler.last_lr = self.scheduler.get_lr()
            if self.state.global_step < self._total and not self.state.should_stop:
                self.state.finished = False
            if self.is_main:
                note(f"note: trainer.resume: the run was planned for {planned} steps and now goes on to "
                     f"{self._total}; the learning-rate schedule was rebuilt for the new length")
            if self.is_main and saved["optimizer"] is None:
                note("note: trainer.resume: the finished run kept no optimizer state (trainer.keep_optimizer_state "
                     "false): the optimizer starts afresh, so this is not the run a longer one would have been")
        self.reader.load_state(saved["reader_state"])

    def _optimizer_state(self):
        """The optimizer's state keyed by structured parameter names: paddle's
        own keys use unique names (``linear_3.w_0``) that differ from process to
        process, or between two models of one process."""
        to_struct = {p.name: n for n, p in self.model.named_parameters()}
        return {_rename(k, to_struct): v for k, v in self.optimizer.state_dict().items()}

    def _load_optimizer_state(self, state):
        to_unique = {n: p.name for n, p in self.model.named_parameters()}
        self.optimizer.set_state_dict({_rename(k, to_unique): v for k, v in state.items()})

    # ------------------------------------------------------------- helpers
    def _log(self, row):
        self.history.append(row)
        self._emit("on_log", row)

    def _emit(self, hook, *args):
        """Call ``hook`` of every callback; their results, in order."""
        return [getattr(callback, hook)(self, *args) for callback in self.callbacks]

    @staticmethod
    def _to_tensors(batch):
        return {k: paddle.to_tensor(v) for k, v in batch.items()}


def _rename(key, names):
    """Replace the parameter name that ``key`` starts with (accumulator keys are
    ``<param>_<accumulator>``) by its counterpart in ``names``."""
    if key in names:
        return names[key]
    for old in sorted(names, key=len, reverse=True):
        if key.startswith(old + "_"):
            return names[old] + key[len(old):]
    return key

