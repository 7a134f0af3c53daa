"""Param files: reading JSON or YAML into a dict (duplicate keys, non-UTF-8 text and bad syntax are
one line each), and ``--set KEY.PATH=VALUE`` overrides. The key-path walk (:func:`get_key`, :func:`set_key`)
is here, below the sweep and the search that use it too. Validating the keys: :mod:`appzoo.params.keys`.
"""
import copy
import json
import os
import re

from appzoo.errors import ConfigError
from appzoo.params.sections import SECTIONS
from appzoo.registry import did_you_mean


def load_param_file(path):
    """Read a JSON or YAML param file (chosen by extension) into a dict."""
    if os.path.isdir(path):
        raise ConfigError(f"{path}: is a folder; give a param file (.json, .yaml or .yml)")
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".json", ".yaml", ".yml"):
        raise ConfigError(f"{path}: a param file must end in .json, .yaml or .yml")
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO would block the read forever, a device too
        raise ConfigError(f"{path}: not a regular file (a pipe, socket or device); give a param file")
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
        check_text(data[key], key)
    return data


def check_text(value, where):
    """Raise ConfigError for a string in ``value`` (keys included) that holds a
    surrogate: a byte that is not UTF-8 in a command-line argument (``$'out\\xff'``)
    or a JSON escape such as ``"\\ud800"``. Such a string cannot be written into
    config.json, so it is refused before anything is. ``where`` names ``value``."""
    if isinstance(value, str):
        found = re.search("[\ud800-\udfff]", value)
        if found is not None:
            char = ord(found.group())
            what = (f"the byte 0x{char - 0xDC00:02x}, which is not UTF-8" if char >= 0xDC80
                    else f"a lone surrogate \\u{char:04x}, which is not a character")
            raise ConfigError(f"{where}: {value!r} holds {what}; a value must be UTF-8 text, since it is saved "
                              f"in config.json (rename the path, or fix the value)")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, where)
            check_text(item, f"{where}.{key}")
    elif isinstance(value, list):
        for item in value:
            check_text(item, where)


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


def overlapping(key, keys):
    """The first of the key paths ``keys`` that is ``key``, holds it or lies inside it (``model.loss`` and
    ``model.loss.gamma``), or None: two settings of such keys would set one value twice."""
    return next((k for k in keys if k == key or k.startswith(key + ".") or key.startswith(k + ".")), None)


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
        if raw.strip()[:1] in ("{", "["):
            try:  # meant as JSON: say why it does not parse, not that a string is the wrong type
                json.loads(raw)
            except json.JSONDecodeError as e:
                raise ConfigError(f"--set {item!r}: the value starts with {raw.strip()[0]!r} but is not "
                                  f"valid JSON ({e.msg} at column {e.colno} of the value)") from None
        check_text(value, f"--set {key.strip()}")
        if len(parts) == 1 and not isinstance(value, dict):
            raise ConfigError(f"--set {item!r}: {parts[0]} is a section and takes an object, got {raw.strip()}; "
                              f"set one of its keys with --set {parts[0]}.KEY=VALUE")
        set_key(config, key.strip(), value, f"--set {item!r}")
    return config


def get_key(config, key, default=None):
    """The value at the key path ``key`` (``model.loss.name``) of a param tree, or ``default`` where the
    path stops short (a key absent, or a value that is not an object on the way)."""
    node = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def set_key(config, key, value, where):
    """Set the key path ``key`` of a param tree to a copy of ``value``, making the objects on the way;
    ``where`` (the flag and its text) begins the message when a value on the way is not an object."""
    node = config
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"{where}: {'.'.join(parts[:depth + 1])} is {child!r}, not an object")
        node = child
    node[parts[-1]] = copy.deepcopy(value)
