"""Sentences of tokens and tags: read from the four file formats (conll, line,
jsonl, spans) or from Python inputs, and their tokens joined back into text.

Each file reader yields one example per sentence (:func:`example`); a line
that cannot be used goes to ``source.bad`` (an error naming ``file:line``, or
skipped and counted under ``on_bad_line: "skip"``).
"""
import re

from appzoo.data.tabular import clip, jsonl_rows
from appzoo.errors import DataError

FORMATS = ("conll", "line", "jsonl", "spans")
#: (token_column, tag_column) when the param file leaves them out
DEFAULT_COLUMNS = {"conll": (0, 1), "jsonl": ("tokens", "tags"), "spans": ("text", "label"), "line": (None, None)}


def read_sentences(source, path, split, format, token_column, tag_column, delimiter):
    """The examples of a file in ``format`` (predict files may leave the tags out)."""
    if format == "conll":
        return read_conll(source, path, split, token_column, tag_column, delimiter)
    if format == "line":
        return read_line(source, path, split)
    if format == "jsonl":
        return read_jsonl(source, path, split, token_column, tag_column)
    return read_spans(source, path, split, token_column, tag_column)


def example(tokens, tags, path, line, conll=False):
    """One sentence as an example; ``line``: where it starts (``conll``: a line per token)."""
    where = f"{path}:{line}"
    if not tokens:
        raise DataError(f"{where}: empty sentence")
    if tags is not None and all(t is None for t in tags):
        tags = None
    if tags is not None and None in tags:
        missing = tags.index(None)
        raise DataError(f"{path}:{line + missing}: no tag, while other tokens of the sentence have one")
    if tags is not None and len(tags) != len(tokens):
        raise DataError(f"{where}: {len(tokens)} tokens but {len(tags)} tags")
    return {"tokens": tokens, "tags": tags, "path": path, "line": line, "conll": conll}


def token_place(example, position):
    """``file:line`` of one token (CoNLL files have a line per token)."""
    if example["conll"]:
        return f"{example['path']}:{example['line'] + position}"
    return f"{example['path']}:{example['line']} (token {position + 1})"


def examples_from_inputs(inputs, format):
    """A token list, or a text: split on whitespace when it has any
    (``John lives in Paris``), else into characters (``我爱北京``); always
    into characters under format ``spans``, as the model was trained. A text
    keeps its tokens' character ``offsets`` in it (``[(start, end)]``), so
    its entities can be given as character spans of the text itself."""
    examples = []
    for i, value in enumerate(inputs):
        offsets = None
        if isinstance(value, str) and format == "spans":
            tokens = list(value) if value.strip() else None
        elif isinstance(value, str):
            if any(c.isspace() for c in value.strip()):
                words = list(re.finditer(r"\S+", value))
                tokens, offsets = [w.group() for w in words], [w.span() for w in words]
            else:
                start = len(value) - len(value.lstrip())
                tokens = list(value.strip())
                offsets = [(start + k, start + k + 1) for k in range(len(tokens))]
        else:
            tokens = value
        if not (isinstance(tokens, (list, tuple)) and tokens and all(isinstance(t, str) and t for t in tokens)):
            raise DataError(f"input {i}: expected a text or a list of non-empty tokens, got {clip(value)}")
        examples.append(example(list(tokens), None, "input", i))
        if offsets is not None:
            examples[-1].update(text=value, offsets=offsets)
    return examples


def read_conll(source, path, split, token_column, tag_column, delimiter):
    """Sentences of a CoNLL file: a token and its tag per line, a blank line (or
    ``-DOCSTART-``) between sentences."""
    # A sentence that lost a line (skipped with on_bad_line "skip") is left
    # out whole: a missing token would shift its entities and line numbers.
    tokens, tags, first, last, broken = [], [], None, 0, False
    for number, raw in source:
        broken, last = broken or number != last + 1, number
        line = raw.rstrip("\r\n")
        if not line.strip() or line.startswith("-DOCSTART-"):
            if tokens and not broken:
                yield example(tokens, tags, path, first, conll=True)
            tokens, tags, first, broken = [], [], None, False
            continue
        columns = _columns(line, delimiter)
        try:
            token = columns[token_column]
        except IndexError:
            source.bad(number, f"no token column {token_column} "
                               f"(the line has {len(columns)} column(s): {line!r})")
            broken = True
            continue
        if not token:
            source.bad(number, f"empty token in column {token_column}: {line!r}")
            broken = True
            continue
        try:
            tag = columns[tag_column].strip()
        except IndexError:
            if split != "predict":
                source.bad(number, f"no tag column {tag_column} "
                                   f"(the line has {len(columns)} column(s): {line!r})")
                broken = True
                continue
            tag = None
        if not tag and tag is not None:
            source.bad(number, f"empty tag in column {tag_column}: {line!r}")
            broken = True
            continue
        if first is None:
            first = number
        tokens.append(token)
        tags.append(tag)
    if tokens and not broken:  # the last sentence may lack a trailing blank line
        yield example(tokens, tags, path, first, conll=True)


def _columns(line, delimiter):
    if delimiter is not None:
        return line.split(delimiter)
    return line.split("\t") if "\t" in line else line.split()


def read_line(source, path, split):
    """Sentences of a line file: ``tokens<TAB>tags`` per line, each side split on spaces."""
    blank = None
    for number, raw in source:
        line = raw.rstrip("\r\n")
        if not line.strip():
            blank = blank or number
            continue
        if blank is not None:
            raise DataError(f"{path}:{blank}: empty sentence (the line format holds one sentence per line)")
        parts = line.split("\t")
        if len(parts) > 2:
            source.bad(number, f"expected tokens<TAB>tags, got {len(parts)} tab-separated fields")
            continue
        tokens = parts[0].split()
        tags = parts[1].split() if len(parts) == 2 else None
        if tags is None and split != "predict":
            source.bad(number, "no tags (expected tokens<TAB>tags)")
            continue
        yield example(tokens, tags, path, number)


def read_jsonl(source, path, split, token_column, tag_column):
    """Sentences of a JSONL file: a token list (a string is read as its characters)
    and a tag list per object."""
    fields = {"tokens": token_column, "tags": tag_column}
    for number, row in jsonl_rows(source, fields, optional=("tags",) if split == "predict" else ()):
        tokens, tags = row["tokens"], row["tags"]
        tokens = list(tokens) if isinstance(tokens, str) else tokens
        tags = tags.split() if isinstance(tags, str) else tags
        wrong = [(name, values) for name, values in (("tokens", tokens), ("tags", tags))
                 if (values is not None or name == "tokens" or split != "predict")  # a predict file: no tags
                 and not (isinstance(values, list) and all(isinstance(v, str) for v in values))]
        if wrong:
            source.bad(number, f"{wrong[0][0]} must be a list of strings, got {clip(wrong[0][1])}")
            continue
        if any(t == "" for t in tokens):
            source.bad(number, f"empty token at position {tokens.index('')}")
            continue
        yield example(tokens, tags, path, number)


def read_spans(source, path, split, token_column, tag_column):
    """Sentences of a JSONL file of texts and their entities' character spans
    (:func:`spans_to_bio`); the tokens are the text's characters."""
    fields = {"text": token_column, "spans": tag_column}
    for number, row in jsonl_rows(source, fields, optional=("spans",) if split == "predict" else ()):
        text, spans = row["text"], row["spans"]
        if not isinstance(text, str) or not text.strip():
            source.bad(number, f"field {token_column!r} must be a non-empty text, got {clip(text)}")
            continue
        if spans is None and split == "predict":
            yield example(list(text), None, path, number)
            continue
        try:
            tags = spans_to_bio(text, spans)
        except ValueError as e:
            source.bad(number, f"field {tag_column!r}: {e}")
            continue
        yield example(list(text), tags, path, number)


def spans_to_bio(text, spans):
    """BIO tags, one per character of ``text``, from entity spans: CLUENER's
    ``{type: {mention: [[start, end], ...]}}`` (end inclusive, the mention
    must be the text there), or a list of ``[start, end, type]`` /
    ``{"start", "end", "label" | "type"}`` (end exclusive). ValueError says
    what does not fit."""
    found = []  # (start, end exclusive, type)
    if isinstance(spans, dict):
        for kind, mentions in spans.items():
            if not isinstance(mentions, dict):
                raise ValueError(f"type {kind!r}: expected {{mention: [[start, end], ...]}}, got {clip(mentions)}")
            for mention, places in mentions.items():
                if not (isinstance(places, list) and all(_pair(p) for p in places)):
                    raise ValueError(f"{kind!r} {mention!r}: expected a list of [start, end], got {clip(places)}")
                for start, end in places:
                    if not 0 <= start <= end < len(text) or text[start:end + 1] != mention:
                        raise ValueError(f"{kind!r} {mention!r} at [{start}, {end}] (end inclusive, as in "
                                         f"CLUENER): the text there is {text[max(start, 0):end + 1]!r} "
                                         f"(the text has {len(text)} characters)")
                    found.append((start, end + 1, kind))
    elif isinstance(spans, list):
        for span in spans:
            if isinstance(span, dict):
                kind = span.get("label", span.get("type"))
                start, end = span.get("start"), span.get("end")
                kind = kind[0] if isinstance(kind, list) and len(kind) == 1 else kind  # Label Studio: ["PER"]
            elif isinstance(span, list) and len(span) == 3:
                start, end, kind = span
            else:
                raise ValueError(f"expected [start, end, type] or {{start, end, label}}, got {clip(span)}")
            if not (_pair([start, end]) and isinstance(kind, str) and kind and 0 <= start < end <= len(text)):
                raise ValueError(f"span {clip(span)}: expected 0 <= start < end <= {len(text)} (the text's "
                                 f"length; end exclusive) and a type name")
            found.append((start, end, kind))
    else:
        raise ValueError(f"expected CLUENER's {{type: {{mention: [[start, end]]}}}} or a list of spans, "
                         f"got {clip(spans)}")
    tags = ["O"] * len(text)
    for start, end, kind in sorted(set(found)):
        if any(t != "O" for t in tags[start:end]):
            raise ValueError(f"{kind!r} at [{start}, {end}) overlaps another entity (nested entities are not "
                             f"supported)")
        if any(c.isspace() for c in kind) or "-" in kind[:1]:
            raise ValueError(f"entity type {kind!r}: no spaces, and not starting with '-'")
        tags[start:end] = [f"B-{kind}"] + [f"I-{kind}"] * (end - start - 1)
    return tags


def _pair(value):
    return (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value))


def join_tokens(tokens):
    """Entity text: CJK characters are joined directly, other tokens with spaces."""
    text = ""
    for token in tokens:
        if text and not (_is_cjk(text[-1]) or _is_cjk(token[:1])):
            text += " "
        text += token
    return text


def _is_cjk(char):
    return bool(char) and ("\u4e00" <= char <= "\u9fff" or "\u3400" <= char <= "\u4dbf"
                           or "\u3000" <= char <= "\u303f" or "\uff00" <= char <= "\uffef")
