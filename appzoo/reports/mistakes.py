"""What a model gets wrong on each evaluated split: ``predictions/<split>.jsonl``, ``errors.md`` and the class warnings.

A reader describes the mistakes of one split (:meth:`DatasetReader.mistakes
<appzoo.task.reader.DatasetReader.mistakes>`) with the helpers here, as a
dict every task shares:

* ``gold`` and ``predicted``: ``{class: count}`` (entities per type for NER);
* ``confusions``: ``[{"gold", "predicted", "count"}]``, the costliest first
  (``"(none)"`` stands for no entity or no label);
* ``rows``: one per mistake, ``{"kind", "class", "gold", "predicted",
  "confidence", "detail", "text", "index"}``; ``kind`` is one of
  :data:`KINDS`, ``confidence`` (None where the model gives none) orders a
  class's mistakes, most confident first, ``index`` is the example's
  position in its split; an entity's row also has ``entity`` and its
  ``context`` (the text before and after it in ``text``, which marks the
  entity in bold);
* for NER, ``sentences``: ``{index: {"pieces", "gold", "predicted"}}`` for
  each sentence with a mistake: its text in pieces, one per token (their
  concatenation is the sentence), and its ``[type, start, end]`` entities, so
  report.html can highlight them.

:func:`class_warnings` turns the split's per-class table and these counts
into a warning per class that was never predicted or scored F1 0; they go
into ``metrics.json`` (``zero_f1_classes``, ``class_warnings``), so sweeps
and the report read them there.
"""
import os
from collections import Counter

from appzoo.utils.text import clip as cut, clip_left
from appzoo.store.archive import RunFolder
from appzoo.utils.files import write_jsonl, write_text
from appzoo.utils.markdown import literal

#: kinds of mistake, in the order errors.md lists them, with their headings
KINDS = {
    "mistake": "Most confident mistakes per class",
    "missed": "Missed (in gold, not predicted)",
    "spurious": "Spurious (predicted, not in gold)",
    "wrong_type": "Wrong type (the gold span, another type)",
    "wrong_boundary": "Wrong boundary (overlaps a gold entity of the same type)",
}
NONE = "(none)"
#: mistakes shown per class and kind; confusions shown per split
PER_CLASS = 5
CONFUSIONS = 15
#: characters of context kept on each side of an entity, and of a text in a table
CONTEXT = 30
TEXT_WIDTH = 120


# ------------------------------------------------------------- describing
def label_mistakes(texts, gold, predicted, confidence=None, detail=None):
    """Mistakes of one label per example (a class, a matching decision).

    ``gold``/``predicted``: label names; ``confidence``: the model's
    confidence in its (wrong) prediction per example, or None;
    ``detail``: a short string per example shown beside it, or None."""
    rows = []
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if g != p:
            rows.append({"kind": "mistake", "class": g, "gold": g, "predicted": p,
                         "confidence": None if confidence is None else float(confidence[i]),
                         "detail": None if detail is None else detail[i], "text": texts[i], "index": i})
    pairs = Counter((r["gold"], r["predicted"]) for r in rows)
    return {"gold": dict(Counter(gold)), "predicted": dict(Counter(predicted)),
            "confusions": _confusions(pairs), "rows": rows}


def multilabel_mistakes(texts, gold, predicted, probs, labels):
    """Mistakes of label sets: a gold label left out (``missed``, its
    confidence the probability it is absent) and a label given that is not
    gold (``spurious``). A confusion pairs a missed label with a spurious one
    of the same example (or with ``(none)``)."""
    rows, pairs = [], Counter()
    for i, (g, p) in enumerate(zip(gold, predicted)):
        missed, spurious = [x for x in g if x not in p], [x for x in p if x not in g]
        for name in missed:
            rows.append({"kind": "missed", "class": name, "gold": name, "predicted": NONE,
                         "confidence": 1.0 - float(probs[i][labels.index(name)]), "detail": None, "text": texts[i],
                         "index": i})
        for name in spurious:
            rows.append({"kind": "spurious", "class": name, "gold": NONE, "predicted": name,
                         "confidence": float(probs[i][labels.index(name)]), "detail": None, "text": texts[i],
                         "index": i})
        for a in missed or [NONE]:
            for b in spurious or [NONE]:
                if (a, b) != (NONE, NONE):
                    pairs[a, b] += 1
    return {"gold": dict(Counter(x for g in gold for x in g)), "predicted": dict(Counter(x for p in predicted for x in p)),
            "confusions": _confusions(pairs), "rows": rows}


def entity_mistakes(sentences, gold, predicted, join):
    """Entity mistakes: ``sentences`` are token lists, ``gold``/``predicted``
    lists of ``(type, start, end)`` per sentence, ``join`` turns tokens into
    text. A predicted entity on a gold entity's exact span with another type
    is ``wrong_type``; one overlapping a gold entity of its type is
    ``wrong_boundary``; other gold entities are ``missed``, other predicted
    ones ``spurious``."""
    rows, pairs, shown = [], Counter(), {}
    for index, (tokens, g, p) in enumerate(zip(sentences, gold, predicted)):
        g, p = set(g), set(p)
        first = len(rows)
        both = g & p
        g_left, p_left = g - both, p - both
        for kind_, start, end in sorted(g_left, key=lambda e: e[1]):
            same_span = [e for e in p_left if e[1:] == (start, end)]
            overlap = [e for e in p_left if e[0] == kind_ and e[1] < end and start < e[2]]
            if same_span:
                found = same_span[0]
                rows.append(_entity_row("wrong_type", kind_, kind_, found[0], tokens, start, end, join))
                pairs[kind_, found[0]] += 1
            elif overlap:
                found = overlap[0]
                rows.append(_entity_row("wrong_boundary", kind_, kind_, kind_, tokens, start, end, join,
                                        f"predicted {join(tokens[found[1]:found[2]])}"))
            else:
                rows.append(_entity_row("missed", kind_, kind_, NONE, tokens, start, end, join))
                pairs[kind_, NONE] += 1
                continue
            p_left.discard(found)
        for kind_, start, end in sorted(p_left, key=lambda e: e[1]):
            rows.append(_entity_row("spurious", kind_, NONE, kind_, tokens, start, end, join))
            pairs[NONE, kind_] += 1
        for row in rows[first:]:
            row["index"] = index
        if len(rows) > first:
            shown[index] = {"pieces": _pieces(tokens, join), "gold": sorted(map(list, g), key=lambda e: e[1]),
                            "predicted": sorted(map(list, p), key=lambda e: e[1])}
    return {"gold": dict(Counter(e[0] for s in gold for e in s)),
            "predicted": dict(Counter(e[0] for s in predicted for e in s)),
            "confusions": _confusions(pairs), "rows": rows, "sentences": shown}


def _entity_row(kind, name, gold, predicted, tokens, start, end, join, detail=None):
    """One entity mistake, its sentence cut to :data:`CONTEXT` characters each side of the entity, which is bold.
    The context keeps the gaps ``join`` puts around the entity (``New **York** is``, not ``New**York**is``)."""
    entity, upto, sentence = join(tokens[start:end]), join(tokens[:end]), join(tokens)
    left = upto[:len(upto) - len(entity)] if upto.endswith(entity) else join(tokens[:start])
    right = sentence[len(upto):] if sentence.startswith(upto) else join(tokens[end:])
    left = clip_left(left, CONTEXT)
    right = right if len(right) <= CONTEXT else right[:CONTEXT] + "…"
    return {"kind": kind, "class": name, "gold": gold, "predicted": predicted, "confidence": None,
            "detail": detail, "text": f"{left}**{entity}**{right}", "entity": entity, "context": [left, right],
            "span": [start, end]}


def _pieces(tokens, join):
    """The text of each token with what ``join`` puts before it, so that the pieces concatenate to ``join(tokens)``.
    A join decides the gap from the two tokens beside it (all of this package's do), so pairs suffice; where that
    does not rebuild the sentence, prefixes do (quadratic in its length)."""
    pieces = [join(tokens[i - 1:i + 1])[len(join(tokens[i - 1:i])):] if i else join(tokens[:1])
              for i in range(len(tokens))]
    if "".join(pieces) == join(tokens):
        return pieces
    pieces, done = [], ""
    for i in range(len(tokens)):
        text = join(tokens[:i + 1])
        pieces.append(text[len(done):])
        done = text
    return pieces


def _confusions(pairs):
    return [{"gold": g, "predicted": p, "count": n}
            for (g, p), n in sorted(pairs.items(), key=lambda item: (-item[1], item[0]))]


# ------------------------------------------------------------- warnings
def class_warnings(split, metrics, mistakes):
    """``{class: {"support", "predicted", "f1"}}`` for each class of the split
    (support > 0) that was never predicted or has F1 0, and one line for
    each. ``metrics``: the split's metrics (its ``per_class`` or
    ``per_type`` table); ``mistakes``: the reader's description, or None."""
    table = metrics.get("per_class") or metrics.get("per_type") or {}
    gold = (mistakes or {}).get("gold", {})
    predicted = (mistakes or {}).get("predicted")
    found, lines = {}, []
    for name in dict.fromkeys([*table, *gold]):
        support = table[name]["support"] if name in table else gold.get(name, 0)
        never = predicted is not None and not predicted.get(name)
        f1 = table[name]["f1"] if name in table else (0.0 if never else None)
        if not support or not (never or f1 == 0):
            continue
        found[name] = {"support": support, "predicted": None if predicted is None else predicted.get(name, 0),
                       "f1": f1}
        if never:
            lines.append(f"warning: class {name!r} was never predicted on {split} (F1 0, {support} in gold)")
        elif predicted is None:
            lines.append(f"warning: class {name!r} has F1 0 on {split} ({support} in gold)")
        else:
            times = predicted[name]
            lines.append(f"warning: class {name!r} has F1 0 on {split} (predicted {times} time{'s' * (times != 1)}, "
                         f"never right; {support} in gold)")
    return found, lines


# ------------------------------------------------------------- writing
def write(root, reader, labels, evaluated, metrics):
    """For each evaluated split (``{split: (examples, predictions)}``):
    ``predictions/<split>.jsonl`` (the rows of ``predictions.jsonl``, with
    the gold label or tags), the class warnings into ``metrics[split]``,
    and ``errors.md``. Returns the warning lines and the mistakes of each
    split (``{split: described}``, for report.html)."""
    if not evaluated:
        return [], {}
    folder = RunFolder(root).split_predictions
    os.makedirs(folder, exist_ok=True)
    described, warnings = {}, []
    for split, (examples, predictions) in evaluated.items():
        write_jsonl(os.path.join(folder, f"{split}.jsonl"), reader.prediction_rows(examples, predictions, labels))
        described[split] = reader.mistakes(examples, predictions, labels)
        found, lines = class_warnings(split, metrics[split], described[split])
        metrics[split]["zero_f1_classes"] = found
        metrics[split]["class_warnings"] = lines
        warnings += lines
    write_text(RunFolder(root).errors, to_markdown(os.path.basename(os.path.abspath(root)), described, metrics))
    return warnings, described


def to_markdown(name, described, metrics):
    """errors.md: per split, the class warnings, the costliest confusions and
    the most confident mistakes of each kind and class. Every text and
    label name in it is :func:`~appzoo.utils.markdown.literal`."""
    lines = [f"# Errors: {literal(name)}", ""]
    for split, mistakes in described.items():
        lines += [f"## {split}", ""]
        lines += [f"- {literal(line)}" for line in metrics[split].get("class_warnings", [])]
        if metrics[split].get("class_warnings"):
            lines.append("")
        if mistakes is None:
            lines += ["This task's reader lists no mistakes.", ""]
            continue
        if not mistakes["rows"]:
            lines += ["No mistakes.", ""]
            continue
        lines += _confusion_table(mistakes)
        for kind, title in KINDS.items():
            rows = [r for r in mistakes["rows"] if r["kind"] == kind]
            if rows:
                lines += _kind_section(kind, title, rows, mistakes)
    return "\n".join(lines) + "\n"


def _confusion_table(mistakes):
    gold = mistakes["gold"]
    lines = ["### Confusions that cost most", "", "| gold | predicted | count | share of gold |", "|---|---|---|---|"]
    for c in mistakes["confusions"][:CONFUSIONS]:
        share = f"{c['count'] / gold[c['gold']]:.1%}" if gold.get(c["gold"]) else "–"
        lines.append(f"| {literal(c['gold'])} | {literal(c['predicted'])} | {c['count']} | {share} |")
    more = len(mistakes["confusions"]) - CONFUSIONS
    return lines + (["", f"({more} more pairs)"] if more > 0 else []) + [""]


def _kind_section(kind, title, rows, mistakes):
    lines = [f"### {title}", ""]
    by_class = {}
    for row in rows:
        by_class.setdefault(row["class"], []).append(row)
    # classes with the most mistakes first
    for name, group in sorted(by_class.items(), key=lambda item: (-len(item[1]), item[0])):
        if any(r["confidence"] is not None for r in group):
            group = sorted(group, key=lambda r: -(r["confidence"] or 0.0))
        shown = group[:PER_CLASS]
        of = (f"of {mistakes['predicted'].get(name, 0)} predicted" if kind == "spurious"
              else f"of {mistakes['gold'].get(name, 0)} in gold")
        lines += [f"**{literal(name)}**: {len(group)} {of}"
                  + (f", the {'most confident ' if group[0]['confidence'] is not None else 'first '}{len(shown)}"
                     if len(group) > len(shown) else ""), ""]
        scored, details = any(r["confidence"] is not None for r in shown), any(r.get("detail") for r in shown)
        header = ["gold", "predicted"] + ["confidence"] * scored + ["text"] + ["note"] * details
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in shown:
            cells = [literal(r["gold"]), literal(r["predicted"])]
            if scored:
                cells.append("–" if r["confidence"] is None else f"{r['confidence']:.3f}")
            cells.append(_entity_text(r) if r.get("entity") else literal(_short(r["text"])))
            if details:
                cells.append(literal(r.get("detail") or ""))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _entity_text(row):
    """An entity mistake's text with the entity in bold: its parts escaped, the bold markers not."""
    left, right = row["context"]
    return f"{literal(left)}**{literal(row['entity'])}**{literal(right)}"


def _short(text):
    return cut(text, TEXT_WIDTH, "…")

