"""Sweeps (appzoo/sweep/): the grid, the results with their statistics,
resuming, the verdict rule and one-line errors before anything runs."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

import run_trainer
from appzoo import sweep
from appzoo.run import runner
from appzoo.errors import Interrupted

sys.path.insert(0, "benchmarks")
import results_book  # noqa: E402

pytestmark = pytest.mark.slow  # most tests run a sweep

EXAMPLE = "examples/cls_ernie_fc_ch.json"


def tiny(out, *more):
    """Two steps per run; dev loss as the best-model metric, so seeds differ."""
    return ["--param_path", EXAMPLE, "--do", "train,eval", "--set", f"trainer.output_dir={out}",
            "--set", "trainer.max_steps=2", "--set", "trainer.eval_steps=0", "--set", "trainer.metric_for_best=loss",
            "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false", *more]


def read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    """2 settings x 2 seeds on the sample data; the sweep/ folder."""
    out = tmp_path_factory.mktemp("sweep") / "out"
    code = run_trainer.main(tiny(out, "--sweep", 'model.loss=[{"name":"ce"},{"name":"focal","gamma":1}]',
                                 "--seeds", "2"))
    assert code == 0
    return out / "sweep"


def test_a_2x2_sweep_writes_the_results_with_mean_and_sample_std(tiny_sweep):
    root = tiny_sweep
    assert {"sweep.json", "sweep.md", "sweep.png", "report.html"} <= set(os.listdir(root))
    summary = read(root / "sweep.json")
    assert [s["setting"] for s in summary["settings"]] == ["loss=name-ce", "loss=name-focal_gamma-1"]
    assert summary["seeds"] == [42, 43]
    assert summary["primary_metric"] == "dev.loss" and summary["greater_is_better"] is False
    assert summary["confirmation_metric"] == "test.loss"
    md = (root / "sweep.md").read_text(encoding="utf-8")
    for row in summary["settings"]:
        folders = [root / row["setting"] / f"seed-{seed}" for seed in (42, 43)]
        per_run = [read(f / "metrics.json") for f in folders]
        assert [read(f / "config.json")["trainer"]["seed"] for f in folders] == [42, 43]
        assert row["n"] == 2
        for key in summary["key_metrics"]:
            split, name = key.split(".")
            values = np.array([m[split][name] for m in per_run], dtype=np.float64)
            np.testing.assert_allclose(row["metrics"][key]["mean"], values.mean(), rtol=1e-12)
            np.testing.assert_allclose(row["metrics"][key]["std"], values.std(ddof=1), rtol=1e-9, atol=1e-15)
        test_loss = np.array([m["test"]["loss"] for m in per_run])
        assert row["metrics"]["test.loss"]["std"] > 0, "the seeds give different runs"
        assert f"| {row['setting']} | 2 | " in md
        assert f"{test_loss.mean():.4f} ± {test_loss.std(ddof=1):.4f}" in md
        np.testing.assert_allclose(row["wall_time_s"]["mean"], np.mean([m["wall_time_s"] for m in per_run]))
    assert summary["settings"][0]["verdict"] == summary["settings"][0]["test_verdict"] == "baseline"
    assert summary["settings"][1]["verdict"] == summary["settings"][1]["test_verdict"] == "too few seeds"
    assert "| verdict on dev.loss | Welch p | test.loss (confirmation) | Welch p |" in md
    assert "| too few seeds |" in md
    for row in summary["settings"]:  # per-class F1: the mean over the seeds' metrics.json, in sweep.md
        per_run = [read(root / row["setting"] / f"seed-{seed}" / "metrics.json") for seed in (42, 43)]
        for name, cell in row["per_class_f1"]["test"].items():
            f1s = [m["test"]["per_class"][name]["f1"] for m in per_run]
            np.testing.assert_allclose(cell["mean"], np.mean(f1s), rtol=1e-12)
            assert cell["zero_in_every_run"] == (max(f1s) == 0)
    assert "Per-class F1 on test, mean over seeds" in md
    assert {"dev.loss", "test.loss", "test.macro_f1", "test.accuracy"} <= set(summary["key_metrics"])
    assert "sample standard deviation (ddof=1)" in md
    assert (root / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_smaller_grid_does_not_replace_the_results_of_a_sweep(tiny_sweep, capsys):
    before = {name: (tiny_sweep / name).read_bytes() for name in ("sweep.json", "sweep.md", "sweep.png")}
    out = tiny_sweep.parent
    for grid, seeds, lost in ((['model.loss=[{"name":"ce"}]'], "2", r"setting 'loss=name-focal_gamma-1'"),
                              (['model.loss=[{"name":"ce"},{"name":"focal","gamma":1}]'], "1", "seed 43")):
        capsys.readouterr()
        assert run_trainer.main(tiny(out, "--sweep", *grid, "--seeds", seeds)) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and re.search(r"--sweep: .*sweep\.json holds the results of a sweep with " + lost
                                           + r", which this grid leaves out, .* set trainer\.output_dir", err[0])
    assert {name: (tiny_sweep / name).read_bytes() for name in before} == before
    settings = [sweep.Setting(name, {}) for name in ("loss=name-ce", "loss=name-focal_gamma-1", "loss=name-dice")]
    sweep.runs._check_extends_results(str(tiny_sweep), settings, [42, 43, 44])  # an extension is fine


def test_an_interrupted_sweep_skips_finished_runs_and_resumes_the_interrupted_one(tmp_path, monkeypatch):
    out = tmp_path / "out"
    real_run = runner.run
    calls = []

    def killed_after_the_checkpoint(plan, callbacks=()):
        calls.append((plan.trainer.output_dir, plan.trainer.resume))
        if len(calls) == 2:  # the second run saved its checkpoint, then the process was stopped
            real_run(plan)
            os.remove(os.path.join(plan.trainer.output_dir, "metrics.json"))
            raise Interrupted(signal.SIGINT, "SIGINT: stopped; a checkpoint was saved")
        return real_run(plan)

    monkeypatch.setattr(runner, "run", killed_after_the_checkpoint)
    args = tiny(out, "--sweep", "model.loss.name=ce", "--seeds", "3")
    assert run_trainer.main(args) == 130
    first, second, third = (str(out / "sweep" / "loss.name=ce" / f"seed-{s}") for s in (42, 43, 44))
    assert calls == [(first, False), (second, False)]
    mtime = os.stat(os.path.join(first, "metrics.json")).st_mtime_ns
    partial = read(out / "sweep" / "sweep.json")  # the results are kept up to date run by run
    assert partial["runs_finished"] == 1 and partial["settings"][0]["n"] == 1
    assert partial["settings"][0]["verdict"] == "baseline"

    calls.clear()
    monkeypatch.setattr(runner, "run", lambda plan, callbacks=(): calls.append((plan.trainer.output_dir,
                                                                               plan.trainer.resume)) or real_run(plan))
    assert run_trainer.main(args) == 0
    assert calls == [(second, True), (third, False)], "the finished run is skipped, the stopped one resumed"
    assert os.stat(os.path.join(first, "metrics.json")).st_mtime_ns == mtime
    summary = read(out / "sweep" / "sweep.json")
    assert summary["runs_finished"] == 3 and summary["settings"][0]["n"] == 3

    calls.clear()
    assert run_trainer.main(args) == 0 and calls == [], "a finished sweep runs nothing"
    # the same folders with other settings are not reused silently
    assert run_trainer.main(args + ["--set", "model.dropout=0.3"]) == 2


def test_a_diverged_run_is_a_recorded_result_and_the_sweep_goes_on(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    args = tiny(out, "--set", "trainer.max_grad_norm=0", "--sweep", "trainer.learning_rate=5e-5,1e30", "--seeds", "2")
    assert run_trainer.main(args) == 0
    said = "".join(capsys.readouterr())
    assert re.search(r"sweep: learning_rate=1e\+?30 seed 42 diverged \(.*(nan|inf).*\); recorded", said, re.I), said
    summary = read(out / "sweep" / "sweep.json")
    base, wild = summary["settings"]
    assert summary["runs_finished"] == 2 and summary["runs_diverged"] == 2
    assert base["verdict"] == "baseline" and base["n"] == 2 and base["diverged"] == []
    assert wild["n"] == 0 and [d["seed"] for d in wild["diverged"]] == [42, 43]
    assert wild["verdict"] == "diverged 2 of 2"
    record = read(os.path.join(wild["diverged"][0]["folder"], "diverged.json"))
    assert record["seed"] == 42 and re.search(r"(?i)nan|inf", record["error"])
    table = (out / "sweep" / "sweep.md").read_text(encoding="utf-8")
    assert "runs finished 2 of 4 (2 more diverged" in table and "| diverged 2 of 2 |" in table
    assert (out / "sweep" / "sweep.png").stat().st_size > 0

    calls = []
    monkeypatch.setattr(runner, "run", lambda plan, callbacks=(): calls.append(plan.trainer.output_dir))
    assert run_trainer.main(args) == 0 and calls == [], "diverged runs have ended: the sweep does not redo them"
    assert "4 of 4 runs already ended (2 diverged); skipped" in "".join(capsys.readouterr())


def test_a_baseline_that_diverged_leaves_the_other_verdicts_open():
    rows = [{"setting": "a", "runs": [], "diverged": [{"seed": 1}]},
            {"setting": "b", "runs": [{"metrics": {"m": 0.5}}, {"metrics": {"m": 0.6}}], "diverged": []}]
    assert [r["verdict"] for r in sweep.judge(rows, "m", True, seeds=2)] == [
        "baseline, diverged 1 of 2", "n/a (the baseline diverged)"]


def test_two_workers_share_a_sweep_a_run_finished_by_the_other_is_skipped(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    args = tiny(out, "--sweep", "model.loss.name=ce", "--seeds", "3")
    real_run = runner.run
    outer, inner = [], []

    def run(plan, callbacks=()):
        seed = plan.trainer.seed
        if inner or outer:  # the second worker, started while the first trains its first run
            inner.append(seed)
            return real_run(plan)
        outer.append(seed)
        result = real_run(plan)
        assert run_trainer.main(args) == 0  # the other worker: 42 is done, it runs 43 and 44
        return result

    monkeypatch.setattr(runner, "run", run)
    assert run_trainer.main(args) == 0
    assert outer == [42] and inner == [43, 44], "each run once: the first worker skips what the second finished"
    err = "".join(capsys.readouterr())
    assert "sweep: loss.name=ce seed 43 was ended by another worker; skipped" in err
    assert read(out / "sweep" / "sweep.json")["runs_finished"] == 3


def test_a_run_another_live_process_holds_is_left_to_it(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    args = tiny(out, "--sweep", "model.loss.name=ce", "--seeds", "3")
    held = str(out / "sweep" / "loss.name=ce" / "seed-43")
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys, time; sys.path.insert(0, {os.getcwd()!r}); "
                               f"from appzoo.store.archive import RunFolder; RunFolder({held!r}).lock(); "
                               f"print('locked', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    real_run = runner.run
    calls = []
    monkeypatch.setattr(runner, "run", lambda plan, callbacks=(): calls.append(plan.trainer.seed) or real_run(plan))
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert run_trainer.main(args) == 0
        err = "".join(capsys.readouterr())
        assert calls == [42, 44]
        assert f"sweep: loss.name=ce seed 43 is held by another run (pid {holder.pid} on" in err
        assert "1 run(s) were left to another worker" in err
        assert read(out / "sweep" / "sweep.json")["runs_finished"] == 2
    finally:
        holder.kill()
        holder.wait()
    calls.clear()
    assert run_trainer.main(args) == 0 and calls == [43], "once the holder is gone the run is done here"
    assert read(out / "sweep" / "sweep.json")["runs_finished"] == 3


@pytest.mark.parametrize("baseline, values, greater, expected", [
    ([0.50, 0.51, 0.52], [0.60, 0.61, 0.62], True, "better"),  # gap 0.10 > 2 * 0.01 on both sides
    ([0.50, 0.51, 0.52], [0.60, 0.61, 0.62], False, "worse"),  # lower is better (a loss)
    ([0.60, 0.61, 0.62], [0.50, 0.51, 0.52], True, "worse"),
    ([0.50, 0.51, 0.52], [0.53, 0.54, 0.55], True, "better"),  # gap 0.03 > 0.02 and > 0.02
    ([0.50, 0.51, 0.52], [0.52, 0.53, 0.54], True, "tie"),  # gap 0.02 is not > 2 std = 0.02
    ([0.50, 0.50, 0.50], [0.53, 0.63, 0.73], True, "tie"),  # beyond the baseline's 0 std, not the other's 0.1
    ([0.53, 0.63, 0.73], [0.50, 0.50, 0.50], True, "tie"),
    ([0.50, 0.50, 0.50], [0.50, 0.50, 0.50], True, "tie"),
    ([0.50, 0.50, 0.50], [0.51, 0.51, 0.51], True, "better"),  # both without spread: any gap counts
    ([0.50, 0.51], [0.90, 0.91], True, "too few seeds"),  # a gap of 40 std, but 2 seeds judge nothing
    ([0.50, 0.51, 0.52], [0.90, 0.91], True, "too few seeds"),
    ([0.50, 0.51], [0.90, 0.91, 0.92], True, "too few seeds"),
    ([0.50], [0.90, 0.91], True, "too few seeds"),
    ([0.50, 0.52], [0.90], True, "too few seeds"),
    ([], [0.9, 0.91], True, "n/a"),
])
def test_verdict_rule(baseline, values, greater, expected):
    assert sweep.verdict(baseline, values, greater) == expected


def welch_reference(baseline, values):
    """Welch's t-test written out: t over the unpooled standard error, Welch–Satterthwaite degrees of freedom,
    two-sided p from Student's t."""
    from scipy.stats import t as student

    a, b = np.asarray(values, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    t = (a.mean() - b.mean()) / np.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return 2 * student.sf(abs(t), df)


def test_welch_p_is_the_two_sided_welch_t_test():
    # equal spreads, gap 0.1: t = 0.1 / sqrt(2 * 0.0001 / 3) = 12.247, df = 4
    assert sweep.welch_p([0.50, 0.51, 0.52], [0.60, 0.61, 0.62]) == pytest.approx(2.552e-4, rel=1e-3)
    for baseline, values in (([0.50, 0.51, 0.52], [0.60, 0.61, 0.62]), ([0.5, 0.6, 0.4, 0.55], [0.52, 0.53]),
                             ([0.50, 0.50, 0.50], [0.53, 0.63, 0.73])):
        assert sweep.welch_p(baseline, values) == pytest.approx(welch_reference(baseline, values), rel=1e-9)
        assert sweep.welch_p(values, baseline) == pytest.approx(welch_reference(baseline, values), rel=1e-9)
    assert sweep.welch_p([0.5], [0.6, 0.7]) is None, "one run: no variance"
    assert sweep.welch_p([0.5, 0.5, 0.5], [0.6, 0.6, 0.6]) is None, "no spread on either side: undefined"


def planted_sweep(root, results, metric="macro_f1"):
    """A :class:`sweep.Sweep` over run folders holding planted metrics.json files: ``results`` maps a
    setting to one ``{split: metrics}`` per seed (None: that run has not finished)."""
    from types import SimpleNamespace

    settings = [sweep.Setting(name, {"model.loss.name": name}) for name in results]
    seeds = [42, 43, 44]
    runs = []
    for setting in settings:
        for seed, metrics in zip(seeds, results[setting.name]):
            folder = root / setting.name / f"seed-{seed}"
            folder.mkdir(parents=True)
            if metrics is not None:
                (folder / "metrics.json").write_text(json.dumps(
                    {**metrics, "train": {"steps": 10}, "wall_time_s": 1.0}), encoding="utf-8")
            runs.append(sweep.SweepRun(setting, seed, str(folder), SimpleNamespace(do=["train", "eval"]), "done", {}))
    return sweep.Sweep(str(root), settings, runs, seeds, metric, True, "planted", "planted.json")


def split_scores(dev, test, rare=(0.0, 0.0)):
    def per_class(f1, rare_f1):
        return {"common": {"precision": f1, "recall": f1, "f1": f1, "support": 90},
                "rare": {"precision": rare_f1, "recall": rare_f1, "f1": rare_f1, "support": 10}}

    return {"dev": {"macro_f1": dev, "accuracy": dev, "per_class": per_class(dev, rare[0])},
            "test": {"macro_f1": test, "accuracy": test, "per_class": per_class(test, rare[1])}}


def test_the_verdict_is_taken_on_dev_and_test_only_confirms(tmp_path):
    low, high = [0.50, 0.51, 0.52], [0.60, 0.61, 0.62]
    summary = sweep.summarise(planted_sweep(tmp_path, {
        "base": [split_scores(d, t) for d, t in zip(low, low)],
        "better_on_test_only": [split_scores(d, t, rare=(0.0, 0.3 * i)) for i, (d, t) in enumerate(zip(low, high))],
        "better_on_dev_only": [split_scores(d, t, rare=(0.2, 0.0)) for d, t in zip(high, low)],
        "two_seeds": [split_scores(d, t) for d, t in zip(high, high)][:2] + [None],
    }))
    assert summary["primary_metric"] == "dev.macro_f1" and summary["confirmation_metric"] == "test.macro_f1"
    rows = {row["setting"]: row for row in summary["settings"]}
    p = welch_reference(low, high)
    assert (rows["better_on_test_only"]["verdict"], rows["better_on_test_only"]["test_verdict"]) == ("tie", "better")
    assert rows["better_on_test_only"]["verdict_p"] == pytest.approx(1.0), "the same dev runs"
    assert rows["better_on_test_only"]["test_verdict_p"] == pytest.approx(p, rel=1e-9)
    assert (rows["better_on_dev_only"]["verdict"], rows["better_on_dev_only"]["test_verdict"]) == ("better", "tie")
    assert rows["better_on_dev_only"]["verdict_p"] == pytest.approx(p, rel=1e-9)
    assert rows["two_seeds"]["n"] == 2
    assert rows["two_seeds"]["verdict"] == rows["two_seeds"]["test_verdict"] == "too few seeds"

    md = sweep.markdown(summary)
    assert "| verdict on dev.macro_f1 | Welch p | test.macro_f1 (confirmation) | Welch p |" in md
    assert re.search(r"\| better_on_test_only \| 3 \| .* \| tie \| 1\.000 \| better \| < 0\.001 \|", md), md
    assert re.search(r"\| better_on_dev_only \| 3 \| .* \| better \| < 0\.001 \| tie \| 1\.000 \|", md), md
    assert re.search(r"\| two_seeds \| 2 \| .* \| too few seeds \| .* \| too few seeds \|", md), md

    # per-class F1: rare is 0 in every run of base and two_seeds, and on dev of better_on_test_only
    dev_table = md.split("Per-class F1 on dev", 1)[1].split("Per-class F1 on test", 1)[0]
    assert "| class | base | better_on_test_only | better_on_dev_only | two_seeds |" in dev_table
    assert "| common | 0.5100 | 0.5100 | 0.6100 | 0.6050 |" in dev_table
    assert "| rare | 0.0000 ⚠ | 0.0000 ⚠ | 0.2000 | 0.0000 ⚠ |" in dev_table
    assert ("Warning: never predicted correctly on dev (F1 0 in every run): rare under base (3 of 3 runs); "
            "rare under better_on_test_only (3 of 3 runs); rare under two_seeds (2 of 2 runs).") in dev_table
    test_table = md.split("Per-class F1 on test", 1)[1]
    assert "| rare | 0.0000 ⚠ | 0.3000 | 0.0000 ⚠ | 0.0000 ⚠ |" in test_table, "one run of three above 0: no flag"
    assert rows["better_on_test_only"]["per_class_f1"]["test"]["rare"] == {
        "mean": pytest.approx(0.3), "runs": 3, "zero_in_every_run": False}


def test_per_class_f1_reads_the_entity_types_of_sequence_labeling():
    runs = [{"test": {"micro_f1": 0.5, "per_type": {"PER": {"f1": f, "precision": f, "recall": f, "support": 4},
                                                    "LOC": {"f1": 0.0, "precision": 0.0, "recall": 0.0, "support": 2}}}}
            for f in (0.4, 0.6)]
    assert sweep.per_class_f1(runs) == {"test": {
        "PER": {"mean": pytest.approx(0.5), "runs": 2, "zero_in_every_run": False},
        "LOC": {"mean": 0.0, "runs": 2, "zero_in_every_run": True}}}
    assert sweep.per_class_f1([{"dev": {"auc": 0.7}}]) == {}, "matching: no per-class table"


def test_the_book_judges_a_sweep_written_under_the_old_test_rule_again_on_dev(tmp_path):
    low, high = [0.50, 0.51, 0.52], [0.60, 0.61, 0.62]
    summary = sweep.summarise(planted_sweep(tmp_path / "out", {
        "base": [split_scores(d, t) for d, t in zip(low, low)],
        "better_on_test_only": [split_scores(d, t) for d, t in zip(low, high)]}))
    old = json.loads(json.dumps(summary))  # as the old rule wrote it: judged on test, no confirmation column
    for key in ("confirmation_metric", "min_seeds", "p_value"):
        del old[key]
    old["primary_metric"] = "test.macro_f1"
    for row, said in zip(old["settings"], ("baseline", "better")):
        row["verdict"] = said
        for key in ("verdict_p", "test_verdict", "test_verdict_p", "per_class_f1"):
            del row[key]
    folder = tmp_path / "old" / "sweep"
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text(json.dumps(old), encoding="utf-8")
    book = tmp_path / "book.md"
    assert results_book.main([str(folder), "--out", str(book)]) == 0
    text = book.read_text(encoding="utf-8")
    assert "Verdict on `dev.macro_f1`" in text and "Verdict on `test.macro_f1`" not in text
    assert re.search(r"\| better_on_test_only \| 3 \| .* \| tie \| 1\.000 \| better \| < 0\.001 \|", text), text
    assert "at least 3 finished seeds" in text and "confirmation on unseen data" in text
    assert "Per-class F1" not in text, "an old sweep.json has no per-class F1: no empty table"


def test_setting_names_are_readable_and_safe():
    assert sweep.setting_name({"model.loss.name": "focal"}) == "loss.name=focal"
    assert sweep.setting_name({"model.loss": {"name": "focal", "gamma": 1}}) == "loss=name-focal_gamma-1"
    assert sweep.setting_name({"model.loss.name": "ce", "trainer.learning_rate": 0.001}) == \
        "loss.name=ce__learning_rate=0.001"
    assert sweep.setting_name({"model.loss.alpha": [0.25, 0.75]}) == "loss.alpha=0.25-0.75"
    assert sweep.setting_name({"model.loss.alpha": "a/b c"}) == "loss.alpha=a_b_c"
    long = sweep.setting_name({"model.loss.name": "x" * 200})
    assert len(long) <= sweep.settings.MAX_NAME
    names = [s.name for s in sweep.grid([("model.loss.alpha", ["a/b", "a b"])])]
    assert names == ["loss.alpha=a_b", "loss.alpha=a_b-2"]


def test_values_split_on_commas_parse_as_json_or_come_from_a_json_list():
    axes = sweep.parse_axes(["model.loss.name=ce, focal", "trainer.learning_rate=1e-3,0.01"])
    assert axes == [("model.loss.name", ["ce", "focal"]), ("trainer.learning_rate", [0.001, 0.01])]
    assert [s.overrides for s in sweep.grid(axes)][:2] == [
        {"model.loss.name": "ce", "trainer.learning_rate": 0.001},
        {"model.loss.name": "ce", "trainer.learning_rate": 0.01}]
    assert sweep.parse_axes(['model.loss=[{"name":"focal","gamma":1},{"name":"dice"}]']) == [
        ("model.loss", [{"name": "focal", "gamma": 1}, {"name": "dice"}])]


def test_an_axis_of_several_keys_sets_them_together():
    axes = sweep.parse_axes(['model.type,model.loss=[["Crf", null], ["Fc", null], ["Fc", {"name": "dice"}]]',
                             "trainer.learning_rate=0.1,0.2"])
    assert axes[0] == (("model.type", "model.loss"), [["Crf", None], ["Fc", None], ["Fc", {"name": "dice"}]])
    settings = sweep.grid(axes)
    assert len(settings) == 6
    assert settings[0].overrides == {"model.type": "Crf", "model.loss": None, "trainer.learning_rate": 0.1}
    assert settings[5].overrides == {"model.type": "Fc", "model.loss": {"name": "dice"},
                                     "trainer.learning_rate": 0.2}
    assert settings[4].name == "type=Fc__loss=name-dice__learning_rate=0.1"


@pytest.mark.parametrize("flags, message", [
    (["--sweep", "model.loss.name=ce,focall"],
     r"sweep setting 'loss.name=focall': model\.loss\.name: 'focall' is not a registered loss; did you mean 'focal'"),
    (["--sweep", "modle.loss.name=ce,focal"], r"--sweep 'modle.loss.name=ce,focal': modle: unknown section; "
                                              r"did you mean 'model'"),
    (["--sweep", "model.loss.name"], r"expected KEY\.PATH=V1,V2"),
    (["--sweep", "model.loss.name=ce,,focal"], r"empty value"),
    (["--sweep", "model.loss.name=[ce, focal]"], r"not a JSON list"),
    (["--sweep", "model.loss.name=ce,ce"], r"the value \"ce\" is given twice"),
    (["--sweep", "trainer.seed=1,2"], r"trainer\.seed is set by the sweep"),
    (["--sweep", "model.loss=[]"], r"no values"),
    (["--sweep", "model.loss.name=ce", "--sweep", "model.loss=[{\"name\":\"ce\"}]"], r"overlaps another"),
    (["--sweep", "model.loss.name,model.dropout=ce,focal"], r"an axis of 2 keys takes a JSON list of lists"),
    (["--sweep", 'model.loss.name,model.dropout=[["ce", 0.1], ["focal"]]'],
     r"each value must be a list of 2 values \(model\.loss\.name, model\.dropout\), got \[\"focal\"\]"),
    (["--sweep", "model.loss.name,model.loss=[[1, 2]]"], r"overlaps another"),
    (["--sweep", 'model.dropout,model.lose.name=[[0.1, "ce"]]'],
     r"sweep setting 'dropout=0.1__lose.name=ce': model\.lose"),
    (["--sweep", "trainer.batch_size=8,-1"], r"sweep setting 'batch_size=-1': trainer\.batch_size: must be >= 1"),
    (["--sweep", "model.dropout=0.1,2"], r"sweep setting 'dropout=2': model\.dropout"),
    (["--seeds", "0"], r"--seeds: must be >= 1, got 0"),
])
def test_a_bad_sweep_is_one_line_before_any_run(flags, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(runner, "run", lambda plan, callbacks=(): pytest.fail("no run may start"))
    out = tmp_path / "out"
    assert run_trainer.main(tiny(out, *flags)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: ")
    assert re.search(message, err), err
    assert not out.exists(), "nothing is written"


def test_the_results_book_is_generated_from_sweep_folders(tiny_sweep, tmp_path, monkeypatch):
    out = tmp_path / "RESULTS.md"
    assert results_book.main([str(tiny_sweep), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    summary = read(tiny_sweep / "sweep.json")
    assert f"- Command: `{summary['command']}`" in text and "--sweep" in summary["command"]
    env = summary["environment"]
    assert env["cores"] >= 1 and "paddlepaddle" in env["versions"] and "paddlenlp" in env["versions"]
    assert f"{env['cpu']}, {env['cores']} cores" in text
    assert f"paddlepaddle {env['versions']['paddlepaddle']}" in text and "python 3." in text
    walls = [r["wall_time_s"] for row in summary["settings"] for r in row["runs"]]
    assert f"- Wall time: {sum(walls):.0f} s for 4 runs" in text
    assert "max_seq_len 64" in text and "2 training steps per run" in text
    assert sweep.markdown(summary).split("| setting |", 1)[1] in text, "the sweep's own table, unchanged"
    assert "\n\n\n" not in text

    registry = tmp_path / "book.md"  # the registered tables: each names its commands and anchors
    monkeypatch.setattr(results_book, "write_json", lambda *a: None)  # a sweep folder here must not touch the repo
    assert results_book.main(["--out", str(registry)]) == 0
    text = registry.read_text(encoding="utf-8")
    for table in results_book.TABLES:
        assert f"## {table['title']}" in text and table["anchors"] in text
        for s in table["sweeps"]:
            assert s["command"] in text
    assert "python benchmarks/get_data.py weibo" in text
    for recipe in os.listdir(results_book.RECIPES):
        assert f"| `{recipe}` |" in text, "every GPU recipe is listed"


def test_the_book_can_judge_another_key_metric_by_the_same_rule():
    def row(name, f1s):
        stats = {"mean": float(np.mean(f1s)), "std": float(np.std(f1s, ddof=1)), "n": len(f1s)}
        return {"setting": name, "runs": [{"metrics": {"test.auc": 0.8, "test.f1": f}} for f in f1s],
                "metrics": {"test.f1": stats}}

    summary = {"key_metrics": ["dev.auc", "test.auc", "test.f1"], "primary_metric": "test.auc",
               "greater_is_better": True, "seeds": [1, 2, 3],
               "settings": [row("ce", [0.80, 0.81, 0.82]), row("focal", [0.90, 0.91, 0.92]), row("dice", [0.81, 0.8]),
                            dict(row("ghm", [0.95, 0.96]), diverged=[{"seed": 3}])]}
    p = welch_reference([0.80, 0.81, 0.82], [0.90, 0.91, 0.92])
    assert results_book.also_verdicts(summary, "test.f1") == [
        f"Confirmation on `test.f1` by the same rule, against ce (test: not for choosing): focal: better (Welch p "
        f"{p:.3f}); dice: too few seeds (Welch p {welch_reference([0.80, 0.81, 0.82], [0.81, 0.8]):.3f}); "
        f"ghm: diverged 1 of 3.", ""]
    assert results_book.also_verdicts(summary, "test.auc") == [] and results_book.also_verdicts(summary, "x") == []


def test_a_kept_summary_without_its_folder_is_judged_again_from_its_recorded_statistics(tmp_path, monkeypatch):
    """The book on a machine without the sweep folders: the kept summary (here one written under the old rule,
    judged on test, its per-seed values not kept) is judged on dev from each setting's mean, std and n."""
    monkeypatch.setattr(results_book, "SUMMARIES", str(tmp_path))

    def row(name, dev, test):
        return {"setting": name, "n": 3, "runs": [], "diverged": [], "wall_time_s": {"mean": 10.0, "total": 30.0},
                "metrics": {"dev.micro_f1": {"mean": dev[0], "std": dev[1], "n": 3},
                            "test.micro_f1": {"mean": test[0], "std": test[1], "n": 3}}}

    kept = {"param_path": "p.json", "command": "python run_trainer.py ...", "seeds": [42, 43, 44],
            "metric_for_best": "micro_f1", "key_metrics": ["dev.micro_f1", "test.micro_f1"], "greater_is_better": True,
            "runs_finished": 6, "runs_diverged": 0, "runs_planned": 6, "sizes": "the sizes", "recorded": "4 decimals",
            "environment": {"cpu": "AMD EPYC", "cores": 2, "gpu": None, "versions": {"python": "3.11.7"}},
            "settings": [row("ce", (0.8857, 0.0032), (0.8445, 0.0010)), row("focal", (0.8814, 0.0034), (0.8384, 0.0025)),
                         row("crf", (0.9000, 0.0025), (0.8500, 0.0039))]}
    (tmp_path / "x.json").write_text(json.dumps(kept), encoding="utf-8")
    lines = results_book.sweep_section("output/bench/x/sweep", "python run_trainer.py ...", keep=True)
    text = "\n".join(lines)
    assert "- Summary: `" + str(tmp_path / "x.json") + "`, kept from the sweep folder; 4 decimals" in text
    assert "- Wall time: 90 s for 6 runs (15 s per run)" in text and "- Sizes: the sizes" in text
    from scipy.stats import ttest_ind_from_stats
    p_focal = ttest_ind_from_stats(0.8814, 0.0034, 3, 0.8857, 0.0032, 3, equal_var=False).pvalue
    p_test = ttest_ind_from_stats(0.8384, 0.0025, 3, 0.8445, 0.0010, 3, equal_var=False).pvalue
    assert f"| focal | 3 | 0.8814 ± 0.0034 | 0.8384 ± 0.0025 | 10.0 | tie | {p_focal:.3f} | worse | {p_test:.3f} |" in text, \
        "worse on test (the old verdict), a tie on dev (the one that chooses)"
    assert "| crf | 3 | 0.9000 ± 0.0025 | 0.8500 ± 0.0039 | 10.0 | better |" in text


def test_results_md_is_the_book_written_again_from_what_the_repository_keeps(tmp_path, monkeypatch):
    """On a machine without one sweep folder (a CI clone), the kept summaries and the sections the other
    benchmark scripts keep in benchmarks/results/ give back benchmarks/RESULTS.md byte for byte: no table
    of it stands only in the book."""
    with open(os.path.join("benchmarks", "RESULTS.md"), encoding="utf-8") as f:
        committed = f.read()
    for kept in (os.path.join("benchmarks", "results"), results_book.RECIPES):
        shutil.copytree(kept, tmp_path / kept)
    monkeypatch.chdir(tmp_path)
    assert not os.path.exists("output")
    written = results_book.book(results_book.TABLES)
    assert written.splitlines() == committed.splitlines(), "run python benchmarks/results_book.py and commit it"
    assert written == committed


def test_the_book_says_when_dev_is_carved_out_of_train(tmp_path):
    run = tmp_path / "seed-42"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({
        "dataset_reader": {"train": "t.txt", "dev": "t.txt", "dev_from_train": 0.05, "split_seed": 13,
                           "test": "x.txt", "max_seq_len": 128},
        "model": {"encoder": {"config": "configs/ernie_tiny.json"}}, "trainer": {"epochs": 1, "batch_size": 64}}))
    (run / "metrics.json").write_text(json.dumps({"train": {"steps": 752}}))
    text = results_book.sizes({"settings": [{"runs": [{"folder": str(run)}]}]})
    assert text.startswith("train `t.txt`, dev 0.05 of train (dev_from_train, split_seed 13), test `x.txt`; "
                           "max_seq_len 128;")
    assert text.endswith("1 epoch(s), batch size 64, 752 training steps per run")


def test_the_book_shows_a_recipe_result_once_its_run_left_metrics(tmp_path):
    recipes = tmp_path / "reproduce"
    recipes.mkdir()
    for name, out in (("ner_weibo_x.json", "ran"), ("mtch_lcqmc_x.json", "never")):
        (recipes / name).write_text(json.dumps({
            "model": {"type": "ErnieCrfSeqLabel", "encoder": {"pretrained": "ernie-3.0-base-zh"}},
            "trainer": {"output_dir": str(tmp_path / out), "epochs": 10, "batch_size": 16, "learning_rate": 5e-5,
                        "amp": "bf16"}}))
    (tmp_path / "ran").mkdir()
    (tmp_path / "ran" / "metrics.json").write_text(json.dumps({"test": {"micro_f1": 0.68123, "loss": 1.0}}))
    rows = {line.split("|")[1].strip(): line for line in results_book.recipes_section(str(recipes))
            if line.startswith("| `")}
    assert rows["`ner_weibo_x.json`"].endswith("| test: micro_f1 0.6812 |")
    assert "`get_data.py weibo`" in rows["`ner_weibo_x.json`"] and "10 × 16, 5e-05, bf16" in rows["`ner_weibo_x.json`"]
    assert "not run (no " in rows["`mtch_lcqmc_x.json`"] and "no pinned source" in rows["`mtch_lcqmc_x.json`"]
