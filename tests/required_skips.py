"""A skip must not hide a missing requirement: a test that skips because a module could not be imported fails
instead when requirements.txt provides that module (conftest.py's ``pytest_runtest_makereport``).

``pytest.importorskip`` says ``could not import 'X': ...``, and a skip written by hand usually quotes Python's
``No module named 'X'``; either names the top-level module X. Chromium, a network namespace or data that is not
here may still skip: requirements.txt does not provide them.
"""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Top-level modules whose names are not their distribution's (the rest import under the distribution's name).
MODULES = {"paddlepaddle": ("paddle",), "scikit-learn": ("sklearn",), "pyyaml": ("yaml",),
           "noto-cjk-sans-otc": ("noto_cjk_sans_otc",), "markdown-it-py": ("markdown_it",),
           "prometheus-client": ("prometheus_client",), "huggingface-hub": ("huggingface_hub",),
           "aistudio-sdk": ("aistudio_sdk",), "pytest-xdist": ("xdist",)}
MISSING = re.compile(r"could not import '([\w.]+)'|No module named '([\w.]+)'")


def _requirement_names(path):
    """The names of the requirements that install here (an environment marker, ``; platform_machine ==
    "x86_64"``, may leave one out on this platform: its tests may skip)."""
    from packaging.requirements import Requirement

    with open(path, encoding="utf-8") as f:
        lines = [line.split("#")[0].strip() for line in f]
    found = [Requirement(line) for line in lines if line]
    return [r.name.lower().replace("_", "-") for r in found if r.marker is None or r.marker.evaluate()]


def provided_modules(path=os.path.join(ROOT, "requirements.txt")):
    """``{top-level module: requirement}`` of what requirements.txt installs: the names an installed
    distribution's metadata gives, and for one that is missing (the case to catch) MODULES or its own name."""
    from importlib.metadata import packages_distributions

    installed = {}
    for module, dists in packages_distributions().items():
        for dist in dists:
            installed.setdefault(dist.lower().replace("_", "-"), []).append(module)
    found = {}
    for name in _requirement_names(path):
        for module in {*MODULES.get(name, (name.replace("-", "_"),)), *installed.get(name, ())}:
            if not module.startswith("_") and module.isidentifier():  # sentencepiece lists "sentencepiece/_version"
                found[module] = name
    return found


def hidden_requirement(message, provided):
    """The requirement a skip's message says could not be imported, when requirements.txt provides it; else None."""
    match = MISSING.search(message or "")
    if not match:
        return None
    module = (match.group(1) or match.group(2)).split(".")[0]
    return provided.get(module)


def hidden_requirement_failure(report, message, nodeid, provided):
    """Turn a skipped ``report`` into a failure when its ``message`` names a module requirements.txt provides."""
    requirement = hidden_requirement(message, provided)
    if requirement:
        report.outcome = "failed"
        report.longrepr = (f"{nodeid} skipped ({message}), but requirements.txt provides {requirement}: install it "
                           f"(pip install -r requirements.txt); a skip would hide a missing requirement")
    return requirement
