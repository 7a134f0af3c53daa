"""Step time, peak memory and cache size at each ``model.encoder.freeze_layers``, on TNEWS and Weibo.

    python benchmarks/frozen_prefix.py                       # every set and depth, one process each
    python benchmarks/frozen_prefix.py --sets weibo --freeze 0 9

Each (set, depth) is one process (its peak RSS is its own): the set's benchmark config
(``benchmarks/configs/cls_tnews_e5_frozen.json``, ``ner_weibo_e5_bilstm_crf.json``) on the first ``--train`` training
examples and ``--dev`` dev examples, ``--steps`` optimizer steps on one thread, the cache in a fresh folder. The
step time is the mean of the steps after the first two (the log's elapsed time); the cache fill is the time
from the start of the run to its first step less the same run's time at depth 0 (reading, converting and pruning
the encoder). Writes ``benchmarks/results/frozen_prefix.json`` and prints a Markdown table.
"""
import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETS = {"tnews": ("benchmarks/configs/cls_tnews_e5_frozen.json", "tsv"),
        "weibo": ("benchmarks/configs/ner_weibo_e5_bilstm_crf.json", "conll")}
RESULT = os.path.join(ROOT, "benchmarks", "results", "frozen_prefix.json")


def _head(path, n, kind, out):
    """The first ``n`` examples of ``path`` (lines of a TSV, sentences of a CoNLL file) into ``out``."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if kind == "tsv":
        rows = text.splitlines()[:n]
        body = "\n".join(rows) + "\n"
    else:
        body = "\n\n".join(text.strip().split("\n\n")[:n]) + "\n"
    with open(out, "w", encoding="utf-8") as f:
        f.write(body)
    return out


def one(name, depth, steps, train, dev):
    """Run one (set, depth) in this process; print its row as JSON."""
    sys.path.insert(0, ROOT)
    os.chdir(ROOT)
    import run_trainer

    config_path, kind = SETS[name]
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    work = tempfile.mkdtemp(prefix=f"frozen-{name}-{depth}-")
    data = config["dataset_reader"]
    data["train"] = _head(data["train"], train, kind, os.path.join(work, "train"))
    data["dev"] = _head(data["dev"], dev, kind, os.path.join(work, "dev"))
    data.pop("test", None)
    encoder = config["model"]["encoder"]
    encoder.update({"freeze_layers": depth, "cache_dir": os.path.join(work, "cache")})
    config["trainer"].update({"output_dir": os.path.join(work, "run"), "max_steps": steps, "logging_steps": 1,
                              "eval_steps": 0, "patience": 0, "do": ["train"], "plots": False, "num_threads": 1,
                              "progress_bar": False})
    path = os.path.join(work, "params.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    started = time.time()
    code = run_trainer.main(["--param_path", path])
    rows = [json.loads(line) for line in open(os.path.join(work, "run", "train_log.jsonl"), encoding="utf-8")]
    rows = [r for r in rows if "loss" in r]
    cache = os.path.join(work, "cache")
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache) for f in fs) if os.path.isdir(cache) else 0
    print(json.dumps({"set": name, "freeze_layers": depth, "exit": code,
                      "step_s": round((rows[-1]["elapsed_s"] - rows[1]["elapsed_s"]) / (len(rows) - 2), 3),
                      "to_first_step_s": round(rows[0]["elapsed_s"], 1), "total_s": round(time.time() - started, 1),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                      "cache_mb": round(size / 2**20, 1), "texts": train + dev}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--freeze", nargs="+", type=int, default=[0, 6, 9, 12])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--train", type=int, default=512)
    parser.add_argument("--dev", type=int, default=128)
    parser.add_argument("--one", nargs=2, metavar=("SET", "DEPTH"))
    args = parser.parse_args(argv)
    if args.one:
        return one(args.one[0], int(args.one[1]), args.steps, args.train, args.dev)
    rows = []
    for name in args.sets:
        for depth in args.freeze:
            out = subprocess.run([sys.executable, __file__, "--one", name, str(depth), "--steps", str(args.steps),
                                  "--train", str(args.train), "--dev", str(args.dev)],
                                 capture_output=True, text=True, cwd=ROOT)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
    base = {r["set"]: r for r in rows if r["freeze_layers"] == 0}
    for r in rows:
        b = base.get(r["set"])
        r["speedup"] = round(b["step_s"] / r["step_s"], 2) if b else None
        r["cache_fill_s"] = round(r["to_first_step_s"] - b["to_first_step_s"], 1) if b else None
    os.makedirs(os.path.dirname(RESULT), exist_ok=True)
    result = {"command": "python benchmarks/frozen_prefix.py " + " ".join(argv or sys.argv[1:]),
              "machine": platform.processor() or platform.machine(), "python": platform.python_version(),
              "threads": 1, "rows": rows}
    with open(RESULT, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    print("| set | freeze_layers | step (s) | × depth 0 | peak RSS (MB) | cache (MB, texts) | cache fill (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['set']} | {r['freeze_layers']} | {r['step_s']} | {r['speedup']} | {r['peak_rss_mb']} | "
              f"{r['cache_mb']} ({r['texts']}) | {r['cache_fill_s']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
