"""Small budgets for the tests that run a param file as written (README's commands, every example): two training
steps, and dev and test cut to every eighth example, since a full evaluation of a 12-layer encoder would be most of
such a run's time while two steps are what those tests check."""
import json
import os

from appzoo.params.param_file import load_param_file


def every_eighth(path, fmt, target):
    """Every eighth example of a dev or test file (a line; a sentence of a CoNLL file), first ones included, as a file
    ``target``. Spread over the file, the slice keeps its classes (and a header line, the file's first)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if fmt == "conll":
        examples = [block for block in text.split("\n\n") if block.strip()]
        kept = "\n\n".join(examples[::8]) + "\n"
    else:
        kept = "".join(line + "\n" for line in text.splitlines()[::8])
    target.write_text(kept, encoding="utf-8")
    return str(target)


def evaluated_on_every_eighth(param_path, folder, cwd="."):
    """``--set`` arguments pointing ``param_path``'s dev and test files (read relative to ``cwd``) at every eighth of
    their examples, written under ``folder``."""
    reader = load_param_file(os.path.join(cwd, param_path))["dataset_reader"]
    os.makedirs(folder, exist_ok=True)
    out = []
    for split in ("dev", "test"):
        if reader.get(split):
            cut = every_eighth(os.path.join(cwd, reader[split]), reader.get("format"), folder / split)
            out += ["--set", f"dataset_reader.{split}={cut}"]
    return out


def check_metrics(out, steps):
    """The run in ``out`` trained ``steps`` steps and was evaluated on dev or test."""
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    assert metrics["train"]["steps"] == steps, (str(out), metrics["train"])
    assert any(split in metrics for split in ("dev", "test")), (str(out), sorted(metrics))
