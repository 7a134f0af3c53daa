"""Text for the markdown files a run writes (report.md, errors.md, audit.md, sweep.md, search.md, docs/params.md).

Two kinds of text go into them. The code's own (help strings, headings) may
use Markdown on purpose and goes into a table through :func:`cell`. Text from
the data or the user (label names, texts, an error line quoting them) goes
through :func:`literal`, which shows it as it is: never as HTML, Markdown or a
terminal's control sequence, and on one line, so it cannot break a table.
"""
import json
import re
import unicodedata

#: HTML's three: a renderer that passes HTML through (CommonMark does) then shows them as text
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
#: ASCII punctuation that would act as Markdown inline (code, emphasis, links, strikethrough, table cells);
#: ``_`` only where it could open or close emphasis (see :func:`literal`)
_PUNCTUATION = frozenset("\\`*[]~|")
#: controls (C0 with newline and tab, DEL, C1), format characters (the bidi controls U+202A-U+202E and
#: U+2066-U+2069, zero-width ones, U+FEFF), the line and paragraph separators and lone surrogates: none shows
#: as itself, so each is written as JSON writes it (``\u001b``, ``\n``, ``\u202e``)
_INVISIBLE = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs"))
#: what makes a text that starts a line (as a list item's does) a heading, a list or a rule: its last character is
#: escaped (``##\# x``, ``\- x``, ``1\. x``); ``-1`` and ``#tag`` are none of these and stay as they are
_BLOCK_START = re.compile(r" *(?:#{1,6}(?= |$)|[-+](?= |$)|\d{1,9}[.)](?= |$)|-(?=(?: *-){2,} *$))")


def cell(value):
    """The code's own text in a markdown table cell: backslashes and pipes escaped, on one line."""
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def literal(value):
    """Text from the data (a label name, a text) as Markdown that renders as that text, in a table cell or
    inline in a line: ``<``, ``>`` and ``&`` as entities; Markdown's punctuation backslash-escaped (an
    underscore only when it is not alone between two letters or digits, as in ``news_tech``, where it cannot
    emphasise), and what would start a heading, a list or a rule at the start of a line; each invisible
    character (:data:`_INVISIBLE`) as JSON's escape of it, as ``predictions/<split>.jsonl`` spells control
    characters."""
    value = str(value)
    start = _BLOCK_START.match(value)
    marker = start.end() - 1 if start else -1
    out = []
    for i, char in enumerate(value):
        if i == marker:
            out.append("\\" + char)
        elif char in _ENTITIES:
            out.append(_ENTITIES[char])
        elif char in _PUNCTUATION:
            out.append("\\" + char)
        elif char == "_":
            inside = 0 < i < len(value) - 1 and value[i - 1].isalnum() and value[i + 1].isalnum()
            out.append("_" if inside else "\\_")
        elif unicodedata.category(char) in _INVISIBLE:
            out.append(json.dumps(char)[1:-1])
        else:
            out.append(char)
    return "".join(out)
