import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.chdir(ROOT)  # param files use paths relative to the repo root

import appzoo.env  # noqa: E402

appzoo.env.configure_cpu()  # as run_trainer.py does, before paddle is imported
appzoo.env.import_paddle_quietly()
import appzoo.losses  # noqa: E402,F401
import appzoo.metrics  # noqa: E402,F401
import tasks  # noqa: E402,F401


# ---- helpers shared by the test files (import them: ``from conftest import read_jsonl``)
import contextlib  # noqa: E402
import json  # noqa: E402


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
    from appzoo.trainer import Trainer

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
