"""The settings of a sweep: ``--sweep`` axes parsed into the grid of settings."""
import dataclasses
import hashlib
import itertools
import json
import re

from appzoo.params.param_file import SECTIONS, overlapping, parse_value
from appzoo.errors import ConfigError
from appzoo.registry import did_you_mean

#: Trainer keys the sweep sets for each of its runs.
SET_BY_SWEEP = ("trainer.output_dir", "trainer.seed", "trainer.resume", "trainer.overwrite_output_dir")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]+")
MAX_NAME = 80


@dataclasses.dataclass
class Setting:
    name: str  # a readable, filesystem-safe folder name
    overrides: dict  # key path -> value


def parse_axes(specs):
    """``["KEY=V1,V2", ...]`` -> ``[(key, [values])]``, every mistake one line.

    ``K1,K2=[[a1,a2],[b1,b2]]`` is one axis that sets several keys together
    (settings that are not a grid, e.g. CRF vs softmax + ce vs softmax + dice):
    its key is the tuple ``(K1, K2)`` and each value a list of one value per key.
    """
    axes, taken = [], []
    for spec in specs:
        key, sep, raw = spec.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key:
            raise ConfigError(f"--sweep {spec!r}: expected KEY.PATH=V1,V2,... e.g. model.loss.name=ce,focal")
        keys = [k.strip() for k in key.split(",")]
        for k in keys:
            _check_key(spec, k, taken)
            taken.append(k)
        if raw.startswith("["):
            try:
                values = json.loads(raw)
            except json.JSONDecodeError as e:
                raise ConfigError(f"--sweep {spec!r}: the values start with '[' but are not a JSON list ({e})") \
                    from None
        elif len(keys) > 1:
            raise ConfigError(f"--sweep {spec!r}: an axis of {len(keys)} keys takes a JSON list of lists, one "
                              f"value per key, e.g. '{key}=[[v1, v2], [w1, w2]]'")
        else:
            items = [v.strip() for v in raw.split(",")]
            if any(not v for v in items):
                raise ConfigError(f"--sweep {spec!r}: empty value; give V1,V2,... or a JSON list "
                                  f"(values holding commas need the JSON list)")
            values = [parse_value(v) for v in items]
        if not values:
            raise ConfigError(f"--sweep {spec!r}: no values")
        if len(keys) > 1:
            wrong = [v for v in values if not isinstance(v, list) or len(v) != len(keys)]
            if wrong:
                raise ConfigError(f"--sweep {spec!r}: each value must be a list of {len(keys)} values "
                                  f"({', '.join(keys)}), got {json.dumps(wrong[0])}")
        seen = [json.dumps(v, sort_keys=True) for v in values]
        twice = [text for i, text in enumerate(seen) if text in seen[:i]]
        if twice:
            raise ConfigError(f"--sweep {spec!r}: the value {twice[0]} is given twice")
        axes.append((tuple(keys) if len(keys) > 1 else key, values))
    return axes


def _check_key(spec, key, taken):
    parts = key.split(".")
    if parts[0] not in SECTIONS:
        raise ConfigError(f"--sweep {spec!r}: {parts[0]}: unknown section{did_you_mean(parts[0], SECTIONS)} "
                          f"(accepted: {', '.join(SECTIONS)})")
    if len(parts) < 2 or not all(p.strip() for p in parts):
        raise ConfigError(f"--sweep {spec!r}: {key!r} is not a key path; expected SECTION.KEY, "
                          f"e.g. model.loss.name")
    if key in SET_BY_SWEEP:
        raise ConfigError(f"--sweep {spec!r}: {key} is set by the sweep for each run "
                          f"(use --seeds N for seeds; the runs go under trainer.output_dir/sweep/)")
    clash = overlapping(key, taken)
    if clash:
        raise ConfigError(f"--sweep {spec!r}: {key} overlaps another --sweep key {clash}; "
                          f"give each key once")


def _slug(value):
    if isinstance(value, dict):
        return "_".join(f"{k}-{_slug(v)}" for k, v in value.items()) or "empty"
    if isinstance(value, list):
        return "-".join(_slug(v) for v in value) or "empty"
    return value if isinstance(value, str) else json.dumps(value)


def setting_name(overrides):
    """``{"model.loss.name": "focal", "trainer.learning_rate": 0.001}`` ->
    ``loss.name=focal__learning_rate=0.001`` (the section is left out)."""
    if not overrides:
        return "base"
    text = "__".join(f"{key.split('.', 1)[1]}={_slug(value)}" for key, value in overrides.items())
    text = _UNSAFE.sub("_", text).strip("._") or "setting"
    if len(text) > MAX_NAME:
        digest = hashlib.sha1(json.dumps(overrides, sort_keys=True).encode()).hexdigest()[:8]
        text = f"{text[:MAX_NAME - 9]}-{digest}"
    return text


def grid(axes):
    """The settings, first axis slowest; names made unique."""
    settings, used = [], set()
    for combo in itertools.product(*[values for _, values in axes]):
        overrides = {}
        for (key, _), value in zip(axes, combo):
            overrides.update(zip(key, value) if isinstance(key, tuple) else [(key, value)])
        name = setting_name(overrides)
        base, i = name, 2
        while name.lower() in used:  # case-insensitive file systems
            name, i = f"{base}-{i}", i + 1
        used.add(name.lower())
        settings.append(Setting(name, overrides))
    return settings

