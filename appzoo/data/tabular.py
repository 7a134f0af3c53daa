"""Reading TSV / CSV / JSONL files into rows of named fields.

Shared by the classification and matching readers. Every problem is a
:class:`DataError` naming ``file:line``.
"""
import csv
import json

from appzoo.errors import DataError

FORMATS = ("tsv", "csv", "jsonl")


def table_options(format, delimiter, header, quoting):
    """Check the file options shared by the tabular readers and return them as
    keyword arguments for :func:`read_rows`."""
    from appzoo.errors import ConfigError

    if header < 0:
        raise ConfigError(f"dataset_reader.header: must be >= 0 (lines to skip), got {header}")
    if delimiter is not None and len(delimiter) != 1 and (quoting or format == "csv"):
        raise ConfigError(f"dataset_reader.delimiter: quoted CSV needs a one-character delimiter, got {delimiter!r}")
    return {"format": format, "delimiter": delimiter, "header": header, "quoting": quoting}


def columns(format, **given):
    """Resolve ``name=(value, default_index)`` to ``{name: column}``: the given
    value, else the default index (TSV/CSV) or the name itself (JSONL)."""
    return {name: value if value is not None else (name if format == "jsonl" else index)
            for name, (value, index) in given.items()}


def open_text(path):
    """Open a UTF-8 file, dropping a byte-order mark if there is one."""
    try:
        return open(path, encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, expected a file") from None


def _split_lines(handle, delimiter, quoting):
    """Yield (line_number, fields) for each non-empty line."""
    if quoting:
        # csv tracks physical lines itself, so quoted fields may span lines.
        reader = csv.reader(handle, delimiter=delimiter, quotechar='"', strict=True)
        while True:
            start = reader.line_num + 1
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise DataError(f"{handle.name}:{start}: bad quoting ({e})") from None
            if fields and any(f.strip() for f in fields):
                yield start, fields
    else:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if line.strip():
                yield number, line.split(delimiter)


def read_rows(path, fields, *, format="tsv", delimiter=None, header=0, quoting=None,
              optional=()):
    """Read ``path`` and return ``[(line_number, {field: value})]``.

    ``fields`` maps output names to a column: an int index (delimited files),
    a header name (delimited files with ``header >= 1``) or a JSON key
    (JSONL). Fields named in ``optional`` may be missing from a row (a predict
    file without labels); their value is then ``None``.
    """
    if format not in FORMATS:
        raise DataError(f"{path}: unknown format {format!r} (accepted: {', '.join(FORMATS)})")
    with open_text(path) as handle:
        if format == "jsonl":
            return list(jsonl_rows(handle, path, fields, optional))
        delimiter = delimiter if delimiter is not None else ("\t" if format == "tsv" else ",")
        quoting = quoting if quoting is not None else format == "csv"
        lines = _split_lines(handle, delimiter, quoting)
        header_fields = None
        for _ in range(header):
            try:
                _, fields_of_line = next(lines)
            except StopIteration:
                raise DataError(f"{path}: expected {header} header line(s), the file is shorter") from None
            header_fields = header_fields or [f.strip() for f in fields_of_line]
        index = _resolve_columns(path, fields, header_fields)
        rows = []
        for number, values in lines:
            row = {}
            for name, col in index.items():
                if col < len(values):
                    row[name] = values[col].strip()
                elif name in optional:
                    row[name] = None
                else:
                    raise DataError(
                        f"{path}:{number}: expected a column {col} for '{name}', the line has "
                        f"{len(values)} field(s) split by {delimiter!r}: {_clip(values)}"
                    )
            rows.append((number, row))
        return rows


def _resolve_columns(path, fields, header_fields):
    index = {}
    for name, col in fields.items():
        if isinstance(col, int):
            index[name] = col
        elif header_fields is None:
            raise DataError(
                f"{path}: column {col!r} for '{name}' is a name, but no header line is read "
                f"(set header: 1, or give the column's index)"
            )
        elif col not in header_fields:
            raise DataError(
                f"{path}:1: no column named {col!r} for '{name}' in the header "
                f"(columns: {', '.join(header_fields)})"
            )
        else:
            index[name] = header_fields.index(col)
    return index


def jsonl_rows(handle, path, fields, optional=()):
    """Yield ``(line_number, {field: value})`` from a JSONL file; ``fields``
    maps output names to JSON keys (see :func:`read_rows`)."""
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{number}: not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{number}: expected a JSON object per line, got {_clip(obj)}")
        row = {}
        for name, key in fields.items():
            if key in obj:
                row[name] = obj[key]
            elif name in optional:
                row[name] = None
            else:
                raise DataError(
                    f"{path}:{number}: missing field {key!r} for '{name}' "
                    f"(fields: {', '.join(map(str, obj))})"
                )
        yield number, row


def _clip(value, width=80):
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."
