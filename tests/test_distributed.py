"""Data-parallel training on CPU processes (gloo) through paddle.distributed.launch:
one launcher of 2 processes, and two launchers ("nodes") of 1 process each,
which must give the same run, evaluation sharded over the ranks."""
import json
import os
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # launches data-parallel runs

ARGS = ["run_trainer.py", "--param_path", "examples/cls_ernie_fc_ch.json", "--do", "train,eval,predict",
        "--set", "trainer.max_steps=4", "--set", "trainer.eval_steps=2", "--set", "trainer.logging_steps=2",
        "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false"]
ENV = dict(os.environ, OMP_NUM_THREADS="1", LIBC_FATAL_STDERR_="1")  # glibc aborts print to the log, not a tty


def _check(done, log_dir):
    logs = "".join(p.read_text(errors="replace")[-2000:] for p in sorted(log_dir.glob("workerlog.*")))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + logs


def _metrics(out):
    with open(out / "metrics.json", encoding="utf-8") as f:
        metrics = json.load(f)
    metrics.pop("wall_time_s")
    return metrics


@pytest.fixture(scope="module")
def one_launcher(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("one")
    out = tmp / "out"
    (tmp / "tmp").mkdir()
    cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--log_dir", str(tmp / "log"),
           *ARGS, "--set", f"trainer.output_dir={out}"]
    _check(subprocess.run(cmd, env=dict(ENV, TMPDIR=str(tmp / "tmp")), capture_output=True, text=True, timeout=300),
           tmp / "log")
    return out


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


def test_two_launchers_of_one_process_match_one_launcher_of_two(one_launcher, tmp_path):
    """The multi-node recipe of docs/deployment.md, with both "nodes" on this machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "out"
    nodes = []
    for rank in (0, 1):
        cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nnodes", "2", "--rank", str(rank),
               "--master", f"127.0.0.1:{port}", "--nproc_per_node", "1", "--log_dir", str(tmp_path / f"log{rank}"),
               *ARGS, "--set", f"trainer.output_dir={out}"]
        nodes.append(subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for rank, node in enumerate(nodes):
        stdout, stderr = node.communicate(timeout=300)
        _check(subprocess.CompletedProcess(node.args, node.returncode, stdout, stderr), tmp_path / f"log{rank}")
    assert _metrics(out) == _metrics(one_launcher)
    assert (out / "predictions.jsonl").read_bytes() == (one_launcher / "predictions.jsonl").read_bytes()


def test_workers_leave_no_vocabulary_folder_behind(one_launcher):
    """A worker skips interpreter teardown at exit (run_trainer._exit), so the run removes its own temp folders."""
    scratch = one_launcher.parent / "tmp"
    assert scratch.is_dir() and list(scratch.glob("appzoo-vocab-*")) == []
