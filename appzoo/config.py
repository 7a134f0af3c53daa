"""Param files: loading (JSON or YAML), ``--set`` overrides, validation.

Every component is built from its config section by checking the section's
keys against the constructor's signature (:func:`check_kwargs`): unknown keys,
missing required keys and wrong types are reported with the full key path.
"""
import inspect
import json
import math
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


def non_finite(value, key_path):
    """``(key path, value)`` of the first NaN or infinity in ``value`` (a
    number, or lists and objects of them), else None. JSON (as Python reads
    it) and YAML both accept NaN and Infinity, and NaN passes every ``<``
    and ``>=`` check silently."""
    if isinstance(value, float) and not math.isfinite(value):
        return key_path, value
    if isinstance(value, dict):
        items = ((f"{key_path}.{k}", v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{key_path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for path, item in items:
        found = non_finite(item, path)
        if found:
            return found
    return None


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
    # A constructor that passes ``**kwargs`` on to its base class accepts the
    # base's keys too: follow the class hierarchy (MRO) while each one does.
    funcs = [c.__init__ for c in target.__mro__ if "__init__" in vars(c) and c is not object] \
        if inspect.isclass(target) else [target]
    params, hints = {}, {}
    for func in funcs:
        hints = {**typing.get_type_hints(func, include_extras=True), **hints}  # the subclass's annotation wins
        signature = inspect.signature(func).parameters
        for name, p in signature.items():
            if name != "self" and name not in injected and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                params.setdefault(name, p)
        if not any(p.kind == p.VAR_KEYWORD for p in signature.values()):
            break
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
        where = non_finite(value, f"{key_path}.{key}")
        if where:
            raise ConfigError(f"{where[0]}: must be a finite number, got {where[1]!r}")
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
    if os.path.isdir(path):
        raise ConfigError(f"{path}: is a folder; give a param file (.json, .yaml or .yml)")
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".json", ".yaml", ".yml"):
        raise ConfigError(f"{path}: a param file must end in .json, .yaml or .yml")
    text = _read_text(path)
    if not text.strip():
        raise ConfigError(f"{path}: the param file is empty (expected an object with sections "
                          f"{', '.join(SECTIONS)})")
    if ext == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
        _json_duplicate_keys(text, path)
    else:
        import yaml

        try:
            _yaml_duplicate_keys(yaml.compose(text, Loader=yaml.SafeLoader), path)
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
            raise ConfigError(f"{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
        if data is None:  # only comments
            raise ConfigError(f"{path}: the param file is empty (expected an object with sections "
                              f"{', '.join(SECTIONS)})")
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


def _read_text(path):
    """The param file's text; each way it cannot be read is one line."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: param file not found") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the param file ({e.strerror})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        start = raw.rfind(b"\n", 0, e.start) + 1
        line = raw.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"{path}:{line}: invalid UTF-8 byte 0x{raw[e.start]:02x} at column "
                          f"{e.start - start + 1} (save the param file as UTF-8)") from None


def _where(keys):
    return ".".join(keys) if keys else "the top level"


def _json_duplicate_keys(text, path):
    """Raise at the first key given twice in one object: ``json.loads`` keeps
    the last silently. The text is valid JSON here; this re-scans it with the
    pure-Python scanner, whose object parser is replaced to see where each
    key is."""
    from json import decoder, scanner

    keys = []  # the path of the value being scanned

    def skip(s, end):
        return decoder.WHITESPACE.match(s, end).end()

    def parse_object(s_and_end, strict, scan_once, *_):
        s, end = s_and_end  # just after "{"
        seen, obj = set(), {}
        end = skip(s, end)
        if s[end] == "}":
            return obj, end + 1
        while True:
            key, after = decoder.scanstring(s, end + 1, strict)
            if key in seen:
                raise ConfigError(f"{path}:{s.count(chr(10), 0, end) + 1}: duplicate key {key!r} in "
                                  f"{_where(keys)}")
            seen.add(key)
            end = skip(s, skip(s, after) + 1)  # past ":"
            keys.append(key)
            obj[key], end = scan_once(s, end)
            keys.pop()
            end = skip(s, end)
            if s[end] == "}":
                return obj, end + 1
            end = skip(s, end + 1)  # past ","

    context = json.JSONDecoder()
    context.parse_object = parse_object
    scanner.py_make_scanner(context)(text, skip(text, 0))


def _yaml_duplicate_keys(node, path, keys=()):
    """As :func:`_json_duplicate_keys`, on a composed YAML node tree."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key in seen:
                raise ConfigError(f"{path}:{key_node.start_mark.line + 1}: duplicate key {key!r} in "
                                  f"{_where(keys)}")
            if key is not None:
                seen.add(key)
            _yaml_duplicate_keys(value_node, path, (*keys, str(key)))
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _yaml_duplicate_keys(item, path, keys)


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
        if not all(part.strip() for part in parts):
            raise ConfigError(f"--set {item!r}: empty key in {key.strip()!r}; expected KEY.PATH=VALUE, "
                              f"e.g. trainer.epochs=3")
        value = parse_value(raw)
        if len(parts) == 1 and not isinstance(value, dict):
            raise ConfigError(f"--set {item!r}: {parts[0]} is a section and takes an object, got {raw.strip()}; "
                              f"set one of its keys with --set {parts[0]}.KEY=VALUE")
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
        node[parts[-1]] = value
    return config
