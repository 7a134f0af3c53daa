"""The ``trainer`` section of a param file."""
import dataclasses
from typing import Annotated, List, Literal, Optional, Union

from appzoo.params.keys import Key, check_fields
from appzoo.params.inference import InferenceSpec, embed_spec, spec_keys
from appzoo.errors import ConfigError

MODES = ("train", "eval", "predict", "export", "audit")


class Do(list):
    """The modes of a run in order (``trainer.do`` as the plan resolved it, or ``--do``): the one place that asks
    whether a mode is among them (held by tests/test_architecture.py). A list, so the param tree, config.json and
    run_record.json write it as they always did."""

    @property
    def trains(self):
        return "train" in self

    @property
    def evaluates(self):
        return "eval" in self

    @property
    def predicts(self):
        return "predict" in self

    @property
    def audits(self):
        return "audit" in self

    @property
    def exports(self):
        return "export" in self

    @property
    def reads_a_model(self):
        """Evaluates or predicts: the modes that run a trained model on data (on a graph engine, if set)."""
        return self.evaluates or self.predicts

    @property
    def uses_a_trained_model(self):
        """Evaluates, predicts or exports with no training before it: it needs a trained model to start from."""
        return not self.trains and (self.reads_a_model or self.exports)

    @property
    def evaluates_a_trained_run(self):
        """An eval with no training before it: its numbers go beside the run's own (metrics.json's ``eval``)."""
        return self.evaluates and not self.trains
#: trainer.sampler's names (appzoo.data.sampler builds them); the class samplers draw by class
SAMPLERS = ("random", "by_length", "balanced", "m_per_class", "no_duplicates")
CLASS_SAMPLERS = ("balanced", "m_per_class")
AUTO = "auto"  # trainer.resume: continue when output_dir holds a checkpoint, else start


def _not_blank(value, key_path):
    if not value.strip():
        raise ConfigError(f"{key_path}: must not be empty or blank, got {value!r}")


#: The trainer's keys of its :class:`~appzoo.params.inference.InferenceSpec`, by the spec's fields:
#: ``inference_<field>``, but for the four that have always had a name of their own.
INFERENCE_KEYS = spec_keys({"calibration_examples": "calibration_examples", "threads": "num_threads",
                            "keep_fp32": "quantize_keep_fp32", "sensitivity_examples": "sensitivity_examples"},
                           prefix="inference_")


@dataclasses.dataclass
@embed_spec(INFERENCE_KEYS)
class TrainerConfig:
    """Every key of the ``trainer`` section: its type, limits, default and help."""

    output_dir: Annotated[str, Key("folder for the run's outputs: best/, checkpoints/, metrics.json, logs",
                                   check=_not_blank)] = "output/run"
    do: Annotated[Optional[List[Literal[MODES]]], Key(
        "modes to run (null: train, then eval on dev/test, then predict when a predict file is set); "
        "audit writes audit.md/audit.json about the data first; --do overrides it")] = None
    epochs: Annotated[int, Key("passes over the training data", ge=1)] = 3
    max_steps: Annotated[int, Key("optimizer steps to train for; overrides epochs", ge=1,
                                  also={-1: "use epochs"})] = -1
    batch_size: Annotated[int, Key("training examples per step", ge=1)] = 32
    eval_batch_size: Annotated[int, Key("examples per batch when evaluating and predicting", ge=1)] = 64
    learning_rate: Annotated[float, Key("peak learning rate of AdamW for the encoder (linear warmup, then linear "
                                        "decay); every parameter group follows this schedule, scaled to its own "
                                        "peak", gt=0)] = 5e-5
    head_learning_rate: Annotated[Optional[float], Key(
        "peak learning rate of every parameter outside model.encoder (the classifier; a CRF too unless "
        "crf_learning_rate is set); null: learning_rate", gt=0)] = None
    crf_learning_rate: Annotated[Optional[float], Key(
        "peak learning rate of a CRF's transition, start and end scores (models with a CRF only); null: "
        "head_learning_rate", gt=0)] = None
    layerwise_decay: Annotated[float, Key(
        "encoder layer i of L (L the top) trains at learning_rate * layerwise_decay ** (L - i), the embeddings at "
        "learning_rate * layerwise_decay ** (L + 1), the pooler at learning_rate; 1: one rate for the whole "
        "encoder", gt=0, le=1)] = 1.0
    weight_decay: Annotated[float, Key("AdamW weight decay (not on biases and LayerNorm)", ge=0)] = 0.01
    warmup_proportion: Annotated[float, Key("share of the steps spent warming the learning rate up from 0; "
                                            "give this or warmup_steps", ge=0, lt=1)] = 0.0
    warmup_steps: Annotated[int, Key("steps spent warming the learning rate up from 0; give this or "
                                     "warmup_proportion", ge=0)] = 0
    gradient_accumulation_steps: Annotated[int, Key(
        "micro-batches of batch_size whose gradients add up to one optimizer step", ge=1)] = 1
    sampler: Annotated[Optional[Literal[SAMPLERS]], Key(
        "which examples make a training batch: random; by_length (seeded mega-batches of sampler_mega_batches "
        "batches sorted by "
        "length, batch order shuffled: little padding); balanced (classes drawn by count ** sampler_power); "
        "m_per_class (sampler_m examples of each of batch_size / sampler_m classes); no_duplicates (in-batch "
        "negatives: a pair whose query or positive is already in the batch waits for a later one). Classes: "
        "the label, a multi-label example's rarest label, a sentence window's rarest tag. Null: by_length, "
        "no_duplicates with in-batch negatives")] = None
    sampler_power: Annotated[float, Key(
        "balanced: a class is drawn with probability proportional to count ** this (1: the data's mix, "
        "0.5: square root, 0: uniform)", ge=0, le=1)] = 0.5
    sampler_m: Annotated[int, Key("m_per_class: examples of each class in a batch; batch_size must be a "
                                  "multiple of it", ge=1)] = 2
    sampler_mega_batches: Annotated[int, Key(
        "by_length: batches per mega-batch that is sorted by length (more: less padding, batches of more "
        "uniform length; 8 measured closest to random batches in F1 on CoNLL-2003, see docs/benchmarks.md)", ge=1)] = 8
    group_by_length: Annotated[Optional[bool], Key(
        "shorthand for sampler by_length (true) or any other sampler (false); null: as sampler says")] = None
    amp: Annotated[Literal["off", "bf16", "fp16"], Key(
        "mixed precision on a GPU: bf16, or fp16 with a loss scaler; losses stay float32 (paddle's autocast "
        "does nothing on CPU, so the plan refuses it there)")] = "off"
    audit: Annotated[bool, Key("write audit.md/audit.json about the data before training (as --do audit)")] = False
    audit_labels: Annotated[bool, Key(
        "the audit also looks for mislabeled training examples: out-of-fold probabilities from audit_folds "
        "trainings of this param file, then cleanlab's confident learning; writes label_issues.jsonl (implies "
        "audit; see docs/reports.md#label-issues)")] = False
    audit_folds: Annotated[int, Key("audit_labels: folds of the training set (stratified by label, seeded by "
                                    "seed); each fold trains on the others and predicts itself", ge=2)] = 5
    floor: Annotated[bool, Key(
        "before training a pretrained encoder, measure the run's floor as its task declares it (a matcher: the "
        "untrained encoder's zero-shot cosine AUC on dev, two forward passes over the dev texts; a single-label "
        "classifier: a logistic regression on its frozen vectors of at most 3,200 training and 2,000 dev texts) "
        "and warn if the run ends below it; see docs/reports.md#a-classifiers-floor-the-frozen-encoder-probe and "
        "docs/text-matching.md#the-floor-the-untrained-encoders-zero-shot-cosine-auc")] = True
    max_grad_norm: Annotated[float, Key("clip the global gradient norm to this (0: no clipping)", ge=0)] = 1.0
    adam_epsilon: Annotated[float, Key("AdamW epsilon", gt=0)] = 1e-8
    seed: Annotated[int, Key("random seed of paddle, numpy and python (shuffling, dropout, init)", ge=0)] = 42
    logging_steps: Annotated[int, Key("log loss and learning rate every this many steps", ge=1)] = 10
    eval_steps: Annotated[int, Key("evaluate on dev every this many steps (0: at the end of each epoch)",
                                   ge=0)] = 0
    metric_for_best: Annotated[Optional[str], Key(
        "dev metric that chooses best/ (null: the task's default, e.g. macro_f1)")] = None
    greater_is_better: Annotated[Optional[bool], Key(
        "whether a larger metric_for_best is better (null: false for a loss or an ece, else true)")] = None
    patience: Annotated[int, Key("stop after this many evaluations without improvement (0: never stop early)",
                                 ge=0)] = 0
    keep_checkpoints: Annotated[int, Key("checkpoints/step-N folders kept for resuming (the newest)", ge=1)] = 1
    keep_optimizer_state: Annotated[bool, Key(
        "keep the optimizer's state in checkpoints/ once training has finished (about twice the model's size), so "
        "that a longer run (trainer.resume with more steps) goes on exactly; false: a finished run's checkpoints "
        "keep the model and the schedule, and a longer run goes on with a fresh optimizer state")] = False
    resume: Annotated[Union[bool, str], Key(
        "continue training from the newest checkpoint in output_dir (true), from this checkpoint folder, or "
        "(auto) from the newest checkpoint when there is one and as a new run when output_dir holds none: "
        "the one command a cluster job runs at every start")] = False
    init_from: Annotated[Optional[str], Key(
        "a best/ folder whose weights, encoder and labels the run starts from (also for eval/predict/export "
        "without training; null: output_dir/best when not training)")] = None
    overwrite_output_dir: Annotated[bool, Key("replace a run already in output_dir")] = False
    num_threads: Annotated[Optional[int], Key("CPU threads for paddle (null: the process default)", ge=1)] = None
    progress_bar: Annotated[bool, Key("show progress bars")] = True
    plots: Annotated[bool, Key("draw the training curve and confusion matrices into plots/")] = True
    visualdl: Annotated[bool, Key("log train loss, learning rate and dev metrics to output_dir/vdl/ for "
                                  "VisualDL (needs the visualdl package)")] = False
    device: Annotated[Literal["auto", "cpu", "gpu"], Key(
        "where to train: auto picks the GPU when paddle is a CUDA build")] = "auto"
    # inference_engine, inference_precision, inference_quantization, calibration_examples, quantize_keep_fp32,
    # sensitivity_examples: the InferenceSpec's keys (embed_spec; num_threads, above, is its threads)

    def __post_init__(self):
        check_fields(self, "trainer")  # also when built from Python, not only from a param file
        self.check_keys_together()

    @property
    def inference(self):
        """What eval and predict run on (:class:`~appzoo.params.inference.InferenceSpec`), checked when the
        section was built."""
        return InferenceSpec.of(self, INFERENCE_KEYS)

    def dev_metric(self, reader):
        """``(name, greater_is_better)`` of the dev metric that chooses ``best/``:
        ``metric_for_best`` or the reader's default; larger is better unless
        ``greater_is_better`` says otherwise or the metric is a loss or a calibration error."""
        metric = self.metric_for_best or reader.default_metric
        greater = self.greater_is_better
        lower = metric.endswith("loss") or metric.startswith("ece")
        return metric, (not lower) if greater is None else greater

    def check_keys_together(self):
        """What no single key's annotation can say."""
        self.inference.check({field: f"trainer.{key}" for field, key in INFERENCE_KEYS.items()})
        if self.group_by_length is not None and self.sampler is not None \
                and self.group_by_length != (self.sampler == "by_length"):
            raise ConfigError(f"trainer.group_by_length: {str(self.group_by_length).lower()} contradicts "
                              f"trainer.sampler {self.sampler!r} (group_by_length is shorthand for sampler "
                              f"'by_length'; give one)")
        if self.sampler == "m_per_class" and self.batch_size % self.sampler_m:
            raise ConfigError(f"trainer.sampler_m: m_per_class needs trainer.batch_size to be a multiple of "
                              f"sampler_m, got batch_size {self.batch_size} and sampler_m {self.sampler_m}")
        if self.warmup_proportion and self.warmup_steps:
            raise ConfigError(
                f"trainer.warmup_steps: give warmup_steps or warmup_proportion, not both "
                f"(got {self.warmup_steps} and {self.warmup_proportion})"
            )
