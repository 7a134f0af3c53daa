"""The inference keys (engine, precision, quantization, calibration examples) that the trainer and serve
sections both embed, and their one check: declared here, below the engines that run them.

Precisions, each where it runs, and refused in one line naming why and what to use instead where it does not
(never a silent fp32): ``fp32`` on every engine; ``bf16`` on Paddle Inference's oneDNN kernels, on a CPU that
reports ``avx512_bf16`` or ``amx_bf16``; ``int8`` on ONNX Runtime (``dynamic`` or ``static`` quantization by
``onnxruntime.quantization``). Paddle 3.3.1 has no int8 path for its PIR exports (docs/deployment.md).
"""
import importlib.util

from appzoo.env import cpu_flags
from appzoo.errors import ConfigError
from appzoo.registry import did_you_mean

ENGINES = ("dygraph", "paddle_inference", "onnxruntime")
PRECISIONS = ("fp32", "bf16", "int8")
QUANTIZATIONS = ("dynamic", "static")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # the CPU flags of oneDNN's bf16 kernels
#: The help of the precision keys, the same in the trainer and serve sections.
PRECISION_HELP = ("the numbers the engine computes in: fp32; bf16 (paddle_inference, on a CPU with avx512_bf16 or "
                  "amx_bf16); int8 (onnxruntime). Speed and agreement with fp32: docs/deployment.md")
QUANTIZATION_HELP = ("how int8 is made: dynamic (int8 weights, activations scaled per batch) or static (activation "
                     "ranges calibrated on calibration_examples dev examples; cached next to the export)")
CALIBRATION_HELP = "dev examples static int8 calibrates on"
DEFAULT_CALIBRATION = 256


def check_engine(engine, key_path="trainer.inference_engine"):
    """ConfigError for an unknown engine, or for one whose package is not installed."""
    if engine not in ENGINES:
        raise ConfigError(f"{key_path}: {engine!r} is not an inference engine{did_you_mean(engine, ENGINES)} "
                          f"(accepted: {', '.join(ENGINES)})")
    if engine == "onnxruntime":
        for package in ("onnxruntime", "paddle2onnx"):
            if importlib.util.find_spec(package) is None:
                raise ConfigError(f"{key_path}: 'onnxruntime' needs the {package} package, which is not "
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
    if engine == "dygraph":
        raise ConfigError(f"{key_path}: {precision!r} needs a graph engine (the Paddle model runs in fp32); use "
                          f"engine 'onnxruntime' with precision 'int8', or 'paddle_inference' with 'bf16'")
    if engine == "onnxruntime" and precision == "bf16":
        raise ConfigError(f"{key_path}: 'bf16' is not available on onnxruntime (its CPU provider has no bf16 "
                          f"kernels for these graphs); use precision 'int8', or engine 'paddle_inference' with 'bf16'")
    if engine == "paddle_inference" and precision == "int8":
        raise ConfigError(f"{key_path}: 'int8' is not available on paddle_inference (Paddle 3.3.1 quantizes only "
                          f"old-IR programs, and its exports are PIR graphs); use engine 'onnxruntime' with "
                          f"precision 'int8'")
    if precision == "bf16":
        if not set(BF16_FLAGS) & (cpu_flags() if flags is None else flags):
            raise ConfigError(f"{key_path}: 'bf16' needs a CPU with {' or '.join(BF16_FLAGS)}, and this one "
                              f"reports neither; use precision 'fp32', {instead}")
