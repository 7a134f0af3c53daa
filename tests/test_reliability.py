"""What the toolkit promises when things go wrong (README, "When things go wrong").

Kills at every save point (``APPZOO_FAULT``, in forked children so paddle is
imported once), Ctrl-C and SIGTERM, a full disk, a second run into a locked
folder, a diverging run, and the rules of ``resume`` and ``init_from``.
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import paddle
import pytest

import run_trainer
from appzoo.store import archive, bundle
from appzoo.utils import files
from appzoo.run.trainer import Trainer

pytestmark = pytest.mark.slow  # kills, interrupts and resumes trained runs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def param_file(tmp_path_factory):
    """The focal example on a small slice of the sample data: 96 train rows,
    so a run of 6 steps (batch 16) takes a second or two."""
    folder = tmp_path_factory.mktemp("small")
    for split, rows in (("train", 96), ("dev", 40), ("test", 40), ("predict", 8)):
        with open(os.path.join(ROOT, "data", "cls", f"{split}.tsv"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        if split == "train":  # every class in the slice
            lines = sorted(lines, key=lambda line: hash(line) % 97)
        (folder / f"{split}.tsv").write_text("\n".join(lines[:rows]) + "\n", encoding="utf-8")
    with open(os.path.join(ROOT, "examples", "cls_ernie_fc_with_focal.json"), encoding="utf-8") as f:
        config = json.load(f)
    for split in ("train", "dev", "test", "predict"):
        config["dataset_reader"][split] = str(folder / f"{split}.tsv")
    # one thread: runs in forked children (see in_child) and in this process give the same numbers
    config["trainer"].update({"max_steps": 6, "eval_steps": 2, "logging_steps": 1, "batch_size": 16,
                              "keep_checkpoints": 2, "progress_bar": False, "plots": False, "patience": 0,
                              "num_threads": 1})
    path = folder / "params.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    yield str(path)
    paddle.base.core.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))  # as conftest set it, for later modules


def cli(param_file, out, *extra):
    return run_trainer.main(["--param_path", param_file, "--set", f"trainer.output_dir={out}", *extra])


def in_child(param_file, out, *extra, fault=None):
    """Run the CLI in a forked child (paddle is already imported here);
    returns its exit code, or -signal when it was killed."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            # One OpenMP thread from the start: the parent's thread team (after a Paddle Inference
            # run in this process, say) does not exist in a forked child, and a parallel region
            # with more threads would wait for it forever.
            paddle.base.core.set_num_threads(1)
            # A killed child cannot remove its temporary folders (the from-scratch vocabulary):
            # they go into the test's own folder, not the suite's temp directory.
            tempfile.tempdir = os.path.dirname(os.path.abspath(out))
            if fault:
                os.environ["APPZOO_FAULT"] = fault
            # what the child says goes to a file beside its folder as well, for child_said() on a failure
            said = os.open(f"{out}.stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(said, 2)
            sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
            code = cli(param_file, out, *extra)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def child_said(out):
    """The last lines a child run into ``out`` wrote to stderr (see :func:`in_child`)."""
    try:
        with open(f"{out}.stderr", encoding="utf-8", errors="replace") as f:
            return f.read()[-3000:]
    except FileNotFoundError:
        return "(nothing)"


def results(out):
    """metrics.json without the wall time, and the predictions."""
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    metrics.pop("wall_time_s")
    with open(os.path.join(out, "predictions.jsonl"), encoding="utf-8") as f:
        return metrics, f.read()


def tree_digest(folder):
    """{relative path: sha256} of every file (links followed), for byte-identity."""
    out = {}
    for base, _, names in os.walk(folder, followlinks=True):
        for name in names:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def straight(param_file, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("straight") / "out")
    code = in_child(param_file, out)
    assert code == 0, f"the straight run exited {code}: {child_said(out)}"
    return out


# ------------------------------------------------------------- kills at save points
# (point, hit): the n-th time a save reaches the point. Steps 2, 4, 6 evaluate
# and save best/ (when dev improves) and a checkpoint.
KILLS = [("checkpoint.files", 2), ("checkpoint.marker", 2), ("checkpoint.rename", 2),
         ("checkpoint.prune", 1), ("best.files", 1), ("best.marker", 1), ("best.link", 1),
         ("best.swap", 1), ("metrics", 1)]


@pytest.mark.parametrize("point,hit", KILLS, ids=[f"{p}:{n}" for p, n in KILLS])
def test_a_kill_at_any_save_point_resumes_to_the_same_result(param_file, straight, tmp_path, point, hit):
    out = str(tmp_path / "out")
    assert in_child(param_file, out, fault=f"{point}:{hit}") == -signal.SIGKILL
    if os.path.lexists(os.path.join(out, "best")):  # never a half-written best/
        bundle.check(os.path.join(out, "best"))
        files.load_tensors(os.path.join(out, "best", bundle.MODEL_FILE))
    resume = "true" if archive.RunFolder(out).latest_checkpoint() else "false"
    assert in_child(param_file, out, "--set", f"trainer.resume={resume}",
                    "--set", "trainer.overwrite_output_dir=true") == 0
    assert results(out) == results(straight)
    leftovers = [n for n in os.listdir(out) + os.listdir(os.path.join(out, "checkpoints"))
                 if ".tmp-" in n or n.startswith((".replaced", ".best.link"))]
    assert leftovers == []


def test_a_kill_while_replacing_a_run_keeps_the_old_one(param_file, straight, tmp_path):
    out = str(tmp_path / "out")
    shutil.copytree(straight, out, symlinks=True)
    before = tree_digest(out)
    for fault in ("replace.aside:3", "best.files:1", "best.link:1"):
        assert in_child(param_file, out, "--set", "trainer.overwrite_output_dir=true",
                        "--set", "trainer.learning_rate=0.001", fault=fault) == -signal.SIGKILL
        # the next run into the folder (here an eval) puts the old run back first
        assert in_child(param_file, out, "--do", "eval") == 0
        after = tree_digest(out)
        # the eval rewrote these, with the same scores (the card and record: its time and command too)
        for name in ("metrics.json", "report.md", "report.html", "MODEL_CARD.md", "run_record.json"):
            before.pop(name, None), after.pop(name, None)
        assert after == before, fault
    assert results(out) == results(straight)


# ------------------------------------------------------------------ interrupts
@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_saves_a_checkpoint_and_resume_matches(param_file, straight, tmp_path, monkeypatch, capsys,
                                                         signum, code):
    out = str(tmp_path / "out")
    real_step = Trainer._train_step

    def signal_in_step_3(self, features):
        if self.state.global_step == 2:
            os.kill(os.getpid(), signum)  # lands mid-step, as Ctrl-C would
        return real_step(self, features)

    monkeypatch.setattr(Trainer, "_train_step", signal_in_step_3)
    assert cli(param_file, out) == code
    captured = capsys.readouterr()
    assert "stopping after this step" in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in captured.err
    assert "at step 3: checkpoint saved" in err[0] and "resume" in err[0]
    assert sorted(os.listdir(os.path.join(out, "checkpoints"))) == ["step-2", "step-3"]
    monkeypatch.setattr(Trainer, "_train_step", real_step)
    assert cli(param_file, out, "--set", "trainer.resume=true") == 0
    assert results(out) == results(straight)


# ------------------------------------------------------------------ full disk
def test_a_full_disk_gives_one_line_and_keeps_the_previous_checkpoint(param_file, tmp_path, monkeypatch, capsys):
    out = str(tmp_path / "out")
    monkeypatch.setenv("APPZOO_FAULT", "checkpoint.files:2:enospc")
    monkeypatch.setattr(files, "_fault_hits", {})
    assert cli(param_file, out) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and "checkpoints/step-2 is intact" in err[0]
    folder = archive.RunFolder(out)
    assert folder.latest_checkpoint().endswith("step-2")
    assert os.listdir(os.path.join(out, "checkpoints")) == ["step-2"]  # the partial step-4 is gone
    monkeypatch.delenv("APPZOO_FAULT")
    assert cli(param_file, out, "--set", "trainer.resume=true") == 0


# ----------------------------------------------------------------------- lock
def test_a_second_run_into_a_locked_folder_exits_2(param_file, tmp_path, capsys):
    out = str(tmp_path / "out")
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            sys.path.insert(0, {ROOT!r})
            from appzoo.store.archive import RunFolder
            RunFolder({out!r}).lock()
            print("locked", flush=True)
            time.sleep(120)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert cli(param_file, out) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"is in use by another run (pid {holder.pid} on" in err[0]
        assert sorted(os.listdir(out)) == [".appzoo-run", ".lock"]  # the holder's lock and mark; nothing of ours
    finally:
        holder.kill()
        holder.wait()
    assert cli(param_file, out) == 0  # the dead holder's lock is taken over
    assert not os.path.exists(os.path.join(out, ".lock"))


# ------------------------------------------------------------- non-finite loss
def test_a_diverging_run_stops_and_keeps_the_old_best(param_file, straight, tmp_path, capsys):
    out = str(tmp_path / "out")
    shutil.copytree(straight, out, symlinks=True)
    before = tree_digest(out)
    assert cli(param_file, out, "--set", "trainer.overwrite_output_dir=true", "--set", "trainer.learning_rate=1e37",
               "--set", "trainer.max_grad_norm=0") == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not finite" in err[0] and "lower trainer.learning_rate" in err[0]
    assert tree_digest(out) == before


# --------------------------------------------------------------- resume rules
def test_resuming_a_finished_run_trains_no_further(param_file, straight, tmp_path, capsys):
    out = str(tmp_path / "out")
    shutil.copytree(straight, out, symlinks=True)
    assert cli(param_file, out, "--set", "trainer.resume=true") == 0
    assert "had finished (step 6); trainer.resume trains no further" in capsys.readouterr().out
    assert results(out) == results(straight)
    assert archive.RunFolder(out).latest_checkpoint().endswith("step-6")


@pytest.mark.parametrize("change,named", [
    (["--set", "trainer.batch_size=8"], "trainer.batch_size=16, this run says 8"),
    (["--set", "model.loss.gamma=1.0"], "model.loss="),
    (["--set", "trainer.learning_rate=0.1"], "trainer.learning_rate=0.0005, this run says 0.1"),
])
def test_resume_refuses_changed_settings(param_file, straight, tmp_path, capsys, change, named):
    out = str(tmp_path / "out")
    shutil.copytree(straight, out, symlinks=True)
    before = tree_digest(out)
    assert cli(param_file, out, "--set", "trainer.resume=true", *change) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trainer.resume:" in err[0] and named in err[0]
    assert tree_digest(out) == before


def test_a_killed_and_resumed_run_counts_its_whole_time(param_file, tmp_path):
    """elapsed_s in the log and wall_time_s in metrics.json go on from the checkpoint, not from 0."""
    out = str(tmp_path / "out")
    assert in_child(param_file, out, fault="checkpoint.files:3") == -signal.SIGKILL  # step-4 is the last kept
    saved = files.read_json(os.path.join(out, "checkpoints", "step-4", archive.STATE_FILE))
    assert saved["wall_time_s"] > 0
    assert in_child(param_file, out, "--set", "trainer.resume=true") == 0
    rows = [json.loads(line) for line in open(os.path.join(out, "train_log.jsonl"), encoding="utf-8")]
    elapsed = [r["elapsed_s"] for r in rows if "elapsed_s" in r]
    assert [r["step"] for r in rows if "elapsed_s" in r] == [1, 2, 3, 4, 5, 6]
    assert elapsed == sorted(elapsed) and elapsed[4] > saved["wall_time_s"]
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        assert json.load(f)["wall_time_s"] >= elapsed[-1] > saved["wall_time_s"]


def test_resume_accepts_a_restated_default(param_file, straight, tmp_path, capsys):
    """config.json is the resolved tree: a param file that writes defaults out
    (the model's pooling, the trainer's weight decay, the loss's reduction)
    resumes a run made from one that left them out."""
    with open(param_file, encoding="utf-8") as f:
        config = json.load(f)
    assert "pooling" not in config["model"] and "reduction" not in config["model"]["loss"]
    assert "weight_decay" not in config["trainer"]
    out = str(tmp_path / "out")
    shutil.copytree(straight, out, symlinks=True)
    assert cli(param_file, out, "--set", "trainer.resume=true", "--set", "model.pooling=cls",
               "--set", "trainer.weight_decay=0.01", "--set", "model.loss.reduction=mean") == 0
    assert "trains no further" in capsys.readouterr().out
    with open(os.path.join(straight, "config.json"), encoding="utf-8") as f:
        saved = json.load(f)
    assert saved["model"]["pooling"] == "cls" and saved["model"]["loss"]["reduction"] == "mean"  # written out


def test_resume_with_a_larger_max_steps_trains_longer(param_file, straight, tmp_path, capsys):
    out = str(tmp_path / "out")
    shutil.copytree(straight, out, symlinks=True)
    assert cli(param_file, out, "--set", "trainer.resume=true", "--set", "trainer.max_steps=8") == 0
    said = capsys.readouterr().out
    assert "the run was planned for 6 steps and now goes on to 8; the learning-rate schedule was rebuilt" in said
    # a finished run keeps no optimizer state (issue 42, item 23: twice the model, read by a longer run alone)
    assert not os.path.exists(os.path.join(archive.RunFolder(straight).latest_checkpoint(), archive.OPTIMIZER_FILE))
    assert "the optimizer starts afresh" in said
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        assert json.load(f)["train"]["steps"] == 8
    assert archive.RunFolder(out).latest_checkpoint().endswith("step-8")
    rows = [json.loads(line) for line in open(os.path.join(out, "train_log.jsonl"), encoding="utf-8")]
    lrs = [r["lr"] for r in rows if "lr" in r]
    assert lrs[5] == 0.0 and lrs[6] > 0  # the old schedule ended at step 6; the new one goes on to 8
    shorter = str(tmp_path / "shorter")
    shutil.copytree(straight, shorter, symlinks=True)
    assert cli(param_file, shorter, "--set", "trainer.resume=true", "--set", "trainer.max_steps=4") == 2
    assert "trainer.max_steps=6, this run says 4" in capsys.readouterr().err


def test_resume_refuses_a_changed_training_file(param_file, straight, tmp_path, capsys):
    out = str(tmp_path / "out")
    shutil.copytree(straight, out, symlinks=True)
    with open(param_file, encoding="utf-8") as f:
        config = json.load(f)
    changed = tmp_path / "train.tsv"
    with open(config["dataset_reader"]["train"], encoding="utf-8") as f:
        changed.write_text(f.read().replace("finance", "tech", 1), encoding="utf-8")
    # the same path with other content: point the checkpoint's config at the copy
    for folder in archive.RunFolder(out).checkpoint_folders():
        saved = files.read_json(os.path.join(folder, "config.json"))
        saved["dataset_reader"]["train"] = str(changed)
        files.write_json(os.path.join(folder, "config.json"), saved)
    assert cli(param_file, out, "--set", "trainer.resume=true", "--set", f"dataset_reader.train={changed}") == 2
    assert "changed since" in capsys.readouterr().err


# ------------------------------------------------------------------- init_from
def test_init_from_trains_on_the_saved_vocabulary_and_exports_here(param_file, straight, tmp_path):
    out = str(tmp_path / "more")
    best = os.path.join(straight, "best")
    # A learning rate of ~0 and one step: the model must score as the saved one does. A vocabulary
    # rebuilt from the texts would reorder the embedding rows and score like chance.
    assert cli(param_file, out, "--set", f"trainer.init_from={best}", "--set", "trainer.max_steps=1",
               "--set", "trainer.learning_rate=1e-12", "--set", "trainer.warmup_proportion=0",
               "--do", "train,eval,export") == 0
    with open(os.path.join(best, "encoder", "vocab.txt"), encoding="utf-8") as a, \
            open(os.path.join(out, "best", "encoder", "vocab.txt"), encoding="utf-8") as b:
        assert a.read() == b.read()
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        mine = json.load(f)
    with open(os.path.join(straight, "metrics.json"), encoding="utf-8") as f:
        theirs = json.load(f)
    np.testing.assert_allclose(mine["test"]["loss"], theirs["test"]["loss"], rtol=1e-4)
    assert os.path.isdir(os.path.join(out, "inference")) and not os.path.exists(os.path.join(best, "inference"))
