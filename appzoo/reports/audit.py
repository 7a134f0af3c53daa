"""A look at the data before training (``--do audit``, or ``trainer.audit: true``).

What ``spacy debug data`` does for spaCy: per split the class counts and
the imbalance ratio (the reader says what a class is: a label, or for NER an
entity type), lengths in tokens before the cut against ``max_seq_len``, the
words the tokenizer maps to ``[UNK]``, texts shared between splits
(leakage), the same text with different labels, and what the task's reader
adds (windows that cut entities, matching queries without a positive or a
negative, in-batch false negatives); then what to try, each line naming the
key that acts on a finding. Writes ``audit.md`` and ``audit.json`` (run
artifacts: see :meth:`appzoo.store.archive.RunFolder.replace_run`); every warning
and every line of advice is also printed as one line.
"""
import collections

import numpy as np

from appzoo.utils.text import clip as cut
from appzoo.utils.markdown import literal
from appzoo.utils import progress


#: a split's largest class over its smallest above this is worth a warning
IMBALANCE_WARNING = 10.0


#: a dev class with fewer examples than this has a noisy F1
FEW_DEV_EXAMPLES = 10
#: the budget inputs are encoded with to measure them before any cut
UNCUT = 10 ** 9


def audit(reader, splits, features, tokenizer, labels, max_seq_len, batch_size):
    """Findings as a JSON-able dict: ``{"splits": ..., "leakage": ..., "conflicts": ...,
    "task": ..., "warnings": [...], "what_to_try": [...]}``. ``features`` are the
    run's (cut to ``max_seq_len``); lengths are measured on the inputs before
    that cut, by encoding each split again without one."""
    report = {"max_seq_len": max_seq_len, "long_inputs": reader.long_inputs, "splits": {}, "warnings": []}
    warn = report["warnings"].append
    words = _WordPieces(tokenizer)
    for split, examples in splits.items():
        row = {"examples": len(examples)}
        counts, names = reader.audit_classes(examples, labels)
        if counts:
            row["labels"] = dict(counts.most_common())
            present = [c for c in counts.values() if c > 0]
            row["imbalance_ratio"] = round(max(present) / min(present), 2)
            if row["imbalance_ratio"] > IMBALANCE_WARNING:
                rare = min(counts, key=counts.get)
                warn(f"{split}: imbalance ratio {row['imbalance_ratio']:g} (most common "
                     f"{counts.most_common(1)[0][0]!r} {max(present)}, rarest {rare!r} {counts[rare]})")
            missing = [name for name in names if name not in counts]
            if missing and split in ("dev", "test"):
                row["labels_absent"] = missing
                warn(f"{split}: {len(missing)} label(s) of the label set never occur: {_clip(missing)}")
        if examples:
            row.update(input_lengths(reader, examples, tokenizer, labels, max_seq_len, split))
            if row["longer_than_max_seq_len"]:
                what = "split into windows" if reader.long_inputs == "windows" else "cut to it"
                warn(f"{split}: {row['longer_than_max_seq_len']} of {len(examples)} inputs "
                     f"({_percent(row['share_cut'])}) are longer than max_seq_len={max_seq_len} tokens (the longest "
                     f"{row['length_percentiles']['max']}) and are {what}")
            unknown = words.unknown(reader.texts(examples))
            if unknown is not None:
                row["unknown_token_share"] = unknown.pop("share")
                if unknown["distinct"]:
                    row["unknown_words"] = unknown
                if row["unknown_token_share"] > 0.01:
                    warn(f"{split}: {row['unknown_token_share']:.1%} of the tokens are unknown to the vocabulary "
                         f"([UNK]), e.g. {_clip(list(unknown['top']))}")
        report["splits"][split] = row
    report["leakage"] = _leakage(splits)
    for pair, shared in report["leakage"].items():
        if shared["count"]:
            warn(f"leakage: {shared['count']} text(s) of {pair.split('-')[1]} also occur in "
                 f"{pair.split('-')[0]}, e.g. {_clip(shared['examples'])}")
    report["conflicts"] = _conflicts(splits)
    if report["conflicts"]["count"]:
        warn(f"conflicts: {report['conflicts']['count']} text(s) occur with different labels, e.g. "
             f"{_clip(report['conflicts']['examples'])}")
    task = reader.audit(splits, features, batch_size)
    if task:
        report["task"] = task
        report["warnings"].extend(task.pop("warnings", []))
    report["what_to_try"] = what_to_try(report, balanced_batches=reader.sampling_classes([]) is not None)
    return report


def input_lengths(reader, examples, tokenizer, labels, max_seq_len, split):
    """Tokens of each example's longest input (with its special tokens) before
    any cut: the percentiles, and how many are longer than ``max_seq_len``."""
    quiet, progress.ENABLED = progress.ENABLED, False
    try:
        lengths = np.array([_longest(f) for f in reader.encode(examples, tokenizer, labels, UNCUT, split)])
    finally:
        progress.ENABLED = quiet
    longer = int((lengths > max_seq_len).sum())
    percentiles = {f"p{q}": int(np.ceil(np.percentile(lengths, q))) for q in (50, 90, 99)}
    percentiles["max"] = int(lengths.max())
    return {"length_percentiles": percentiles, "longer_than_max_seq_len": longer,
            "share_cut": round(longer / len(lengths), 4)}


def _longest(feature):
    """Tokens of a feature's longest input (a pair's two texts are two inputs)."""
    return max((len(v) for k, v in feature.items() if k.endswith("input_ids")), default=0)


class _WordPieces:
    """What [UNK] means: the words (as the tokenizer splits a text before its
    word pieces) whose pieces include ``[UNK]``, counted in the same pieces as
    the share, so that the list and the share cannot disagree."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        basic = getattr(tokenizer, "basic_tokenizer", None)  # BERT/ERNIE: whitespace, punctuation, CJK characters
        self.words = basic.tokenize if basic is not None else str.split
        self.cache = {}  # word -> (pieces, unknown pieces)

    def unknown(self, texts, top=20):
        """``{"share", "distinct", "occurrences", "top"}`` over ``texts``; None without an ``[UNK]`` token."""
        unk = self.tokenizer.unk_token
        if unk is None:
            return None
        counts = collections.Counter(w for text in texts for w in self.words(text))
        pieces = unknown_pieces = 0
        unknown = collections.Counter()
        for word, n in counts.items():
            if word not in self.cache:
                found = self.tokenizer.tokenize(word)
                self.cache[word] = (len(found), sum(p == unk for p in found))
            total, bad = self.cache[word]
            pieces += n * total
            unknown_pieces += n * bad
            if bad:
                unknown[word] = n
        return {"share": round(unknown_pieces / pieces, 4) if pieces else 0.0, "distinct": len(unknown),
                "occurrences": sum(unknown.values()), "top": dict(unknown.most_common(top))}


def what_to_try(report, balanced_batches=True):
    """Short advice from the findings, each pointing at the key that acts on it:
    ``[{"key", "try", "why"}]``."""
    advice = []
    splits = report["splits"]
    train = splits.get("train", {})
    if balanced_batches and train.get("imbalance_ratio", 0) > IMBALANCE_WARNING:
        counts = train["labels"]
        rare = min(counts, key=counts.get)
        advice.append({"key": "trainer.sampler", "try": "balanced",
                       "why": f"train classes are {train['imbalance_ratio']:g} apart ({next(iter(counts))!r} "
                              f"{max(counts.values())}, {rare!r} {counts[rare]}); balanced batches draw each class "
                              f"by the square root of its frequency"})
    # worth a key change when more than 1% are cut (p99 beyond max_seq_len); a few outliers are not
    cut = {s: row for s, row in splits.items()
           if row.get("length_percentiles", {}).get("p99", 0) > report["max_seq_len"]}
    if cut:
        first, row = next(iter(cut.items()))
        p99 = row["length_percentiles"]["p99"]
        if report.get("long_inputs") == "windows":
            remedy = (f"raise it toward {p99} ({first} p99) for fewer windows, or dataset_reader.window_overlap "
                      f"for more context at each cut")
        else:
            remedy = (f"raise it toward {p99} ({first} p99, within the encoder's positions), or split long texts "
                      f"into windows")
        advice.append({"key": "dataset_reader.max_seq_len", "try": p99,
                       "why": f"{first}: {_percent(row['share_cut'])} of the inputs are longer than "
                              f"{report['max_seq_len']} tokens; {remedy}"})
    few = {k: v for k, v in splits.get("dev", {}).get("labels", {}).items() if v < FEW_DEV_EXAMPLES}
    if few:
        listed = ", ".join(f"{k!r} ({v})" for k, v in sorted(few.items(), key=lambda kv: kv[1]))
        advice.append({"key": "dataset_reader.dev", "try": "more dev examples of these classes",
                       "why": f"dev has fewer than {FEW_DEV_EXAMPLES} examples of {listed}: "
                              f"{'its' if len(few) == 1 else 'their'} F1 will be noisy"})
    for pair, shared in report.get("leakage", {}).items():
        if shared["count"]:
            first, second = pair.split("-")
            advice.append({"key": f"dataset_reader.{second}", "try": f"remove the {shared['count']} shared text(s)",
                           "why": f"{shared['count']} text(s) of {second} also occur in {first}: a score on them "
                                  f"measures memory, not generalisation"})
    return advice


def key_of(example):
    """The text an example is about: a text, a token sequence, or a pair."""
    if "text" in example:
        return example["text"]
    if "tokens" in example:  # characters (Chinese) join without spaces, words with them
        tokens = example["tokens"]
        return "".join(tokens) if all(len(t) == 1 for t in tokens) else " ".join(tokens)
    if "text_a" in example:
        return f"{example['text_a']}\t{example['text_b']}"
    if "query" in example:
        return f"{example['query']}\t{example['positive']}"
    return None


def label_of(example):
    value = example.get("label", example.get("tags"))
    return tuple(value) if isinstance(value, list) else value


def _leakage(splits):
    keys = {s: {key_of(e) for e in ex} - {None} for s, ex in splits.items()}
    out = {}
    for first, second in (("train", "dev"), ("train", "test"), ("dev", "test")):
        if first in keys and second in keys:
            shared = sorted(keys[first] & keys[second])
            out[f"{first}-{second}"] = {"count": len(shared), "examples": shared[:5]}
    return out


def _conflicts(splits):
    seen = collections.defaultdict(set)
    for split in ("train", "dev", "test"):
        for example in splits.get(split, []):
            key, label = key_of(example), label_of(example)
            if key is not None and label is not None:
                seen[key].add(label)
    bad = sorted(k for k, v in seen.items() if len(v) > 1)
    return {"count": len(bad), "examples": [f"{k} -> {sorted(map(str, seen[k]))}" for k in bad[:5]]}


def to_markdown(report, title):
    """audit.md: the report as tables, warnings first; what comes from the data (class names, texts, words, and
    the warnings that quote them) as :func:`~appzoo.utils.markdown.literal`."""
    lines = [f"# Data audit: {literal(title)}", ""]
    if report["warnings"]:
        lines += ["## Warnings", ""] + [f"- {literal(w)}" for w in report["warnings"]] + [""]
    if report.get("what_to_try"):
        lines += ["## What to try", ""] + [f"- `{a['key']}: {a['try']}`: {literal(a['why'])}"
                                           for a in report["what_to_try"]]
        lines.append("")
    what = "split into windows" if report.get("long_inputs") == "windows" else "cut"
    lines += ["## Splits", "", f"Lengths are in tokens (word pieces, with [CLS]/[SEP]) before any cut; inputs "
              f"longer than max_seq_len {report['max_seq_len']} are {what}.", "",
              "| split | examples | classes | imbalance (max/min) | length p50 / p90 / p99 / max | longer than "
              "max_seq_len | [UNK] share |",
              "|---|---|---|---|---|---|---|"]
    for split, row in report["splits"].items():
        p = row.get("length_percentiles")
        lengths = f"{p['p50']} / {p['p90']} / {p['p99']} / {p['max']}" if p else "—"
        longer = f"{row['longer_than_max_seq_len']} ({_percent(row['share_cut'])})" if p else "—"
        lines.append(f"| {split} | {row['examples']} | {len(row.get('labels', {})) or '—'} | "
                     f"{row.get('imbalance_ratio', '—')} | {lengths} | {longer} | "
                     f"{row.get('unknown_token_share', '—')} |")
    for split, row in report["splits"].items():
        if row.get("labels"):
            total = sum(row["labels"].values())
            lines += ["", f"### Classes in {split}", "", "| class | count | share |", "|---|---|---|"]
            lines += [f"| {literal(k)} | {v} | {v / total:.2%} |" for k, v in row["labels"].items()]
    for split, row in report["splits"].items():
        u = row.get("unknown_words")
        if u:
            lines += ["", f"### Words with [UNK] pieces in {split}: {u['distinct']} distinct, {u['occurrences']} "
                          f"occurrence(s)", "", ", ".join(f"{literal(w)} ({c})" for w, c in u["top"].items())]
    lines += ["", "## Leakage and conflicts", "", "| between | shared texts | examples |", "|---|---|---|"]
    lines += [f"| {k} | {v['count']} | {literal(_clip(v['examples']))} |" for k, v in report["leakage"].items()]
    lines += ["", f"Texts with conflicting labels: {report['conflicts']['count']}"
              + (f" (e.g. {literal(_clip(report['conflicts']['examples']))})" if report["conflicts"]["count"] else "")]
    if report.get("task"):
        lines += ["", "## Task", ""] + [f"- **{literal(k)}**: {literal(_clip(v, 300))}"
                                        for k, v in report["task"].items()]
    return "\n".join(lines) + "\n"


def _percent(share):
    """A share as a percentage that never reads 0.0% for a few."""
    return "<0.1%" if 0 < share < 0.001 else f"{share:.1%}"


def _clip(value, width=160):
    text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    text = text.replace("\n", " ")  # one line for the console; audit.md escapes the rest
    return cut(text, width)
