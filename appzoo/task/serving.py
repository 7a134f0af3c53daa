"""How a task is served: the shape of one input, the fields of one answer,
and what a server's list of models says about it.

A reader declares its :class:`Serving` (:meth:`DatasetReader.serving
<appzoo.task.reader.DatasetReader.serving>`); a server, its KServe V2
metadata and the try-it page read it, and never a task's name, so that a
plugin task serves as well as a built-in one.
"""
from dataclasses import dataclass, field

from appzoo.errors import ConfigError

#: the shape of one input -> the input a model is warmed up with when a server loads it
INPUT_KINDS = {
    "text": "warm up",  # a string
    "text_or_tokens": "warm up",  # a string, or a list of tokens
    "pair": ("warm up", "warm up"),  # [text_a, text_b]
}
#: the kinds of an answer's field -> what its value in a prediction row is
FIELD_KINDS = {
    "label": "one label (a string)",
    "labels": "a set of labels (a list of strings)",
    "probs": "{label: probability} over every label of the model",
    "tags": "one tag per token (a list of strings)",
    "entities": "a list of {type, start, end, text} objects, start and end indexing the row's tokens",
    "score": "a number",
}


@dataclass(frozen=True)
class Field:
    """One field of a prediction row that a server answers: the row's key
    ``name`` and its ``kind`` (one of :data:`FIELD_KINDS`), from which the
    server's codec takes its V2 datatype and shape and the page its view."""

    name: str
    kind: str


@dataclass(frozen=True)
class Serving:
    """A task's serving shape.

    ``input``: one of :data:`INPUT_KINDS`. ``outputs``: the :class:`Field`\\ s
    every prediction row has, in the order V2 lists them. ``description``:
    a few words the try-it page shows ("multi-label classification").
    ``shows``: what ``GET /models`` also says about the model, JSON values;
    the page reads ``threshold`` (a score's decision threshold) and
    ``thresholds`` (``{label: threshold}`` of a set of labels). ``warm_up``: the input a
    model is warmed up with (None: the input kind's, :data:`INPUT_KINDS`).
    """

    input: str
    outputs: tuple
    description: str
    shows: dict = field(default_factory=dict)
    warm_up: object = None

    def warm_up_input(self):
        return INPUT_KINDS.get(self.input) if self.warm_up is None else self.warm_up

    def kinds(self):
        """The kinds of :attr:`outputs`, a set."""
        return {f.kind for f in self.outputs}

    def check(self, reader):
        """ConfigError (one line naming ``reader``) unless a server can answer this declaration."""
        if self.input not in INPUT_KINDS:
            raise ConfigError(f"reader {reader}: serving() declares the input {self.input!r}, not an input kind "
                              f"(accepted: {', '.join(INPUT_KINDS)})")
        for f in self.outputs:
            if f.kind not in FIELD_KINDS:
                raise ConfigError(f"reader {reader}: serving() declares the output {f.name!r} of kind {f.kind!r}, "
                                  f"not a field kind (accepted: {', '.join(FIELD_KINDS)})")

    def check_rows(self, reader, rows):
        """ConfigError (one line naming ``reader`` and the field) unless each of ``rows`` (prediction rows,
        as a server answers them) has every declared output."""
        for row in rows:
            missing = [f for f in self.outputs if f.name not in row]
            if missing:
                raise ConfigError(f"reader {reader}: serving() declares the output {missing[0].name!r} "
                                  f"({missing[0].kind}), but its prediction rows have no such field (they have: "
                                  f"{', '.join(row)})")
