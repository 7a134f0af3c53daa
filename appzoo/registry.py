"""Small registries of named components, one per kind.

Components register under an explicit name; registering a name twice raises,
and looking up an unknown name raises a :class:`ConfigError` that names the
key path, the available names and the closest match.
"""
import difflib

from appzoo.errors import ConfigError


def did_you_mean(name, choices):
    """Return ``"; did you mean 'x'?"`` for the closest choice, or ``""``."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


class Registry:
    """Maps explicit names to classes or functions of one kind."""

    def __init__(self, kind):
        self.kind = kind
        self._items = {}

    def register(self, name):
        def decorator(obj):
            if name in self._items:
                raise ValueError(
                    f"{self.kind} '{name}' is already registered "
                    f"(by {self._items[name].__module__}.{self._items[name].__qualname__})"
                )
            self._items[name] = obj
            return obj

        return decorator

    def get(self, name, key_path):
        """Return the component registered as ``name``; ``key_path`` is where the name came from."""
        if name not in self._items:
            raise ConfigError(
                f"{key_path}: {name!r} is not a registered {self.kind}{did_you_mean(name, self._items)} "
                f"(available: {', '.join(self.names())})"
            )
        return self._items[name]

    def names(self):
        return sorted(self._items)

    def __contains__(self, name):
        return name in self._items

    def __iter__(self):
        return iter(self.names())


MODELS = Registry("model")
READERS = Registry("reader")
LOSSES = Registry("loss")
METRICS = Registry("metric")
