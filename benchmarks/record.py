"""What a benchmark records beside its numbers: the machine it ran on, and its own section of a Markdown file.

Every benchmark captures the machine through :func:`machine` and writes it with :func:`machine_line`;
one that owns a part of a Markdown file (``docs/serving.md`` below its marker line, its ``##``
section of ``benchmarks/RESULTS.md``) rewrites it with :func:`put_section`, atomically.

Light on purpose (the standard library and two paddle-free appzoo modules): ``hf_predict.py`` loads
this file in an interpreter that has torch and no paddle.
"""
import os
import platform
import re
from importlib import metadata

from appzoo.env import available_cores, cpu_flags, cpu_model
from appzoo.utils.files import write_text

#: The CPU flags a result depends on: the fp32 peak (avx2, avx512f) and the int8 and bf16 kernels.
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "amx_tile")
#: Recorded with their version, None when not installed.
PACKAGES = ("paddlepaddle", "paddlenlp", "onnxruntime", "tokenizers")
#: Recorded only when installed: never a dependency of the toolkit (the HF rows run in another interpreter).
OPTIONAL = ("torch", "transformers")


def versions(packages):
    """``{package: version}`` of installed distributions, None for one not installed."""
    found = {}
    for package in packages:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def machine(packages=PACKAGES, optional=OPTIONAL):
    """Where a benchmark runs: ``{"cpu", "cores", "cores_usable", "ghz", "flags", "python", "versions"}``.

    ``cpu`` is /proc/cpuinfo's model name (else the platform's), ``cores`` ``os.cpu_count()`` and
    ``cores_usable`` those this process may run on, ``ghz`` the first processor's clock (None where
    not reported), ``flags`` the sorted :data:`FLAGS` the CPU reports (detected, never assumed from
    the vendor). ``versions`` has each of ``packages`` (None when not installed) and each of
    ``optional`` that is installed."""
    name, mhz = cpu_model()
    shown = versions(packages)
    shown.update({package: v for package, v in versions(optional).items() if v is not None})
    return {"cpu": name or platform.processor() or platform.machine() or "unknown CPU",
            "cores": os.cpu_count(), "cores_usable": available_cores(),
            "ghz": round(mhz / 1000, 3) if mhz else None,
            "flags": sorted(cpu_flags().intersection(FLAGS)),
            "python": platform.python_version(), "versions": shown}


def fp32_peak_gflops(info, fma_units=2):
    """The fp32 peak, in GFLOP/s, of the machine ``info`` (:func:`machine`): its usable cores x its clock x the
    FLOPs of a cycle (2 per fused multiply-add x 16 lanes with avx512f, 8 with avx2, 4 otherwise, x
    ``fma_units``); None where the clock is not reported. An upper bound: /proc/cpuinfo does not say how many
    FMA units a core has (server Xeons and EPYCs have two, some one) nor its turbo or AVX-512 clock, and a
    VM's "cpu MHz" is the nominal clock."""
    if not info.get("ghz"):
        return None
    lanes = 16 if "avx512f" in info["flags"] else 8 if "avx2" in info["flags"] else 4
    return info["cores_usable"] * info["ghz"] * 2 * lanes * fma_units


def machine_line(info):
    """One line for Markdown notes or a table cell: ``CPU, N cores (M usable), G GHz, flags ...; python X, package V``.

    Takes a :func:`machine` dict or a sweep summary's ``environment`` (``appzoo.sweep.summary``: cpu,
    cores, gpu, versions with python among them): a part whose key is absent is left out, and so is a
    package that is not installed."""
    if not info:
        return "not recorded"
    line = f"{info.get('cpu')}, {info.get('cores')} cores"
    if info.get("cores_usable") is not None:
        line += f" ({info['cores_usable']} usable)"
    if info.get("ghz"):
        line += f", {info['ghz']:g} GHz"
    if "flags" in info:
        line += ", flags " + (" ".join(info["flags"]) or "none of " + " ".join(FLAGS))
    if "gpu" in info:
        line += f", GPU {info['gpu']}" if info["gpu"] else ", no GPU"
    shown = {"python": info["python"]} if "python" in info else {}
    shown.update(info.get("versions") or {})
    said = ", ".join(f"{package} {v}" for package, v in shown.items() if v)
    return f"{line}; {said}" if said else line


def put_section(path, marker, text, until=None):
    """Make ``text`` the section of the Markdown file ``path`` that starts at the line ``marker``; atomically.

    The section is the ``marker`` line and the lines after it up to the first line that starts with
    ``until`` (``"## "``: the next section of that level; that line and the rest are kept), or to the
    end of the file when ``until`` is None (a "written by ...: everything below this line" marker).
    Everything outside the section stays byte for byte. A file without the marker gets the section
    at its end, after a blank line; a missing file is created with it. Written through
    :func:`appzoo.utils.files.write_text` (a temporary file in the same folder, flushed, renamed over
    ``path``), so a failed write leaves the file as it was."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            content = f.read()
    except FileNotFoundError:
        content = ""
    lines = [line for line in re.split(r"(?<=\n)", content) if line]  # each with its own end, bytes kept
    body = text.strip("\n")
    section = f"{marker}\n\n{body}\n"
    start = next((i for i, line in enumerate(lines) if line.rstrip("\r\n") == marker), None)
    if start is None:
        before = content
        if before and not before.endswith("\n\n"):
            before += "\n" if before.endswith("\n") else "\n\n"
        write_text(path, before + section)
        return
    end = len(lines)
    if until is not None:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(until)), end)
    after = "".join(lines[end:])
    write_text(path, "".join(lines[:start]) + section + ("\n" + after if after else ""))


def keep_section(book, name, text):
    """Put the section ``text`` (its ``## `` heading line first) into the Markdown file ``book`` with
    :func:`put_section`, and keep it as ``results/NAME.md`` beside ``book``
    (``benchmarks/results/NAME.md`` for ``benchmarks/RESULTS.md``), where ``results_book.py`` reads it back,
    so writing the book again never drops a section a benchmark script wrote."""
    heading, _, body = text.strip("\n").partition("\n")
    kept = os.path.join(os.path.dirname(book), "results")
    os.makedirs(kept, exist_ok=True)
    write_text(os.path.join(kept, f"{name}.md"), f"{heading}\n\n{body.strip()}\n")
    put_section(book, heading, body, until="## ")
