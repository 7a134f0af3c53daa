"""An answer of a route other than success: its status, one line, and headers."""
import json

from appzoo.utils.text import clip as cut


class Failure(Exception):
    """An answer other than success: its status, one line, and headers."""

    def __init__(self, status, message, headers=None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def clip(value, width=60):
    """``value`` as a message shows it: JSON (a string in quotes), cut at ``width`` characters."""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return cut(text, width)
