"""Param files: loading (JSON or YAML), ``--set`` overrides, validation.

Every component is built from its config section by checking the section's
keys against the constructor's signature (:func:`check_kwargs`): unknown keys,
missing required keys and wrong types are reported with the full key path.
"""
import inspect
import json
import os
import typing

from appzoo.errors import ConfigError
from appzoo.registry import did_you_mean

_NO_DEFAULT = inspect.Parameter.empty


class Range:
    """Bounds for a number, used as ``Annotated[float, Range(ge=0, lt=1)]`` so
    that check_kwargs can reject out-of-range values before anything is built."""

    def __init__(self, ge=None, gt=None, le=None, lt=None):
        self.bounds = {"ge": ge, "gt": gt, "le": le, "lt": lt}

    def check(self, value):
        ops = {"ge": lambda a, b: a >= b, "gt": lambda a, b: a > b,
               "le": lambda a, b: a <= b, "lt": lambda a, b: a < b}
        return all(bound is None or ops[k](value, bound) for k, bound in self.bounds.items())

    def describe(self):
        lo = (f"[{self.bounds['ge']}" if self.bounds["ge"] is not None else
              f"({self.bounds['gt']}" if self.bounds["gt"] is not None else "(-inf")
        hi = (f"{self.bounds['le']}]" if self.bounds["le"] is not None else
              f"{self.bounds['lt']})" if self.bounds["lt"] is not None else "inf)")
        return f"in {lo}, {hi}"


def _range_of(annotation):
    for meta in getattr(annotation, "__metadata__", ()):
        if isinstance(meta, Range):
            return meta
    return None


def _type_ok(value, annotation):
    """True when ``value`` fits ``annotation`` (a small subset of typing)."""
    if annotation is _NO_DEFAULT or annotation is typing.Any:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _type_ok(value, typing.get_args(annotation)[0])
    if origin is typing.Union:
        return any(_type_ok(value, arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if origin in (list, tuple):
        args = typing.get_args(annotation)
        if not isinstance(value, (list, tuple)):
            return False
        return not args or all(_type_ok(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return True


def describe_type(annotation):
    """Human-readable form of an annotation, for messages."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return describe_type(typing.get_args(annotation)[0])
    if origin is typing.Union:
        return " or ".join(describe_type(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if origin in (list, tuple):
        args = typing.get_args(annotation)
        return f"a list of {describe_type(args[0])}" if args else "a list"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        return {"str": "a string", "int": "an integer", "float": "a number",
                "bool": "true/false", "dict": "an object", "list": "a list"}.get(
                    annotation.__name__, annotation.__name__)
    return str(annotation)


def check_kwargs(target, section, key_path, injected=(), label=None):
    """Validate ``section`` (a dict) against the signature of ``target``.

    ``injected`` names parameters the framework passes itself; they are not
    accepted from the param file. ``label`` names the component in messages
    (defaults to the target's name). Returns ``section`` unchanged.
    """
    label = label or getattr(target, "__name__", str(target))
    if not isinstance(section, dict):
        raise ConfigError(f"{key_path}: expected an object, got {section!r}")
    func = target.__init__ if inspect.isclass(target) else target
    hints = typing.get_type_hints(func, include_extras=True)
    params = {
        name: p for name, p in inspect.signature(func).parameters.items()
        if name not in ("self",) and name not in injected
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    for key, value in section.items():
        if key not in params:
            raise ConfigError(
                f"{key_path}.{key}: unknown key for '{label}'{did_you_mean(key, params)} "
                f"(accepted: {', '.join(sorted(params))})"
            )
        annotation = hints.get(key, _NO_DEFAULT)
        if not _type_ok(value, annotation):
            raise ConfigError(
                f"{key_path}.{key}: expected {describe_type(annotation)}, got {value!r}"
            )
        bounds = _range_of(annotation)
        if bounds is not None and isinstance(value, (int, float)) and not bounds.check(value):
            raise ConfigError(f"{key_path}.{key}: must be {bounds.describe()}, got {value!r}")
    for name, p in params.items():
        if p.default is _NO_DEFAULT and name not in section:
            raise ConfigError(f"{key_path}.{name}: required key for '{label}' is missing")
    return section


# ---------------------------------------------------------------------------
# Param files
# ---------------------------------------------------------------------------
SECTIONS = ("dataset_reader", "model", "trainer")


def load_param_file(path):
    """Read a JSON or YAML param file (chosen by extension) into a dict."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".json", ".yaml", ".yml"):
        raise ConfigError(f"{path}: a param file must end in .json, .yaml or .yml")
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: param file not found") from None
    if ext == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
            raise ConfigError(f"{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected an object with sections {', '.join(SECTIONS)}, got {type(data).__name__}")
    for key in data:
        if key not in SECTIONS:
            raise ConfigError(f"{path}: {key}: unknown section{did_you_mean(key, SECTIONS)} (accepted: {', '.join(SECTIONS)})")
    for key in SECTIONS:
        data.setdefault(key, {})
        if not isinstance(data[key], dict):
            raise ConfigError(f"{path}: {key}: expected an object, got {data[key]!r}")
    return data


def parse_value(text):
    """``--set`` values: JSON when they parse as JSON, else the plain string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def apply_overrides(config, overrides):
    """Apply ``a.b.c=VALUE`` strings to ``config`` in place."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY.PATH=VALUE, e.g. trainer.epochs=3")
        parts = key.strip().split(".")
        if parts[0] not in SECTIONS:
            raise ConfigError(
                f"--set {item!r}: {parts[0]}: unknown section{did_you_mean(parts[0], SECTIONS)} "
                f"(accepted: {', '.join(SECTIONS)})"
            )
        node = config
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(
                    f"--set {item!r}: {'.'.join(parts[:depth + 1])} is {child!r}, not an object"
                )
            node = child
        node[parts[-1]] = parse_value(raw)
    return config
