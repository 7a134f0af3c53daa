"""Small registries of named components, one per kind, filled on first use.

Components register under an explicit name; registering a name twice raises,
and looking up an unknown name raises a :class:`ConfigError` that names the
key path, the available names and the closest match.

The modules that register are imported here, on the first lookup of any
registry (``get``, ``names``, ``in``, iteration), so no caller imports them
for their side effect: the built-in ones by name (:data:`BUILT_IN`), then
every module a package declares under the entry-point group
:data:`PLUGIN_GROUP`, e.g. in its ``pyproject.toml``::

    [project.entry-points."appzoo.plugins"]
    my_task = "my_package.my_task"

An error while importing one of them propagates: a component that failed to
register is not silently missing.
"""
import difflib
import importlib
import importlib.metadata
import threading

from appzoo.env import import_paddle_quietly
from appzoo.errors import ConfigError

BUILT_IN = ("appzoo.losses", "appzoo.metrics", "tasks")
PLUGIN_GROUP = "appzoo.plugins"

_lock = threading.RLock()
_loaded = False
_loading = False


def load_components():
    """Import the registering modules, once per process (also safe from several threads)."""
    global _loaded, _loading
    if _loaded:
        return
    with _lock:
        # _loading: a lookup made while those modules import (same thread, the lock is reentrant)
        # sees what has registered so far instead of starting over.
        if _loaded or _loading:
            return
        _loading = True
        try:
            import_paddle_quietly()  # the registering modules import paddle: without its import-time noise
            for module in BUILT_IN:
                importlib.import_module(module)
            for entry_point in importlib.metadata.entry_points(group=PLUGIN_GROUP):
                entry_point.load()
            _loaded = True
        finally:
            _loading = False


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
        load_components()
        if name not in self._items:
            raise ConfigError(
                f"{key_path}: {name!r} is not a registered {self.kind}{did_you_mean(name, self._items)} "
                f"(available: {', '.join(self.names())})"
            )
        return self._items[name]

    def names(self):
        load_components()
        return sorted(self._items)

    def __contains__(self, name):
        load_components()
        return name in self._items

    def __iter__(self):
        return iter(self.names())


MODELS = Registry("model")
READERS = Registry("reader")
LOSSES = Registry("loss")
METRICS = Registry("metric")
