"""Entity-level metrics for sequence labeling (seqeval, strict mode)."""
from appzoo.registry import METRICS

#: tag schemes the sequence-labeling task knows, and the seqeval scheme each is scored with
SCHEMES = ("BIO", "IOB1", "BIOES", "BMES")


def seqeval_scheme(scheme):
    """The seqeval scheme class for ``scheme`` (BMES is scored as IOBES after
    :func:`to_seqeval_tags` maps ``M-`` to ``I-``)."""
    from seqeval.scheme import IOB1, IOB2, IOBES

    try:
        return {"BIO": IOB2, "IOB1": IOB1, "BIOES": IOBES, "BMES": IOBES}[scheme]
    except KeyError:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}") from None


def to_seqeval_tags(tags, scheme):
    """Tags as seqeval reads them: ``M-X`` becomes ``I-X`` under BMES."""
    if scheme != "BMES":
        return list(tags)
    return ["I-" + t[2:] if t.startswith("M-") else t for t in tags]


def entity_spans(tags, scheme):
    """``[(type, start, end)]`` of one tag sequence, ``end`` exclusive, read in
    seqeval's strict mode: a chunk that breaks the scheme (``I-X`` after ``O``
    under BIO) is not an entity."""
    from seqeval.scheme import Entities

    if not tags:
        return []
    found = Entities([to_seqeval_tags(tags, scheme)], seqeval_scheme(scheme)).entities[0]
    return [(e.tag, e.start, e.end) for e in found]


@METRICS.register("entities")  # not the reader's name: a metric of entity spans
def sequence_labeling_metrics(gold, pred, scheme="BIO"):
    """Entity-level micro / macro / weighted P/R/F1 and per-type P/R/F1/support
    of seqeval in strict mode for ``scheme``, plus token accuracy.

    ``gold`` and ``pred`` are lists of tag-string lists of equal lengths."""
    from seqeval.metrics.v1 import precision_recall_fscore_support
    from seqeval.scheme import Entities

    if len(gold) != len(pred) or any(len(g) != len(p) for g, p in zip(gold, pred)):
        raise ValueError("gold and pred must hold the same number of sentences and tags")
    cls = seqeval_scheme(scheme)
    gold = [to_seqeval_tags(g, scheme) for g in gold]
    pred = [to_seqeval_tags(p, scheme) for p in pred]
    tokens = sum(len(g) for g in gold)
    correct = sum(a == b for g, p in zip(gold, pred) for a, b in zip(g, p))
    # the entities of each side, read once for the four calls (seqeval's own reuse, as its classification_report's)
    entities = {"entities_true": Entities(gold, cls), "entities_pred": Entities(pred, cls)}
    out = {"micro_f1": 0.0}  # first, so it heads report tables
    for average in ("micro", "macro", "weighted"):
        p, r, f, _ = precision_recall_fscore_support(gold, pred, average=average, scheme=cls,
                                                     zero_division=0, **entities)
        out.update({f"{average}_precision": float(p), f"{average}_recall": float(r), f"{average}_f1": float(f)})
    out["token_accuracy"] = correct / tokens if tokens else 0.0
    p, r, f, s = precision_recall_fscore_support(gold, pred, average=None, scheme=cls, zero_division=0, **entities)
    # the order seqeval reports per-type scores in (its unique_labels)
    types = sorted(entities["entities_true"].unique_tags | entities["entities_pred"].unique_tags)
    out["per_type"] = {name: {"precision": float(pi), "recall": float(ri), "f1": float(fi), "support": int(si)}
                       for name, pi, ri, fi, si in zip(types, p, r, f, s)}
    return out

