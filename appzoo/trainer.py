"""The one trainer every task shares: train / evaluate / predict / export.

Tasks plug in through their reader (data in, predictions and metrics out) and
their model (``forward`` returns a dict with ``logits`` and, given labels,
``loss``; ``decode`` turns outputs into predictions). Everything that must
survive a restart lives in :class:`TrainerState`, saved with each checkpoint.
"""
import contextlib
import dataclasses
import inspect
import math
import os
import time

import numpy as np
import paddle

from appzoo import callbacks as cb
from appzoo import interrupts
from appzoo.archive import MODEL_FILE, Best, RunFolder, load_weights, read_best
from appzoo.data.sampler import (
    CLASS_SAMPLERS, check_class_count, choose_sampler, feature_length, length_order, train_batches,
)
from appzoo.errors import DataError, DivergedError, Interrupted
from appzoo.progress import progress


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


class Trainer:
    def __init__(self, model, reader, tokenizer, labels, config, output_dir, *,
                 run_config=None, model_args=None, folder=None):
        self.model = model
        self.reader = reader
        self.tokenizer = tokenizer
        self.labels = labels
        self.config = config
        self.output_dir = output_dir
        self.folder = folder or RunFolder(output_dir)
        self.run_config = run_config or {}
        self.model_args = model_args or {}
        self.state = TrainerState()
        self.world_size = paddle.distributed.get_world_size()
        self.rank = paddle.distributed.get_rank()
        self.is_main = self.rank == 0
        self.history = []  # the rows of train_log.jsonl, for plots
        self._best_weights = None  # the best model's weights, kept in memory to restore at the end
        metric = config.metric_for_best or reader.default_metric
        greater = config.greater_is_better
        if greater is None:
            greater = not metric.endswith("loss")
        self.metric, self.greater = metric, greater
        self.callbacks = [cb.JsonlLogger(os.path.join(output_dir, "train_log.jsonl")),
                          cb.BestCheckpoint(), cb.EarlyStopping(config.patience)]
        if config.visualdl:
            self.callbacks.append(cb.VisualDLLogger(os.path.join(output_dir, "vdl")))
        params = inspect.signature(model.forward).parameters.values()
        self._forward_keys = None if any(p.kind == p.VAR_KEYWORD for p in params) else {p.name for p in params}
        self._train_model = model
        if self.world_size > 1:
            paddle.distributed.init_parallel_env()
            self._train_model = paddle.DataParallel(model)

    # ------------------------------------------------------------------ train
    def train(self, train_features, dev=None, resume_from=None):
        """Train on features; ``dev`` is ``(examples, features)`` or None;
        ``resume_from`` a checkpoint folder. Ends with the best model's weights
        in ``self.model``."""
        cfg = self.config
        self._prepare_sampler(train_features)
        per_epoch = len(self._epoch_steps(train_features, 0))
        if per_epoch == 0:
            if self.sampler == "no_duplicates":
                raise DataError(f"trainer.sampler: no_duplicates cannot make a batch of two or more of the "
                                f"{len(train_features)} training pairs without a repeated query or positive")
            raise DataError(f"the training data has {len(train_features)} example(s), fewer than the "
                            f"{self.world_size} data-parallel processes")
        total = cfg.max_steps if cfg.max_steps > 0 else per_epoch * cfg.epochs
        self._total = total
        self.build_optimizer(total)
        if resume_from:
            self._resume(resume_from)
        if self.state.finished:  # nothing left to train; count an epoch that its last step ended
            if self.state.step_in_epoch == per_epoch:
                self.state.epoch, self.state.step_in_epoch = self.state.epoch + 1, 0
            self._restore_best()
            return self.state

        bar = self._bar = progress(total=total, initial=self.state.global_step, desc="train", unit="step",
                                   disable=not (cfg.progress_bar and self.is_main), dynamic_ncols=True)
        running, started = [], time.time()
        with interrupts.deferred():
            while self.state.global_step < total and not self.state.should_stop:
                order = self._epoch_steps(train_features, self.state.epoch)
                for group in order[self.state.step_in_epoch:]:
                    running.append(self._train_step([[train_features[i] for i in b] for b in group]))
                    self.state.step_in_epoch += 1
                    self.state.global_step += 1
                    step = self.state.global_step
                    bar.update(1)
                    if step % cfg.logging_steps == 0:
                        self._log_loss(running, started)
                    if cfg.eval_steps and step % cfg.eval_steps == 0:
                        self._evaluate_and_save(dev)
                    self._stop_if_interrupted()
                    if step >= total or self.state.should_stop:
                        break
                if self.state.step_in_epoch == len(order):  # the epoch ran to its end
                    self.state.epoch += 1
                    self.state.step_in_epoch = 0
                if self.state.global_step >= total or self.state.should_stop:
                    break
                self._log_loss(running, started)
                if self.state.evaluated_at != self.state.global_step:  # eval_steps may have just done it
                    self._evaluate_and_save(dev)
                self._stop_if_interrupted()
            self._log_loss(running, started)
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
        raise Interrupted(signum, f"{name} at step {self.state.global_step}: checkpoint saved in "
                                  f"{self.folder.latest_checkpoint()}; continue with --set trainer.resume=true")

    def _restore_best(self):
        """Put the best model's weights back into ``self.model``."""
        if self._best_weights is not None:
            self.model.set_state_dict(self._best_weights)
            self.reader.load_state(self._best_reader_state)
        elif os.path.isdir(self.folder.best):  # a resumed run whose best predates this process
            self.model.set_state_dict(load_weights(os.path.join(self.folder.best, MODEL_FILE)))
            self.reader.load_state(read_best(self.folder.best).reader_state)

    def build_optimizer(self, total):
        """AdamW (no decay on biases and norms), global-norm clipping, linear
        warmup then decay over ``total`` steps."""
        cfg = self.config
        from paddlenlp.transformers import LinearDecayWithWarmup

        self.scheduler = LinearDecayWithWarmup(cfg.learning_rate, total, cfg.warmup_steps or cfg.warmup_proportion)
        no_decay = ("bias", "norm", "layer_norm", "LayerNorm")
        decay = {p.name for n, p in self.model.named_parameters() if not any(k in n for k in no_decay)}
        if getattr(cfg, "amp", "off") == "fp16":
            self.scaler = paddle.amp.GradScaler(init_loss_scaling=2.0 ** 15)
        self.optimizer = paddle.optimizer.AdamW(
            learning_rate=self.scheduler, parameters=self.model.parameters(),
            weight_decay=cfg.weight_decay, epsilon=cfg.adam_epsilon,
            apply_decay_param_fun=lambda name: name in decay,
            grad_clip=paddle.nn.ClipGradByGlobalNorm(cfg.max_grad_norm) if cfg.max_grad_norm > 0 else None,
        )

    def _prepare_sampler(self, features):
        """Choose the sampler (:func:`choose_sampler`) and compute what it
        needs from the training features: lengths, classes or duplicate keys."""
        cfg, reader = self.config, self.reader
        self.sampler = choose_sampler(getattr(cfg, "sampler", None), getattr(cfg, "group_by_length", None),
                                      getattr(reader, "batch_composition_matters", False))
        self._lengths = [feature_length(f) for f in features] if self.sampler == "by_length" else None
        self._classes = reader.sampling_classes(features) if self.sampler in CLASS_SAMPLERS else None
        self._keys = reader.duplicate_keys(features) if self.sampler == "no_duplicates" else None
        if self.sampler in CLASS_SAMPLERS:
            check_class_count(self.sampler, cfg.batch_size, cfg.sampler_m, self._classes)
        self._tokens_per_batch = None  # see _loss_share
        if self.sampler == "by_length" and getattr(self.model, "LOSS_PER", "example") == "token":
            tokens = sum(reader.loss_targets(f) for f in features)
            self._tokens_per_batch = cfg.batch_size * tokens / max(1, len(features))

    def _loss_share(self, features):
        """1, or with length-grouped batches and a per-token loss (``LOSS_PER =
        "token"``) the batch's tokens over the mean tokens of a batch: a batch
        of short sentences then weighs what its tokens weigh in a random batch,
        not as much as a batch of long ones."""
        if self._tokens_per_batch is None:
            return 1.0
        return sum(self.reader.loss_targets(f) for f in features) / self._tokens_per_batch

    def _epoch_steps(self, features, epoch):
        """The steps of one epoch, each a list of micro-batches (of indices)."""
        cfg = self.config
        micro = train_batches(len(features), cfg.batch_size, seed=cfg.seed, epoch=epoch, sampler=self.sampler,
                              lengths=self._lengths, classes=self._classes, keys=self._keys,
                              power=getattr(cfg, "sampler_power", 0.5), m=getattr(cfg, "sampler_m", 2),
                              mega_batches=getattr(cfg, "sampler_mega_batches", 8),
                              rank=self.rank, world_size=self.world_size)
        k = getattr(cfg, "gradient_accumulation_steps", 1)
        return [micro[i:i + k] for i in range(0, len(micro), k)]

    def _log_loss(self, running, started):
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
                       "elapsed_s": round(time.time() - started, 2)})
            running.clear()

    def _train_step(self, micro_batches):
        """One optimizer step over ``micro_batches`` (lists of features):
        gradients accumulate, the loss is their mean. Returns the loss tensor.
        A model's output may carry ``loss_parts`` (GradCache): those are
        back-propagated, one by one and scaled like the loss, instead of it."""
        paddle.seed(self.config.seed + self.state.global_step)  # dropout masks survive a resume
        self._train_model.train()
        total = None
        for j, features in enumerate(micro_batches):
            batch = self._to_tensors(self.reader.collate(features, self.tokenizer.pad_token_id))
            sync = self.world_size == 1 or j == len(micro_batches) - 1
            with contextlib.nullcontext() if sync else self._train_model.no_sync():
                with self._autocast():
                    out = self._train_model(**self._inputs(batch))
                # GradCache models (appzoo.losses.grad_cache) return the loss detached and the parts whose
                # gradients add up to its own, each built when it is back-propagated
                share = self._loss_share(features) / len(micro_batches)
                for part in out["loss_parts"] if "loss_parts" in out else [out["loss"]]:
                    part = part.astype("float32") * share
                    (self.scaler.scale(part) if self.scaler else part).backward()
                loss = out["loss"].astype("float32") * share
            total = loss.detach() if total is None else total + loss.detach()
        if self.scaler:  # fp16: an overflow in the scaled gradients only skips the step (and lowers the scale)
            self.scaler.unscale_(self.optimizer)
            self._check_finite(total, grads=False)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self._check_finite(total)
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.clear_grad()
        return total

    scaler = None

    def _autocast(self):
        """``trainer.amp``: bf16 or fp16 autocast on a GPU (paddle's autocast has no
        effect on CPU; the plan refuses amp there). Losses run in float32
        (appzoo.losses.build_loss)."""
        amp = getattr(self.config, "amp", "off")
        if amp == "off":
            return contextlib.nullcontext()
        return paddle.amp.auto_cast(dtype="bfloat16" if amp == "bf16" else "float16", level="O1")

    def _check_finite(self, loss, grads=True):
        """Stop before a non-finite loss or gradient reaches the weights: the
        last best/ and checkpoint stay as they were."""
        grads = [p.grad for p in self.model.parameters() if p.grad is not None] if grads else []
        norm = paddle.sqrt(paddle.add_n([paddle.sum(paddle.square(g.astype("float32"))) for g in grads])) \
            if grads else paddle.to_tensor(0.0)
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
                       **{f"dev_{k}": v for k, v in metrics.items() if _is_scalar(v)}})
            for callback in self.callbacks:
                callback.on_evaluate(self, metrics)
        if self.state.should_stop or self.state.global_step >= self._total:
            self.state.finished = True
        self._save_checkpoint()

    def improved(self, value):
        best = self.state.best_metric
        return best is None or (value > best if self.greater else value < best)

    # ------------------------------------------------------- eval / predict
    @paddle.no_grad()
    def predict(self, examples, features, desc="predict"):
        """Per-example predictions (whatever the reader's ``decode`` returns)
        and the mean loss where the features carry labels. Batches run longest
        first (little padding), shared out over the data-parallel ranks, and
        the rows are put back in the examples' order before decoding."""
        self.model.eval()
        order = length_order(features)
        size = self.config.eval_batch_size
        chunks = [order[i:i + size] for i in range(0, len(order), size)][self.rank::self.world_size]
        rows, outputs, losses, sizes = [], {}, [], []
        for indices in progress(chunks, desc=desc, unit="batch", leave=False,
                                disable=not (self.config.progress_bar and self.is_main)):
            batch = self._to_tensors(self.reader.collate([features[i] for i in indices],
                                                         self.tokenizer.pad_token_id))
            out = self.model(**self._inputs(batch))
            if "loss" in out:
                losses.append(float(out["loss"]))
                sizes.append(len(indices))
            for key, value in self.model.decode(out, batch).items():
                outputs.setdefault(key, []).extend(list(value.numpy()))
            rows.extend(indices)
        if self.world_size > 1:  # every rank gets every row
            shares = []
            paddle.distributed.all_gather_object(shares, (rows, outputs, losses, sizes))
            rows = [i for share in shares for i in share[0]]
            keys = dict.fromkeys(k for share in shares for k in share[1])  # a rank with no batch has none
            outputs = {k: [v for share in shares for v in share[1].get(k, [])] for k in keys}
            losses = [v for share in shares for v in share[2]]
            sizes = [v for share in shares for v in share[3]]
        if not examples:  # an empty predict file
            return [], None
        back = np.argsort(rows, kind="stable")  # row position of each feature, in the features' order
        outputs = {k: [v[j] for j in back] for k, v in outputs.items()}
        predictions = self.reader.decode(examples, features, outputs, self.labels)
        loss = float(np.average(losses, weights=sizes)) if losses else None
        return predictions, loss

    def evaluate(self, examples, features, split, fit=False):
        """Metrics of one split; ``fit`` lets the reader tune on it first (dev
        during training: a decision threshold, say)."""
        predictions, loss = self.predict(examples, features, desc=f"eval {split}")
        if fit:
            self.reader.fit(examples, predictions, self.labels)
        metrics = self.reader.evaluate(examples, predictions, self.labels)
        if loss is not None:
            metrics = {"loss": loss, **metrics}
        return metrics

    # ------------------------------------------------------------- saving
    def save_best(self):
        """Keep the current weights as the best model: in memory (every rank)
        and in ``best/`` (the main process), with everything needed to predict."""
        self._best_weights = {k: v.numpy().copy() for k, v in self.model.state_dict().items()}
        self._best_reader_state = self.reader.state()
        if self.is_main:
            self.folder.save_best(self.model, self.model.encoder, self.tokenizer, Best(
                labels=self.labels, model_args=self.model_args, reader_state=self.reader.state(),
                config=self.run_config, info={"step": self.state.global_step, "metric": self.metric,
                                              "value": self.state.best_metric}))

    _saved_at = None

    def _save_checkpoint(self):
        self._saved_at = self.state.global_step
        if not self.is_main:
            return
        self.folder.save_checkpoint(
            self.state.global_step, model=self.model.state_dict(), optimizer=self._optimizer_state(),
            scheduler=self._scheduler_state(), state=dataclasses.asdict(self.state),
            reader_state=self.reader.state(), config=self.run_config, keep=self.config.keep_checkpoints)

    def _scheduler_state(self):
        """The schedule's state, with fp16's loss-scaler state (the scale and its counters)."""
        state = dict(self.scheduler.state_dict())
        if self.scaler:
            state["grad_scaler"] = self.scaler.state_dict()
        return state

    def _resume(self, folder):
        saved = self.folder.load_checkpoint(folder)
        self.model.set_state_dict(saved["model"])
        self._load_optimizer_state(saved["optimizer"])
        scheduler = dict(saved["scheduler"])
        scaler = scheduler.pop("grad_scaler", None)
        self.scheduler.set_state_dict(scheduler)
        if self.scaler and scaler:
            self.scaler.load_state_dict(scaler)
        self.state = TrainerState(**saved["state"])
        self._saved_at = self.state.global_step
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
        for callback in self.callbacks:
            callback.on_log(self, row)

    @staticmethod
    def _to_tensors(batch):
        return {k: paddle.to_tensor(v) for k, v in batch.items()}

    def _inputs(self, batch):
        """The batch keys the model's ``forward`` takes (as HF's Trainer does):
        a reader's batch may carry more, for the model's ``decode``."""
        if self._forward_keys is None:  # forward(**kwargs) takes them all
            return batch
        return {k: v for k, v in batch.items() if k in self._forward_keys}


def _rename(key, names):
    """Replace the parameter name that ``key`` starts with (accumulator keys are
    ``<param>_<accumulator>``) by its counterpart in ``names``."""
    if key in names:
        return names[key]
    for old in sorted(names, key=len, reverse=True):
        if key.startswith(old + "_"):
            return names[old] + key[len(old):]
    return key


def _is_scalar(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)
