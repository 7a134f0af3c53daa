"""What a trained model predicts on (:class:`InferenceSpec`: engine, precision, quantization, calibration
examples, threads): its keys, declared once for the trainer and serve sections that embed them, and its one
check, below the engines that run it.

Precisions, each where it runs, and refused in one line naming why and what to use instead where it does not
(never a silent fp32): ``fp32`` on every engine; ``bf16`` on Paddle Inference's oneDNN kernels, on a CPU that
reports ``avx512_bf16`` or ``amx_bf16``; ``int8`` on ONNX Runtime (``dynamic`` or ``static`` quantization by
``onnxruntime.quantization``). Paddle 3.3.1 has no int8 path for its PIR exports (docs/deployment.md).
"""
import dataclasses
import importlib.util
from typing import Annotated, List, Literal, Optional, Union

from appzoo.env import cpu_flags
from appzoo.errors import ConfigError
from appzoo.params.keys import Key, check_value
from appzoo.registry import did_you_mean

PRECISIONS = ("fp32", "bf16", "int8")


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What an engine needs and runs (timm's way: the capabilities beside the registration): the packages it
    imports, the precisions it computes in, what it runs, and for each precision it does not run why and what
    to use instead (the one-line refusal of :func:`check_precision`)."""

    runs: str
    graph: Optional[str] = None  # the exported graph it runs: None (the Paddle model itself), "pir" or "onnx"
    packages: tuple = ()
    precisions: tuple = ("fp32",)
    refusals: dict = dataclasses.field(default_factory=dict)


#: The engine that is the Paddle model itself (no exported graph): what a run trains and evaluates with.
DYGRAPH = "dygraph"
_GRAPH_ENGINE = ("needs a graph engine (the Paddle model runs in fp32); use engine 'onnxruntime' with precision "
                 "'int8', or 'paddle_inference' with 'bf16'")
#: Every engine's capabilities, by the name a param file gives it; :data:`appzoo.inference.engines.BY_NAME` holds
#: the class of each (a test keeps the two tables in step).
CAPABILITIES = {
    DYGRAPH: Capabilities("the Paddle model", refusals={"bf16": _GRAPH_ENGINE, "int8": _GRAPH_ENGINE}),
    "paddle_inference": Capabilities(
        "the exported Paddle graph (PIR), oneDNN kernels on CPU", graph="pir", precisions=("fp32", "bf16"),
        refusals={"int8": "is not available on paddle_inference (Paddle 3.3.1 quantizes only old-IR programs, and "
                          "its exports are PIR graphs); use engine 'onnxruntime' with precision 'int8'"}),
    "onnxruntime": Capabilities(
        "the exported graph converted to ONNX", graph="onnx", packages=("onnxruntime", "paddle2onnx"),
        precisions=("fp32", "int8"),
        refusals={"bf16": "is not available on onnxruntime (its CPU provider has no bf16 kernels for these graphs); "
                          "use precision 'int8', or engine 'paddle_inference' with 'bf16'"}),
}
ENGINES = tuple(CAPABILITIES)
QUANTIZATIONS = ("dynamic", "static")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # the CPU flags of oneDNN's bf16 kernels
DEFAULT_CALIBRATION = 256
DEFAULT_SENSITIVITY = 128
KEEP_FP32_MODES = ("auto", "none")

# The keys, each annotated once; the trainer section (inference_engine, inference_precision, ...) and the serve
# section (engine, precision, ...) name them as they always have. The engine's installed package and the
# precision's fit with the engine are :meth:`InferenceSpec.check`'s, made once the section is built.
Engine = Annotated[Literal[ENGINES], Key(
    "what the model predicts on (eval and predict of a run; the served models): the Paddle model, or the graph "
    "exported into the run's inference/ folder on Paddle Inference (oneDNN on CPU) or on ONNX Runtime (the "
    "fastest at batch 1, and within 25% of Paddle Inference at batch 32; docs/deployment.md)")]
Precision = Annotated[Literal[PRECISIONS], Key(
    "the numbers the engine computes in: fp32; bf16 (paddle_inference, on a CPU with avx512_bf16 or amx_bf16); "
    "int8 (onnxruntime). Speed and agreement with fp32: docs/deployment.md")]
Quantization = Annotated[Literal[QUANTIZATIONS], Key(
    "how int8 is made: dynamic (int8 weights, activations scaled per batch) or static (activation ranges "
    "calibrated on calibration_examples dev examples; cached next to the export)")]
CalibrationExamples = Annotated[int, Key("dev examples static int8 calibrates on", ge=1)]


def _check_keep_fp32(value, key_path):
    """ConfigError unless ``value`` (a string or a list of strings) is 'auto', 'none' or a list of node names
    (non-blank, each once)."""
    if isinstance(value, str) and value not in KEEP_FP32_MODES:
        raise ConfigError(f"{key_path}: {value!r} is not a mode{did_you_mean(value, KEEP_FP32_MODES)} (accepted: "
                          f"'auto', 'none', or a list of ONNX node names such as [\"MatMul.7\"])")
    if isinstance(value, list):
        for i, name in enumerate(value):
            if not name.strip():
                raise ConfigError(f"{key_path}[{i}]: {name!r} is not a node name (expected the name of a MatMul "
                                  f"of the exported model.onnx)")
            if name in value[:i]:
                raise ConfigError(f"{key_path}[{i}]: {name!r} is named twice")


KeepFp32 = Annotated[Union[str, List[str]], Key(
    "which MatMuls int8 leaves in fp32: auto (the node groups whose int8 version changes the outputs most on "
    "sensitivity_examples dev examples; docs/deployment.md), none, or a list of ONNX node names",
    check=_check_keep_fp32)]
SensitivityExamples = Annotated[int, Key("dev examples the int8 sensitivity pass (quantize_keep_fp32: auto) "
                                         "measures on", ge=1)]
_Threads = Annotated[Optional[int], Key("CPU threads of the engine (null: the process default)", ge=1)]


@dataclasses.dataclass(frozen=True)
class InferenceSpec:
    """What a trained model predicts on: built by a section from its keys (``TrainerConfig.inference``,
    ``ServeConfig.inference``) or by the Predictor from its keyword arguments, and checked there once
    (:meth:`check`); the Predictor and the engines take it as checked. ``threads``: the engine's CPU threads
    (None: ``OMP_NUM_THREADS``, else the cores this process may use)."""

    engine: Engine = DYGRAPH
    precision: Precision = "fp32"
    quantization: Quantization = "dynamic"
    calibration_examples: CalibrationExamples = DEFAULT_CALIBRATION
    threads: _Threads = None
    keep_fp32: KeepFp32 = "auto"
    sensitivity_examples: SensitivityExamples = DEFAULT_SENSITIVITY

    def check(self, key_paths=None):
        """This spec, or a one-line ConfigError naming the key path (``key_paths``: ``{field: key path}``;
        a field left out is named as itself, the Predictor's keyword) of what is wrong: an unknown name, an
        engine whose package is not installed, a precision the engine does not run here."""
        paths = {field.name: field.name for field in dataclasses.fields(self)} | dict(key_paths or {})
        check_engine(self.engine, paths["engine"])
        check_precision(self.engine, self.precision, paths["precision"])
        if self.quantization not in QUANTIZATIONS:
            raise ConfigError(f"{paths['quantization']}: {self.quantization!r} is not a quantization"
                              f"{did_you_mean(self.quantization, QUANTIZATIONS)} "
                              f"(accepted: {', '.join(QUANTIZATIONS)})")
        for field in dataclasses.fields(self):  # every other key by its annotation: a new one is checked too
            if field.name not in ("engine", "precision", "quantization"):
                check_value(paths[field.name], getattr(self, field.name), field.type)
        return self

    def needs_dev(self):
        """Whether making this spec's model reads the model's dev set: static int8 calibrates on it, and
        ``keep_fp32: auto`` measures each node group's int8 on it."""
        return self.precision == "int8" and (self.quantization == "static" or self.keep_fp32 == "auto")

    def evaluated_with(self):
        """What metrics.json says an evaluation ran on: ``{"engine", "precision"}``, with ``quantization`` (and,
        static, ``calibration_examples``) for int8."""
        out = {"engine": self.engine, "precision": self.precision}
        if self.precision == "int8":
            out["quantization"] = self.quantization
            if self.quantization == "static":
                out["calibration_examples"] = self.calibration_examples
            out["keep_fp32"] = self.keep_fp32
            if self.keep_fp32 == "auto":
                out["sensitivity_examples"] = self.sensitivity_examples
        return out

    @classmethod
    def of(cls, section, keys):
        """The spec ``section`` (a section's dataclass) holds under ``keys`` (``{field: the section's key}``)."""
        return cls(**{field: getattr(section, key) for field, key in keys.items()})


def spec_keys(renamed=(), prefix=""):
    """``{spec field: its key}`` in a section or the Predictor's keywords: ``renamed`` where that key has always
    had another name, else ``prefix`` + the field's name. So a field added to :class:`InferenceSpec` is a key of
    the trainer and serve sections (:func:`embed_spec`) and a keyword of the Predictor with no edit there."""
    renamed = dict(renamed)
    return {field.name: renamed.get(field.name, prefix + field.name) for field in dataclasses.fields(InferenceSpec)}


def embed_spec(keys):
    """Decorate a section's class (under ``@dataclasses.dataclass``) so that it has a key of every
    :class:`InferenceSpec` field under ``keys`` (:func:`spec_keys`): those the class does not declare itself
    (to keep a key's place or give it another default) are added after its own keys, typed, documented and
    defaulted as the spec's field."""
    def embed(cls):
        annotations = cls.__dict__["__annotations__"]
        for field in dataclasses.fields(InferenceSpec):
            if keys[field.name] not in annotations:
                annotations[keys[field.name]] = field.type
                setattr(cls, keys[field.name], field.default)
        return cls
    return embed


def check_engine(engine, key_path="trainer.inference_engine"):
    """ConfigError for an unknown engine, or for one whose package is not installed."""
    if engine not in CAPABILITIES:
        raise ConfigError(f"{key_path}: {engine!r} is not an inference engine{did_you_mean(engine, CAPABILITIES)} "
                          f"(accepted: {', '.join(CAPABILITIES)})")
    for package in getattr(CAPABILITIES.get(engine), "packages", ()):
        if importlib.util.find_spec(package) is None:
            raise ConfigError(f"{key_path}: {engine!r} needs the {package} package, which is not "
                              f"installed (pip install {package})")


def check_precision(engine, precision, key_path="trainer.inference_precision", flags=None):
    """ConfigError, in one line naming why and what to use instead, for a precision
    the engine does not run here (see the module docstring); ``flags``: the CPU's
    (:func:`appzoo.env.cpu_flags` when None)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"{key_path}: {precision!r} is not a precision{did_you_mean(precision, PRECISIONS)} "
                          f"(accepted: {', '.join(PRECISIONS)})")
    if precision == "fp32":
        return
    instead = "or engine 'onnxruntime' with precision 'int8'"
    capabilities = CAPABILITIES.get(engine)
    if capabilities is not None and precision not in capabilities.precisions:
        raise ConfigError(f"{key_path}: {precision!r} {capabilities.refusals[precision]}")
    if precision == "bf16":
        if not set(BF16_FLAGS) & (cpu_flags() if flags is None else flags):
            raise ConfigError(f"{key_path}: 'bf16' needs a CPU with {' or '.join(BF16_FLAGS)}, and this one "
                              f"reports neither; use precision 'fp32', {instead}")
