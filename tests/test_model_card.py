"""MODEL_CARD.md and run_record.json (appzoo/reports/card.py, record.py) and --do reproduce (appzoo/run/reproduce.py),
on one short run trained from a copy of data/cls whose class 'tech' is renamed to a label full of Markdown and HTML."""
import hashlib
import json
import os

import numpy as np
import pytest
from sklearn.metrics import f1_score

import browser
import run_trainer
from appzoo.utils.markdown import literal
from conftest import read_jsonl
from test_markdown_escaping import assert_shows_no_html


HOSTILE = "<b>te|ch</b> *x*"
EXAMPLE = "examples/cls_ernie_fc_with_focal.json"
#: enough steps at a high rate that the model predicts several classes (an interval of one class says little)
FAST = ["--set", "trainer.max_steps=12", "--set", "trainer.learning_rate=0.003", "--set", "trainer.progress_bar=false",
        "--set", "trainer.plots=false", "--set", "trainer.batch_size=64"]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """``(run folder, data folder)``: a run trained, evaluated and predicted from the copied data."""
    root = tmp_path_factory.mktemp("card")
    data = root / "data"
    data.mkdir()
    for name in ("train", "dev", "test", "predict"):
        text = read(f"data/cls/{name}.tsv").replace("\ttech\n", f"\t{HOSTILE}\n")
        (data / f"{name}.tsv").write_text(text, encoding="utf-8")
    out = str(root / "run")
    sets = [f"dataset_reader.{s}={data}/{s}.tsv" for s in ("train", "dev", "test", "predict")]
    argv = ["--param_path", EXAMPLE, "--set", f"trainer.output_dir={out}", *FAST,
            *[a for s in sets for a in ("--set", s)]]
    assert run_trainer.main(argv) == 0
    return out, data, argv


@pytest.mark.slow  # trains
def test_the_record_is_versioned_and_the_card_is_escaped_and_holds_the_bootstrap_interval(run):
    out, data, argv = run
    record = json.loads(read(os.path.join(out, "run_record.json")))
    metrics = json.loads(read(os.path.join(out, "metrics.json")))
    assert record["record_version"] == 1 and record["do"] == ["train", "eval", "predict"]
    assert record["command"]["argv"] == argv and record["command"]["overrides"][0] == f"trainer.output_dir={out}"
    assert record["labels"] == sorted(["finance", "health", "sports", HOSTILE])
    train = record["data"]["train"]
    assert train["sha256"] == hashlib.sha256((data / "train.tsv").read_bytes()).hexdigest()
    assert train["examples"] == 1200 and sum(train["classes"].values()) == 1200 and train["classes"][HOSTILE] == 171
    assert record["data"]["test"]["examples"] == 300
    encoder = hashlib.sha256(open("configs/ernie_tiny.json", "rb").read()).hexdigest()
    assert record["files"] == {"model.encoder.config": {"path": "configs/ernie_tiny.json", "sha256": encoder,
                                                        "abs_path": os.path.abspath("configs/ernie_tiny.json")}}
    assert record["metrics"]["test"]["scalars"]["macro_f1"] == metrics["test"]["macro_f1"]
    assert record["metrics"]["dev"]["per_class_f1"][HOSTILE] == metrics["dev"]["per_class"][HOSTILE]["f1"]
    assert record["versions"]["paddle"] and record["machine"]["cores"] >= 1 and record["wall_time_s"] > 0
    groups = record["parameter_groups"]  # appzoo.run.param_groups: no rate key set, one rate for both
    assert [(g["name"], g["holds"], g["peak_learning_rate"]) for g in groups] == [
        ("encoder", ["encoder"], 0.003), ("head", ["classifier"], 0.003)]
    assert groups == metrics["train"]["parameter_groups"] and groups[1]["parameters"] == 128 * 4 + 4

    # the interval, recomputed here with scikit-learn's F1 on the same seeded resamples of predictions/test.jsonl
    head = record["headline"]
    assert (head["split"], head["metric"], head["resamples"], head["seed"]) == ("test", "macro_f1", 1000, 0)
    rows = read_jsonl(os.path.join(out, "predictions", "test.jsonl"))
    gold, pred = np.array([r["gold"] for r in rows]), np.array([r["label"] for r in rows])
    assert len(set(pred)) > 1, "a model of one class: train longer, or the interval tests little"
    rng = np.random.default_rng(0)
    values = [f1_score(gold[i], pred[i], labels=record["labels"], average="macro", zero_division=0)
              for i in (rng.integers(0, len(rows), len(rows)) for _ in range(1000))]
    np.testing.assert_allclose(head["ci"], np.percentile(values, [2.5, 97.5]), rtol=1e-12)
    assert head["ci"][0] < head["value"] < head["ci"][1]

    card = read(os.path.join(out, "MODEL_CARD.md"))
    assert card.startswith("---\nlicense: unknown\nlibrary_name: appzoo\n")
    low, high = head["ci"]
    assert (f"test macro_f1 = {head['value']:.4f}, 95% interval [{low:.4f}, {high:.4f}]: percentile bootstrap over "
            f"the 300 test examples' saved predictions, 1000 resamples, seed 0.") in card
    assert literal(HOSTILE) == "&lt;b&gt;te\\|ch&lt;/b&gt; \\*x\\*"
    assert f"| {literal(HOSTILE)} | 171 | 39 | 42 |" in card
    assert "| head | classifier | 516 | 0.003 |" in card
    assert "## Learning rates" in read(os.path.join(out, "report.md"))
    assert HOSTILE not in card and "<" not in card.replace("`predictions/<split>.jsonl`", "")  # its own code span
    assert_shows_no_html(card.split("---\n", 2)[2])
    assert f"`{train['sha256']}`" in card and literal(" ".join(["python", "run_trainer.py", *argv])) in card


@pytest.mark.slow  # trains
def test_the_server_shows_the_card_and_report_html_links_and_holds_it(run, tmp_path):
    from fastapi.testclient import TestClient

    from appzoo.params.serve import ServeConfig
    from appzoo.serve.app import create_app

    out, _, _ = run
    card = read(os.path.join(out, "MODEL_CARD.md"))
    record = json.loads(read(os.path.join(out, "run_record.json")))
    app = create_app({"m": os.path.join(out, "best")}, ServeConfig(engine="dygraph"), 1, load=False)
    app.state.models.load()  # in this thread: no wait for the loading one
    client = TestClient(app)
    answer = client.get("/v2/models/m")
    shown = answer.json()["model_card"]
    assert answer.status_code == 200 and shown["record_version"] == 1 and shown["labels"] == record["labels"]
    assert shown["headline"] == record["headline"] and shown["data"]["train"]["file"] == "train.tsv"
    assert shown["data"]["test"]["sha256"] == record["data"]["test"]["sha256"]
    assert os.path.dirname(out) not in answer.text  # a model is named, never located (docs/serving.md)

    reason = browser.missing()
    if reason:
        pytest.skip(f"no browser can run here: {reason}")
    driver = browser.chromium()
    try:
        browser.screenshot(driver, os.path.join(out, "report.html"), str(tmp_path / "closed.png"))
        assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        low, high = record["headline"]["ci"]
        assert driver.find_element("id", "card-headline").text.startswith(
            f"test macro_f1 {record['headline']['value']:.4f}, 95% interval [{low:.4f}, {high:.4f}]")
        link = driver.find_element("id", "card-link")
        assert link.get_attribute("href") == "file://" + os.path.join(out, "MODEL_CARD.md")
        text = driver.find_element("css selector", "#card pre")
        assert not text.is_displayed()
        driver.find_element("css selector", "#card summary").click()
        assert text.is_displayed() and text.text.strip() == card.strip()
        # what a person sees of it (APPZOO_CARD_SCREENSHOT=PATH keeps the picture)
        driver.find_element("id", "model-card").screenshot(str(tmp_path / "heading.png"))
        keep = os.environ.get("APPZOO_CARD_SCREENSHOT", str(tmp_path / "open.png"))
        driver.find_element("id", "card").screenshot(keep)
    finally:
        driver.quit()


@pytest.mark.slow  # trains
def test_reproduce_gives_bit_identical_metrics_and_refuses_a_changed_data_file(run, capsys):
    out, data, _ = run
    config = os.path.join(out, "config.json")
    # a later eval rewrites the record; it keeps what trained the run
    assert run_trainer.main(["--param_path", config, "--do", "eval"]) == 0
    assert json.loads(read(os.path.join(out, "run_record.json")))["do"] == ["eval"]
    capsys.readouterr()
    assert run_trainer.main(["--param_path", config, "--do", "reproduce"]) == 0
    again = os.path.join(out, "reproduce", "1")
    printed = capsys.readouterr().out
    assert f"reproduce: bit-identical: the 24 dev and test metrics of {again} equal those recorded in {out}" in printed
    comparison = json.loads(read(os.path.join(again, "reproduce.json")))
    assert comparison["verdict"] == "bit-identical" and comparison["environment_differences"] == {}
    before, after = (json.loads(read(os.path.join(d, "metrics.json"))) for d in (out, again))
    for split in ("dev", "test"):
        assert {k: v for k, v in after[split].items() if k != "class_warnings"} == \
               {k: v for k, v in before[split].items() if k != "class_warnings"}

    train = data / "train.tsv"
    kept = train.read_bytes()
    old = hashlib.sha256(kept).hexdigest()
    try:
        train.write_bytes(kept + "新的一行\tfinance\n".encode("utf-8"))
        new = hashlib.sha256(train.read_bytes()).hexdigest()
        assert run_trainer.main(["--param_path", config, "--do", "reproduce"]) == 2
    finally:
        train.write_bytes(kept)
    err = capsys.readouterr().err
    assert err == (f"error: --do reproduce: dataset_reader.train: {train} changed since the run in {out} "
                   f"(recorded sha256 {old}, now {new}); reproduce on the same data\n")
    assert sorted(os.listdir(os.path.join(out, "reproduce"))) == ["1"]  # nothing written for the refused one


@pytest.mark.slow  # trains (the module's one run, shared with the tests above)
def test_reproduce_refuses_a_param_file_whose_settings_differ_from_the_runs(run, tmp_path, capsys, monkeypatch):
    out, data, _ = run
    config = os.path.join(out, "config.json")
    reproductions = os.path.join(out, "reproduce")
    done = sorted(os.listdir(reproductions)) if os.path.isdir(reproductions) else []
    # the example the run was made from, without the run's --set: the reproduction would silently ignore them
    assert run_trainer.main(["--param_path", EXAMPLE, "--set", f"trainer.output_dir={out}", "--do", "reproduce"]) == 2
    assert capsys.readouterr().err == (
        f"error: --do reproduce: {EXAMPLE}: dataset_reader.dev is {os.path.abspath('data/cls/dev.tsv')!r}, but the "
        f"run in {out} was trained with {str(data / 'dev.tsv')!r} ({config}); a reproduction re-runs the recorded "
        f"settings, so give its config.json as --param_path; to train with these settings, run without --do "
        f"reproduce\n")
    # a copy of the run's settings that differs in one key deep in a section
    settings = json.loads(read(config))
    settings["model"]["loss"]["gamma"] = 5.0
    other = tmp_path / "other.json"
    other.write_text(json.dumps(settings), encoding="utf-8")
    assert run_trainer.main(["--param_path", str(other), "--do", "reproduce"]) == 2
    assert f"error: --do reproduce: {other}: model.loss.gamma is 5.0, but the run in {out} was trained with " \
           in capsys.readouterr().err
    assert (sorted(os.listdir(reproductions)) if os.path.isdir(reproductions) else []) == done  # nothing written

    # the same settings from another file (and another output_dir, set back by --set) pass on to the re-run
    class Reached(Exception):
        pass

    def reached(plan):
        raise Reached(plan.trainer.output_dir)

    settings = json.loads(read(config))
    settings["trainer"]["output_dir"] = "elsewhere"
    same = tmp_path / "same.json"
    same.write_text(json.dumps(settings), encoding="utf-8")
    monkeypatch.setattr("appzoo.run.reproduce.run", reached)
    with pytest.raises(Reached):
        run_trainer.main(["--param_path", str(same), "--set", f"trainer.output_dir={out}", "--do", "reproduce"])


def test_the_auc_bootstrap_is_scikit_learns_auc_on_each_resample():
    from sklearn.metrics import roc_auc_score

    from appzoo.metrics.bootstrap import auc_statistic, interval

    rng = np.random.default_rng(3)
    gold = np.array([1] * 4 + [0] * 26)  # few positives: some resamples hold none
    scores = np.round(rng.random(30) + 0.3 * gold, 1)  # rounded: ties
    auc = auc_statistic(gold, scores)
    draws = np.random.default_rng(0)
    values = []
    for _ in range(300):
        i = draws.integers(0, 30, 30)
        if len(set(gold[i])) < 2:
            assert auc(i) is None
            continue
        values.append(roc_auc_score(gold[i], scores[i]))
        assert auc(i) == pytest.approx(values[-1], abs=1e-12)
    ci, undefined = interval(auc, 30, resamples=300)
    assert 0 < undefined == 300 - len(values)
    np.testing.assert_allclose(ci, np.percentile(values, [2.5, 97.5]), rtol=1e-12)


def test_reproduce_without_a_record_or_with_another_mode_is_one_line(tmp_path, capsys):
    out = tmp_path / "never trained"
    out.mkdir()
    assert run_trainer.main(["--param_path", EXAMPLE, "--set", f"trainer.output_dir={out}", "--do", "reproduce"]) == 2
    assert capsys.readouterr().err == (
        f"error: --do reproduce: {str(out)!r} has no run_record.json (written by every run that trains); give the "
        f"run's folder as trainer.output_dir, or its config.json as --param_path\n")
    assert run_trainer.main(["--param_path", EXAMPLE, "--do", "reproduce,eval"]) == 2
    assert capsys.readouterr().err == (
        "error: --do 'reproduce,eval': reproduce runs alone (it re-runs the finished run in trainer.output_dir into "
        "a new folder); run the other modes first, then --do reproduce\n")
    assert os.listdir(out) == []


def test_reproduce_refuses_a_set_other_than_the_output_dir(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["--param_path", EXAMPLE, "--set", f"trainer.output_dir={out}", "--set", "trainer.seed=1",
            "--set", "model.loss.gamma=3", "--do", "reproduce"]
    assert run_trainer.main(argv) == 2
    assert capsys.readouterr().err == (
        f"error: --do reproduce: --set trainer.seed=1 --set model.loss.gamma=3: a reproduction re-runs the recorded "
        f"settings ({out}/config.json); only trainer.output_dir, which names the run, may be set; to train with "
        f"other settings, run without --do reproduce\n")
    assert not out.exists()


def test_a_reproduction_elsewhere_states_each_difference():
    from appzoo.run.reproduce import compare

    def record(paddle, f1, seconds):
        return {"versions": {"paddle": paddle}, "machine": {"cpu": "x", "cores": 2}, "git": {"commit": "abc"},
                "metrics": {"test": {"scalars": {"macro_f1": f1, "accuracy": 0.5, "eval_time_s": seconds}}}}

    same = compare(record("3.3.1", 0.25, 1.0), record("3.3.1", 0.25, 2.0), "run", "run/reproduce/1")
    assert same["verdict"] == "bit-identical" and "eval_time_s" not in same["metrics"]["test"]  # timings not compared
    moved = compare(record("3.3.1", 0.25, 1.0), record("3.4.0", 0.25, 1.0), "run", "run/reproduce/1")
    assert moved["verdict"] == "identical metrics" and moved["summary"] == [
        "reproduce: identical metrics: 0 of 2 dev and test metrics of run/reproduce/1 differ from those recorded in "
        "run", "  differs: versions.paddle: recorded '3.3.1', now '3.4.0'"]
    drifted = compare(record("3.3.1", 0.25, 1.0), record("3.3.1", 0.5, 1.0), "run", "run/reproduce/1")
    assert drifted["verdict"] == "different" and drifted["summary"][1] == \
        "  test macro_f1: recorded 0.25, now 0.5 (+0.25)"
    assert drifted["metrics"]["test"]["macro_f1"]["difference"] == 0.25


def test_the_cards_wording_reads_right():
    """Issue 42, item 28: a version as its release is named, no "every class has at least N" as a limitation,
    and a teacher's scores beside the student's."""
    from appzoo.reports import card

    assert card._release("2.8.1.post") == "2.8.1" and card._release("3.3.1") == "3.3.1"
    record = {"limitations": {"few_training_examples": {}, "few_threshold": 20, "rarest_in_training": {},
                              "training_examples": 10, "longer_than_max_seq_len": {}},
              "data": {"train": {"examples": 10}}, "max_seq_len": 8}
    limits = card._limitations(record)
    assert not any("every class has at least" in line for line in limits)
    assert limits[2] == "- none found: no class with fewer than 20 training examples, no input longer than max_seq_len"
