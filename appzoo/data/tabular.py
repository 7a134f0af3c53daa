"""Reading data files: decoding lines, and TSV / CSV / JSONL rows of named fields.

Shared by every reader. Every problem is a :class:`DataError` naming
``file:line``; with ``on_bad_line: "skip"`` a line that cannot be decoded or
parsed is left out and counted instead (see :class:`TextFile`).
"""
import codecs
import csv
import json
import re
from collections import Counter
from typing import Union

from appzoo.utils.text import clip as cut
from appzoo.errors import ConfigError, DataError

FORMATS = ("tsv", "csv", "jsonl")
#: a reader's column key: a 0-based index or a header name (TSV/CSV), a field
#: name (JSONL); None takes the reader's default
Column = Union[int, str, None]
ON_BAD_LINE = ("error", "skip")

# An undecodable byte b is read as the lone surrogate U+DC00 + b, which no
# valid text decodes to: the line keeps its number and the byte its column,
# and the line can be reported (or skipped) on its own.
_ESCAPE = 0xDC00
_ERRORS = "appzoo.escape"
# NUL never appears in text; in a file read as UTF-8 it is the mark of UTF-16.
# Any other surrogate is no character either (unicode_escape or utf-7 decode
# one from "\\ud800"): text holding one cannot be written as UTF-8 later.
_SUSPECT = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_undecodable(error):
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "".join(chr(_ESCAPE + b) for b in error.object[error.start:error.end]), error.end


codecs.register_error(_ERRORS, _escape_undecodable)


def check_encoding(encoding, key="dataset_reader.encoding"):
    """Raise ConfigError unless ``encoding`` names a Python text codec."""
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ConfigError(f"{key}: unknown encoding {encoding!r}") from None
    try:
        b"a".decode(encoding, "ignore")  # an empty string would not reach the codec
    except LookupError:  # base64, rot13, ...: codecs from bytes to bytes or str to str
        raise ConfigError(f"{key}: {encoding!r} is not a text encoding") from None


def check_on_bad_line(on_bad_line, key="dataset_reader.on_bad_line"):
    if on_bad_line not in ON_BAD_LINE:
        raise ConfigError(f"{key}: expected one of {', '.join(map(repr, ON_BAD_LINE))}, got {on_bad_line!r}")


class TextFile:
    """The lines of a data file, decoded with ``encoding``.

    Used as a context manager; iterating yields ``(line_number, line)`` with
    the line ending kept and a byte-order mark at the start dropped. A line
    with a byte the encoding cannot decode, or with a NUL, is a bad line; so
    is any line a reader reports with :meth:`bad` (a row it cannot parse).
    With ``on_bad_line`` "error" a bad line raises DataError naming
    ``file:line``; with "skip" it is left out and counted in ``skipped``
    (``first_skipped`` keeps the message of the first).
    """

    def __init__(self, path, encoding="utf-8", on_bad_line="error"):
        check_encoding(encoding)
        check_on_bad_line(on_bad_line)
        self.path = path
        self.encoding = encoding
        self.on_bad_line = on_bad_line
        self.skipped = 0
        self.first_skipped = None
        self._first_number = None
        self._utf8 = codecs.lookup(encoding).name == "utf-8"
        self._handle = None

    def __enter__(self):
        try:
            # newline="": csv sees quoted line breaks as they are; \r\n is stripped by the readers
            self._handle = open(self.path, encoding="utf-8-sig" if self._utf8 else self.encoding,
                                errors=_ERRORS, newline="")
        except FileNotFoundError:
            raise DataError(f"{self.path}: file not found") from None
        except IsADirectoryError:
            raise DataError(f"{self.path}: is a folder, expected a file") from None
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def __iter__(self):
        for number, line in enumerate(self._decoded(), start=1):
            if number == 1 and line.startswith("\ufeff"):  # utf-8-sig drops it; other codecs may not
                line = line[1:]
            suspect = _SUSPECT.search(line)
            if suspect is None:
                yield number, line
            else:
                self.bad(number, *self._undecodable(line, suspect.start(), number))

    def _decoded(self):
        """The handle's lines; a codec that refuses the whole file (UTF-16 or
        UTF-32 without a byte-order mark) is one error, whatever on_bad_line says."""
        lines = iter(self._handle)
        while True:
            try:
                yield next(lines)
            except StopIteration:
                return
            except UnicodeError as e:  # not a UnicodeDecodeError: those are escaped byte by byte
                raise DataError(f"{self.path}: not {self.encoding} ({e}); set dataset_reader.encoding to the "
                                f"file's encoding") from None

    def bad(self, number, reason, hint=""):
        """Line ``number`` cannot be used because of ``reason``: raise, or
        skip it and count it. ``hint`` (how to fix it) goes into the error only."""
        message = f"{self.path}:{number}: {reason}"
        if self.on_bad_line == "error":
            raise DataError(message + hint)
        self.skipped += 1
        if self._first_number is None or number < self._first_number:
            self._first_number, self.first_skipped = number, message

    def _undecodable(self, line, column, number):
        if line[column] == "\x00":
            return (f"NUL byte at column {column + 1}",
                    ' (a UTF-16 file? hint: set dataset_reader.encoding, e.g. "utf-16")')
        if not "\udc00" <= line[column] <= "\udcff":
            return surrogate(line[column], f" at column {column + 1}"), ""
        name = "UTF-8" if self._utf8 else self.encoding
        reason = f"invalid {name} byte 0x{ord(line[column]) - _ESCAPE:02x} at column {column + 1}"
        start = "".join(chr(ord(c) - _ESCAPE) if "\udc00" <= c <= "\udcff" else c for c in line[:4])
        if number == 1 and column == 0 and start[:2] in ("\xff\xfe", "\xfe\xff"):
            width = "32" if start == "\xff\xfe\x00\x00" else "16"
            return (f"{reason}: the file starts with a UTF-{width} byte-order mark",
                    f' (hint: set dataset_reader.encoding: "utf-{width}")')
        if self._utf8:
            return reason, ' (hint: set dataset_reader.encoding, e.g. "gbk" or "utf-16", or on_bad_line: "skip")'
        return reason, (f" (hint: is dataset_reader.encoding {self.encoding!r} the file's encoding? "
                        f'or set on_bad_line: "skip")')


# Help texts of the file keys every tabular reader takes (see appzoo.params.keys.Key).
FORMAT_HELP = "file format: tab-separated, comma-separated (quoted fields), or one JSON object per line"
DELIMITER_HELP = "field separator (null: tab for tsv, comma for csv)"
HEADER_HELP = "lines to skip at the top of each file (a header row names the columns)"
QUOTING_HELP = "fields may be quoted, as in CSV (null: true for csv, false for tsv)"


def table_options(format, delimiter, header, quoting):
    """Check the file options shared by the tabular readers and return them as
    keyword arguments for :func:`read_rows`."""
    if delimiter is not None and len(delimiter) != 1 and (quoting or format == "csv"):
        raise ConfigError(f"dataset_reader.delimiter: quoted CSV needs a one-character delimiter, got {delimiter!r}")
    return {"format": format, "delimiter": delimiter, "header": header, "quoting": quoting}


def columns(format, **given):
    """Resolve ``name=(value, default_index)`` to ``{name: column}``: the given
    value, else the default index (TSV/CSV) or the name itself (JSONL)."""
    return {name: value if value is not None else (name if format == "jsonl" else index)
            for name, (value, index) in given.items()}


def _split_lines(source, delimiter, quoting):
    """Yield (line_number, fields) for each non-empty line of ``source``."""
    if quoting:
        # csv tracks physical lines itself, so quoted fields may span lines;
        # ``numbers`` maps the lines it pulled back to the file's line numbers.
        numbers = []

        def lines():
            for number, line in source:
                numbers.append(number)
                yield line

        reader = csv.reader(lines(), delimiter=delimiter, quotechar='"', strict=True)
        while True:
            pulled = reader.line_num
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as e:  # the reader starts afresh on the next line
                source.bad(numbers[min(pulled, len(numbers) - 1)], f"bad quoting ({e})")
                continue
            if fields and any(f.strip() for f in fields):
                yield numbers[pulled], fields
    else:
        for number, line in source:
            line = line.rstrip("\r\n")
            if line.strip():
                yield number, line.split(delimiter)


def read_rows(source, fields, *, format="tsv", delimiter=None, header=0, quoting=None, optional=()):
    """Read the :class:`TextFile` ``source`` into ``[(line_number, {field: value})]``.

    ``fields`` maps output names to a column: an int index (delimited files),
    a header name (delimited files with ``header >= 1``) or a JSON key
    (JSONL). Fields named in ``optional`` may be missing from a row (a predict
    file without labels); their value is then ``None``.

    A delimited row may not have more fields than the file has columns (see
    :func:`_row_width`): a delimiter inside a text would otherwise shift the
    columns silently. Rows that do not parse are reported to ``source``.
    """
    path = source.path
    if format not in FORMATS:
        raise DataError(f"{path}: unknown format {format!r} (accepted: {', '.join(FORMATS)})")
    if format == "jsonl":
        return list(jsonl_rows(source, fields, optional))
    delimiter = delimiter if delimiter is not None else ("\t" if format == "tsv" else ",")
    quoting = quoting if quoting is not None else format == "csv"
    lines = _split_lines(source, delimiter, quoting)
    header_fields = None
    for _ in range(header):
        try:
            _, fields_of_line = next(lines)
        except StopIteration:
            raise DataError(f"{path}: expected {header} header line(s), the file is shorter") from None
        header_fields = header_fields or [f.strip() for f in fields_of_line]
    index = _resolve_columns(path, fields, header_fields, _csv_hint(header_fields or [], delimiter))
    split = list(lines)
    width = _row_width(index, header_fields, split)
    hint = (" (a delimiter inside a text? quote the field" + ("" if quoting else " and set quoting: true")
            + ", or fix the line)")
    rows = []
    for number, values in split:
        if width is not None and _field_count(values) > width:
            source.bad(number, f"expected {width} field(s) split by {delimiter!r}, got {_field_count(values)}",
                       hint)
            continue
        row = {}
        for name, col in index.items():
            if col < len(values):
                row[name] = values[col].strip()
            elif name in optional:
                row[name] = None
            else:
                source.bad(number, f"expected a column {col} for '{name}', the line has "
                                   f"{len(values)} field(s) split by {delimiter!r}: {clip(values)}",
                           _csv_hint(values, delimiter))
                break
        else:
            rows.append((number, row))
    return rows


def _field_count(values):
    """Fields of a row, not counting empty ones at its end (a trailing
    delimiter shifts nothing)."""
    count = len(values)
    while count and not values[count - 1].strip():
        count -= 1
    return count


def _row_width(index, header_fields, rows):
    """The most fields a row may have: the header's columns; without a header
    the highest configured column + 1, or the field count most rows share when
    that is more (a file with unused columns at the end). None when a column
    counts from the end, so that extra fields shift nothing."""
    if header_fields is not None:
        return len(header_fields)
    if any(col < 0 for col in index.values()):
        return None
    width = max(index.values()) + 1
    common = Counter(_field_count(values) for _, values in rows).most_common(1)
    if common and common[0][0] > width and 2 * common[0][1] > len(rows):
        return common[0][0]
    return width


def _csv_hint(values, delimiter):
    """The fix for a comma-separated line read with tabs: one field that holds commas."""
    if delimiter == "\t" and len(values) == 1 and "," in values[0]:
        return ' (hint: the line looks comma-separated; set dataset_reader.format: "csv")'
    return ""


def _resolve_columns(path, fields, header_fields, hint=""):
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
                f"(columns: {', '.join(header_fields)}){hint}"
            )
        else:
            index[name] = header_fields.index(col)
    return index


def jsonl_rows(source, fields, optional=()):
    """Yield ``(line_number, {field: value})`` from the JSONL :class:`TextFile`
    ``source``; ``fields`` maps output names to JSON keys (see :func:`read_rows`)."""
    for number, line in source:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            source.bad(number, f"not valid JSON ({e.msg} at column {e.colno})")
            continue
        if not isinstance(obj, dict):
            source.bad(number, f"expected a JSON object per line, got {clip(obj)}")
            continue
        if "\\u" in line:  # "\ud800" parses to a lone surrogate: refused here, not when predictions are written
            found = _find_surrogate(obj)
            if found is not None:
                source.bad(number, surrogate(found[1], f" in field {found[0]!r}"))
                continue
        missing = next((name for name, key in fields.items() if key not in obj and name not in optional), None)
        if missing is not None:
            source.bad(number, f"missing field {fields[missing]!r} for '{missing}' "
                               f"(fields: {', '.join(map(str, obj))})")
            continue
        yield number, {name: obj.get(key) for name, key in fields.items()}


def surrogate(char, where=""):
    """``a lone surrogate \\ud800 (...)``: for a message about ``char``, found ``where``."""
    return (f"a lone surrogate \\u{ord(char):04x}{where} (half of a UTF-16 pair, not a character; "
            f"it cannot be written as UTF-8)")


def _find_surrogate(value, key=None):
    """``(key, char)`` of the first string (or object key) in a parsed JSON
    value that holds a surrogate; the key is the top-level field. None if none."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return None if found is None else (key, found.group())
    if isinstance(value, dict):
        for name, item in value.items():
            field = name if key is None else key
            found = _find_surrogate(name, field) or _find_surrogate(item, field)
            if found is not None:
                return found
    elif isinstance(value, list):
        for item in value:
            found = _find_surrogate(item, key)
            if found is not None:
                return found
    return None


def wrong_type(key, value, expected="a string"):
    """``field 'text' must be a string, got 5``: a JSON value of the wrong type."""
    return f"field {key!r} must be {expected}, got {clip(value)}"


def clip(value, width=80):
    """``value`` for a one-line message: JSON for non-strings and for a blank
    string, control characters escaped, cut to ``width`` characters."""
    if isinstance(value, str) and value.strip():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in value)
    else:
        text = json.dumps(value, ensure_ascii=False)
    return cut(text, width)
