"""Bad input gets one clear line, exit code 2, no traceback, and a finished
run in the output folder stays byte-identical (issue 8).

The table lives in tests/bad_input_cases.py, shared with
benchmarks/bad_inputs_probe.py, which prints the verdict counts for any
checkout. Every case runs ``run_trainer.main`` in-process.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

import run_trainer
from bad_input_cases import CASES, Workspace, execute, judge, make_encoder_folder, make_finished_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One finished run (two training steps) and one saved tiny encoder for all cases."""
    finished = make_finished_run(str(tmp_path_factory.mktemp("finished")), ROOT, run_trainer.main)
    encoder = make_encoder_folder(str(tmp_path_factory.mktemp("encoder") / "enc"), ROOT)
    return finished, encoder


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, shared, tmp_path, capsys):
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


def test_table_is_large_and_ids_unique():
    assert len(CASES) >= 90
    assert len({c.id for c in CASES}) == len(CASES)


def test_finished_run_holds_only_the_documented_outputs(shared):
    """The prior run the cases copy must be what a finished run leaves: no staging folders, and
    best/ a link to the one hidden folder that holds the best model (see appzoo/archive.py)."""
    documented = {"config.json", "train_log.jsonl", "metrics.json", "predictions.jsonl", "report.md", "plots",
                  "best", "checkpoints"}
    names = set(os.listdir(shared[0]))
    hidden = {n for n in names if n.startswith(".")}
    assert names - hidden <= documented, sorted(names - hidden - documented)
    assert hidden == {os.readlink(os.path.join(shared[0], "best"))}


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
