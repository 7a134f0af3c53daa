"""Files of labelled pairs and of training triples read into examples, each
problem one line naming ``file:line``."""
from appzoo.task.reader import label_number
from appzoo.data.tabular import read_rows, wrong_type
from appzoo.errors import DataError


def read_pairs(source, path, split, fields, options, positive, negative):
    """The labelled pairs ``{text_a, text_b, label, source}`` of an open data file
    (predict files may leave the label out)."""
    examples = []
    for line, row in read_rows(source, fields, optional=("label",) if split == "predict" else (), **options):
        problem = _row_problem(row, fields, ("text_a", "text_b"), label_required=split != "predict")
        if problem:
            source.bad(line, problem)
            continue
        where = f"{path}:{line}"
        header_like = line == 1 and not options["header"] and options["format"] != "jsonl"
        examples.append({"text_a": row["text_a"], "text_b": row["text_b"],
                         "label": parse_label(row["label"], where, positive, negative, header_like), "source": where})
    return examples


def read_triples(source, path, fields, options):
    """The training triples ``{query, positive, negative, source}`` of an open data file."""
    items = []
    for line, row in read_rows(source, fields, **options):
        problem = _row_problem(row, fields, ("query", "positive", "negative"))
        if problem:
            source.bad(line, problem)
            continue
        items.append({key: row[key] for key in ("query", "positive", "negative")})
        items[-1]["source"] = f"{path}:{line}"
    return items


def parse_label(value, where, positive, negative, header_like=False):
    """A pair's label: ``positive`` or ``negative`` (a number written another way,
    ``1.0`` for ``1``, is read as the label); anything else is an error.
    ``header_like``: the value is on the first line of a file read without a header row."""
    if value is None:
        return None
    label = str(value).strip()
    number = label_number(label)
    for known in (positive, negative):
        if label != known and number is not None and number == label_number(known):
            return known  # 1.0 for 1: labels written by a float column
    if label not in (positive, negative):
        near = [known for known in (positive, negative)
                if known.strip().casefold() == label.casefold()]
        hint = f"; it differs from {near[0]!r} only by case or spaces" if near else ""
        if header_like and not near and number is None:
            hint = "; if this line is a header row, set dataset_reader.header=1"
        raise DataError(
            f"{where}: label {label!r} is neither the positive label {positive!r} nor the "
            f"negative label {negative!r}{hint} (set dataset_reader.positive_label / negative_label)"
        )
    return label


def _row_problem(row, fields, texts, label_required=False):
    """Why ``row`` cannot be read, else None. JSONL values: texts are strings;
    a label is a string or a number (``1`` reads as ``"1"``), null only where
    labels may be left out."""
    for name in texts:
        if not isinstance(row[name], str):
            return wrong_type(fields[name], row[name])
    label = row.get("label")
    if (label is None and label_required) or not isinstance(label, (str, int, float, type(None))):
        return wrong_type(fields["label"], label, "a string or a number")
    empty = next((name for name in texts if not row[name].strip()), None)
    return f"empty {empty}" if empty else None
