"""The under-training note: the best model is that of the last of several dev evaluations."""
import json
import os

from appzoo.reports import report
from appzoo.run.modes.train import best_is_last as _best_is_last
from appzoo.run.trainer import TrainerState
from conftest import cli, read_jsonl

NOTE = ("the best checkpoint is the last evaluated step ({step}): dev macro_f1 was still improving, so the model "
        "may be under-trained (try more trainer.epochs or trainer.max_steps)")


def log(*steps):
    return [{"step": s, "loss": 1.0} for s in steps] + [{"step": s, "dev_macro_f1": 0.5} for s in steps]


def test_best_at_the_last_of_several_evaluations_is_noted():
    assert _best_is_last(TrainerState(best_step=6, evaluated_at=6), log(2, 4, 6), "macro_f1") == NOTE.format(step=6)


def test_best_before_the_last_evaluation_or_a_single_evaluation_is_not():
    assert _best_is_last(TrainerState(best_step=4, evaluated_at=6), log(2, 4, 6), "macro_f1") is None
    assert _best_is_last(TrainerState(best_step=2, evaluated_at=2), log(2), "macro_f1") is None  # nothing to compare
    assert _best_is_last(TrainerState(best_step=6), log(2, 4, 6), "accuracy") is None  # no dev_accuracy rows


def test_report_shows_the_note(tmp_path):
    metrics = {"best": {"step": 6, "metric": "macro_f1", "value": 0.5, "note": NOTE.format(step=6)},
               "wall_time_s": 1.0}
    report.write(str(tmp_path), metrics, [], ["a", "b"], plots=False)
    assert f"Note: {NOTE.format(step=6)}" in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_a_run_notes_it_in_metrics_json_and_report_md_exactly_when_its_log_says_so(tmp_path, capsys):
    out = str(tmp_path / "out")
    assert cli("examples/cls_ernie_fc_ch.json", out, "--do", "train", "--set", "trainer.max_steps=4",
               "--set", "trainer.eval_steps=2", "--set", "trainer.metric_for_best=loss",
               "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false") == 0
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        best = json.load(f)["best"]
    losses = {r["step"]: r["dev_loss"] for r in read_jsonl(os.path.join(out, "train_log.jsonl")) if "dev_loss" in r}
    assert sorted(losses) == [2, 4]
    if losses[4] < losses[2]:  # still improving at the end
        expected = NOTE.format(step=4).replace("macro_f1", "loss")
        assert best["note"] == expected
        assert f"note: {expected}" in capsys.readouterr().out
        with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
            assert f"Note: {expected}" in f.read()
    else:
        assert "note" not in best
