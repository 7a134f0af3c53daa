"""CPU defaults that must be in place before paddle is imported.

Paddle uses one thread by default, and its bundled MKL takes a slow code path
on AMD processors unless ``MKL_DEBUG_CPU_TYPE=5`` is set before the library
loads (measurements: docs/benchmarks.md, "CPU defaults"). Values already set
in the environment win, so every default here can be overridden.
"""
import os
import sys


def available_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _is_amd():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return "AuthenticAMD" in f.read(4096)
    except OSError:
        return False


def configure_cpu(num_threads=None):
    """Set thread count and the MKL AMD switch, unless paddle is already loaded.

    Returns the effective settings, for the run log.
    """
    if num_threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(num_threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(available_cores()))
    if _is_amd():
        os.environ.setdefault("MKL_DEBUG_CPU_TYPE", "5")
    return {
        "OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"],
        "MKL_DEBUG_CPU_TYPE": os.environ.get("MKL_DEBUG_CPU_TYPE"),
        "applied_before_paddle_import": "paddle" not in sys.modules,
    }


# Lines paddle and its dependencies print at import that say nothing to a user
# of this toolkit: the OMP warning is about the very setting made above.
_IMPORT_NOISE = ("WARNING: OMP_NUM_THREADS set to", "PLEASE USE OMP_NUM_THREADS WISELY")


def import_paddle_quietly():
    """Import paddle (and the library warnings it triggers) without the noise
    above; anything else it prints still reaches stderr."""
    import contextlib
    import io
    import warnings

    warnings.filterwarnings("ignore", message="Setuptools is replacing distutils")
    warnings.filterwarnings("ignore", message="No ccache found")
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured):
        import paddle  # noqa: F401
    for line in captured.getvalue().splitlines():
        if line.strip() and not line.startswith(_IMPORT_NOISE):
            print(line, file=sys.stderr)
