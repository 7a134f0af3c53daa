"""What ``model.encoder.prune_vocab`` saves: parameters, the time of a training step and peak memory, pruned vs not,
measured in one run on each param file.

    python benchmarks/prune_vocab.py benchmarks/configs/cls_tnews_e5.json benchmarks/configs/ner_weibo_e5.json

For each param file, two fresh processes train ``--steps`` steps (no dev evaluation), once with the vocabulary
pruned and once with it whole. Reported: the encoder's parameters (the run's own note), the median time of a
step after the first ``--skip`` logged ones (from train_log.jsonl), and the peak resident memory of the process
(``wait4``'s ru_maxrss). Writes ``benchmarks/results/prune_vocab.json`` and the section
``benchmarks/results/prune_vocab.md`` that ``results_book.py`` puts into RESULTS.md. What pruning does to the
metric is measured by full runs (benchmarks/RESULTS.md names them).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from appzoo.utils.files import write_json, write_text  # noqa: E402
from benchmarks.record import machine  # noqa: E402


def measure(param_path, pruned, steps, threads, work):
    out = os.path.join(work, f"{os.path.basename(param_path)}-{'pruned' if pruned else 'whole'}")
    command = [sys.executable, os.path.join(ROOT, "run_trainer.py"), "--param_path", param_path, "--do", "train",
               "--set", f"model.encoder.prune_vocab={'true' if pruned else 'false'}",
               "--set", f"trainer.output_dir={out}", "--set", f"trainer.max_steps={steps}",
               "--set", "trainer.logging_steps=1", "--set", "trainer.eval_steps=0", "--set", "dataset_reader.dev=null",
               "--set", f"trainer.num_threads={threads}", "--set", "trainer.progress_bar=false",
               "--set", "trainer.plots=false"]
    log = out + ".log"
    with open(log, "w", encoding="utf-8") as f:
        process = subprocess.Popen(command, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)  # the child's own peak memory, as it ends
    with open(log, encoding="utf-8") as f:
        said = f.read()
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(command)} exited {os.waitstatus_to_exitcode(status)}:\n{said[-2000:]}")
    with open(os.path.join(out, "train_log.jsonl"), encoding="utf-8") as f:
        times = [json.loads(line)["elapsed_s"] for line in f if '"loss"' in line]
    found = re.search(r"encoder parameters ([\d.]+M) -> ([\d.]+M)", said)
    return {"steps": steps, "seconds_per_step": round(statistics.median(b - a for a, b in zip(times, times[1:])), 3),
            "parameters": found.group(2) if found else None, "before": found.group(1) if found else None,
            "peak_rss_gb": round(usage.ru_maxrss / 2**20, 2)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("param_paths", nargs="+")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "prune_vocab"))
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="appzoo-prune-bench-")
    results = {"cpu": machine()["cpu"], "threads": args.threads, "runs": {}}
    try:
        for path in args.param_paths:
            pruned = measure(path, True, args.steps, args.threads, work)
            whole = measure(path, False, args.steps, args.threads, work)
            results["runs"][path] = {"pruned": pruned, "whole": whole}
            print(path, json.dumps(results["runs"][path]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_json(args.out + ".json", results)
    lines = ["## Vocabulary pruning (`model.encoder.prune_vocab`): parameters, step time, peak memory", "",
             f"`python benchmarks/prune_vocab.py {' '.join(args.param_paths)} --steps {args.steps} --threads "
             f"{args.threads}`: per param file, two fresh processes train {args.steps} steps (no dev evaluation), "
             f"the vocabulary pruned and whole; {args.threads} threads, {results['cpu']} CPU. Step time: median "
             f"over the logged steps. Memory: the peak resident set of the process.", "",
             "| param file | parameters, whole → pruned | s per step, whole → pruned | peak RSS GB, whole → pruned |",
             "|---|---|---|---|"]
    for path, run in results["runs"].items():
        w, p = run["whole"], run["pruned"]
        lines.append(f"| `{path}` | {p['before']} → {p['parameters']} | {w['seconds_per_step']} → "
                     f"{p['seconds_per_step']} ({w['seconds_per_step'] / p['seconds_per_step']:.2f}×) | "
                     f"{w['peak_rss_gb']} → {p['peak_rss_gb']} |")
    write_text(args.out + ".md", "\n".join(lines) + "\n")
    print(f"wrote {args.out}.json and {args.out}.md")


if __name__ == "__main__":
    main()
