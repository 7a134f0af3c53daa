"""How paddle is loaded: CPU defaults that must be in place first, and a quiet import.

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


def _cpuinfo_head():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read(8192)  # the first processor's block: vendor, model name, flags
    except OSError:  # not on Linux
        return ""


def cpu_model():
    """``(model name, clock in MHz)`` of the first processor /proc/cpuinfo lists; None each where it says
    nothing (not on Linux, or a CPU that gives no name or clock). For the records of where runs were made."""
    name = mhz = None
    for line in _cpuinfo_head().splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and name is None:
            name = value.strip()
        elif key == "cpu MHz" and mhz is None:
            try:
                mhz = float(value)
            except ValueError:
                pass
    return name, mhz


def _is_amd():
    return "AuthenticAMD" in _cpuinfo_head()


def cpu_flags():
    """The instruction-set flags the CPU reports (``avx512_bf16``, ``amx_int8``, ...); empty where
    /proc/cpuinfo cannot be read. Precisions and kernels are chosen by these, never by the vendor."""
    for line in _cpuinfo_head().splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


#: The CPU flags of int8 dot-product instructions (VNNI, AMX): with one, int8 weights use their full 8 bits.
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def has_vnni(flags=None):
    """Whether the CPU (its :func:`cpu_flags`, or ``flags``) has int8 dot-product instructions. Without them,
    the u8 x s8 multiply-adds of AVX2/AVX-512 (``vpmaddubsw``) saturate at 16 bits, which ONNX Runtime's
    ``reduce_range`` (7-bit weights) avoids at some accuracy; with them, ``reduce_range`` only costs accuracy."""
    return bool(set(VNNI_FLAGS) & (cpu_flags() if flags is None else set(flags)))


def configure_cpu(num_threads=None):
    """Set thread count and the MKL AMD switch, unless paddle is already loaded.

    Returns the effective settings, for the run log.
    """
    if num_threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(num_threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(available_cores()))
    if _is_amd():
        os.environ.setdefault("MKL_DEBUG_CPU_TYPE", "5")
    # paddle's C++ warnings (glog level 1) say what its graph code does by design ("not support input out
    # tensor for now!!!!!" at every export); errors (level 2) still print
    os.environ.setdefault("GLOG_minloglevel", "2")
    return {
        "OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"],
        "MKL_DEBUG_CPU_TYPE": os.environ.get("MKL_DEBUG_CPU_TYPE"),
        "applied_before_paddle_import": "paddle" not in sys.modules,
    }


# What paddle and paddlenlp print at import that says nothing to a user of this
# toolkit: the OMP lines are about the very setting configure_cpu makes (or the
# user's own), the warnings about building C++ extensions and setuptools.
_IMPORT_NOISE = ("WARNING: OMP_NUM_THREADS set to", "PLEASE USE OMP_NUM_THREADS WISELY")
_IMPORT_WARNINGS = ("No ccache found", "Setuptools is replacing distutils")


def import_paddle_quietly():
    """Import paddle and paddlenlp without the noise above; anything else they
    print still reaches stderr. Safe for a library: the warning filters are
    restored afterwards, and no setting of the process changes."""
    if "paddlenlp" in sys.modules:
        return
    import contextlib
    import io
    import warnings

    captured = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(captured):
        for message in _IMPORT_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        import paddle  # noqa: F401
        import paddlenlp  # noqa: F401
    # Only after a complete import: one cut short (Ctrl-C) says so with its exception, and
    # paddle's own note about it ("Can not import paddle core ...") would be a second line.
    for line in captured.getvalue().splitlines():
        if line.strip() and not line.startswith(_IMPORT_NOISE):
            print(line, file=sys.stderr)
