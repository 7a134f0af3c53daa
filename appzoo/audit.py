"""A look at the data before training (``--do audit``, or ``trainer.audit: true``).

What ``spacy debug data`` does for spaCy: per split the label (or tag)
counts and the imbalance ratio, lengths against ``max_seq_len``, tokens the
vocabulary does not know, texts shared between splits (leakage), the same
text with different labels, and what the task's reader adds (windows that
cut entities, matching queries without a positive or a negative, in-batch
false negatives). Writes ``audit.md`` and ``audit.json``; every warning is
also printed as one line.
"""
import collections

import numpy as np


#: a split's largest class over its smallest above this is worth a warning
IMBALANCE_WARNING = 10.0


def audit(reader, splits, features, tokenizer, labels, max_seq_len, batch_size):
    """Findings as a JSON-able dict: ``{"splits": ..., "leakage": ..., "conflicts": ...,
    "task": ..., "warnings": [...]}``."""
    report = {"max_seq_len": max_seq_len, "splits": {}, "warnings": []}
    warn = report["warnings"].append
    for split, examples in splits.items():
        row = {"examples": len(examples)}
        counts = _label_counts(examples)
        if counts:
            row["labels"] = dict(counts.most_common())
            present = [c for c in counts.values() if c > 0]
            row["imbalance_ratio"] = round(max(present) / min(present), 2)
            if row["imbalance_ratio"] > IMBALANCE_WARNING:
                rare = min(counts, key=counts.get)
                warn(f"{split}: imbalance ratio {row['imbalance_ratio']:g} (most common "
                     f"{counts.most_common(1)[0][0]!r} {max(present)}, rarest {rare!r} {counts[rare]})")
            missing = [name for name in labels if name not in counts] if split != "predict" else []
            if missing and split in ("dev", "test"):
                row["labels_absent"] = missing
                warn(f"{split}: {len(missing)} label(s) of the label set never occur: {_clip(missing)}")
        feats = features.get(split) or []
        if feats:
            lengths = np.array([_longest(f) for f in feats])
            row["length_percentiles"] = {f"p{q}": int(np.percentile(lengths, q)) for q in (50, 90, 99)}
            row["length_percentiles"]["max"] = int(lengths.max())
            full = int((lengths >= max_seq_len).sum())
            row["at_max_seq_len"] = full
            if full:
                warn(f"{split}: {full} of {len(feats)} inputs reach max_seq_len={max_seq_len} (cut, or split "
                     f"into windows)")
            unk = tokenizer.unk_token_id
            ids = [i for f in feats for k, v in f.items() if k.endswith("input_ids") for i in v]
            if ids and unk is not None:
                share = sum(i == unk for i in ids) / len(ids)
                row["unknown_token_share"] = round(share, 4)
                if share > 0.01:
                    warn(f"{split}: {share:.1%} of the tokens are unknown to the vocabulary ([UNK])")
        report["splits"][split] = row
    unknown = _unknown_words(reader, splits.get("train", []), tokenizer)
    if unknown:
        report["unknown_words_train"] = unknown
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
    return report


def _longest(feature):
    """Tokens of a feature's longest input (a pair's two texts are two inputs)."""
    return max((len(v) for k, v in feature.items() if k.endswith("input_ids")), default=0)


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


def _label_counts(examples):
    counts = collections.Counter()
    for example in examples:
        value = example.get("label", example.get("tags"))
        if value is None:
            continue
        counts.update(value if isinstance(value, list) else [value])
    return counts


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


def _unknown_words(reader, examples, tokenizer, top=20):
    """The most frequent training words the vocabulary maps to [UNK]."""
    if tokenizer.unk_token is None or not examples:
        return None
    words = collections.Counter()
    for text in reader.texts(examples[:20000]):
        words.update(text.split() if " " in text.strip() else list(text))
    unknown = [(w, c) for w, c in words.most_common(5000)
               if tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w) or [tokenizer.unk_token])
               == [tokenizer.unk_token_id]]
    return {"distinct": len(unknown), "top": dict(unknown[:top])} if unknown else None


def to_markdown(report, title):
    """audit.md: the report as tables, warnings first."""
    lines = [f"# Data audit: {title}", ""]
    if report["warnings"]:
        lines += ["## Warnings", ""] + [f"- {w}" for w in report["warnings"]] + [""]
    lines += ["## Splits", "", f"max_seq_len {report['max_seq_len']}", "",
              "| split | examples | labels | imbalance (max/min) | length p50 / p90 / p99 / max | at max_seq_len | [UNK] share |",
              "|---|---|---|---|---|---|---|"]
    for split, row in report["splits"].items():
        p = row.get("length_percentiles")
        lengths = f"{p['p50']} / {p['p90']} / {p['p99']} / {p['max']}" if p else "—"
        lines.append(f"| {split} | {row['examples']} | {len(row.get('labels', {})) or '—'} | "
                     f"{row.get('imbalance_ratio', '—')} | {lengths} | {row.get('at_max_seq_len', '—')} | "
                     f"{row.get('unknown_token_share', '—')} |")
    for split, row in report["splits"].items():
        if row.get("labels"):
            total = sum(row["labels"].values())
            lines += ["", f"### Labels in {split}", "", "| label | count | share |", "|---|---|---|"]
            lines += [f"| {k} | {v} | {v / total:.2%} |" for k, v in row["labels"].items()]
    if report.get("unknown_words_train"):
        u = report["unknown_words_train"]
        lines += ["", f"## Unknown words (train): {u['distinct']} distinct", "",
                  ", ".join(f"`{w}` ({c})" for w, c in u["top"].items())]
    lines += ["", "## Leakage and conflicts", "", "| between | shared texts | examples |", "|---|---|---|"]
    lines += [f"| {k} | {v['count']} | {_clip(v['examples'])} |" for k, v in report["leakage"].items()]
    lines += ["", f"Texts with conflicting labels: {report['conflicts']['count']}"
              + (f" (e.g. {_clip(report['conflicts']['examples'])})" if report["conflicts"]["count"] else "")]
    if report.get("task"):
        lines += ["", "## Task", ""] + [f"- **{k}**: {_clip(v, 300)}" for k, v in report["task"].items()]
    return "\n".join(lines) + "\n"


def _clip(value, width=160):
    text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[:width - 3] + "..."
