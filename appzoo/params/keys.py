"""The keys of a param file: their annotations, and the validation and defaults read from them.

Every key a param file can set is a constructor parameter (or a dataclass
field) annotated with its type and a :class:`Key`: the range or other limits
it accepts and a help text, e.g.

    dropout: Annotated[float, Key("dropout before the classifier", ge=0, lt=1)] = 0.1

That one annotation is the whole validation of a single key: :func:`check_kwargs`
checks a param-file section against it (unknown keys, missing required keys,
wrong types, non-finite numbers and out-of-range values, each named by its key
path), :func:`check_args` holds objects built from Python to the same
annotation, and ``--describe`` and ``docs/params.md`` are generated from it.
Checks between keys (``warmup_steps`` with ``warmup_proportion``) stay
explicit code in the constructor. Reading a param file and ``--set``:
:mod:`appzoo.params.param_file`.
"""
import dataclasses
import functools
import inspect
import math
import typing

from appzoo.errors import ConfigError
from appzoo.registry import did_you_mean

_NO_DEFAULT = inspect.Parameter.empty
_OPS = {"ge": (">=", lambda a, b: a >= b), "gt": (">", lambda a, b: a > b),
        "le": ("<=", lambda a, b: a <= b), "lt": ("<", lambda a, b: a < b)}


class Key:
    """What a key is for and what it accepts beyond its type, used as
    ``Annotated[float, Key("help text", ge=0, lt=1)]``.

    ``ge``/``gt``/``le``/``lt``: bounds of a number (of each number, for a
    list of numbers). ``also``: values accepted outside the bounds, each with
    its meaning (``{-1: "use epochs"}``). ``nonempty``: a string must not be
    "". ``check``: ``check(value, key_path)`` raises ConfigError
    for what no bound can say (an encoding name that Python knows).
    """

    def __init__(self, help="", *, ge=None, gt=None, le=None, lt=None, also=None, nonempty=False, check=None):
        self.help = help
        self.bounds = {k: v for k, v in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt)) if v is not None}
        self.also = also or {}
        self.nonempty = nonempty
        self.check = check

    def in_range(self, value):
        return value in self.also or all(_OPS[k][1](value, bound) for k, bound in self.bounds.items())

    def describe_range(self):
        """``>= 0``, ``in [0, 1)``, ``-1 (use epochs) or >= 1``; "" without bounds."""
        b = self.bounds
        if ("ge" in b or "gt" in b) and ("le" in b or "lt" in b):
            text = (f"in {'[' if 'ge' in b else '('}{b.get('ge', b.get('gt'))}, "
                    f"{b.get('le', b.get('lt'))}{']' if 'le' in b else ')'}")
        else:
            text = " and ".join(f"{_OPS[k][0]} {v}" for k, v in b.items())
        specials = [f"{v!r} ({meaning})" if meaning else repr(v) for v, meaning in self.also.items()]
        return " or ".join(specials + [text]) if text else ""


def key_of(annotation):
    """The :class:`Key` of an ``Annotated`` annotation, else None; the last
    one wins (``Annotated[Dropout, Key("...")]`` restates a shared key)."""
    keys = [meta for meta in getattr(annotation, "__metadata__", ()) if isinstance(meta, Key)]
    return keys[-1] if keys else None


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
        return f"a list, each {describe_type(args[0])}" if args else "a list"
    if origin is dict or annotation is typing.Dict:
        return "an object"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        return {"str": "a string", "int": "an integer", "float": "a number",
                "bool": "true/false", "dict": "an object", "list": "a list"}.get(
                    annotation.__name__, annotation.__name__)
    return str(annotation)


def check_value(key_path, value, annotation):
    """Raise ConfigError unless ``value`` fits ``annotation``: its type, then
    (numbers anywhere in it) finiteness, then its :class:`Key`; then the
    member of a Union that the value is, and each item of a list, the same way."""
    if not _type_ok(value, annotation):
        raise ConfigError(f"{key_path}: expected {describe_type(annotation)}, got {value!r}")
    where = non_finite(value, key_path)
    if where:  # NaN passes every range check silently
        raise ConfigError(f"{where[0]}: must be a finite number, got {where[1]!r}")
    key = key_of(annotation)
    if key is not None:
        if key.bounds and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and not key.in_range(value):
            raise ConfigError(f"{key_path}: must be {key.describe_range()}, got {value!r}")
        if key.nonempty and value == "":
            raise ConfigError(f"{key_path}: must not be empty, got {value!r}")
        if key.check is not None and value is not None:
            key.check(value, key_path)
    inner = typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    if origin is typing.Union:
        check_value(key_path, value, next(a for a in args if _type_ok(value, a)))
    elif origin in (list, tuple) and args:
        for i, item in enumerate(value):
            check_value(f"{key_path}[{i}]", item, args[0])


def parameters(target, supplied=()):
    """``{name: (inspect.Parameter, annotation)}`` of the keys ``target`` (a
    class or a function) accepts, in signature order. A constructor that
    passes ``**kwargs`` on to its base class accepts the base's keys too: the
    class hierarchy (MRO) is followed while each one does. ``supplied`` names
    parameters the framework passes itself; they are not keys."""
    if inspect.isclass(target) and dataclasses.is_dataclass(target):
        hints = typing.get_type_hints(target, include_extras=True)
        return {f.name: (inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=_field_default(f)),
                         hints[f.name]) for f in dataclasses.fields(target) if f.name not in supplied}
    funcs = [c.__init__ for c in target.__mro__ if "__init__" in vars(c) and c is not object] \
        if inspect.isclass(target) else [target]
    params = {}
    for func in funcs:
        hints = typing.get_type_hints(func, include_extras=True)
        signature = inspect.signature(func).parameters
        for name, p in signature.items():
            if name != "self" and name not in supplied and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                params.setdefault(name, (p, hints.get(name, _NO_DEFAULT)))  # the subclass's wins
        if not any(p.kind == p.VAR_KEYWORD for p in signature.values()):
            break
    return params


def _field_default(field):
    """A dataclass field's default (made by its ``default_factory`` when it has one), else _NO_DEFAULT."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return _NO_DEFAULT


def check_kwargs(target, section, key_path, supplied=(), label=None, also_accepted=()):
    """Validate ``section`` (a dict) against the annotated signature of
    ``target`` (see :func:`parameters`) and return it unchanged.

    ``label`` names the component in messages (defaults to the target's
    name). ``also_accepted`` names keys that another component of the same
    section takes (listed as accepted, not checked here).
    """
    label = label or getattr(target, "__name__", str(target))
    if not isinstance(section, dict):
        raise ConfigError(f"{key_path}: expected an object, got {section!r}")
    params = parameters(target, supplied)
    for key, value in section.items():
        if key in also_accepted:
            continue
        if key not in params:
            accepted = sorted(set(params) | set(also_accepted))
            raise ConfigError(
                f"{key_path}.{key}: unknown key for '{label}'{did_you_mean(key, accepted)} "
                f"(accepted: {', '.join(accepted)})"
            )
        check_value(f"{key_path}.{key}", value, params[key][1])
    for name, (p, _) in params.items():
        if p.default is _NO_DEFAULT and name not in section:
            raise ConfigError(f"{key_path}.{name}: required key for '{label}' is missing")
    return section



def build_section(cls, section, name):
    """``cls(**section)`` for the param file's section ``name`` whose keys are the dataclass ``cls``'s fields,
    after :func:`check_kwargs`: an unknown key, a wrong type or a value out of range is a ConfigError naming
    ``name.KEY``."""
    check_kwargs(cls, section, name, label=name)
    return cls(**section)

def check_args(prefix=None):
    """Decorator for a constructor: check the arguments it is given against
    their annotations as :func:`check_kwargs` checks a param file, so that an
    object built from Python meets the same limits. ``prefix`` starts the key
    path in messages (default: the class name). Only this function's own
    parameters are checked; a base class checks what ``**kwargs`` passes on."""
    def decorate(init):
        signature = inspect.signature(init)

        @functools.wraps(init)
        def checked(self, *args, **kwargs):
            hints = typing.get_type_hints(init, include_extras=True)
            for name, value in signature.bind(self, *args, **kwargs).arguments.items():
                kind = signature.parameters[name].kind
                if name in hints and kind not in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD):
                    check_value(f"{prefix or type(self).__name__}.{name}", value, hints[name])
            init(self, *args, **kwargs)

        return checked
    return decorate


def with_defaults(target, section, supplied=()):
    """``section`` with each key ``target`` accepts (:func:`parameters`) that
    it leaves out set to its default, in signature order; a required key it
    lacks stays out, and keys ``target`` does not know are kept at the end."""
    out = {}
    for name, (p, _) in parameters(target, supplied).items():
        if name in section:
            out[name] = section[name]
        elif p.default is not _NO_DEFAULT:
            out[name] = p.default
    out.update({k: v for k, v in section.items() if k not in out})
    return out


def check_fields(obj, prefix):
    """:func:`check_args` for a dataclass instance (call it in ``__post_init__``)."""
    hints = typing.get_type_hints(type(obj), include_extras=True)
    for field in dataclasses.fields(obj):
        check_value(f"{prefix}.{field.name}", getattr(obj, field.name), hints[field.name])
