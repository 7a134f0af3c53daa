"""Data-parallel training on CPU processes (gloo) through paddle.distributed.launch:
one launcher of 2 processes, and two launchers ("nodes") of 1 process each,
which must give the same run, evaluation sharded over the ranks. The two
launchers run deploy/paddlejob.yaml's container command, configured as the
Kubeflow operator configures its pods."""
import json
import socket
import subprocess

import pytest

# launches data-parallel runs; one worker of pytest -n runs them with one_launcher (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("one_launcher")]

from conftest import LAUNCH_ENV, LAUNCH_SETTINGS, check_launch
from test_deploy import paddlejob_pod


def _metrics(out):
    with open(out / "metrics.json", encoding="utf-8") as f:
        metrics = json.load(f)
    metrics.pop("wall_time_s")
    return metrics


def test_two_process_data_parallel_run(one_launcher):
    metrics = _metrics(one_launcher)
    assert metrics["train"]["steps"] == 4  # 2 ranks x 32 examples per step: 4 steps, not 8
    rows = [json.loads(line) for line in open(one_launcher / "train_log.jsonl", encoding="utf-8")]
    assert [r["step"] for r in rows if "loss" in r] == [2, 4]  # written once, by rank 0
    assert 0 <= metrics["test"]["macro_f1"] <= 1 and sum(map(sum, metrics["test"]["confusion_matrix"])) == 300
    # 40 predict rows make one batch: rank 1 predicts nothing and still gets every row
    predictions = [json.loads(line) for line in open(one_launcher / "predictions.jsonl", encoding="utf-8")]
    assert len(predictions) == 40 and all(set(row["probs"]) == {"finance", "health", "sports", "tech"}
                                          for row in predictions)


def test_two_launchers_given_only_the_operators_variables_match_one_launcher_of_two(one_launcher, tmp_path):
    """Two pods of deploy/paddlejob.yaml on this machine: each runs the container's command with only what
    the Kubeflow operator sets (PADDLE_MASTER, PADDLE_NNODES, PADDLE_JOB_ID) and the YAML's env, no
    --master, --nnodes or --rank. The launcher that starts the rendezvous server on the master's port
    becomes rank 0, whichever it is; the run is the same either way."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "out"
    pods = []
    for pod in (0, 1):
        cmd, env = paddlejob_pod({"PADDLE_MASTER": f"127.0.0.1:{port}", "PADDLE_NNODES": "2",
                                  "PADDLE_JOB_ID": "appzoo-test", "OUTPUT_DIR": str(out),
                                  # pods have folders of their own; these two share the repository
                                  "PADDLE_LOG_DIR": str(tmp_path / f"log{pod}"), **LAUNCH_ENV}, *LAUNCH_SETTINGS)
        pods.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for pod, launcher in enumerate(pods):
        stdout, stderr = launcher.communicate(timeout=300)
        check_launch(subprocess.CompletedProcess(launcher.args, launcher.returncode, stdout, stderr),
                     tmp_path / f"log{pod}")
    assert _metrics(out) == _metrics(one_launcher)
    assert (out / "predictions.jsonl").read_bytes() == (one_launcher / "predictions.jsonl").read_bytes()


def test_workers_leave_no_vocabulary_folder_behind(one_launcher):
    """A worker skips interpreter teardown at exit (appzoo.cli.exit_with), so the run removes its own temp folders."""
    scratch = one_launcher.parent / "tmp"
    assert scratch.is_dir() and list(scratch.glob("appzoo-vocab-*")) == []
