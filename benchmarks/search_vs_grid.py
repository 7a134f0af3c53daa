"""Does ``--search`` (TPE + median pruning) reach a grid sweep's best dev macro-F1 in less CPU time?

    python benchmarks/search_vs_grid.py                       # both arms at once, one thread each
    python benchmarks/search_vs_grid.py --trials 20 --book benchmarks/RESULTS.md
    python benchmarks/search_vs_grid.py --pruner successive_halving   # one more search arm, added to the results

Issue 21's target, on TNEWS with the tiny encoder trained from scratch (benchmarks/configs/cls_tnews_fc.json):
a ``--sweep`` grid of learning rate x warm-up x loss x sampler (3 x 2 x 3 x 2 = 36 runs, one seed) against
``--search`` over the same keys as ranges (the grid's values at the ends), Optuna's default TPE with the median
pruner and ``--trials`` trials. Both arms train on the same fixed subset of TNEWS train and are judged on the
same fixed subset of dev, with a training budget sized to a 2-core CPU (``--max-steps``, ``--eval-steps``).

CPU time: each arm is one child process (``run_trainer.py``); its user + system time is read from the kernel
when it ends (``os.wait4``) and sampled while it runs (psutil, every ``--poll`` seconds, the process and any
children). A run or trial ends when its ``metrics.json`` is written; the arm's CPU time at that moment,
interpolated in the samples, is the x of the curve "best dev macro-F1 so far vs cumulative CPU seconds". Both
arms are measured the same way, start-up and planning included.

Test: TNEWS has no public test labels, so ``--test-examples`` lines of train, disjoint from the training subset,
are held out; each arm's chosen run (its best on dev: for the search, the best finished trial) is evaluated
on them after the arms end, outside the CPU accounting.

``--pruner P`` runs only a second search, the same with ``--set search.pruner=P``, into ``<out>/search-P``, and
adds it to the results already in ``search_vs_grid.json`` (key ``search_P``; the grid and the first search are kept
as they were measured, not run again).

Writes ``<results>/search_vs_grid.json``, ``.png`` and ``.md`` (the section for benchmarks/RESULTS.md; ``--book``
puts it into that file in place of an earlier copy, or at its end). The runs stay in ``--out``.
"""
import argparse
import bisect
import glob
import json
import os
import random
import shlex
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from appzoo.utils.files import write_text  # noqa: E402  (atomic)
from benchmarks.record import machine, put_section  # noqa: E402

CONFIG = "benchmarks/configs/cls_tnews_fc.json"
DATA = "data/benchmarks/classification/tnews"
TITLE = "## TNEWS: --search (TPE + median pruning) vs a --sweep grid, CPU time to the grid's best"
METRIC = "macro_f1"

# The grid, and the same keys as ranges whose ends are the grid's outer values.
LEARNING_RATES = (0.0002, 0.0006, 0.002)
WARMUPS = (0.0, 0.2)
LOSSES = ("ce", "focal", "logit_adjusted_ce")
SAMPLERS = ("random", "balanced")
GRID = [f"trainer.learning_rate={','.join(map(str, LEARNING_RATES))}",
        f"trainer.warmup_proportion={','.join(map(str, WARMUPS))}",
        f"model.loss.name={','.join(LOSSES)}",
        f"trainer.sampler={','.join(SAMPLERS)}"]
SPACE = [f"trainer.learning_rate=log_uniform({min(LEARNING_RATES)},{max(LEARNING_RATES)})",
         f"trainer.warmup_proportion=uniform({min(WARMUPS)},{max(WARMUPS)})",
         f"model.loss.name=choice({','.join(LOSSES)})",
         f"trainer.sampler=choice({','.join(SAMPLERS)})"]


# ------------------------------------------------------------------ data
def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [line for line in f.read().splitlines() if line.strip()]


def _write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def make_data(folder, train_n, dev_n, test_n, seed):
    """Seeded subsets: train and a held-out test from TNEWS train (disjoint), dev from TNEWS dev."""
    train, dev = _lines(os.path.join(DATA, "train.tsv")), _lines(os.path.join(DATA, "dev.tsv"))
    if train_n + test_n > len(train) or dev_n > len(dev):
        sys.exit(f"error: asked for {train_n}+{test_n} of {len(train)} train lines and {dev_n} of {len(dev)} dev lines")
    order = list(range(len(train)))
    random.Random(seed).shuffle(order)
    os.makedirs(folder, exist_ok=True)
    paths = {split: os.path.join(folder, f"{split}.tsv") for split in ("train", "dev", "test")}
    _write(paths["train"], [train[i] for i in order[:train_n]])
    _write(paths["test"], [train[i] for i in order[train_n:train_n + test_n]])
    _write(paths["dev"], random.Random(seed).sample(dev, dev_n))
    paths["labels"] = os.path.join(DATA, "labels.txt")
    return paths


# ------------------------------------------------------------- measuring
class Arm:
    """One arm: a run_trainer.py child process, its CPU time sampled while it runs and read at its end."""

    def __init__(self, name, command, log_path, poll):
        self.name, self.command, self.log_path, self.poll = name, command, log_path, poll
        self.samples = []  # (wall time, CPU seconds of the process tree)
        self.cpu_s = self.wall_s = self.returncode = None

    def start(self):
        import psutil

        self._log = open(self.log_path, "w", encoding="utf-8")
        self.started = time.time()
        self.proc = subprocess.Popen(self.command, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT)
        self._ps = psutil.Process(self.proc.pid)
        self.samples.append((self.started, 0.0))
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _tree_cpu(self):
        import psutil

        t = self._ps.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for child in self._ps.children(recursive=True):
            try:
                c = child.cpu_times()
                total += c.user + c.system
            except psutil.Error:
                pass
        return total

    def _watch(self):
        import psutil

        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:  # ended: the kernel's account of it and of its waited-for children
                self.wall_s = time.time() - self.started
                self.cpu_s = usage.ru_utime + usage.ru_stime
                self.returncode = os.waitstatus_to_exitcode(status)
                self.proc.returncode = self.returncode  # reaped here, so Popen must not wait for it
                self.samples.append((time.time(), self.cpu_s))
                self._log.close()
                return
            try:
                self.samples.append((time.time(), self._tree_cpu()))
            except psutil.Error:
                pass
            time.sleep(self.poll)

    def join(self, timeout=None):
        self._thread.join(timeout)
        if self._thread.is_alive():
            print(f"{self.name}: past {timeout:.0f} s, stopping it", flush=True)
            self.proc.terminate()
            self._thread.join()

    def cpu_at(self, when):
        """CPU seconds of the arm at wall time ``when``, interpolated between samples."""
        times = [t for t, _ in self.samples]
        i = bisect.bisect_left(times, when)
        if i == 0:
            return self.samples[0][1]
        if i >= len(times):
            return self.samples[-1][1]
        (t0, c0), (t1, c1) = self.samples[i - 1], self.samples[i]
        return c0 + (c1 - c0) * ((when - t0) / (t1 - t0) if t1 > t0 else 1.0)


# ------------------------------------------------------------- the runs
def _read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _settings(config):
    return {"learning_rate": config["trainer"]["learning_rate"],
            "warmup_proportion": config["trainer"]["warmup_proportion"],
            "loss": config["model"]["loss"]["name"], "sampler": config["trainer"]["sampler"]}


def grid_runs(arm, folder):
    runs = []
    for path in glob.glob(os.path.join(folder, "sweep", "*", "seed-*", "metrics.json")):
        run = os.path.dirname(path)
        metrics = _read(path)
        ended = os.path.getmtime(path)
        runs.append({"folder": os.path.relpath(run, ROOT), "state": "finished",
                     "settings": _settings(_read(os.path.join(run, "config.json"))),
                     "dev": (metrics.get("best") or {}).get("value"), "steps": metrics.get("train", {}).get("steps"),
                     "ended": ended, "cpu_s": arm.cpu_at(ended)})
    return sorted(runs, key=lambda r: r["ended"])


def search_runs(arm, folder):
    summary_path = os.path.join(folder, "search", "search.json")
    if not os.path.exists(summary_path):
        return [], None
    summary = _read(summary_path)
    runs = []
    for trial in summary["trials"]:
        path = os.path.join(trial["folder"] or "", "metrics.json")
        if trial["state"] in ("running", "queued") or not os.path.exists(path):
            continue
        ended = os.path.getmtime(path)
        config = _read(os.path.join(trial["folder"], "config.json"))
        runs.append({"folder": os.path.relpath(trial["folder"], ROOT), "trial": trial["trial"], "state": trial["state"],
                     "settings": _settings(config), "dev": trial["value"], "steps": trial["steps"],
                     "pruned_at_step": trial["pruned_at_step"], "trial_cpu_s": trial["cpu_time_s"],
                     "ended": ended, "cpu_s": arm.cpu_at(ended)})
    return sorted(runs, key=lambda r: r["ended"]), summary


def search_result(arm, folder, planned, grid_best, grid_cpu_s):
    """A search arm's results: its trials, counts, CPU time, best finished trial, and when it first reached
    ``grid_best`` (CPU s, and as a share of ``grid_cpu_s``)."""
    runs, summary = search_runs(arm, folder)
    finished = [r for r in runs if r["state"] == "finished" and r["dev"] is not None]
    counts = {}
    for r in runs:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    curve = best_so_far(runs)
    reach = first_reach(curve, grid_best)
    return {"planned": planned, "counts": counts, "cpu_s": arm.cpu_s, "wall_s": arm.wall_s,
            "returncode": arm.returncode, "trial_cpu_sum_s": summary["cpu_time_s"] if summary else 0.0,
            "best": max(finished, key=lambda r: r["dev"]) if finished else None, "curve": curve, "runs": runs,
            "reach_cpu_s": reach, "ratio": None if reach is None else reach / grid_cpu_s}


def best_so_far(runs, counts=("finished",)):
    """[(cumulative CPU s, best dev so far)] at each run that counts, in the order the runs ended."""
    curve, best = [], None
    for r in runs:
        if r["state"] in counts and r["dev"] is not None:
            best = r["dev"] if best is None else max(best, r["dev"])
            curve.append((r["cpu_s"], best))
    return curve


def first_reach(curve, target):
    return next((cpu for cpu, best in curve if best >= target), None)


def evaluate_on_test(run_folder, test_path, out_folder, threads):
    """The run's best/ on the held-out test lines (a separate process, not counted in either arm)."""
    command = [sys.executable, "run_trainer.py", "--param_path", os.path.join(run_folder, "config.json"),
               "--set", f"trainer.output_dir={out_folder}", "--set", f"trainer.init_from={run_folder}/best",
               "--set", f"dataset_reader.test={test_path}", "--set", "trainer.resume=false",
               "--set", "trainer.overwrite_output_dir=true", "--set", f"trainer.num_threads={threads}", "--do", "eval"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
        return None
    return _read(os.path.join(out_folder, "metrics.json")).get("test", {}).get(METRIC)


# ------------------------------------------------------------- reporting
COLOURS = ("tab:green", "tab:purple", "tab:brown")  # of the search arms, in order


def search_arms(result):
    """[(key, arm)]: the first search ("search") and those ``--pruner`` added later."""
    return [(key, result[key]) for key in ("search", *result.get("more_search_arms", []))]


def _name(arm):
    return f"search, {arm.get('pruner', 'median')} pruner"


def _reach(result, key):
    """(CPU s when the arm first reached the grid's best, that / the grid's CPU s); None, None if never."""
    if key == "search":
        return result["search_reach_cpu_s"], result["ratio"]
    return result[key]["reach_cpu_s"], result[key]["ratio"]


def plot(result, path):
    from appzoo.utils.fonts import pyplot  # the toolkit's fonts, as every plot of it

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(10, 6.8))
    grid = result["grid"]
    arms = [("grid sweep", grid, "tab:blue")]
    arms += [(_name(arm), arm, COLOURS[i % len(COLOURS)]) for i, (_, arm) in enumerate(search_arms(result))]
    for label, arm, colour in arms:  # dots: each finished run or trial; x: a pruned trial's dev before its stop
        finished = [r for r in arm["runs"] if r["state"] == "finished" and r["dev"] is not None]
        pruned = [r for r in arm["runs"] if r["state"] == "pruned" and r["dev"] is not None]
        ax.plot([r["cpu_s"] for r in finished], [r["dev"] for r in finished], "o", color=colour, alpha=0.3,
                markersize=4)
        if pruned:
            ax.plot([r["cpu_s"] for r in pruned], [r["dev"] for r in pruned], "x", color=colour, alpha=0.6,
                    markersize=5)
        if arm["curve"]:  # from where the first run ended: before that the best so far is undefined
            cx, cy = zip(*arm["curve"])
            counted = (f"{len(finished)} runs" if arm is grid
                       else f"{len(finished)} finished (dots), {len(pruned)} pruned (x)")
            ax.step([0.0, *cx, arm["cpu_s"]], [cy[0], *cy, cy[-1]], where="post", color=colour, lw=2,
                    label=f"{label}: best so far; {counted}; {arm['cpu_s']:.0f} CPU s in all")
    ax.axhline(result["grid_best"], color="grey", ls="--", lw=1,
               label=f"grid's best dev macro-F1 {result['grid_best']:.4f}")
    ax.axvline(0.5 * grid["cpu_s"], color="grey", ls=":", lw=1,
               label=f"50% of the grid's CPU time ({0.5 * grid['cpu_s']:.0f} s)")
    for (key, arm), (label, _, colour) in zip(search_arms(result), arms[1:]):
        reach = _reach(result, key)[0]
        if reach is not None:
            ax.plot([reach], [result["grid_best"]], "*", color=colour, markeredgecolor="black", markersize=14,
                    label=f"{label} reaches it at {reach:.0f} CPU s")
    ax.set_xlabel("cumulative CPU seconds of the arm's process (user + system)")
    ax.set_ylabel("dev macro-F1 (best so far; dots: each run, x: pruned)")
    ax.set_title(f"TNEWS, tiny ERNIE from scratch: {grid['planned']}-run grid vs {result['search']['planned']}-trial "
                 f"searches (one thread each)", fontsize=11)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)  # below: the points stay clear
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt(value, digits=4):
    return "–" if value is None else f"{value:.{digits}f}"


def _setting(s):
    return (f"lr {s['learning_rate']:.3g}, warm-up {s['warmup_proportion']:.3g}, {s['loss']}, "
            f"{s['sampler']} batches")


def _trials(s):
    return (f"{s['planned']}: {s['counts'].get('finished', 0)} finished, {s['counts'].get('pruned', 0)} pruned, "
            f"{sum(v for k, v in s['counts'].items() if k not in ('finished', 'pruned'))} other")


def table(result):
    g, arms = result["grid"], search_arms(result)
    ss = [s for _, s in arms]
    reaches = [_reach(result, key) for key, _ in arms]
    grid_reach = result["grid_reach_cpu_s"]
    rows = [("runs / trials", [f"{g['finished']} of {g['planned']}"] + [_trials(s) for s in ss]),
            ("CPU s of the arm (kernel, whole process)", [f"{a['cpu_s']:.0f}" for a in (g, *ss)]),
            ("wall s of the arm", [f"{a['wall_s']:.0f}" for a in (g, *ss)]),
            ("best dev macro-F1", [_fmt(a["best"]["dev"] if a["best"] else None) for a in (g, *ss)]),
            ("its setting", [_setting(a["best"]["settings"]) if a["best"] else "–" for a in (g, *ss)]),
            ("CPU s when it first reached the grid's best",
             [f"{grid_reach:.0f}"] + ["not reached" if r is None else f"{r:.0f}" for r, _ in reaches]),
            ("that, as a share of the grid's CPU s",
             [f"{100 * grid_reach / g['cpu_s']:.0f}%"] + ["–" if q is None else f"{100 * q:.0f}%" for _, q in reaches]),
            ("held-out test macro-F1 of that setting", [_fmt(a.get("test_macro_f1")) for a in (g, *ss)])]
    lines = ["| | grid (--sweep) | " + " | ".join(f"{_name(s)} (--search)" for s in ss) + " |",
             "|---" * (2 + len(ss)) + "|"]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows]
    return lines


def _verdict(result, key):
    g, s = result["grid"], result[key]
    reach, ratio = _reach(result, key)
    if ratio is None:
        return (f"**not met**: no finished trial reached the grid's best dev macro-F1 ({result['grid_best']:.4f}); "
                f"its best was {_fmt(s['best']['dev'] if s['best'] else None)} after {s['cpu_s']:.0f} CPU s "
                f"({100 * s['cpu_s'] / g['cpu_s']:.0f}% of the grid's {g['cpu_s']:.0f})")
    return (f"**{'met' if ratio <= 0.5 else 'not met'}**: its best finished trial reached the grid's best dev "
            f"macro-F1 ({result['grid_best']:.4f}) after {reach:.0f} CPU s, {100 * ratio:.0f}% of the grid's "
            f"{g['cpu_s']:.0f} (target <= 50%)")


def kept_notes(md_path):
    """The hand-written paragraphs ("What the run shows ...") of an earlier section, kept when it is rewritten."""
    if not os.path.exists(md_path):
        return []
    with open(md_path, encoding="utf-8") as f:
        return [p.strip() for p in f.read().split("\n\n") if p.startswith("What the run shows")]


def section(result, args, notes=()):
    g, arms = result["grid"], search_arms(result)
    verdicts = [f"Verdict on dev, {_name(s)}: {_verdict(result, key)}." for key, s in arms]
    if g["finished"] < g["planned"]:  # a grid cut short has no best of the grid to reach: say so first
        verdicts.insert(0, f"Not judged: the grid finished {g['finished']} of its {g['planned']} runs (exit "
                           f"{g['returncode']}), so its best is that of a part of the grid; as measured:")
    more = [s for _, s in arms[1:]]
    env = result["environment"]
    pruners = ("median (from the 6th trial, at every dev evaluation)" + "".join(
        f"; then, in a second search, {s['pruner']} (`--set search.pruner={s['pruner']}`, Optuna's "
        + ("SuccessiveHalvingPruner with its defaults: min_resource auto, reduction_factor 4, "
           "min_early_stopping_rate 0)" if s["pruner"] == "successive_halving" else "defaults)") for s in more))
    arms_line = ("- Arms: " + ("the grid and the first search ran at the same time, one thread each, so they met the "
                               "same load" if not args.sequential else "run one after the other, one thread each"))
    for s in more:
        arms_line += (f"; the {s['pruner']} search ran later, alone (`--pruner {s['pruner']}`), on the same data "
                      f"subsets with the same command but for its output folder and the pruner, and the grid was "
                      f"not run again (its figures are those of the first run)")
    if result["search"].get("note"):
        arms_line += f". {result['search']['note']}"
    lines = [TITLE, "",
             "Issue 21's target: on TNEWS (tiny encoder, `configs/ernie_tiny.json` from scratch as in "
             "`cls_tnews_fc.json`), `--search` over learning rate, warm-up, loss and sampler with pruning reaches the "
             "best dev macro-F1 of a comparable grid sweep in <= 50% of its CPU time.", "",
             "```bash", "python benchmarks/get_data.py tnews", result["command"], *(s["command"] for s in more),
             "```", "",
             f"- Machine: {env['cpu']}, {env['cores']} cores shared with other work (load average {env['load_start']} "
             f"at the start, {env['load_end']} at the end" + "".join(
                 f"; {s['environment']['load_start']} and {s['environment']['load_end']} for the {s['pruner']} "
                 f"search" for s in more) + f"), no GPU; python {env['python']}, paddlepaddle "
             f"{env['paddle']}, paddlenlp {env['paddlenlp']}, optuna {env['optuna']}",
             f"- Sizes (for the 2-core budget): a seeded sample (seed {args.data_seed}) of {args.train_examples} TNEWS "
             f"train lines to train on, {args.dev_examples} dev lines to judge on, and {args.test_examples} other train "
             f"lines held out as test (TNEWS has no public test labels); max_seq_len {args.max_seq_len}, batch size "
             f"{args.batch_size}, max_steps {args.max_steps} (less than one epoch, so no epoch-end evaluations), dev "
             f"evaluated every {args.eval_steps} steps ({args.max_steps // args.eval_steps} evaluations, the pruner's "
             f"reports), `--do train` in all arms; one seed ({result['seed']}); trainer.num_threads {args.threads}",
             f"- Grid (`--sweep`, {g['planned']} runs): " + " × ".join(f"`{a}`" for a in GRID),
             f"- Search (`--search`, `--trials {args.trials}`, fixed before the run"
             + (", the grid's run count): " if args.trials == g["planned"] else "): ")
             + ", ".join(f"`{d}`" for d in SPACE) + "; TPE (Optuna's default, 5 random start-up trials), sampler "
             "seed = trainer.seed; pruner: " + pruners,
             arms_line,
             f"- Results: `benchmarks/results/search_vs_grid.json` (every run and trial with its dev value and the "
             f"arm's CPU seconds when it ended), the runs in `{os.path.relpath(args.out, ROOT)}`"
             + "".join(f" (the {s['pruner']} search's in `{os.path.basename(s['folder'])}/`)" for s in more), "",
             *(line for v in verdicts for line in (v, "")), *table(result), "",
             "![best dev macro-F1 so far vs cumulative CPU seconds](results/search_vs_grid.png)", "",
             *(line for note in notes for line in (note, "")),
             "How CPU time was measured: each arm is one `run_trainer.py` process. Its total is the kernel's user + "
             "system time of that process when it ended (`os.wait4`), start-up (imports, planning every run or "
             "range end, the study's SQLite) included. While it ran, the script sampled the process's CPU time "
             f"(psutil, every {args.poll:g} s); a run or trial ends when its `metrics.json` is written, and the arm's "
             "CPU time then (interpolated between samples) is the x of the curves. A search also records each "
             "trial's own CPU time (`cpu_time_s` in search.json): they sum to "
             + ", ".join(f"{s['trial_cpu_sum_s']:.0f} s of the arm's {s['cpu_s']:.0f} s ({s.get('pruner', 'median')})"
                         for _, s in arms)
             + "; the grid's runs are timed only by the samples. A search curve counts "
             "finished trials only (the best trial is chosen among them); a pruned trial's value is that of a "
             "model stopped early.", "",
             "Caveats: one seed per run and per trial, on a 1,500-line dev sample: the best of 36 on dev is "
             "optimistic for both arms, and a difference of a point of macro-F1 between two settings is within "
             "seed noise (see the TNEWS tables above, std about 0.01–0.02 over seeds). Whether the search reaches "
             "the grid's best depends on the sampler's seed and on the trial order; a single study is one draw. "
             "The training budget is small (a fraction of an epoch), so the ranking of settings is that of early "
             "training. The test figures are on held-out train lines, not TNEWS's test set.", ""]
    return "\n".join(lines)


def environment():
    """The machine (:func:`benchmarks.record.machine`) in this benchmark's keys, as arms.json and the results keep it."""
    info = machine(("paddlepaddle", "paddlenlp", "optuna"), optional=())
    version = {package: v or "?" for package, v in info["versions"].items()}
    return {"cpu": info["cpu"], "cores": info["cores"], "python": info["python"], "paddle": version["paddlepaddle"],
            "paddlenlp": version["paddlenlp"], "optuna": version["optuna"],
            "load_start": " ".join(f"{x:.1f}" for x in os.getloadavg())}


# ------------------------------------------------------------------ main
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "output", "bench", "search_vs_grid"),
                        help="folder of the data subsets and both arms' runs (default: %(default)s)")
    parser.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "results"),
                        help="where search_vs_grid.json/.png/.md go (default: %(default)s)")
    parser.add_argument("--book", help="also put the section into this file (benchmarks/RESULTS.md): in place of an earlier "
                        "copy, else at its end")
    parser.add_argument("--train-examples", type=int, default=8000)
    parser.add_argument("--dev-examples", type=int, default=1500)
    parser.add_argument("--test-examples", type=int, default=2000,
                        help="train lines held out as test (TNEWS has no public test labels)")
    parser.add_argument("--data-seed", type=int, default=13)
    parser.add_argument("--max-seq-len", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-steps", type=int, default=160)
    parser.add_argument("--eval-steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1, help="trainer.num_threads of every run (default 1)")
    parser.add_argument("--trials", type=int, default=36, help="--trials of the search (default: the grid's 36)")
    parser.add_argument("--sequential", action="store_true", help="run the arms one after the other")
    parser.add_argument("--arm-timeout", type=float, help="stop an arm after this many wall seconds")
    parser.add_argument("--report-only", action="store_true",
                        help="write the report again from --out's arms.json and runs, training nothing")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between CPU samples (default 0.5)")
    parser.add_argument("--pruner", help="run only a second search arm, the same with --set search.pruner=PRUNER, "
                        "into <out>/search-PRUNER, and add it to the results of <results>/search_vs_grid.json "
                        "(its grid and first search are kept as they were measured)")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    args.out = os.path.abspath(args.out)
    env = environment()
    data = make_data(os.path.join(args.out, "data"), args.train_examples, args.dev_examples, args.test_examples,
                     args.data_seed)
    common = ["--param_path", CONFIG,
              "--set", f"dataset_reader.train={data['train']}", "--set", f"dataset_reader.dev={data['dev']}",
              "--set", f"dataset_reader.max_seq_len={args.max_seq_len}",
              "--set", f"trainer.batch_size={args.batch_size}", "--set", f"trainer.max_steps={args.max_steps}",
              "--set", f"trainer.eval_steps={args.eval_steps}", "--set", f"trainer.num_threads={args.threads}",
              "--do", "train"]
    python = [sys.executable, "run_trainer.py"]
    grid_cmd = python + common + ["--set", f"trainer.output_dir={os.path.join(args.out, 'grid')}"]
    for axis in GRID:
        grid_cmd += ["--sweep", axis]
    search_cmd = python + common + ["--set", f"trainer.output_dir={os.path.join(args.out, 'search')}"]
    for dim in SPACE:
        search_cmd += ["--search", dim]
    search_cmd += ["--trials", str(args.trials)]
    if args.pruner:
        return more_search(args, argv, env, data, python + common)
    arms = {"grid": Arm("grid", grid_cmd, os.path.join(args.out, "grid.log"), args.poll),
            "search": Arm("search", search_cmd, os.path.join(args.out, "search.log"), args.poll)}
    started = time.time()
    saved = os.path.join(args.out, "arms.json")  # the measurement, kept so the report can be redone from it
    if args.report_only:
        kept = _read(saved)
        env, started = kept["environment"], kept["started"]
        for arm in arms.values():
            for key, value in kept["arms"][arm.name].items():
                setattr(arm, key, [tuple(x) for x in value] if key == "samples" else value)
    else:
        if os.path.exists(os.path.join(args.out, "grid")) or os.path.exists(os.path.join(args.out, "search")):
            sys.exit(f"error: {args.out} holds runs of an earlier measurement; a resumed arm would not be timed "
                     f"whole. Remove it or give another --out (or --report-only to report on it again)")
        for arm in arms.values():
            print(f"{arm.name}: {shlex.join(arm.command)}", flush=True)
            arm.start()
            if args.sequential:
                arm.join(args.arm_timeout)
        for arm in arms.values():
            arm.join(None if args.arm_timeout is None else max(1.0, args.arm_timeout - (time.time() - arm.started)))
            print(f"{arm.name}: exit {arm.returncode}, {arm.cpu_s:.0f} CPU s, {arm.wall_s:.0f} wall s", flush=True)
        env["load_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
        with open(saved, "w", encoding="utf-8") as f:
            json.dump({"environment": env, "started": started, "ended": time.time(),
                       "arms": {a.name: {k: getattr(a, k) for k in ("samples", "cpu_s", "wall_s", "returncode",
                                                                     "started")} for a in arms.values()}}, f)

    grid_list = grid_runs(arms["grid"], os.path.join(args.out, "grid"))
    if not grid_list:
        sys.exit(f"error: the grid finished no run; see {arms['grid'].log_path}")
    grid_curve = best_so_far(grid_list)
    grid_best = max(grid_list, key=lambda r: r["dev"] if r["dev"] is not None else -1)
    search = search_result(arms["search"], os.path.join(args.out, "search"), args.trials, grid_best["dev"],
                           arms["grid"].cpu_s)
    search_best, reach, ratio = search["best"], search.pop("reach_cpu_s"), search.pop("ratio")
    search["pruner"] = "median"
    result = {
        "command": "python benchmarks/search_vs_grid.py " + shlex.join(
            [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--report-only"]),
        "environment": env, "seed": _read(CONFIG)["trainer"].get("seed", 42), "metric": f"dev.{METRIC}",
        "args": {k: v for k, v in vars(args).items()}, "grid_command": shlex.join(grid_cmd),
        "search_command": shlex.join(search_cmd), "wall_s": round(max(a.started + a.wall_s for a in arms.values()) - started, 1),
        "grid": {"planned": len(LEARNING_RATES) * len(WARMUPS) * len(LOSSES) * len(SAMPLERS),
                 "finished": len(grid_list), "cpu_s": arms["grid"].cpu_s, "wall_s": arms["grid"].wall_s,
                 "returncode": arms["grid"].returncode, "best": grid_best, "curve": grid_curve, "runs": grid_list},
        "search": search,
        "grid_best": grid_best["dev"],
        "grid_reach_cpu_s": first_reach(grid_curve, grid_best["dev"]),
        "search_reach_cpu_s": reach,
        "ratio": ratio,
    }
    print("evaluating each arm's chosen run on the held-out test lines", flush=True)
    result["grid"]["test_macro_f1"] = evaluate_on_test(os.path.join(ROOT, grid_best["folder"]), data["test"],
                                                       os.path.join(args.out, "test-grid"), args.threads)
    if search_best:
        result["search"]["test_macro_f1"] = evaluate_on_test(os.path.join(ROOT, search_best["folder"]), data["test"],
                                                             os.path.join(args.out, "test-search"), args.threads)
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, "search_vs_grid.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    plot(result, os.path.join(args.results, "search_vs_grid.png"))
    write_section(result, args)
    print(f"ratio (search CPU to reach the grid's best / grid CPU): {'not reached' if ratio is None else f'{ratio:.2f}'}")
    return 0


def write_section(result, args):
    md_path = os.path.join(args.results, "search_vs_grid.md")
    text = section(result, args, kept_notes(md_path))
    write_text(md_path, text)
    if args.book:  # the section in place of an earlier copy (to the next "## " heading), else at the end
        put_section(args.book, TITLE, text.removeprefix(TITLE), until="## ")
    print("\n".join(table(result)))


def more_search(args, argv, env, data, base_cmd):
    """``--pruner``: one more search arm, alone, added to the results of the first measurement."""
    key, name = f"search_{args.pruner}", f"search-{args.pruner}"
    first = _read(os.path.join(args.results, "search_vs_grid.json"))["args"]
    sizes = ("train_examples", "dev_examples", "test_examples", "data_seed", "max_seq_len", "batch_size", "max_steps",
             "eval_steps", "threads", "trials", "poll")
    if any(getattr(args, k) != first[k] for k in sizes) or os.path.abspath(first["out"]) != args.out:
        sys.exit("error: --pruner adds an arm to the first measurement: give it the same sizes and --out")
    folder = os.path.join(args.out, name)
    command = base_cmd + ["--set", f"trainer.output_dir={folder}", "--set", f"search.pruner={args.pruner}"]
    for dim in SPACE:
        command += ["--search", dim]
    command += ["--trials", str(args.trials)]
    arm = Arm(name, command, os.path.join(args.out, f"{name}.log"), args.poll)
    saved = os.path.join(args.out, f"arms-{name}.json")
    if args.report_only:
        kept = _read(saved)
        env = kept["environment"]
        for k, value in kept["arm"].items():
            setattr(arm, k, [tuple(x) for x in value] if k == "samples" else value)
    else:
        if os.path.exists(folder):
            sys.exit(f"error: {folder} holds an earlier measurement; remove it (or --report-only)")
        print(f"{name}: {shlex.join(command)}", flush=True)
        arm.start()
        arm.join(args.arm_timeout)
        print(f"{name}: exit {arm.returncode}, {arm.cpu_s:.0f} CPU s, {arm.wall_s:.0f} wall s", flush=True)
        env["load_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
        with open(saved, "w", encoding="utf-8") as f:
            json.dump({"environment": env, "arm": {k: getattr(arm, k) for k in
                                                   ("samples", "cpu_s", "wall_s", "returncode", "started")}}, f)
    result = _read(os.path.join(args.results, "search_vs_grid.json"))  # the grid and first search, as measured
    arm_result = search_result(arm, folder, args.trials, result["grid_best"], result["grid"]["cpu_s"])
    arm_result.update({"pruner": args.pruner, "folder": os.path.relpath(folder, ROOT), "environment": env,
                       "command": "python benchmarks/search_vs_grid.py " + shlex.join(
                           [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--report-only"]),
                       "search_command": shlex.join(command)})
    if arm_result["best"]:
        arm_result["test_macro_f1"] = evaluate_on_test(os.path.join(ROOT, arm_result["best"]["folder"]), data["test"],
                                                       os.path.join(args.out, f"test-{name}"), args.threads)
    result["search"].setdefault("pruner", "median")
    result["search"].setdefault("note", "The median-pruner search ran before commit d9f16b9 (a trial is no longer "
                                        "pruned at its last evaluation); its figures are kept as measured")
    result[key] = arm_result
    result["more_search_arms"] = sorted(set(result.get("more_search_arms", [])) | {key})
    with open(os.path.join(args.results, "search_vs_grid.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    plot(result, os.path.join(args.results, "search_vs_grid.png"))
    write_section(result, args)
    ratio = arm_result["ratio"]
    print(f"ratio ({name} CPU to reach the grid's best / grid CPU): "
          f"{'not reached' if ratio is None else f'{ratio:.2f}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
