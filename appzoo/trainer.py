"""The one trainer every task shares: train / evaluate / predict / export.

Tasks plug in through their reader (data in, predictions and metrics out) and
their model (``forward`` returns a dict with ``logits`` and, given labels,
``loss``; ``decode`` turns outputs into predictions). Everything that must
survive a restart lives in :class:`TrainerState`, saved with each checkpoint.
"""
import dataclasses
import json
import math
import os
import shutil
import time

import numpy as np
import paddle

from appzoo import callbacks as cb
from appzoo.encoders import save_encoder
from appzoo.errors import ConfigError, DataError
from appzoo.progress import progress

MODEL_FILE = "model_state.pdparams"
STATE_FILE = "trainer_state.json"


@dataclasses.dataclass
class TrainerState:
    """What a resumed run needs to continue exactly where it stopped."""

    epoch: int = 0
    step_in_epoch: int = 0  # batches of ``epoch`` already consumed
    global_step: int = 0
    best_metric: float = None
    best_step: int = None
    bad_evals: int = 0  # evaluations in a row without improvement
    should_stop: bool = False


def batches(features, batch_size, *, shuffle, seed=0, rank=0, world_size=1):
    """Lists of feature indices. Shuffled by ``seed`` (so a resumed epoch sees
    the same order), then split across data-parallel ranks."""
    order = np.arange(len(features))
    if shuffle:
        order = np.random.RandomState(seed).permutation(len(features))
    step = batch_size * world_size
    out = []
    for start in range(0, len(order), step):
        chunk = order[start:start + step]
        if shuffle and world_size > 1 and len(chunk) < step:
            break  # ranks must run the same number of steps
        out.append(chunk[rank::world_size].tolist())
    return out


class Trainer:
    def __init__(self, model, reader, tokenizer, labels, config, output_dir, *,
                 run_config=None, model_args=None):
        self.model = model
        self.reader = reader
        self.tokenizer = tokenizer
        self.labels = labels
        self.config = config
        self.output_dir = output_dir
        self.run_config = run_config or {}
        self.model_args = model_args or {}
        self.state = TrainerState()
        self.world_size = paddle.distributed.get_world_size()
        self.rank = paddle.distributed.get_rank()
        self.is_main = self.rank == 0
        self.history = []  # the rows of train_log.jsonl, for plots
        metric = config.metric_for_best or reader.default_metric
        greater = config.greater_is_better
        if greater is None:
            greater = not metric.endswith("loss")
        self.metric, self.greater = metric, greater
        self.callbacks = [cb.JsonlLogger(os.path.join(output_dir, "train_log.jsonl")),
                          cb.BestCheckpoint(), cb.EarlyStopping(config.patience)]
        self._train_model = model
        if self.world_size > 1:
            paddle.distributed.init_parallel_env()
            self._train_model = paddle.DataParallel(model)

    # ------------------------------------------------------------------ train
    def train(self, train_features, dev=None):
        """Train on features; ``dev`` is ``(examples, features)`` or None."""
        cfg = self.config
        per_epoch = len(batches(train_features, cfg.batch_size, shuffle=True,
                                world_size=self.world_size))
        if per_epoch == 0:
            raise DataError(f"the training data has {len(train_features)} example(s), fewer than the "
                            f"{self.world_size} data-parallel processes")
        total = cfg.max_steps if cfg.max_steps > 0 else per_epoch * cfg.epochs
        epochs = math.ceil(total / per_epoch)
        warmup = cfg.warmup_steps or cfg.warmup_proportion
        from paddlenlp.transformers import LinearDecayWithWarmup

        self.scheduler = LinearDecayWithWarmup(cfg.learning_rate, total, warmup)
        no_decay = ("bias", "norm", "layer_norm", "LayerNorm")
        decay = {p.name for n, p in self.model.named_parameters() if not any(k in n for k in no_decay)}
        self.optimizer = paddle.optimizer.AdamW(
            learning_rate=self.scheduler, parameters=self.model.parameters(),
            weight_decay=cfg.weight_decay, epsilon=cfg.adam_epsilon,
            apply_decay_param_fun=lambda name: name in decay,
            grad_clip=paddle.nn.ClipGradByGlobalNorm(cfg.max_grad_norm) if cfg.max_grad_norm > 0 else None,
        )
        if cfg.resume:
            self._resume(cfg.resume)

        bar = progress(total=total, initial=self.state.global_step, desc="train", unit="step",
                   disable=not (cfg.progress_bar and self.is_main), dynamic_ncols=True)
        running, started = [], time.time()
        self._evaluated_at = None
        while self.state.epoch < epochs and not self.state.should_stop:
            order = batches(train_features, cfg.batch_size, shuffle=True, seed=cfg.seed + self.state.epoch,
                            rank=self.rank, world_size=self.world_size)
            for indices in order[self.state.step_in_epoch:]:
                running.append(self._train_step([train_features[i] for i in indices]))
                self.state.step_in_epoch += 1
                self.state.global_step += 1
                step, lr = self.state.global_step, self.optimizer.get_lr()
                bar.update(1)
                bar.set_postfix(loss=f"{running[-1]:.4f}", lr=f"{lr:.2e}")
                if step % cfg.logging_steps == 0:
                    self._log_loss(running, started)
                if cfg.eval_steps and step % cfg.eval_steps == 0:
                    self._evaluate_and_save(dev)
                if step >= total or self.state.should_stop:
                    break
            if self.state.step_in_epoch == len(order):  # the epoch ran to its end
                self.state.epoch += 1
                self.state.step_in_epoch = 0
            if self.state.global_step >= total:
                break
            self._log_loss(running, started)
            if self._evaluated_at != self.state.global_step:  # eval_steps may have just done it
                self._evaluate_and_save(dev)
        self._log_loss(running, started)
        if self._evaluated_at != self.state.global_step:
            self._evaluate_and_save(dev)
        bar.close()
        if self.world_size > 1:
            paddle.distributed.barrier()  # rank 0 may still be writing best/ that every rank reloads
        return self.state

    def _log_loss(self, running, started):
        """Log the mean loss of the steps since the last log (and forget them)."""
        if running:
            self._log({"step": self.state.global_step, "epoch": self.state.epoch,
                       "loss": float(np.mean(running)), "lr": self.optimizer.get_lr(),
                       "elapsed_s": round(time.time() - started, 2)})
            running.clear()

    def _train_step(self, features):
        paddle.seed(self.config.seed + self.state.global_step)  # dropout masks survive a resume
        self._train_model.train()
        batch = self._to_tensors(self.reader.collate(features, self.tokenizer.pad_token_id))
        loss = self._train_model(**batch)["loss"]
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.clear_grad()
        return float(loss)

    def _evaluate_and_save(self, dev):
        """Evaluate on dev (when there is one), let the callbacks keep the best
        model or stop the run, and write a checkpoint."""
        self._evaluated_at = self.state.global_step
        if dev is None:
            # nothing to choose by: the latest model is the best we know
            if self.is_main:
                self.save_best()
        else:
            metrics = self.evaluate(*dev, split="dev", fit=True)
            self._log({"step": self.state.global_step, "epoch": self.state.epoch,
                       **{f"dev_{k}": v for k, v in metrics.items() if _is_scalar(v)}})
            for callback in self.callbacks:
                callback.on_evaluate(self, metrics)
        self._save_checkpoint()

    def improved(self, value):
        best = self.state.best_metric
        return best is None or (value > best if self.greater else value < best)

    # ------------------------------------------------------- eval / predict
    @paddle.no_grad()
    def predict(self, examples, features, desc="predict"):
        """Per-example predictions (whatever the reader's ``decode`` returns)
        and the mean loss where the features carry labels."""
        self.model.eval()
        outputs, losses, sizes = {}, [], []
        order = batches(features, self.config.eval_batch_size, shuffle=False)
        for indices in progress(order, desc=desc, unit="batch", leave=False,
                            disable=not (self.config.progress_bar and self.is_main)):
            batch = self._to_tensors(self.reader.collate([features[i] for i in indices],
                                                         self.tokenizer.pad_token_id))
            out = self.model(**batch)
            if "loss" in out:
                losses.append(float(out["loss"]))
                sizes.append(len(indices))
            for key, value in self.model.decode(out, batch).items():
                outputs.setdefault(key, []).extend(list(value.numpy()))
        predictions = self.reader.decode(examples, features, outputs, self.labels)
        loss = float(np.average(losses, weights=sizes)) if losses else None
        return predictions, loss

    def evaluate(self, examples, features, split, fit=False):
        """Metrics of one split; ``fit`` lets the reader tune on it first (dev
        during training: a decision threshold, say)."""
        predictions, loss = self.predict(examples, features, desc=f"eval {split}")
        if fit:
            self.reader_state = self.reader.fit(examples, predictions, self.labels)
        metrics = self.reader.evaluate(examples, predictions, self.labels)
        if loss is not None:
            metrics = {"loss": loss, **metrics}
        return metrics

    # ------------------------------------------------------------- saving
    def save_best(self):
        """Write ``best/``: weights, encoder config, tokenizer, labels, the
        reader's tuned state and the resolved config — enough to predict."""
        folder = os.path.join(self.output_dir, "best")
        tmp = folder + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        paddle.save(self.model.state_dict(), os.path.join(tmp, MODEL_FILE))
        save_encoder(self.model.encoder, self.tokenizer, os.path.join(tmp, "encoder"))
        _write_json(os.path.join(tmp, "labels.json"), self.labels)
        _write_json(os.path.join(tmp, "model_args.json"), self.model_args)
        _write_json(os.path.join(tmp, "reader_state.json"), getattr(self, "reader_state", {}) or {})
        _write_json(os.path.join(tmp, "config.json"), self.run_config)
        _write_json(os.path.join(tmp, "best.json"), {"step": self.state.global_step,
                                                    "metric": self.metric, "value": self.state.best_metric})
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)

    def _save_checkpoint(self):
        if not self.is_main:
            return
        root = os.path.join(self.output_dir, "checkpoints")
        folder = os.path.join(root, f"step-{self.state.global_step}")
        os.makedirs(folder, exist_ok=True)
        paddle.save(self.model.state_dict(), os.path.join(folder, MODEL_FILE))
        paddle.save(self._optimizer_state(), os.path.join(folder, "optimizer.pdopt"))
        paddle.save(self.scheduler.state_dict(), os.path.join(folder, "scheduler.pdparams"))
        _write_json(os.path.join(folder, STATE_FILE), dataclasses.asdict(self.state))
        _write_json(os.path.join(folder, "reader_state.json"), getattr(self, "reader_state", {}) or {})
        for old in checkpoint_folders(root)[:-self.config.keep_checkpoints]:
            shutil.rmtree(old)

    def _resume(self, resume):
        root = os.path.join(self.output_dir, "checkpoints")
        if resume is True:
            found = checkpoint_folders(root)
            if not found:
                raise ConfigError(f"trainer.resume: no checkpoint to resume from in {root!r}")
            folder = found[-1]
        else:
            folder = resume
            if not os.path.isfile(os.path.join(folder, STATE_FILE)):
                raise ConfigError(f"trainer.resume: {folder!r} is not a checkpoint folder (no {STATE_FILE})")
        self.model.set_state_dict(paddle.load(os.path.join(folder, MODEL_FILE)))
        self._load_optimizer_state(paddle.load(os.path.join(folder, "optimizer.pdopt")))
        self.scheduler.set_state_dict(paddle.load(os.path.join(folder, "scheduler.pdparams")))
        with open(os.path.join(folder, STATE_FILE), encoding="utf-8") as f:
            self.state = TrainerState(**json.load(f))
        self.state.should_stop = False
        with open(os.path.join(folder, "reader_state.json"), encoding="utf-8") as f:
            self.reader_state = json.load(f)
        self.reader.load_state(self.reader_state)

    def _optimizer_state(self):
        """The optimizer's state keyed by structured parameter names: paddle's
        own keys use unique names (``linear_3.w_0``) that differ from process to
        process, or between two models of one process."""
        to_struct = {p.name: n for n, p in self.model.named_parameters()}
        return {_rename(k, to_struct): v for k, v in self.optimizer.state_dict().items()}

    def _load_optimizer_state(self, state):
        to_unique = {n: p.name for n, p in self.model.named_parameters()}
        self.optimizer.set_state_dict({_rename(k, to_unique): v for k, v in state.items()})

    def export(self, folder):
        """Static graph for ``paddle.inference`` (model.pdmodel + params)."""
        self.model.eval()
        static = paddle.jit.to_static(self.model.forward, input_spec=self.model.input_spec(), full_graph=True)
        paddle.jit.save(static, os.path.join(folder, "model"))
        return folder

    # ------------------------------------------------------------- helpers
    def _log(self, row):
        self.history.append(row)
        for callback in self.callbacks:
            callback.on_log(self, row)

    @staticmethod
    def _to_tensors(batch):
        return {k: paddle.to_tensor(v) for k, v in batch.items()}


def checkpoint_folders(root):
    """Checkpoint folders under ``root``, oldest first."""
    if not os.path.isdir(root):
        return []
    steps = [(int(n.split("-")[1]), n) for n in os.listdir(root) if n.startswith("step-")]
    return [os.path.join(root, n) for _, n in sorted(steps)]


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


def _write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)
