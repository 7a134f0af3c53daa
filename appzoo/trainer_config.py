"""The ``trainer`` section of a param file."""
import dataclasses
import math
from typing import List, Literal, Optional, Union

from appzoo.errors import ConfigError

MODES = ("train", "eval", "predict", "export")


@dataclasses.dataclass
class TrainerConfig:
    """Every key of the ``trainer`` section, with its default (see README)."""

    output_dir: str = "output/run"
    do: Optional[List[Literal["train", "eval", "predict", "export"]]] = None
    epochs: int = 3
    max_steps: int = -1
    batch_size: int = 32
    eval_batch_size: int = 64
    learning_rate: float = 5e-5
    weight_decay: float = 0.01
    warmup_proportion: float = 0.0
    warmup_steps: int = 0
    max_grad_norm: float = 1.0
    adam_epsilon: float = 1e-8
    seed: int = 42
    logging_steps: int = 10
    eval_steps: int = 0
    metric_for_best: Optional[str] = None
    greater_is_better: Optional[bool] = None
    patience: int = 0
    keep_checkpoints: int = 1
    resume: Union[bool, str] = False
    init_from: Optional[str] = None
    overwrite_output_dir: bool = False
    num_threads: Optional[int] = None
    progress_bar: bool = True
    plots: bool = True
    device: Literal["auto", "cpu", "gpu"] = "auto"

    def __post_init__(self):
        def positive(name, minimum=1):
            value = getattr(self, name)
            if value < minimum:
                raise ConfigError(f"trainer.{name}: must be >= {minimum}, got {value}")

        # NaN passes every comparison below unnoticed (max_grad_norm=NaN turned clipping off)
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"trainer.{field.name}: must be a finite number, got {value}")
        if not self.output_dir.strip():
            raise ConfigError("trainer.output_dir: must not be empty (a folder for the run's outputs)")
        for name in ("epochs", "batch_size", "eval_batch_size", "logging_steps", "keep_checkpoints"):
            positive(name)
        for name in ("eval_steps", "patience", "warmup_steps", "seed"):
            positive(name, 0)
        for name in ("learning_rate", "adam_epsilon"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"trainer.{name}: must be > 0, got {getattr(self, name)}")
        for name in ("weight_decay", "max_grad_norm"):
            positive(name, 0)
        if not 0 <= self.warmup_proportion < 1:
            raise ConfigError(f"trainer.warmup_proportion: must be in [0, 1), got {self.warmup_proportion}")
        if self.warmup_proportion and self.warmup_steps:
            raise ConfigError(
                f"trainer.warmup_steps: give warmup_steps or warmup_proportion, not both "
                f"(got {self.warmup_steps} and {self.warmup_proportion})"
            )
        if self.max_steps == 0 or self.max_steps < -1:
            raise ConfigError(f"trainer.max_steps: must be -1 (use epochs) or >= 1, got {self.max_steps}")
        if self.num_threads is not None:
            positive("num_threads")
