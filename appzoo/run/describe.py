"""The keys a param file can set, generated from their annotations.

``run_trainer.py --describe TARGET`` prints one component's keys; this
module's ``main`` writes ``docs/params.md`` (every component, and the table
of example param files), so the docs are made from the code that validates:

    python -m appzoo.run.describe > docs/params.md
"""
import glob
import json
import os
import sys

from appzoo.params.keys import _NO_DEFAULT, describe_type, key_of, parameters
from appzoo.errors import ConfigError
from appzoo.utils.markdown import cell
from appzoo.params.param_file import load_param_file
from appzoo.params.dataset import DatasetConfig
from appzoo.task.reader import DatasetReader
from appzoo.encoders.spec import EncoderSpec
from appzoo.losses.build import SUPPLIED as LOSS_SUPPLIED
from appzoo.params.sections import SECTIONS, plain_sections
from appzoo.registry import LOSSES, MODELS, READERS, did_you_mean

REGENERATE = "python -m appzoo.run.describe > docs/params.md"
# The plain sections by name (trainer, serve, search, ...: appzoo.params.sections), then the typed ones' parts.
TARGETS = (*plain_sections(), "dataset_reader", "encoder", "model.NAME", "reader.NAME", "loss.NAME")


def components(target):
    """``[(title, section key path, target, supplied)]`` for ``target``:
    ``trainer``, ``dataset_reader`` (the keys every reader shares),
    ``encoder``, ``model.NAME``, ``reader.NAME`` or ``loss.NAME``."""
    kind, _, name = target.partition(".")
    if target in plain_sections():
        return [(target, target, SECTIONS[target].schema, ())]
    if target == "dataset_reader":
        return [("dataset_reader: keys every reader takes", "dataset_reader", DatasetConfig, ()),
                ("dataset_reader: data files, every reader", "dataset_reader", DatasetReader, ())]
    if target == "encoder":
        return [("model.encoder", "model.encoder", EncoderSpec, ())]
    if kind == "model" and name:
        cls = MODELS.get(name, "--describe model")
        return [(f"model.type: {name}", "model", cls, cls.MODEL_ARGS)]
    if kind == "reader" and name:
        return [(f"dataset_reader.type: {name}", "dataset_reader", READERS.get(name, "--describe reader"), ())]
    if kind == "loss" and name:
        return [(f"model.loss.name: {name}", "model.loss", LOSSES.get(name, "--describe loss"), LOSS_SUPPLIED)]
    raise ConfigError(f"--describe {target!r}: unknown target{did_you_mean(target, TARGETS)} "
                      f"(accepted: {', '.join(TARGETS)})")


def rows(cls, supplied=()):
    """``[(key, type, default, range, help)]`` of the keys ``cls`` accepts."""
    out = []
    for name, (param, annotation) in parameters(cls, supplied).items():
        key = key_of(annotation)
        default = "required" if param.default is _NO_DEFAULT else json.dumps(param.default)
        limits = key.describe_range() if key else ""
        if key and key.nonempty:
            limits = ", ".join(filter(None, [limits, "not empty"]))
        out.append((name, describe_type(annotation), default, limits, key.help if key else ""))
    return out


def describe(target):
    """The text ``--describe TARGET`` prints."""
    lines = []
    for title, _, cls, supplied in components(target):
        lines.append(f"{title}")
        for name, kind, default, limits, help_text in rows(cls, supplied):
            accepted = f"; {limits}" if limits else ""
            lines.append(f"  {name}: {kind}{accepted}; default {default}")
            lines.append(f"      {help_text}")
        lines.append("")
    if target.startswith("reader."):
        lines.append("(plus the keys every reader shares: --describe dataset_reader)")
    return "\n".join(lines).rstrip() + "\n"


def _table(cls, supplied):
    lines = ["| key | type | default | range | help |", "|---|---|---|---|---|"]
    for row in rows(cls, supplied):
        name, *rest = row
        lines.append(f"| `{name}` | " + " | ".join(cell(value) for value in rest) + " |")
    return lines


def examples_table(folder="examples"):
    """The example param files and what each one runs, read from the files."""
    lines = ["| file | task (reader) | model | loss | encoder |", "|---|---|---|---|---|"]
    paths = sorted(glob.glob(os.path.join(folder, "*.json")) + glob.glob(os.path.join(folder, "*.yaml")))
    for path in paths:
        config = load_param_file(path)
        model = config["model"]
        model_type = model.get("type", "")
        reader = config["dataset_reader"].get("type") or MODELS.get(model_type, path).READERS[0]
        loss = model.get("loss") or {}
        loss_text = loss.get("name", "(model default)")
        if "base" in loss:
            loss_text += f" over {loss['base'].get('name')}"
        encoder = model.get("encoder")
        if isinstance(encoder, dict):
            encoder = encoder.get("pretrained") or encoder.get("config")
        lines.append(f"| `{os.path.basename(path)}` | {reader} | {model_type} | {loss_text} | `{encoder}` |")
    return lines


def markdown():
    """The text of docs/params.md."""
    out = ["# Parameters", "",
           f"Generated from the annotations in the code by `{REGENERATE}`; do not edit by hand",
           "(a test fails when this file is out of date). `python run_trainer.py --describe TARGET`",
           "prints the same for one component.", "",
           "## Example param files", ""]
    out += examples_table()
    typed = {"reader": [("dataset_reader", ["dataset_reader"]), ("Readers", [f"reader.{n}" for n in READERS.names()])],
             "model": [("model.encoder", ["encoder"]), ("Models", [f"model.{n}" for n in MODELS.names()]),
                       ("Losses", [f"loss.{n}" for n in LOSSES.names()])]}
    sections = [part for name, section in SECTIONS.items()
                for part in (typed[section.typed] if section.typed else [(name, [name])])]
    for heading, targets in sections:
        out += ["", f"## {heading}"]
        for target in targets:
            for title, _, cls, supplied in components(target):
                out += ["", f"### {title}", ""] if title != heading else [""]
                doc = (cls.__doc__ or "").strip().split("\n\n")[0]
                if "." in target and doc and not doc.startswith("See "):  # a registered component
                    out += [" ".join(doc.split()), ""]
                out += _table(cls, supplied)
    return "\n".join(out) + "\n"


def main():
    sys.stdout.write(markdown())


if __name__ == "__main__":
    main()
