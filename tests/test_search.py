"""--search: the ranges, checked before the first trial; pruning and divergence; a study killed with
SIGKILL and continued by two workers at once; trials as Ray tasks (appzoo/search/, appzoo/experiments/ray.py)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from appzoo.search.space import parse_dimension
from conftest import read_json

EXAMPLE = "examples/cls_ernie_fc_ch.json"
TRIAL = {"max_steps": 30, "eval_steps": 10, "logging_steps": 10, "progress_bar": False, "plots": False}
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def param_file(tmp_path, search=None, name="params.json", **trainer):
    """The classification example, trained TRIAL's few steps into tmp_path/out, with ``search``."""
    config = read_json(EXAMPLE)
    config["trainer"].update(**{"output_dir": str(tmp_path / "out"), **TRIAL, **trainer})
    if search is not None:
        config["search"] = search
    path = tmp_path / name
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


def main(*argv):
    import run_trainer

    return run_trainer.main(list(argv))


# ---- ranges
def test_each_kind_of_range_parses_and_says_what_it_holds():
    lr = parse_dimension("trainer.learning_rate", "log_uniform(1e-5, 1e-3)", "w")
    assert (lr.kind, lr.low, lr.high) == ("log_uniform", 1e-5, 1e-3)
    assert lr.contains(1e-4) and not lr.contains(1e-2) and not lr.contains("0.001") and not lr.contains(True)
    steps = parse_dimension("trainer.warmup_steps", "int(0, 50)", "w")
    assert steps.extremes() == [0, 50] and steps.contains(7) and not steps.contains(7.5)
    loss = parse_dimension("model.loss", 'choice({"name": "focal", "gamma": 1}, {"name": "ce"})', "w")
    assert loss.choices == ({"name": "focal", "gamma": 1}, {"name": "ce"}) and not loss.plain()
    assert loss.optuna_choices() == ['{"gamma": 1, "name": "focal"}', '{"name": "ce"}']
    plain = parse_dimension("trainer.sampler", "choice(random, balanced, null)", "w")
    assert plain.choices == ("random", "balanced", None) and plain.plain()


BAD = [
    (["--search", "trainer.learning_rate=log_uniform(1e-3,1e-5)"],
     "--search 'trainer.learning_rate=log_uniform(1e-3,1e-5)': LOW must be below HIGH, got log_uniform(1e-3, 1e-5)"),
    (["--search", "trainer.learning_rate=log_uniform(0,1e-3)"],
     "--search 'trainer.learning_rate=log_uniform(0,1e-3)': log_uniform needs 0 < LOW, got 0 (use uniform for a "
     "range from 0)"),
    (["--search", "trainer.learning_rate=loguniform(1e-5,1e-3)"],
     "--search 'trainer.learning_rate=loguniform(1e-5,1e-3)': 'loguniform' is not a kind of range; did you mean "
     "'log_uniform'? (accepted: log_uniform, uniform, int, choice)"),
    (["--search", "trainer.batch_size=int(8,sixty)"],
     "--search 'trainer.batch_size=int(8,sixty)': int takes numbers, got 'sixty'"),
    (["--search", "trainer.learnin_rate=log_uniform(1e-5,1e-3)"],
     "search trainer.learnin_rate=log_uniform(1e-5,1e-3): with 1e-05: trainer.learnin_rate: unknown key for "
     "'trainer'; did you mean 'learning_rate'?"),
    (["--search", "trainer.warmup_proportion=uniform(0,1.5)"],
     "search trainer.warmup_proportion=uniform(0,1.5): with 1.5: trainer.warmup_proportion: must be in [0, 1), "
     "got 1.5"),
    (["--search", "model.loss.name=choice(ce,focall)"],
     "search model.loss.name=choice(ce,focall): with \"focall\": model.loss.name: 'focall' is not a registered "
     "loss; did you mean 'focal'?"),
    (["--search", "trainer.output_dir=choice(a,b)"],
     "--search 'trainer.output_dir=choice(a,b)': trainer.output_dir is set by the search for each trial (the "
     "trials go under trainer.output_dir/search/)"),
    (["--search", "serve.port=int(1,9)"],
     "--search 'serve.port=int(1,9)': serve: not a section a search can vary (accepted: dataset_reader, model, "
     "trainer)"),
    (["--search"], "--search: no search space: give --search KEY=SPACE (e.g. --search "
                   "trainer.learning_rate=log_uniform(1e-5,1e-3)) or a search.space section in the param file"),
    (["--search", "trainer.learning_rate=log_uniform(1e-5,1e-3)", "--trials", "0"],
     "search.trials: must be >= 1, got 0"),
    (["--trials", "3"], "--trials and --timeout belong to --search"),
    (["--search", "trainer.seed=int(1,3)", "--cpus-per-trial", "2"],
     "--cpus-per-trial belongs to --backend ray (trials and runs as Ray tasks); add --backend ray, or leave it out"),
    (["--search", "trainer.seed=int(1,3)", "--backend", "ray", "--cpus-per-trial", "0"],
     "--cpus-per-trial: must be > 0, got 0"),
    (["--search", "trainer.seed=int(1,3)", "--set", "trainer.num_threads=1", "--timeout", "-5"],
     "search.timeout_s: must be > 0, got -5.0"),
    (["--search", "trainer.seed=int(1,3)", "--sweep", "trainer.seed=1,2"],
     "--search and --sweep are two ways to choose settings; give one of them"),
    (["--search", "trainer.learning_rate=log_uniform(1e-5,1e-3)",
      "--search", "trainer.learning_rate=uniform(1e-4,1e-3)"],
     "--search 'trainer.learning_rate=uniform(1e-4,1e-3)': trainer.learning_rate overlaps another --search key "
     "trainer.learning_rate; give each key once"),
]


@pytest.mark.parametrize("argv, message", BAD, ids=[m[:40] for _, m in BAD])
def test_a_bad_search_is_one_line_before_any_trial(argv, message, tmp_path, capsys):
    path = param_file(tmp_path)
    assert main("--param_path", path, *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: {message}") or err.startswith(f"error: {message}"), err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_search_under_the_data_parallel_launcher_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "2")
    assert main("--param_path", param_file(tmp_path), "--search", "trainer.seed=int(1,3)") == 2
    assert capsys.readouterr().err == ("error: --search runs each trial in one process; start it without "
                                       "paddle.distributed.launch (two workers of one study: the same command "
                                       "twice, or --backend ray)\n")


def test_a_bad_search_section_is_named_by_its_key_path_when_any_run_is_planned(tmp_path, capsys):
    path = param_file(tmp_path, search={"trails": 5})
    assert main("--param_path", path) == 2  # a plain run, not --search
    assert capsys.readouterr().err == (f"error: {path}: search.trails: unknown key for 'search'; did you mean "
                                       f"'trials'? (accepted: pruner, sampler, seed, space, start_with, "
                                       f"startup_trials, timeout_s, trials)\n")
    path = param_file(tmp_path, search={"space": {"trainer.learning_rate": "uniform(1e-4, 1e-3)"},
                                        "start_with": [{"trainer.learning_rate": 0.01}]})
    assert main("--param_path", path, "--search") == 2
    assert capsys.readouterr().err == (f"error: {path}: search.start_with[0].trainer.learning_rate: 0.01 is "
                                       f"outside uniform(1e-4, 1e-3)\n")


# ---- one worker: pruning, divergence, the results
def test_pruning_stops_a_plainly_bad_learning_rate_and_a_diverged_trial_is_recorded(tmp_path, capsys):
    """Trial 0 (a good rate) finishes; trial 1's rate of 20 leaves it at chance and the median pruner
    stops it before its last step; trial 2's rate of 1e12 makes the loss NaN: recorded, not fatal."""
    rates = [0.005, 20.0, 1e12]
    path = param_file(tmp_path, max_steps=20, eval_steps=5, search={
        "space": {"trainer.learning_rate": "choice(0.005, 20.0, 1e12)"}, "trials": 3, "startup_trials": 1,
        "start_with": [{"trainer.learning_rate": r} for r in rates]})
    assert main("--param_path", path, "--search") == 0
    root = tmp_path / "out" / "search"
    summary = read_json(root / "search.json")
    states = [(t["trial"], t["params"]["trainer.learning_rate"], t["state"]) for t in summary["trials"]]
    assert states == [(0, 0.005, "finished"), (1, 20.0, "pruned"), (2, 1e12, "diverged")]
    good, bad, nan = summary["trials"]
    assert good["steps"] == 20 and list(good["reports"]) == ["5", "10", "15", "20"]
    assert bad["pruned_at_step"] < 20 and bad["steps"] == bad["pruned_at_step"]
    assert float(bad["reports"][str(bad["pruned_at_step"])]) < good["reports"][str(bad["pruned_at_step"])]
    assert "not finite" in nan["error"] and (root / "trial-0002" / "diverged.json").exists()
    # the best trial, chosen on dev, evaluated on test; its settings a complete param file
    best = summary["best"]
    assert best["trial"] == 0 and best["value"] == good["value"] and "macro_f1" in best["test"]
    assert read_json(root / "trial-0000" / "metrics.json")["test"]["macro_f1"] == best["test"]["macro_f1"]
    params = read_json(root / "best-params.json")
    assert params["trainer"]["learning_rate"] == 0.005 and "search" not in params
    from appzoo.run.plan import validate

    assert validate(params).trainer.output_dir == str(root / "best-run")
    assert "--sweep" in summary["confirm"] and "best-params.json" in summary["confirm"]
    text = (root / "search.md").read_text(encoding="utf-8")
    assert "## Best trial: 0" in text and "pruned at step" in text and "| 2 | diverged |" in text
    assert (root / "search.png").stat().st_size > 10_000
    out = "".join(capsys.readouterr())
    assert "search: trial 1 pruned at step" in out and "search: trial 2 diverged" in out


def test_a_study_of_another_space_is_refused(tmp_path, capsys):
    """The study in the folder is continued only by the same search (the killed study below is continued
    by the same command); a spent time budget makes the study without training a trial."""
    path = param_file(tmp_path)
    space = "trainer.learning_rate=log_uniform(1e-3,1e-2)"
    assert main("--param_path", path, "--search", space, "--timeout", "0.001") == 0
    assert main("--param_path", path, "--search", space, "--timeout", "0.001") == 0  # the same: continued
    capsys.readouterr()
    assert main("--param_path", path, "--search", "trainer.learning_rate=log_uniform(1e-4,1e-2)") == 2
    db = tmp_path / "out" / "search" / "study.db"
    assert capsys.readouterr().err == (
        f"error: {path}: --search: {db} holds a study of macro_f1 over {{\"trainer.learning_rate\": "
        f"\"log_uniform(1e-3,1e-2)\"}}; this search is of macro_f1 over {{\"trainer.learning_rate\": "
        f"\"log_uniform(1e-4,1e-2)\"}}; search the same space to continue it, or set trainer.output_dir to "
        f"another folder\n")


# ---- several workers
def _search(path, trials, log):
    return subprocess.Popen([sys.executable, "run_trainer.py", "--param_path", path, "--search",
                             "trainer.learning_rate=log_uniform(1e-3,1e-2)", "--trials", str(trials)],
                            stdout=log, stderr=subprocess.STDOUT, env=ENV, start_new_session=True)


def _wait_for(predicate, what, process, deadline_s=240):
    deadline = time.time() + deadline_s
    while not predicate():
        assert process.poll() is None, f"the search ended before {what}"
        assert time.time() < deadline, f"no {what} in {deadline_s} s"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_search_killed_with_sigkill_is_continued_by_two_workers_without_running_a_trial_twice(tmp_path):
    """Worker A is killed (SIGKILL) while its trial 1 trains, past a checkpoint. Two workers, B and C,
    started at once with the same command, continue the study: trial 1 is queued again and continues from
    its checkpoint in its own folder; the study ends with exactly its 3 trials, each run by one worker."""
    path = param_file(tmp_path, max_steps=20, eval_steps=5)
    root = tmp_path / "out" / "search"
    checkpoints = root / "trial-0001" / "checkpoints"
    with open(tmp_path / "a.log", "wb") as log:
        a = _search(path, 3, log)
        try:
            _wait_for(lambda: checkpoints.is_dir() and any(p.name.startswith("step-") for p in checkpoints.iterdir()),
                      "checkpoint of trial 1", a)
            killed_at = max(int(p.name[5:]) for p in checkpoints.iterdir() if p.name.startswith("step-"))
        finally:
            os.killpg(a.pid, signal.SIGKILL)
            a.wait()
    logs = [open(tmp_path / f"{name}.log", "wb") for name in "bc"]
    try:
        workers = [_search(path, 3, log) for log in logs]
        codes = [w.wait(timeout=300) for w in workers]
    finally:
        for log in logs:
            log.close()
    output = "".join((tmp_path / f"{name}.log").read_text(errors="replace")[-3000:] for name in "bc")
    assert codes == [0, 0], output
    summary = read_json(root / "search.json")
    trials = {t["trial"]: t for t in summary["trials"]}
    abandoned = trials[1]
    assert abandoned["state"] == "abandoned", output
    twin = trials[abandoned["continued_by"]]
    assert twin["continues"] == 1 and twin["folder"] == abandoned["folder"] and twin["state"] == "finished"
    assert twin["params"] == abandoned["params"]
    # it continued from the checkpoint: it evaluated only the steps after it, and its log has no step twice
    assert min(int(step) for step in twin["reports"]) > killed_at
    from conftest import read_jsonl

    steps = [row["step"] for row in read_jsonl(os.path.join(twin["folder"], "train_log.jsonl")) if "loss" in row]
    assert len(steps) == len(set(steps)) and max(steps) == twin["steps"]
    # the study has its 3 trials, none run twice, the two after the kill shared by B and C
    counted = [t for t in summary["trials"] if t["state"] != "abandoned"]
    assert len(counted) == 3 and all(t["state"] == "finished" for t in counted)
    assert len({t["folder"] for t in counted}) == 3
    after = [t for t in counted if t["trial"] > 1]
    assert len({t["worker"] for t in after}) == 2, [(t["trial"], t["worker"]) for t in after]
    assert summary["best"]["test"]


# ---- Ray
@pytest.mark.slow
def test_ray_runs_two_trials_and_a_sweep_as_tasks_on_a_local_cluster_of_two_cpus(tmp_path):
    """A local Ray cluster of this machine's cores (2 in CI; one paddle thread per task): a search of 2
    trials, then a sweep of 2 runs; each trial or run in a Ray worker process, not in the driver."""
    path = param_file(tmp_path, max_steps=10, eval_steps=5)
    script = (
        "import sys, run_trainer\n"
        "base = ['--param_path', sys.argv[1], '--backend', 'ray', '--cpus-per-trial', '1']\n"
        "assert run_trainer.main([*base, '--search', 'trainer.learning_rate=log_uniform(1e-3,1e-2)',"
        " '--trials', '2']) == 0\n"
        "assert run_trainer.main([*base, '--sweep', 'model.loss.name=ce,focal']) == 0\n")
    done = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=400,
                          env=ENV)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    search = read_json(tmp_path / "out" / "search" / "search.json")
    assert [t["state"] for t in search["trials"]] == ["finished", "finished"]
    sweep = read_json(tmp_path / "out" / "sweep" / "sweep.json")
    assert [s["setting"] for s in sweep["settings"]] == ["loss.name=ce", "loss.name=focal"]
    # the trials' and runs' lines come from Ray's task processes, prefixed with the task's name
    assert output.count("(_trial_task pid=") >= 2 and output.count("(_sweep_task pid=") >= 2, output[-4000:]


@pytest.mark.parametrize("package, argv, message", [
    ("optuna", [], "--search needs the optuna package: pip install optuna==5.0.0"),
    ("ray", ["--backend", "ray"], "--backend ray needs the ray package: pip install 'appzoo[ray]' (or pip install "
                                  "ray==2.60.0)"),
])
def test_a_missing_optional_package_is_one_line(package, argv, message, tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == package else real(name, *a))
    path = param_file(tmp_path)
    assert main("--param_path", path, "--search", "trainer.learning_rate=log_uniform(1e-3,1e-2)", *argv) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / "out").exists()


def test_a_trial_is_never_pruned_at_its_last_evaluation():
    """Stopping at the last evaluation saves nothing and would drop a finished model from the choice of best
    (seen in the TNEWS benchmark); before it, the pruner's word stops the training."""
    import types

    from appzoo.search.study import ReportToTrial

    class Trial:  # a pruner that always says stop
        def __init__(self):
            self.reports = []

        def report(self, value, step):
            self.reports.append((step, value))

        def should_prune(self):
            return True

    for step, pruned in ((40, True), (160, False)):
        state = types.SimpleNamespace(global_step=step, total_steps=160, should_stop=False)
        trainer = types.SimpleNamespace(metric="macro_f1", state=state)
        callback = ReportToTrial(Trial())
        callback.on_evaluate(trainer, {"macro_f1": 0.25})
        assert callback.trial.reports == [(step, 0.25)]
        assert (state.should_stop, callback.pruned_at) == ((True, step) if pruned else (False, None))


def test_a_trial_that_fails_on_the_data_is_recorded_once_another_has_got_through(tmp_path, capsys, monkeypatch):
    """A setting the data cannot take (a loss that needs every class, say) fails its trial, recorded, and the
    search goes on; while no trial has got through, such an error stops the search in one line (every
    trial would most likely fail the same way)."""
    from appzoo.run import runner
    from appzoo.errors import DataError

    real = runner.run

    def run(plan, callbacks=()):
        if plan.trainer.learning_rate == 0.004:
            raise DataError("train.tsv: class 'sports' has no example, which logit_adjusted_ce needs")
        return real(plan, callbacks)

    monkeypatch.setattr(runner, "run", run)
    rates = [0.003, 0.004]
    path = param_file(tmp_path, max_steps=4, eval_steps=2, search={
        "space": {"trainer.learning_rate": "choice(0.003, 0.004)"}, "trials": 2,
        "start_with": [{"trainer.learning_rate": r} for r in rates]})
    assert main("--param_path", path, "--search") == 0
    trials = read_json(tmp_path / "out" / "search" / "search.json")["trials"]
    assert [(t["state"], t["error"]) for t in trials] == [
        ("finished", None), ("failed", "train.tsv: class 'sports' has no example, which logit_adjusted_ce needs")]
    assert "search: trial 1 (trainer.learning_rate=0.004) failed: train.tsv: class 'sports'" in capsys.readouterr().out

    path = param_file(tmp_path, name="first.json", output_dir=str(tmp_path / "first"), search={
        "space": {"trainer.learning_rate": "choice(0.004)"}, "trials": 2})
    assert main("--param_path", path, "--search") == 2
    assert capsys.readouterr().err == ("error: train.tsv: class 'sports' has no example, which logit_adjusted_ce "
                                       "needs\n")



def test_a_spent_time_budget_starts_no_trial_and_says_so(tmp_path, capsys):
    path = param_file(tmp_path)
    assert main("--param_path", path, "--search", "trainer.learning_rate=log_uniform(1e-3,1e-2)",
                "--timeout", "0.001") == 0
    assert "search: this worker stops: the time budget of 0.001 s is spent" in capsys.readouterr().out
    root = tmp_path / "out" / "search"
    assert read_json(root / "search.json")["trials"] == []
    assert "No trial has finished yet." in (root / "search.md").read_text(encoding="utf-8")
    assert (root / "search.png").exists() and not (root / "best-params.json").exists()


@pytest.mark.parametrize("argv, advice", [
    (["--search", "trainer.learning_rate=log_uniform(1e-3,1e-2)"],
     "the same --search command continues the study, and trial 0 from that checkpoint"),
    (["--sweep", "model.loss.name=ce,focal"], "the same --sweep command continues the sweep, and this run from "
                                              "that checkpoint"),
])
def test_a_stopped_search_or_sweep_says_its_own_command_continues_it(argv, advice, tmp_path, capsys, monkeypatch):
    """SIGTERM mid-trial: the trainer's checkpoint line, with the advice to run the same command again
    (not --set trainer.resume=true, which would train that one run outside the search or sweep)."""
    from appzoo.run import runner
    from appzoo.errors import Interrupted

    def stopped(plan, callbacks=()):
        raise Interrupted(15, "SIGTERM at step 3: checkpoint saved in X", advice="continue with --set "
                                                                              "trainer.resume=true")

    monkeypatch.setattr(runner, "run", stopped)
    assert main("--param_path", param_file(tmp_path), *argv) == 143
    assert capsys.readouterr().err == f"error: SIGTERM at step 3: checkpoint saved in X; {advice}\n"


# ---- the study file: one line for a study that cannot be used (corrupt ones: tests/bad_input_cases.py)
def _optuna_study(root):
    """``root/study.db``: a new study as Optuna makes it, without a trial."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    root.mkdir(parents=True)
    optuna.create_study(study_name="search", storage=f"sqlite:///{root / 'study.db'}")
    return root / "study.db"


@pytest.mark.parametrize("which", ["study.db", "its folder"])
def test_a_read_only_study_is_one_line_and_left_as_it_was(which, tmp_path, capsys):
    from bad_input_harness import tree_hashes

    path = param_file(tmp_path)
    root = tmp_path / "out" / "search"
    db = _optuna_study(root)
    target = db if which == "study.db" else root
    target.chmod(0o444 if target == db else 0o555)
    immutable = False
    if os.access(target, os.W_OK):  # root: chmod does not stop its writes; an immutable file does
        immutable = subprocess.run(["chattr", "+i", str(target)], capture_output=True).returncode == 0
        if not immutable:
            pytest.skip("running as root, where chmod does not stop writes, and chattr +i is not possible "
                        "here; the read-only error found while writing is tested below")
    try:
        before = tree_hashes(root)
        assert main("--param_path", path, "--search", "trainer.learning_rate=log_uniform(1e-3,1e-2)") == 2
        assert capsys.readouterr().err == (
            f"error: {db}: cannot write the study (read-only); make it writable, or set trainer.output_dir to "
            f"another folder\n" if target == db else
            f"error: {root}: cannot write in this folder (the study and its trials are kept there); make it "
            f"writable, or set trainer.output_dir to another folder\n")
        assert tree_hashes(root) == before
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(target)], check=True)
        target.chmod(0o644 if target == db else 0o755)  # for pytest's clean-up of its old folders


def test_a_study_db_that_is_a_broken_link_is_one_line(tmp_path, capsys):
    root = tmp_path / "out" / "search"
    root.mkdir(parents=True)
    (root / "study.db").symlink_to(tmp_path / "gone.db")  # SQLite would make the file it points to
    assert main("--param_path", param_file(tmp_path), "--search", "trainer.learning_rate=log_uniform(1e-3,1e-2)") == 2
    assert capsys.readouterr().err == (
        f"error: {root / 'study.db'}: not a regular file (a broken link, a device or a pipe); move it and the trial "
        f"folders beside it away, or set trainer.output_dir to another folder, to start a new study\n")
    assert os.listdir(root) == ["study.db"] and not (tmp_path / "gone.db").exists()


def test_a_study_a_killed_worker_left_mid_commit_is_not_refused(tmp_path):
    """A hot journal (a writer killed mid-transaction) is rolled back by the next read-write connection,
    Optuna's: the read-only check of the plan cannot, and must let it through."""
    from appzoo.search.storage import check_study_folder

    db = _optuna_study(tmp_path / "search")
    killed = ("import os, sqlite3\n"
              "db = sqlite3.connect(os.environ['DB'])\n"
              "db.execute('PRAGMA cache_size = 1')\n"
              "db.execute('BEGIN')\n"
              "db.executemany('INSERT INTO studies (study_name) VALUES (?)', [(str(i) * 200,) for i in range(2000)])\n"
              "db.execute('UPDATE studies SET study_name = study_name || 1')\n"
              "os._exit(9)\n")
    subprocess.run([sys.executable, "-c", killed], env={**ENV, "DB": str(db)}, check=False)
    assert (tmp_path / "search" / "study.db-journal").stat().st_size > 0
    check_study_folder(str(tmp_path / "search"))  # no error


@pytest.mark.parametrize("sqlite_says, code, advice", [
    ("attempt to write a readonly database", 2, "make it and its folder writable, or set trainer.output_dir to "
                                                "another folder"),
    ("database or disk is full", 1, "free some space, then the same command continues the study"),
    ("database is locked", 1, "on a network file system without working locks, keep trainer.output_dir on a "
                              "local disk"),
    ("database disk image is malformed", 2, "move it and the trial folders beside it away, or set "
                                            "trainer.output_dir to another folder, to start a new study"),
])
def test_an_error_of_the_study_found_while_writing_is_one_line(sqlite_says, code, advice, tmp_path, capsys,
                                                               monkeypatch):
    """What SQLite says under SQLAlchemy under Optuna (each wraps the one below, as Optuna's commit does), when
    the study turns read-only, full, locked or damaged once the search has begun."""
    import sqlite3

    import optuna
    import sqlalchemy

    from appzoo.search import study

    def load_study(search, worker_index=0):
        try:
            try:
                raise sqlite3.OperationalError(sqlite_says)
            except sqlite3.OperationalError as error:
                raise sqlalchemy.exc.OperationalError("INSERT INTO studies", {}, error) from error
        except sqlalchemy.exc.OperationalError as error:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from error

    monkeypatch.setattr(study, "load_study", load_study)
    path = param_file(tmp_path)
    assert main("--param_path", path, "--search", "trainer.learning_rate=log_uniform(1e-3,1e-2)") == code
    db = tmp_path / "out" / "search" / "study.db"
    what = ("another worker held the study locked for over a minute" if "locked" in sqlite_says else
            "not a readable Optuna study" if "malformed" in sqlite_says else "cannot write the study")
    assert capsys.readouterr().err == f"error: {db}: {what} ({sqlite_says}); {advice}\n"


def test_a_study_of_another_optuna_schema_says_how_to_upgrade_it(tmp_path, capsys):
    import sqlite3

    from bad_input_harness import tree_hashes

    root = tmp_path / "out" / "search"
    db = _optuna_study(root)
    with sqlite3.connect(db) as connection:  # an older schema than this Optuna's
        connection.execute("UPDATE alembic_version SET version_num = 'v3.0.0.d'")
    connection.close()
    before = tree_hashes(root)
    assert main("--param_path", param_file(tmp_path), "--search", "trainer.learning_rate=log_uniform(1e-3,1e-2)") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {db}: The runtime optuna version ") and len(err.splitlines()) == 1, err
    assert f"`$ optuna storage upgrade --storage sqlite:///{db}`" in err
    assert tree_hashes(root) == before


@pytest.mark.parametrize("second, message", [
    ("diverged", "every trial diverged (2 of 2)"),
    ("no dev evaluation", "no trial trained: 1 of 2 diverged, the others failed"),
])
def test_a_search_whose_every_trial_diverged_exits_3_as_a_diverged_run(second, message, tmp_path, capsys,
                                                                      monkeypatch):
    """No setting trained: exit 3 and one line, with the trials recorded (a real divergence is recorded in
    the pruning test above; here runner.run diverges at once, for no training)."""
    from appzoo.run import runner
    from appzoo.errors import DivergedError

    def run(plan, callbacks=()):
        os.makedirs(plan.trainer.output_dir)  # as a run makes its folder
        if plan.trainer.learning_rate == 1e30 or second == "diverged":
            raise DivergedError("step 2: the training loss nan is not finite")
        return {"best": {"value": None}, "train": {"steps": 2}}  # a run that never evaluated on dev

    monkeypatch.setattr(runner, "run", run)
    path = param_file(tmp_path, search={"space": {"trainer.learning_rate": "choice(1e30, 1e31)"}, "trials": 2,
                                        "start_with": [{"trainer.learning_rate": 1e30},
                                                       {"trainer.learning_rate": 1e31}]})
    assert main("--param_path", path, "--search") == 3
    root = tmp_path / "out" / "search"
    assert capsys.readouterr().err == (
        f"error: search: {message}: the training loss or a gradient was not finite; lower trainer.learning_rate "
        f"(or its searched range), keep trainer.max_grad_norm > 0, or check the data; each trial's error is in "
        f"{root}/search.md\n")
    trials = read_json(root / "search.json")["trials"]
    assert [t["state"] for t in trials] == ["diverged", "diverged" if second == "diverged" else "failed"]
    assert "| 0 | diverged |" in (root / "search.md").read_text(encoding="utf-8")


def test_a_search_whose_every_trial_failed_exits_2(tmp_path, capsys, monkeypatch):
    """No trial trained and none diverged (each ran without a dev evaluation here): exit 2, not 0 with an empty
    result."""
    from appzoo.run import runner

    def run(plan, callbacks=()):
        os.makedirs(plan.trainer.output_dir)
        return {"best": {"value": None}, "train": {"steps": 2}}

    monkeypatch.setattr(runner, "run", run)
    path = param_file(tmp_path, search={"space": {"trainer.learning_rate": "choice(1e-3, 1e-2)"}, "trials": 2,
                                        "start_with": [{"trainer.learning_rate": 1e-3},
                                                       {"trainer.learning_rate": 1e-2}]})
    assert main("--param_path", path, "--search") == 2
    root = tmp_path / "out" / "search"
    assert capsys.readouterr().err == (
        f"error: search: no trial trained: every trial failed (2 of 2; the first: no dev evaluation); fix the space "
        f"or the param file; each trial's error is in {root}/search.md\n")
    assert [t["state"] for t in read_json(root / "search.json")["trials"]] == ["failed", "failed"]
