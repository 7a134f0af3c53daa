"""Every param file in examples/ loads, validates and runs a couple of steps,
so that an example can never rot."""
import glob
import os

import pytest

import run_trainer
from appzoo.params.param_file import load_param_file
from appzoo.run.plan import validate
from budgets import check_metrics, evaluated_on_every_eighth
from serving import STEPS, TASKS
from test_readme_commands import trained_examples

EXAMPLES = sorted(p for ext in ("json", "yaml", "yml") for p in glob.glob(f"examples/*.{ext}"))


def test_there_are_examples():
    assert "examples/cls_ernie_fc_with_focal.json" in EXAMPLES
    assert "examples/cls_ernie_fc_ch.json" in EXAMPLES


#: examples the serving tests run anyway (tests/serving.py): their runs are checked here, not run twice
SERVED = {example: name for name, (example, _) in TASKS.items()}
#: examples README's commands train as written (tests/test_readme_commands.py, with the same budget and the same
#: checks of metrics.json): not run a second time here
IN_README = trained_examples() - set(SERVED)


def test_every_example_runs_here_or_in_a_readme_command():
    assert IN_README and IN_README <= set(EXAMPLES), IN_README  # a README command names a file that is not there
    assert "examples/cls_e5_fc_ch.json" in IN_README


@pytest.mark.slow
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xdist_group("served")) if p in SERVED else p
                                  for p in EXAMPLES if p not in IN_README])
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
        code = run_trainer.main(["--param_path", path, "--do", "train,eval", "--set", f"trainer.output_dir={out}",
                                 "--set", "trainer.max_steps=2", "--set", "trainer.eval_steps=0",
                                 "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false",
                                 *evaluated_on_every_eighth(path, tmp_path / "eighth")])
        assert code == 0
    check_metrics(out, steps)

