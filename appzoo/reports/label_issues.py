"""Mislabeled training examples, found by confident learning (``trainer.audit_labels``): the audit's section on
them and ``label_issues.jsonl``.

cleanlab's ``find_label_issues`` (Northcutt et al., 2021, "Confident Learning") reads the out-of-fold
probabilities :mod:`appzoo.run.label_folds` made: an example is a suspect when its given label's probability
is below the average probability the examples of that label give it, while another label's is above its own
average, counted so that each pair of labels gets as many suspects as the estimated noise between them. The
suspects are ranked by cleanlab's label quality score (the probability of the given label: self-confidence);
a multi-label set goes through cleanlab's multi-label module (``cleanlab.multilabel_classification``). The summary goes into ``audit.json`` (``labels``)
and ``audit.md``; :mod:`appzoo.reports.html` shows the same in ``report.html``. Rare classes come first,
because a single error weighs most there.
"""
import numpy as np

from appzoo.reports.audit import key_of
from appzoo.utils.markdown import literal
from appzoo.utils.text import clip

#: suspects listed in audit.md and report.html (all of them are in label_issues.jsonl)
SHOWN = 50
#: Northcutt, Athalye and Mueller (2021), "Pervasive Label Errors in Test Sets": the average share of label
#: errors they estimated in the test sets of ten common benchmarks
TYPICAL_NOISE = 0.033


def find(given, probs, multi_label, labels, examples, folds):
    """``(rows, summary)``: the suspects as ``label_issues.jsonl`` rows, ranked (most likely mislabeled first),
    and the summary for ``audit.json``. ``given``: label indices per example (lists where ``multi_label``);
    ``probs``: ``[N, len(labels)]`` out-of-fold probabilities."""
    import cleanlab  # the audit's alone: a run without trainer.audit_labels never loads it

    probs = np.asarray(probs, dtype="float64")
    if multi_label:
        from cleanlab.multilabel_classification.filter import find_label_issues  # as above
        from cleanlab.multilabel_classification.rank import get_label_quality_scores
        scores = get_label_quality_scores(given, probs)
        suggested = [list(np.flatnonzero(p >= 0.5)) for p in probs]
        correct = np.mean([sorted(s) == sorted(g) for s, g in zip(suggested, given)])
    else:
        from cleanlab.filter import find_label_issues  # as above
        from cleanlab.rank import get_label_quality_scores
        probs = probs / probs.sum(axis=1, keepdims=True)  # a softmax's rounding: cleanlab wants rows of 1
        scores = get_label_quality_scores(np.asarray(given), probs)
        suggested = list(probs.argmax(axis=1))
        correct = float(np.mean(np.asarray(suggested) == np.asarray(given)))
    ranked = find_label_issues(given if multi_label else np.asarray(given), probs,
                               return_indices_ranked_by="self_confidence", n_jobs=1)
    name = (lambda ids: [labels[j] for j in ids]) if multi_label else (lambda j: labels[j])
    rows = [{"rank": r + 1, "index": int(i), "source": examples[i].get("source"), "text": key_of(examples[i]),
             "given": name(given[i]), "suggested": name(suggested[i]), "score": round(float(scores[i]), 6)}
            for r, i in enumerate(ranked)]
    return rows, _summary(rows, given, multi_label, labels, folds, float(correct), cleanlab.__version__)


def _summary(rows, given, multi_label, labels, folds, accuracy, version):
    """Counts per class (rarest first), the share of suspects, and a note that says what the count means."""
    n = len(given)
    classes = [j for g in given for j in (g if multi_label else [g])]
    totals = np.bincount(classes, minlength=len(labels))
    suspects = np.zeros(len(labels), dtype=int)
    for row in rows:
        for label in (row["given"] if multi_label else [row["given"]]):
            suspects[labels.index(label)] += 1
    order = sorted(range(len(labels)), key=lambda j: (totals[j], labels[j]))
    table = [{"class": labels[j], "examples": int(totals[j]), "suspects": int(suspects[j]),
              "share": round(suspects[j] / totals[j], 4) if totals[j] else 0.0} for j in order]
    share = len(rows) / n if n else 0.0
    majority = totals.max() / n if n else 0.0
    return {"folds": folds, "examples": n, "suspects": len(rows), "share": round(share, 4),
            "out_of_fold_accuracy": round(accuracy, 4), "majority_share": round(float(majority), 4),
            "classes": table, "cleanlab": version, "note": note(len(rows), n, accuracy, majority)}


def note(suspects, examples, accuracy, majority):
    """What the number of suspects means: a share, set against what a noisy set shows and against how good the
    model that found them is."""
    share = suspects / examples if examples else 0.0
    text = f"{suspects} suspect(s) ({share:.1%} of {examples} training examples)"
    if share < TYPICAL_NOISE / 2:
        text += (f": few. Sets with label noise usually show more (about {TYPICAL_NOISE:.1%} were found wrong in "
                 f"the test sets of ten common benchmarks, Northcutt et al. 2021); the ones listed are worth a "
                 f"look, and need not be errors")
    else:
        text += (": confident learning flags mislabeled examples and some that are only hard for the model; "
                 "check the first ones by hand before removing or relabelling any")
    if accuracy <= majority + 0.05:
        text += (f". The out-of-fold accuracy is {accuracy:.1%}, no better than always answering the largest "
                 f"class ({majority:.1%}): the model is too weak for its probabilities to judge the labels "
                 f"(train longer, or use a stronger encoder)")
    else:
        text += f". Out-of-fold accuracy {accuracy:.1%}"
    return text


def to_markdown(summary, rows):
    """audit.md's section: the note, the classes rarest first, and the first :data:`SHOWN` suspects, those of
    the rarest given class first; what comes from the data through :func:`~appzoo.utils.markdown.literal`."""
    lines = ["", "## Label issues", "", literal(summary["note"]) + ".", "",
             f"Out-of-fold probabilities from {summary['folds']} trainings of this param file, each on the other "
             f"folds of the training set; confident learning by cleanlab {summary['cleanlab']} "
             f"(`find_label_issues`, ranked by self-confidence, the out-of-fold probability of the given label). "
             f"Every suspect is in label_issues.jsonl.", "",
             "| class | training examples | suspects | share |", "|---|---|---|---|"]
    lines += [f"| {literal(c['class'])} | {c['examples']} | {c['suspects']} | {c['share']:.1%} |"
              for c in summary["classes"]]
    shown = rare_first(rows, summary)[:SHOWN]
    if shown:
        lines += ["", f"### Suspects, rarest given class first ({len(shown)} of {len(rows)})", "",
                  "| rank | line | given | suggested | score | text |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['rank']} | {literal(r['source'] or r['index'])} | {literal(names(r['given']))} | "
                  f"{literal(names(r['suggested']))} | {r['score']:.3f} | {literal(clip(str(r['text']), 160))} |"
                  for r in shown]
    return "\n".join(lines) + "\n"


def rare_first(rows, summary):
    """The suspects ordered by how rare their given class is (a multi-label example's rarest), then by rank."""
    size = {c["class"]: c["examples"] for c in summary["classes"]}
    return sorted(rows, key=lambda r: (min((size[n] for n in r["given"]), default=0) if isinstance(r["given"], list)
                                       else size[r["given"]], r["rank"]))


def names(value):
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)
