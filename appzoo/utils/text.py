"""Text cut to a width for one line (a message, a table cell, a console line): the one clip helper."""


def clip(text, width, mark="..."):
    """``text`` when it has at most ``width`` characters, else its first characters and ``mark``, ``width``
    in all (``mark`` is ``...`` in messages, ``…`` where a person reads Markdown)."""
    return text if len(text) <= width else text[:width - len(mark)] + mark


def clip_left(text, width, mark="…"):
    """``text`` cut from the left: ``mark`` and its last ``width`` characters (the context before a span)."""
    return text if len(text) <= width else mark + text[-width:]
