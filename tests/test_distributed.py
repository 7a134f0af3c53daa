"""Data-parallel training on 2 CPU processes (gloo) through paddle.distributed.launch."""
import json
import os
import subprocess
import sys


def test_two_process_data_parallel_run(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2",
           "--log_dir", str(tmp_path / "log"), "run_trainer.py",
           "--param_path", "examples/cls_ernie_fc_ch.json", "--do", "train,eval",
           "--set", f"trainer.output_dir={out}", "--set", "trainer.max_steps=4",
           "--set", "trainer.logging_steps=2", "--set", "trainer.progress_bar=false",
           "--set", "trainer.plots=false"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    logs = "".join(p.read_text(errors="replace")[-2000:] for p in sorted((tmp_path / "log").glob("workerlog.*")))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + logs
    with open(out / "metrics.json", encoding="utf-8") as f:
        metrics = json.load(f)
    assert metrics["train"]["steps"] == 4  # 2 ranks x 32 examples per step: 4 steps, not 8
    rows = [json.loads(line) for line in open(out / "train_log.jsonl", encoding="utf-8")]
    assert [r["step"] for r in rows if "loss" in r] == [2, 4]  # written once, by rank 0
