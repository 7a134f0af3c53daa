"""Every param file in examples/ loads, validates and runs a couple of steps,
so that an example can never rot."""
import glob
import json
import os

import pytest

import run_trainer
from appzoo.params.param_file import load_param_file
from appzoo.run.plan import validate
from serving import STEPS, TASKS

EXAMPLES = sorted(p for ext in ("json", "yaml", "yml") for p in glob.glob(f"examples/*.{ext}"))


def test_there_are_examples():
    assert "examples/cls_ernie_fc_with_focal.json" in EXAMPLES
    assert "examples/cls_ernie_fc_ch.json" in EXAMPLES


#: examples the serving tests run anyway (tests/serving.py): their runs are checked here, not run twice
SERVED = {example: name for name, (example, _) in TASKS.items()}


@pytest.mark.slow
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xdist_group("served")) if p in SERVED else p
                                  for p in EXAMPLES])
def test_example_validates_and_runs_two_steps(path, tmp_path, request):
    config = load_param_file(path)
    assert config["trainer"]["output_dir"].startswith("output/"), "examples write under output/ (git-ignored)"
    out = tmp_path / "out"
    config["trainer"]["output_dir"] = str(out)
    validate(config, path)
    steps = 2
    if path in SERVED:  # its run is the longer one the serving tests share (train, eval and predict)
        out, steps = request.getfixturevalue("served_runs")[SERVED[path]], STEPS
    else:
        reader = config["dataset_reader"]
        evaluated = [f"dataset_reader.{split}={every_eighth(reader[split], reader.get('format'), tmp_path / split)}"
                     for split in ("dev", "test") if reader.get(split)]
        code = run_trainer.main(["--param_path", path, "--do", "train,eval", "--set", f"trainer.output_dir={out}",
                                 "--set", "trainer.max_steps=2", "--set", "trainer.eval_steps=0",
                                 "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false",
                                 *(arg for value in evaluated for arg in ("--set", value))])
        assert code == 0
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    assert metrics["train"]["steps"] == steps
    assert any(split in metrics for split in ("dev", "test"))


def every_eighth(path, fmt, target):
    """Every eighth example of a dev or test file (a line; a sentence of a CoNLL file), first ones included, as a file
    ``target``: two training steps are what this test checks, and a full evaluation of a 12-layer encoder would be most
    of its time. Spread over the file, the slice keeps its classes."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if fmt == "conll":
        examples = [block for block in text.split("\n\n") if block.strip()]
        kept = "\n\n".join(examples[::8]) + "\n"
    else:
        kept = "".join(line + "\n" for line in text.splitlines()[::8])
    target.write_text(kept, encoding="utf-8")
    return str(target)
