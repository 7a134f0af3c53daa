import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.chdir(ROOT)  # param files use paths relative to the repo root

import appzoo.env  # noqa: E402

# Under pytest -n the workers share the cores: each gets its share of paddle's threads, unless the environment says
# otherwise (two workers of two OpenMP threads on two cores spin against each other: 18% more CPU time, measured)
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, appzoo.env.available_cores() // _WORKERS)))
appzoo.env.configure_cpu()  # as run_trainer.py does, before paddle is imported
appzoo.env.import_paddle_quietly()


# ---- the suite leaves nothing in the temp directory
import contextlib  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def temp_dir_left_clean(tmp_path_factory):
    """Give the suite's processes a temp directory of their own (TMPDIR, inherited by subprocesses
    and forked children); fail when anything of appzoo's is left in it at the end, then remove it.
    Tests that kill a run on purpose point its temp directory into their own ``tmp_path``."""
    tmp_path_factory.getbasetemp()  # pytest's own folders stay in the system temp directory
    private = tempfile.mkdtemp(prefix="appzoo-tests-")
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = private
    yield
    if saved[0] is None:
        del os.environ["TMPDIR"]
    else:
        os.environ["TMPDIR"] = saved[0]
    tempfile.tempdir = saved[1]
    left = sorted(name for name in os.listdir(private) if name.startswith("appzoo-"))
    shutil.rmtree(private, ignore_errors=True)
    assert left == [], f"the suite left {left} in the temp directory"


# ---- helpers shared by the test files (import them: ``from conftest import read_jsonl``)


def write(tmp_path, name, text, encoding="utf-8"):
    """``text`` (str, in ``encoding``; or bytes) as the file ``tmp_path/name``; its path as a string."""
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode(encoding))
    return str(path)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def cli(param_path, out, *args):
    """``run_trainer.main`` on ``param_path`` with ``trainer.output_dir=out``: its exit code."""
    import run_trainer

    return run_trainer.main(["--param_path", param_path, "--set", f"trainer.output_dir={out}", *args])


def xlmr_folder(out, layers=1, unused="", normalize=None, extra_rows=0):
    """A multilingual-e5-layout folder in ``out``: config.json, Paddle weights of a BERT of width 16 with
    ``layers`` layers, and a Unigram tokenizer.json whose pieces are each character of data/ alone and after
    the word-start mark, and the pieces of ``unused``; ``extra_rows`` embedding rows beyond the pieces."""
    import glob

    import paddle
    from paddlenlp.transformers import BertConfig, BertModel

    from appzoo.data.unigram import build_tokenizer_json

    chars = set(unused)
    for path in glob.glob(os.path.join(ROOT, "data", "*", "*.*")):
        if path.endswith((".tsv", ".txt")):
            with open(path, encoding="utf-8") as f:
                chars.update(c for c in f.read() if not c.isspace())
    chars = sorted(chars)
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "\u2581"] + chars + ["\u2581" + c for c in chars]
    scores = [0.0] * 4 + [-3.0] + [-6.0] * len(chars) + [-5.0] * len(chars)
    ids = {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
    (out / "tokenizer.json").write_text(build_tokenizer_json(pieces, scores, normalize or {}, ids), encoding="utf-8")
    paddle.seed(0)
    model = BertModel(BertConfig(vocab_size=len(pieces) + extra_rows, hidden_size=16, num_hidden_layers=layers,
                                 num_attention_heads=2, intermediate_size=32, max_position_embeddings=128,
                                 pad_token_id=1))
    model.save_pretrained(str(out))
    return str(out)


def tiny_ernie(vocab_size=30, seed=0):
    """A one-layer ERNIE of width 16: a real encoder that builds in milliseconds."""
    import paddle
    from paddlenlp.transformers import ErnieConfig, ErnieModel

    paddle.seed(seed)
    return ErnieModel(ErnieConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=32, pad_token_id=0))


@contextlib.contextmanager
def crash_after_step(monkeypatch, step):
    """Within the block, the trainer raises RuntimeError("simulated crash")
    instead of training step ``step + 1`` (a process killed after ``step`` steps)."""
    from appzoo.run.trainer import Trainer

    real = Trainer._train_step

    def crash(self, batches):
        if self.state.global_step == step:
            raise RuntimeError("simulated crash")
        return real(self, batches)

    monkeypatch.setattr(Trainer, "_train_step", crash)
    try:
        yield
    finally:
        monkeypatch.setattr(Trainer, "_train_step", real)


# ---- data-parallel runs under paddle.distributed.launch (tests/test_distributed.py, tests/test_cluster.py)
#: run_trainer.py arguments of the few-step data-parallel runs that must all give one_launcher's run
LAUNCH_SETTINGS = ["--do", "train,eval,predict", "--set", "trainer.max_steps=4", "--set", "trainer.eval_steps=2",
                   "--set", "trainer.logging_steps=2", "--set", "trainer.progress_bar=false",
                   "--set", "trainer.plots=false"]
LAUNCH_ENV = {"OMP_NUM_THREADS": "1", "LIBC_FATAL_STDERR_": "1"}  # glibc aborts print to the log, not a tty


def check_launch(done, log_dir):
    """Fail with the launcher's output and its workers' logs unless ``done`` (a CompletedProcess) exited 0."""
    logs = "".join(p.read_text(errors="replace")[-2000:] for p in sorted(log_dir.glob("workerlog.*")))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + logs


@pytest.fixture(scope="session")
def one_launcher(tmp_path_factory):
    """The output folder of one launcher of 2 processes running LAUNCH_SETTINGS on the PaddleJob's param file:
    the run every other launch of them must reproduce. The tests that use it are marked
    ``xdist_group("one_launcher")``, so that under ``pytest -n`` one worker trains it once."""
    import subprocess

    from test_deploy import PARAM

    tmp = tmp_path_factory.mktemp("one")
    out = tmp / "out"
    (tmp / "tmp").mkdir()
    cmd = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--log_dir", str(tmp / "log"),
           "run_trainer.py", "--param_path", PARAM, *LAUNCH_SETTINGS, "--set", f"trainer.output_dir={out}"]
    env = dict(os.environ, **LAUNCH_ENV, TMPDIR=str(tmp / "tmp"))
    check_launch(subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300), tmp / "log")
    return out


@pytest.fixture(scope="session")
def served_runs(tmp_path_factory):
    """``{task: run folder}`` of a short run of every task the server answers (tests/serving.py), shared by
    the serving, predictor, precision and example tests. Those are marked ``xdist_group("served")``, so
    that under ``pytest -n`` one worker runs them all and trains these runs once."""
    from serving import train

    return train(tmp_path_factory.mktemp("served"))


# ---- the long runs first: under ``pytest -n`` the short tests then fill the workers' last minutes, instead of one
# worker starting a two-minute run while the other has nothing left (a longest-first schedule, by the marker)
def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the order within each kind stays


# ---- a skip must not hide a missing requirement (tests/required_skips.py)
from required_skips import hidden_requirement_failure, provided_modules  # noqa: E402

PROVIDED = provided_modules()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.skipped and call.excinfo is not None:
        hidden_requirement_failure(report, str(call.excinfo.value), item.nodeid, PROVIDED)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    report = (yield).get_result()
    if report.skipped:  # a module-level importorskip: longrepr is (path, line, "Skipped: message")
        hidden_requirement_failure(report, str(report.longrepr), collector.nodeid, PROVIDED)
