"""The search space: ``KEY=log_uniform(1e-5, 1e-3)`` and its kin, parsed and checked.

One syntax serves the ``search.space`` section of a param file (``{"trainer.learning_rate":
"log_uniform(1e-5, 1e-3)"}``) and ``--search KEY=SPACE`` on the command line:

- ``log_uniform(LOW, HIGH)``: a float, uniform in log space (0 < LOW < HIGH);
- ``uniform(LOW, HIGH)``: a float (LOW < HIGH);
- ``int(LOW, HIGH)``: an integer, LOW and HIGH included (LOW < HIGH);
- ``choice(V1, V2, ...)``: one of the values, each parsed as JSON when it parses (as ``--set`` does),
  else a string; a JSON list of values inside the parentheses (``choice({"name": "focal"}, ...)``) is
  read as JSON as a whole, so values may hold commas.
"""
import dataclasses
import json
import math
import re
from typing import Optional

from appzoo.errors import ConfigError
from appzoo.params.param_file import overlapping, parse_value
from appzoo.registry import did_you_mean

KINDS = ("log_uniform", "uniform", "int", "choice")
#: The sections a search may vary: what is trained (``serve`` and ``search`` are not).
SEARCHABLE = ("dataset_reader", "model", "trainer")
#: Trainer keys the search sets for each of its trials.
SET_BY_SEARCH = ("trainer.output_dir", "trainer.resume", "trainer.overwrite_output_dir", "trainer.do")
_SPEC = re.compile(r"^\s*([A-Za-z_]+)\s*\((.*)\)\s*$", re.S)
EXAMPLE = "trainer.learning_rate=log_uniform(1e-5,1e-3)"


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One searched key: its kind and its range (``low``/``high``) or values (``choices``)."""

    key: str
    kind: str
    low: Optional[float] = None
    high: Optional[float] = None
    choices: tuple = ()
    text: str = ""  # as the user wrote it, for messages and the results

    def suggest(self, trial):
        """The value of this key in an Optuna trial (the key path is the parameter's name)."""
        if self.kind == "log_uniform":
            return trial.suggest_float(self.key, self.low, self.high, log=True)
        if self.kind == "uniform":
            return trial.suggest_float(self.key, self.low, self.high)
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high))
        return self.from_param(trial.suggest_categorical(self.key, self.optuna_choices()))

    def plain(self):
        """True when every choice is a number, a string, a bool or null (Optuna takes those as they are;
        objects and lists go by their JSON text)."""
        return all(v is None or isinstance(v, (bool, int, float, str)) for v in self.choices)

    def optuna_choices(self):
        return list(self.choices) if self.plain() else [json.dumps(v, sort_keys=True) for v in self.choices]

    def as_param(self, value):
        """``value`` as Optuna stores it for this key (for a trial enqueued with known settings)."""
        return value if self.plain() or self.kind != "choice" else json.dumps(value, sort_keys=True)

    def from_param(self, stored):
        """The value of this key that Optuna stored as ``stored`` (the inverse of :meth:`as_param`)."""
        return stored if self.plain() or self.kind != "choice" else json.loads(stored)

    def contains(self, value):
        if self.kind == "choice":
            return any(json.dumps(value, sort_keys=True) == json.dumps(c, sort_keys=True) for c in self.choices)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind == "int" and not float(value).is_integer():
            return False
        return self.low <= value <= self.high

    def extremes(self):
        """The values the plan is checked with before the first trial: both ends, or every choice."""
        if self.kind == "choice":
            return list(self.choices)
        if self.kind == "int":
            return [int(self.low), int(self.high)]
        return [self.low, self.high]


def parse_dimension(key, text, where):
    """``("trainer.learning_rate", "log_uniform(1e-5, 1e-3)")`` -> :class:`Dimension`; one line per mistake.
    ``where`` starts each message (``--search 'K=...'`` or ``search.space.K``)."""
    _check_key(key, where)
    if not isinstance(text, str):
        raise ConfigError(f"{where}: expected a text such as 'log_uniform(1e-5, 1e-3)', 'uniform(0, 0.2)', "
                          f"'int(8, 64)' or 'choice(ce, focal)', got {json.dumps(text)}")
    match = _SPEC.match(text)
    if not match:
        raise ConfigError(f"{where}: {text!r} is not KIND(...) (accepted kinds: {', '.join(KINDS)}; "
                          f"e.g. {EXAMPLE})")
    kind, inner = match.group(1), match.group(2).strip()
    if kind not in KINDS:
        raise ConfigError(f"{where}: {kind!r} is not a kind of range{did_you_mean(kind, KINDS)} "
                          f"(accepted: {', '.join(KINDS)})")
    if kind == "choice":
        return Dimension(key, kind, choices=tuple(_choices(inner, where)), text=text.strip())
    parts = [p.strip() for p in inner.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"{where}: {kind} takes two numbers, LOW and HIGH, got {text.strip()!r}")
    low, high = (_number(p, where, kind) for p in parts)
    if not low < high:
        raise ConfigError(f"{where}: LOW must be below HIGH, got {kind}({parts[0]}, {parts[1]})")
    if kind == "log_uniform" and low <= 0:
        raise ConfigError(f"{where}: log_uniform needs 0 < LOW, got {parts[0]} (use uniform for a range from 0)")
    if kind == "int" and not (float(low).is_integer() and float(high).is_integer()):
        raise ConfigError(f"{where}: int takes whole numbers, got {text.strip()!r}")
    return Dimension(key, kind, low, high, text=text.strip())


def _number(text, where, kind):
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where}: {kind} takes numbers, got {text!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{where}: {kind} takes finite numbers, got {text!r}")
    return value


def _choices(inner, where):
    if not inner:
        raise ConfigError(f"{where}: choice needs at least one value, e.g. choice(ce, focal)")
    try:
        values = json.loads(f"[{inner}]")
    except json.JSONDecodeError:
        if inner.lstrip()[:1] in ("{", "["):
            raise ConfigError(f"{where}: the choices start with {inner.lstrip()[0]!r} but are not JSON values "
                              f"separated by commas") from None
        items = [v.strip() for v in inner.split(",")]
        if any(not v for v in items):
            raise ConfigError(f"{where}: empty value in choice({inner})")
        values = [parse_value(v) for v in items]
    seen = [json.dumps(v, sort_keys=True) for v in values]
    twice = [text for i, text in enumerate(seen) if text in seen[:i]]
    if twice:
        raise ConfigError(f"{where}: the value {twice[0]} is given twice")
    return values


def _check_key(key, where):
    parts = key.split(".")
    if parts[0] not in SEARCHABLE:
        raise ConfigError(f"{where}: {parts[0]}: not a section a search can vary"
                          f"{did_you_mean(parts[0], SEARCHABLE)} (accepted: {', '.join(SEARCHABLE)})")
    if len(parts) < 2 or not all(p.strip() for p in parts):
        raise ConfigError(f"{where}: {key!r} is not a key path; expected SECTION.KEY, e.g. trainer.learning_rate")
    if key in SET_BY_SEARCH:
        raise ConfigError(f"{where}: {key} is set by the search for each trial "
                          f"(the trials go under trainer.output_dir/search/)")


def parse_specs(specs, space=None):
    """The ``--search KEY=SPACE`` texts (added to, or replacing, the keys of ``space``, the
    param file's ``search.space``) -> ``[Dimension]``, in order; keys that overlap are refused."""
    dimensions = {key: parse_dimension(key, text, f"search.space.{key}") for key, text in (space or {}).items()}
    given = []  # the keys of --search so far: one may replace a key of the param file, not another --search
    for spec in specs:
        key, sep, text = spec.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--search {spec!r}: expected KEY.PATH=SPACE, e.g. {EXAMPLE}")
        clash = overlapping(key, given)
        if clash:
            raise ConfigError(f"--search {spec!r}: {key} overlaps another --search key {clash}; give each key "
                              f"once")
        given.append(key)
        dimensions[key] = parse_dimension(key, text, f"--search {spec!r}")
    keys = list(dimensions)
    for i, key in enumerate(keys):
        clash = overlapping(key, keys[:i])  # the keys of a dict: never equal
        if clash:
            raise ConfigError(f"search: {key} overlaps the searched key {clash}; search each key once")
    if not dimensions:
        raise ConfigError(f"--search: no search space: give --search KEY=SPACE (e.g. --search {EXAMPLE}) or a "
                          f"search.space section in the param file")
    return list(dimensions.values())
