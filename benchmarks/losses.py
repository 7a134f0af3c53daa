"""Forward+backward time of every registered loss, relative to ``ce``.

    MKL_DEBUG_CPU_TYPE=5 OMP_NUM_THREADS=1 python benchmarks/losses.py [--repeats 50] [--model]

Workloads (float32, CPU):

* classification: token-level logits ``[32, 128, 17]``, int labels with ~15%
  ``ignore_index``; baseline ``ce`` on the same input.
* pair: ``pos_scores [64]`` and ``neg_scores [64, 64]`` (rows of a 64x64
  similarity matrix); baseline ``ce`` over that ``[64, 65]`` score matrix.
* embedding: ``query``, ``positive``, ``negative`` ``[64, 128]``; baseline
  ``ce`` over the in-batch similarity matrix ``query @ positive.T`` (the
  matmul included).

Each loss is built with its defaults through ``build_loss`` (``ohem`` mines
``ce``). Each time is the median of ``--repeats`` timed runs after warm-up;
the table is printed as markdown.

``--model`` adds a second table: what the loss costs in a real step. One
forward + backward (no optimizer step) of the ``ErnieFcSeqLabel`` tagger on
``configs/ernie_tiny.json`` (from scratch, 5000-word vocabulary) over a
32 x 128 token batch with 17 tags and the same ~15% ignored labels, for each
classification loss that takes class indices (all but ``kl``), in
round-robin order so machine drift hits every loss alike; dropout on.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("MKL_DEBUG_CPU_TYPE", "5")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402

from appzoo.losses import build_loss, losses_for  # noqa: E402
from benchmarks.record import machine, machine_line  # noqa: E402


def median_time(step, repeats, warmup=5):
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def leaf(array):
    x = paddle.to_tensor(array.astype("float32"))
    x.stop_gradient = False
    return x


def run_step(loss_fn, inputs):
    def step():
        for x in inputs:
            x.clear_gradient()
        loss = loss_fn()
        loss.backward()
        # force completion on the device before the clock stops
        float(loss)
    return step


def model_step_table(labels_np, repeats, rounds=5):
    """Median forward + backward time of the ERNIE tagger per loss; rows ``(name, seconds)``."""
    import tempfile

    from appzoo.encoders import build_encoder, parse_encoder_spec
    from appzoo.task.model import classification_loss
    from tasks.sequence_labeling.model import ErnieFcSeqLabel

    paddle.seed(0)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = parse_encoder_spec({"config": os.path.join(root, "configs", "ernie_tiny.json")})
    with tempfile.TemporaryDirectory() as work_dir:
        encoder, _ = build_encoder(spec, lambda: [chr(0x4e00 + i) for i in range(5000)], work_dir)
    model = ErnieFcSeqLabel(encoder, num_labels=17)
    model.train()
    batch, length = labels_np.shape
    ids = paddle.randint(5, 5000, [batch, length])
    positions = paddle.arange(length, dtype="int64").unsqueeze(0).expand([batch, length])
    labels = paddle.to_tensor(labels_np)
    names = [n for n in losses_for("classification") if n != "kl"]
    names.remove("ce")
    names.insert(0, "ce")
    losses = {n: classification_loss({"name": n, "base": {"name": "ce"}} if n == "ohem" else {"name": n})
              for n in names}

    def step(name):
        model.loss_fn = losses[name]
        loss = model(ids, positions, labels=labels)["loss"]
        loss.backward()
        model.clear_gradients()
        float(loss)

    times = {n: [] for n in names}
    per_round = max(1, repeats // rounds)
    for _ in range(rounds):
        for n in names:
            for _ in range(2):
                step(n)  # warm-up after switching
            for _ in range(per_round):
                start = time.perf_counter()
                step(n)
                times[n].append(time.perf_counter() - start)
    return [(n, statistics.median(times[n])) for n in names]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--model", action="store_true",
                        help="also time a forward + backward of the ERNIE tagger with each loss")
    parser.add_argument("--model-repeats", type=int, default=20)
    args = parser.parse_args()
    paddle.set_device("cpu")
    rng = np.random.default_rng(0)

    # classification
    logits = leaf(rng.normal(size=(32, 128, 17)) * 2)
    labels_np = rng.integers(0, 17, size=(32, 128))
    labels_np[rng.random((32, 128)) < 0.15] = -100
    labels = paddle.to_tensor(labels_np)
    soft = paddle.to_tensor(np.where(labels_np[..., None] == -100, -100.0,
                                     F.softmax(paddle.to_tensor(rng.normal(size=(32, 128, 17)))).numpy())
                            .astype("float32"))
    # pair
    scores = np.tanh(rng.normal(size=(64, 65)))
    pos, neg = leaf(scores[:, 0]), leaf(scores[:, 1:])
    score_matrix = leaf(scores)
    pair_labels = paddle.zeros([64], dtype="int64")
    # embedding
    q, p, n = (leaf(rng.normal(size=(64, 128))) for _ in range(3))
    diag = paddle.arange(64, dtype="int64")

    ce = build_loss({"name": "ce"})
    rows = []
    baselines = {
        "classification": median_time(run_step(lambda: ce(logits, labels), [logits]), args.repeats),
        "pair": median_time(run_step(lambda: ce(score_matrix, pair_labels), [score_matrix]), args.repeats),
        "embedding": median_time(run_step(lambda: ce(paddle.matmul(q, p, transpose_y=True), diag), [q, p]),
                                 args.repeats),
    }
    paddle_ce = median_time(run_step(lambda: F.cross_entropy(logits, labels, ignore_index=-100), [logits]),
                            args.repeats)
    rows.append(("classification", "paddle F.cross_entropy (reference)", paddle_ce, baselines["classification"]))
    for family in ("classification", "pair", "embedding"):
        for name in losses_for(family):
            cfg = {"name": name, "base": {"name": "ce"}} if name == "ohem" else {"name": name}
            layer = build_loss(cfg)
            if family == "classification":
                target = soft if name == "kl" else labels
                fn, inputs = (lambda layer=layer, target=target: layer(logits, target)), [logits]
            elif family == "pair":
                fn, inputs = (lambda layer=layer: layer(pos, neg)), [pos, neg]
            else:
                fn, inputs = (lambda layer=layer: layer(q, p, n)), [q, p, n]
            rows.append((family, name, median_time(run_step(fn, inputs), args.repeats), baselines[family]))

    print(f"forward+backward, median of {args.repeats}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; "
          f"{machine_line(machine(('paddlepaddle',), optional=()))}\n")
    print("| family | loss | time (ms) | × ce | ≤ 1.3× |")
    print("|---|---|---:|---:|:---:|")
    for family, name, seconds, base in rows:
        ratio = seconds / base
        print(f"| {family} | {name} | {seconds * 1e3:.3f} | {ratio:.2f} | {'yes' if ratio <= 1.3 else 'no'} |")
    print("\nce baselines (ms): " + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in baselines.items()))
    if args.model:
        loss_time = {name: seconds for family, name, seconds, _ in rows if family == "classification"}
        steps = model_step_table(labels_np, args.model_repeats)
        base = steps[0][1]
        print(f"\nErnieFcSeqLabel (configs/ernie_tiny.json) forward + backward on 32 x 128 tokens, 17 tags, "
              f"median of {args.model_repeats}\n")
        print("| loss | step (ms) | × ce step | loss alone (ms, table above) | loss share of step |")
        print("|---|---:|---:|---:|---:|")
        for name, seconds in steps:
            print(f"| {name} | {seconds * 1e3:.1f} | {seconds / base:.3f} | {loss_time[name] * 1e3:.3f} | "
                  f"{loss_time[name] / seconds:.1%} |")


if __name__ == "__main__":
    main()
