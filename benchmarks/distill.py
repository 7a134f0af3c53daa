"""Distillation on the Chinese sets: the teacher, the student trained alone and the student distilled, with
their inference speed, in one table (benchmarks/RESULTS.md, its own section).

    python benchmarks/distill.py                 # the three sets below, their runs made first (see SETS)
    python benchmarks/distill.py --only tnews --examples 512

Each set has a teacher (a run folder: Step 17's multilingual-e5-small, fine-tuned) and a sweep of the student
(its first 3 layers, ``model.encoder.layers``) over ``distill.alpha`` 0 (the labels alone: no teacher is run)
and 0.5 (half the loss the T^2 KL to the teacher's softened logits, T = 2), 3 seeds each, the same steps as the
teacher. Quality: the sweep's own cells and its verdict on dev (better or worse only when the means differ by
more than 2 std of both sides over 3 seeds). Speed: each model's ``best/`` on ONNX Runtime fp32 (the toolkit's
serving default) with 2 threads, the model's time only (the texts tokenised beforehand, as both read them the
same way), over the same dev examples, at batch 32 and at batch 1; rounds alternate between the models and the
best round counts, so a busy moment slows no model more than the other.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.chdir(ROOT)

from appzoo.env import configure_cpu  # noqa: E402
from appzoo.utils.files import write_json  # noqa: E402
from benchmarks.record import keep_section, machine, machine_line  # noqa: E402

#: set -> (title, teacher run, its command, student sweep folder, the student's param file, dev metric, test metric)
SETS = {
    "tnews": ("TNEWS (15 classes)", "output/distill/tnews_teacher",
              "python run_trainer.py --param_path benchmarks/configs/cls_tnews_e5.json --set "
              "trainer.output_dir=output/distill/tnews_teacher --set trainer.max_steps=400 --set trainer.eval_steps=200",
              "output/bench/distill_cls_tnews_e5/sweep", "benchmarks/configs/distill_tnews_e5.json", "macro_f1", None),
    "weibo": ("Weibo NER (CRF)", "output/distill/weibo_teacher",
              "python run_trainer.py --param_path benchmarks/configs/ner_weibo_e5.json --set "
              "trainer.output_dir=output/distill/weibo_teacher --set model.type=ErnieCrfSeqLabel --set model.loss=null "
              "--set trainer.epochs=6",
              "output/bench/distill_ner_weibo_e5/sweep", "benchmarks/configs/distill_weibo_e5_crf.json", "micro_f1",
              "micro_f1"),
    "afqmc": ("AFQMC (pairs)", "output/distill/afqmc_teacher",
              "python run_trainer.py --param_path benchmarks/configs/mtch_afqmc_e5.json --set "
              "trainer.output_dir=output/distill/afqmc_teacher --set trainer.max_steps=300",
              "output/bench/distill_mtch_afqmc_e5/sweep", "benchmarks/configs/distill_afqmc_e5.json", "auc", None),
}
SECTION = "## Distillation: multilingual-e5-small into its first 3 layers (TNEWS, Weibo, AFQMC)"
ALONE = "alpha=0.0"


def distilled(cells):
    """The distilled settings of a set (alpha > 0), in the sweep's order, and the one chosen on dev (the best
    dev mean): the goal is judged on it."""
    settings = [k for k in cells if k.startswith("alpha=") and k != ALONE]
    chosen = max(settings, key=lambda k: cells[k]["dev_mean"], default=None)
    return settings, chosen
ALPHAS = {"tnews": "0.0,0.5,0.9"}  # the sweeps' alphas where more than 0 and 0.5 were run
GOAL = {"tnews": 1.0, "weibo": 3.0, "afqmc": 1.0}  # points the distilled student may trail the teacher by


def quality(name):
    """The teacher's dev (and test) metric, and each student setting's cells and verdict from its sweep.json."""
    _, teacher, _, sweep, _, metric, test_metric = SETS[name]
    with open(os.path.join(teacher, "metrics.json"), encoding="utf-8") as f:
        teacher_metrics = json.load(f)
    with open(os.path.join(sweep, "sweep.json"), encoding="utf-8") as f:
        summary = json.load(f)
    out = {"teacher": {"dev": teacher_metrics["dev"][metric],
                       "test": teacher_metrics.get("test", {}).get(test_metric) if test_metric else None,
                       "wall_time_s": teacher_metrics.get("wall_time_s")}}
    for setting in summary["settings"]:
        values = [run["metrics"].get(f"dev.{metric}") for run in setting["runs"]]
        tests = [run["metrics"].get(f"test.{test_metric}") for run in setting["runs"]] if test_metric else []
        out[setting["setting"]] = {
            "seeds": len(values), "dev": values, "dev_mean": statistics.mean(values),
            "dev_std": statistics.stdev(values) if len(values) > 1 else None,
            "test_mean": statistics.mean(tests) if tests and None not in tests else None,
            "test_std": statistics.stdev(tests) if len(tests) > 1 and None not in tests else None,
            "verdict": setting.get("verdict"), "p_value": setting.get("verdict_p"),
            "wall_time_s": setting["wall_time_s"]["mean"], "folder": setting["runs"][0]["folder"]}
    return out


def speed(folders, examples, threads, rounds):
    """``{folder: {"batch32_ms", "batch1_ms"}}``: milliseconds per example of each ``best/`` on ONNX Runtime
    fp32, the best of ``rounds`` alternating rounds."""
    from appzoo import Predictor
    from appzoo.utils.progress import quiet

    loaded = {}
    for folder in folders:
        best = os.path.join(folder, "best")
        predictor = Predictor(best, engine="onnxruntime", num_threads=threads, batch_size=32)
        reader = predictor.reader
        dev = predictor.bundle.config["dataset_reader"]["dev"]
        with quiet():  # a sentence's windows are encoded with it: each set of examples is encoded whole
            chosen = reader.read(dev, "dev")[:examples]
            few = chosen[:64]
            sets = {size: (part, reader.encode(part, predictor.tokenizer, predictor.labels, predictor.max_seq_len,
                                               "bench")) for size, part in ((32, chosen), (1, few))}
        predictor.predict_features(*sets[1])  # warm up
        loaded[folder] = (predictor, sets)
    times = {folder: {"batch32_ms": [], "batch1_ms": []} for folder in folders}
    for _ in range(rounds):
        for folder, (predictor, sets) in loaded.items():
            for size, (part, features) in sets.items():
                predictor.batch_size = size
                start = time.perf_counter()
                predictor.predict_features(part, features)
                times[folder][f"batch{size}_ms"].append((time.perf_counter() - start) * 1000 / len(part))
    return {folder: {k: min(v) for k, v in t.items()} for folder, t in times.items()}


def encoder_size(folder):
    with open(os.path.join(folder, "best", "encoder", "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    return config["num_hidden_layers"], config["vocab_size"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=sorted(SETS), help="these sets only (repeatable)")
    parser.add_argument("--examples", type=int, default=512, help="dev examples timed per model (default 512)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/distill.json")
    parser.add_argument("--book", default="benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    configure_cpu()
    result = {"machine": machine(), "examples": args.examples, "threads": args.threads, "rounds": args.rounds,
              "sets": {}}
    for name in args.only or list(SETS):
        cells = quality(name)
        _, chosen = distilled(cells)
        teacher, student = SETS[name][1], os.path.dirname(cells[chosen or ALONE]["folder"])
        student_run = os.path.join(student, "seed-42") if os.path.isdir(os.path.join(student, "seed-42")) else \
            cells[chosen or ALONE]["folder"]
        timed = speed([teacher, student_run], args.examples, args.threads, args.rounds)
        cells["speed"] = {"teacher": timed[teacher], "student": timed[student_run],
                          "batch32_x": timed[teacher]["batch32_ms"] / timed[student_run]["batch32_ms"],
                          "batch1_x": timed[teacher]["batch1_ms"] / timed[student_run]["batch1_ms"]}
        cells["sizes"] = {"teacher": encoder_size(teacher), "student": encoder_size(student_run)}
        result["sets"][name] = cells
        print(name, json.dumps(cells["speed"]), flush=True)
    write_json(args.out, result)
    keep_section(args.book, "distill", f"{SECTION}\n\n{markdown(result)}")
    print(markdown(result))
    return 0


def _cell(mean, std):
    return "–" if mean is None else f"{mean:.4f}" + (f" ± {std:.4f}" if std is not None else "")


def markdown(result):
    lines = [
        "Step 20's distillation. The teacher is Step 17's multilingual-e5-small (12 layers, its vocabulary pruned to "
        "the data), fine-tuned; the student is its first 3 layers (`model.encoder.layers: 3`), trained the same "
        "steps at the same rate, alone (`distill.alpha: 0`: no teacher is run) or distilled (`distill.alpha: 0.5`, and 0.9 on TNEWS; "
        "`temperature: 2`: that share of the loss the T² KL to the teacher's softened logits; per word for the CRF "
        "tagger, on its emissions). The goal is judged on the distilled setting with the best dev mean. Students: 3 seeds, mean ± sample std, the verdict on dev by the sweeps' rule (distilled "
        "against alone); the teacher: one run (seed 42). Speed: each `best/` on ONNX Runtime fp32 with "
        f"{result['threads']} threads, model time per example over {result['examples']} dev examples (tokenised "
        f"beforehand), the best of {result['rounds']} alternating rounds. {machine_line(result['machine'])}",
        "",
        "Commands, in order (the teachers, then each student sweep, then this table):",
        "",
        "```bash",
        *[SETS[name][2] for name in result["sets"]],
        *[f"python run_trainer.py --param_path {SETS[name][4]} --sweep distill.alpha={ALPHAS.get(name, '0.0,0.5')} "
          f"--seeds 3" for name in result["sets"]],
        "python benchmarks/distill.py",
        "```",
        "",
        "| set | model | layers | dev | test | verdict on dev (vs alone) | gap to the teacher (points) | ms/example, "
        "batch 32 | ms/example, batch 1 | speed vs teacher (32 / 1) |",
        "|---|---|---:|---|---|---|---:|---:|---:|---|"]
    goals = []
    for name, cells in result["sets"].items():
        title, metric = SETS[name][0], SETS[name][5]
        teacher, timed = cells["teacher"], cells["speed"]
        layers_t, layers_s = cells["sizes"]["teacher"][0], cells["sizes"]["student"][0]
        test = "–" if teacher["test"] is None else f"{teacher['test']:.4f}"
        lines.append(f"| {title} | teacher | {layers_t} | {teacher['dev']:.4f} (1 run) | {test} | – | – | "
                     f"{timed['teacher']['batch32_ms']:.2f} | {timed['teacher']['batch1_ms']:.2f} | 1× |")
        settings, chosen = distilled(cells)
        rows = [(ALONE, "student alone")] + [(k, f"student distilled ({k.replace('=', ' ')})") for k in settings]
        for setting, label in rows:
            if setting not in cells:
                continue
            c = cells[setting]
            gap = f"{(c['dev_mean'] - teacher['dev']) * 100:+.2f}"
            if c["test_mean"] is not None and teacher["test"] is not None:
                gap += f" (test {(c['test_mean'] - teacher['test']) * 100:+.2f})"
            verdict = "baseline" if setting == ALONE else (c["verdict"] or "–")
            if setting != ALONE and c.get("p_value") is not None:
                verdict += f" (Welch p {c['p_value']:.3f})"
            lines.append(f"| {title} | {label} | {layers_s} | {_cell(c['dev_mean'], c['dev_std'])} "
                         f"({c['seeds']} seeds) | {_cell(c['test_mean'], c['test_std'])} | {verdict} | {gap} | "
                         f"{timed['student']['batch32_ms']:.2f} | {timed['student']['batch1_ms']:.2f} | "
                         f"{timed['batch32_x']:.2f}× / {timed['batch1_x']:.2f}× |")
        if chosen:
            gap = (teacher["dev"] - cells[chosen]["dev_mean"]) * 100
            met = gap <= GOAL[name] and timed["batch32_x"] >= 4 and timed["batch1_x"] >= 4
            on_test = ""
            if cells[chosen]["test_mean"] is not None and teacher["test"] is not None:
                test_gap = (teacher["test"] - cells[chosen]["test_mean"]) * 100
                on_test = f"; on test by {test_gap:.2f} ({'within' if test_gap <= GOAL[name] else 'beyond'} it)"
            alone = (teacher["dev"] - cells[ALONE]["dev_mean"]) * 100 if ALONE in cells else None
            goals.append(f"{title}: the distilled student chosen on dev ({chosen.replace('=', ' ')}) trails the teacher by {gap:.2f} points of dev {metric} "
                         f"(goal: at most {GOAL[name]:g}{on_test}; the student alone: {alone:.2f}) at "
                         f"{timed['batch32_x']:.2f}× / {timed['batch1_x']:.2f}× its speed (goal: 4×): "
                         f"{'met' if met else 'not met'} on dev.")
    return "\n".join(lines + [""] + [f"- {g}" for g in goals]) + "\n"


if __name__ == "__main__":
    sys.exit(main())
