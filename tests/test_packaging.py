"""pyproject.toml: `pip install -e .` installs what the repository runs.

The installed `appzoo` command is run_trainer's main, the packages are every
folder of appzoo/ and tasks/, and the dependencies are requirements.txt's
(which CI installs). The fresh-process Predictor test is in test_predictor.py.
"""
import importlib
import os
import tomllib

import setuptools

import run_trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def test_the_appzoo_command_is_the_main_of_run_trainer():
    config = pyproject()
    module, _, function = config["project"]["scripts"]["appzoo"].partition(":")
    assert getattr(importlib.import_module(module), function) is run_trainer.main
    assert module in config["tool"]["setuptools"]["py-modules"]


def test_every_folder_of_code_is_an_installed_package():
    include = pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    found = set(setuptools.find_packages(ROOT, include=include))
    code = {os.path.relpath(base, ROOT).replace(os.sep, ".")
            for top in ("appzoo", "tasks")
            for base, dirs, files in os.walk(os.path.join(ROOT, top))
            if "__pycache__" not in base and any(name.endswith(".py") for name in files)}
    assert found == code  # a folder without __init__.py would be left out of an install


def test_the_dependencies_are_those_of_requirements_txt():
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as f:
        required = [line.split("#")[0].strip() for line in f]
    project = pyproject()["project"]
    assert project["dependencies"] + project["optional-dependencies"]["test"] == [r for r in required if r]


def test_every_file_of_the_packages_that_is_not_python_is_package_data():
    import fnmatch

    globs = pyproject()["tool"]["setuptools"]["package-data"]
    missing = []
    for top in ("appzoo", "tasks"):
        for base, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith((".py", ".pyc")):
                    continue
                inside = os.path.relpath(os.path.join(base, name), os.path.join(ROOT, top)).replace(os.sep, "/")
                if not any(fnmatch.fnmatch(inside, g) for g in globs.get(top, ())):
                    missing.append(f"{top}/{inside}")
    assert missing == [], f"not in [tool.setuptools.package-data], so a wheel would leave them out: {missing}"


def test_constraints_pin_every_requirement_inside_its_range():
    from packaging.requirements import Requirement

    with open(os.path.join(ROOT, "constraints.txt"), encoding="utf-8") as f:
        pins = dict(line.split("#")[0].strip().split("==") for line in f if line.split("#")[0].strip())
    pins = {name.lower().replace("_", "-"): version for name, version in pins.items()}
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as f:
        required = [Requirement(line.split("#")[0].strip()) for line in f if line.split("#")[0].strip()]
    for requirement in required:
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"constraints.txt does not pin {requirement.name}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (requirement, pins[name])
