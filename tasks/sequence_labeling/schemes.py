"""Tag schemes: which prefixes a scheme has, detecting it, checking sequences
against it and the transitions a CRF may take.

``BIO`` is IOB2 (every entity starts with ``B-``); ``IOB1`` uses ``B-`` only
between two adjacent entities of one type; ``BIOES`` adds ``E-`` (end) and
``S-`` (single-token entity); ``BMES`` is BIOES with ``M-`` for ``I-``, as in
the Resume and MSRA-BMES data.
"""
import numpy as np

PREFIXES = {"BIO": "BI", "IOB1": "BI", "BIOES": "BIES", "BMES": "BMES"}  # the schemes of metrics.SCHEMES


def split_tag(tag):
    """``"B-PER"`` -> ``("B", "PER")``; ``"O"`` -> ``("O", None)``; anything
    else -> ``(None, None)``."""
    if tag == "O":
        return "O", None
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIMES":
        return tag[0], tag[2:]
    return None, None


def tag_order(tag):
    """Sort key: ``O`` first, then by type, then by prefix (B, I/M, E, S)."""
    prefix, kind = split_tag(tag)
    return (prefix != "O", kind or "", "BIMES".find(prefix or "") if prefix != "O" else -1, tag)


def detect_scheme(sequences):
    """The scheme a corpus of tag sequences is written in: BMES when an ``M-``
    occurs, BIOES when ``E-`` / ``S-`` occur, else IOB1 when some entity starts
    with ``I-`` and ``B-`` only ever follows the same type, else BIO."""
    prefixes, starts_with_i, b_after_other = set(), False, False
    for tags in sequences:
        previous = None
        for tag in tags:
            prefix, kind = split_tag(tag)
            prefixes.add(prefix)
            if prefix == "I" and previous != kind:
                starts_with_i = True
            if prefix == "B" and previous != kind:
                b_after_other = True
            previous = kind
    if "M" in prefixes:
        return "BMES"
    if prefixes & {"E", "S"}:
        return "BIOES"
    if starts_with_i and not b_after_other:
        return "IOB1"
    return "BIO"


def check_tag(tag, scheme):
    """None when ``tag`` fits ``scheme``, else the reason."""
    prefix, kind = split_tag(tag)
    if prefix == "O":
        return None
    if prefix is None or prefix not in PREFIXES[scheme]:
        expected = "/".join(f"{p}-" for p in PREFIXES[scheme])
        return f"tag {tag!r} does not fit scheme {scheme} (expected 'O' or {expected} followed by a type)"
    return None


def _inner(scheme):
    return "M" if scheme == "BMES" else "I"


def allowed_transition(previous, current, scheme):
    """Whether tag ``current`` may follow tag ``previous`` (None: sentence start)."""
    p_prefix, p_kind = split_tag(previous) if previous is not None else ("O", None)
    c_prefix, c_kind = split_tag(current)
    if scheme == "BIO":
        return c_prefix != "I" or (p_prefix in "BI" and p_kind == c_kind)
    if scheme == "IOB1":
        return c_prefix != "B" or (p_prefix in "BI" and p_kind == c_kind)
    inner = _inner(scheme)
    open_entity = p_prefix in ("B", inner)  # previous token needs a continuation
    if open_entity:
        return c_prefix in (inner, "E") and c_kind == p_kind
    return c_prefix in ("O", "B", "S")


def allowed_end(tag, scheme):
    """Whether a sentence may end with ``tag``."""
    prefix, _ = split_tag(tag)
    return scheme in ("BIO", "IOB1") or prefix not in ("B", _inner(scheme))


def invalid_position(tags, scheme):
    """Index of the first tag that breaks ``scheme`` (``len(tags)`` when the
    last tag leaves an entity open), or None when the sequence is valid."""
    previous = None
    for i, tag in enumerate(tags):
        if not allowed_transition(previous, tag, scheme):
            return i
        previous = tag
    if tags and not allowed_end(tags[-1], scheme):
        return len(tags)
    return None


def transition_masks(labels, scheme):
    """Boolean ``(transitions [C, C], start [C], end [C])`` over ``labels``."""
    trans = np.array([[allowed_transition(a, b, scheme) for b in labels] for a in labels], bool)
    start = np.array([allowed_transition(None, b, scheme) for b in labels], bool)
    end = np.array([allowed_end(a, scheme) for a in labels], bool)
    return trans, start, end
