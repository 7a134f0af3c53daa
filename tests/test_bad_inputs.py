"""Bad input gets one clear line, its exit code, no traceback, and a finished
run in the output folder stays byte-identical (issue 8).

The table lives in tests/bad_input_cases.py, the harness in
tests/bad_input_harness.py. A case refused at PLAN or READ runs in-process
through the planner (and ``appzoo.run.prepare`` for READ): its error is raised
before the first write, so what the CLI would add is only the printing. The
cases only a run can refuse, and a few of the others, run end to end through
``run_trainer.main``; benchmarks/bad_inputs_probe.py runs every case that way.
"""
import gc
import os
import signal
import subprocess
import sys
import time

import pytest

import run_trainer
from bad_input_cases import CASES
from bad_input_harness import (PLAN, RUN, Workspace, execute, judge, make_encoder_folder, make_finished_run,
                               plan_in_process)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Cases refused before any write that also run through the CLI: a param file's error as printed, and a data
#: error over a finished run (with overwrite_output_dir) that leaves it byte-identical.
ALSO_END_TO_END = ("json-trailing-comma", "output-dir-finished-run-bad-dev-label-with-overwrite")
IN_PROCESS = [c for c in CASES if c.stage != RUN]
END_TO_END = [c for c in CASES if c.stage == RUN or c.id in ALSO_END_TO_END]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One finished run (two training steps) and one saved tiny encoder for all cases."""
    finished = make_finished_run(str(tmp_path_factory.mktemp("finished")), ROOT, run_trainer.main)
    encoder = make_encoder_folder(str(tmp_path_factory.mktemp("encoder") / "enc"), ROOT)
    gc.freeze()  # the libraries' objects: a case's gc.collect() then scans only its own (0.3 s -> 0.01 s)
    yield finished, encoder
    gc.unfreeze()


@pytest.mark.parametrize("case", IN_PROCESS, ids=[c.id for c in IN_PROCESS])
def test_refused_before_the_first_write(case, shared, tmp_path):
    ws = Workspace(tmp_path, ROOT, *shared)
    outcome, line = plan_in_process(case, ws)
    verdict, reason = judge(case, outcome, line, ws)
    assert outcome.exception is None, outcome.exception
    assert verdict == "good", f"{verdict}: {reason}\nexit {outcome.rc}\nerror line: {line}"
    if case.stage == PLAN:  # what the param file and the command line alone get wrong is the planner's to find
        assert outcome.stage == PLAN, f"refused while reading, not planning: {line}"
    assert (outcome.changed or [], outcome.added or []) == ([], []), "the finished run's folder changed"
    assert not outcome.wrote, f"a refused run wrote into a fresh output folder: {outcome.wrote}"


@pytest.mark.parametrize("case", END_TO_END, ids=[c.id for c in END_TO_END])
def test_refused_through_the_cli(case, shared, tmp_path, capsys):
    ws = Workspace(tmp_path, ROOT, *shared)
    capsys.readouterr()
    outcome = execute(case, ws, run_trainer.main)
    err = capsys.readouterr().err
    verdict, reason = judge(case, outcome, err, ws)
    assert outcome.exception is None, outcome.exception
    assert verdict == "good", f"{verdict}: {reason}\nexit {outcome.rc}\nstderr:\n{err[-3000:]}"
    assert outcome.rc == case.code
    if ws.prior is not None:
        assert (outcome.changed, outcome.added) == ([], []), "the finished run's folder is not byte-identical"
    if case.code == 2:  # refused while planning or reading: nothing written yet
        assert not outcome.wrote, f"a refused run wrote into a fresh output folder: {outcome.wrote}"


def test_table_is_large_ids_unique_and_every_exit_code_runs_end_to_end():
    assert len(CASES) >= 90
    assert len({c.id for c in CASES}) == len(CASES)
    assert set(ALSO_END_TO_END) <= {c.id for c in CASES}
    assert {c.code for c in CASES} <= {c.code for c in END_TO_END}
    # a handful, and --do reproduce's three refusals of an edited record or config.json (refused before training)
    assert len(END_TO_END) <= 13, "the end-to-end runs are a handful; the rest run in-process"


def test_finished_run_holds_only_the_documented_outputs(shared):
    """The prior run the cases copy must be what a finished run leaves: no staging folders, and
    best/ a link to the one hidden folder that holds the best model (see appzoo/store/archive.py)."""
    documented = {"config.json", "train_log.jsonl", "metrics.json", "predictions.jsonl", "report.md", "report.html", "plots",
                  "best", "checkpoints", "predictions", "errors.md", "MODEL_CARD.md", "run_record.json"}
    names = set(os.listdir(shared[0]))
    hidden = {n for n in names if n.startswith(".")}
    assert names - hidden <= documented, sorted(names - hidden - documented)
    assert hidden == {os.readlink(os.path.join(shared[0], "best")), ".appzoo-run"}  # and the mark of a run


def test_ctrl_c_while_the_libraries_load_is_one_line_and_exit_130(tmp_path):
    """Ctrl-C in the first seconds, while paddle imports: one line, exit 130, nothing written. (Landing
    in a C extension's initialisation, the KeyboardInterrupt comes out as paddle's ImportError.)"""
    out = tmp_path / "out"
    child = subprocess.Popen([sys.executable, "run_trainer.py", "--param_path", "examples/cls_ernie_fc_ch.json",
                              "--set", f"trainer.output_dir={out}"], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while time.time() < deadline and not _loads_paddle(child.pid):
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err[-3000:]
    assert err.strip() == "error: interrupted (Ctrl-C); nothing was written"
    assert not out.exists()


def _loads_paddle(pid):
    """Paddle's shared libraries are mapped into the process: its import is under way."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            return "/paddle/" in f.read()
    except FileNotFoundError:  # not Linux (or the child is gone): a moment into the start is enough
        time.sleep(0.5)
        return True
