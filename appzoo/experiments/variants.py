"""A variant of a param file: the base tree with some keys set, and each one planned before anything runs.

A sweep's grid and a search's ranges are two ways of choosing variants; both start from the base planned as a
fresh run (:func:`fresh`), make each variant with :func:`variant` and plan each with :func:`plan_variant`, so
a bad key or value stops them with one line and nothing written. The key-path walk itself is the one ``--set``
uses (:func:`appzoo.params.param_file.set_key`).
"""
import copy

from appzoo.errors import ConfigError
from appzoo.params.param_file import get_key, set_key
from appzoo.params.trainer import Do
from appzoo.run.plan import validate

__all__ = ["get_key", "set_key", "variant", "fresh", "plan_variant", "check_trains"]


def variant(config, overrides, **trainer):
    """A copy of the param tree ``config`` with ``overrides`` (``{key path: value}``) set, then the trainer keys
    ``trainer`` (the folder, seed and resume keys the strategy owns)."""
    out = copy.deepcopy(config)
    for key, value in overrides.items():
        # a search's message names --sweep as well: the text both have always given
        set_key(out, key, value, f"--sweep {key}")
    if trainer:
        out.setdefault("trainer", {}).update(trainer)
    return out


def fresh(config, **trainer):
    """``config`` as a run that starts anew and may replace an old folder: what a variant is planned as before
    its folder's state is known."""
    return variant(config, {}, resume=False, overwrite_output_dir=True, **trainer)


def plan_variant(config, param_path, do, what=None):
    """The plan of one variant's tree (or of the base, :func:`fresh`); its ConfigError begins with ``what``
    (which variant it is), where given."""
    try:
        return validate(config, param_path, do=do)
    except ConfigError as e:
        if what is None:
            raise
        raise ConfigError(f"{what}: {e}") from None


def check_trains(strategy, do, source="--do"):
    """A sweep or a search trains every variant: ConfigError when the modes ``do`` (of ``source``: ``--do``, or
    ``trainer.do`` as the plan resolved it) have no train."""
    if do is not None and not Do(do).trains:
        modes = ",".join(do) if source == "--do" else do  # --do as typed, trainer.do as the list it is
        raise ConfigError(f"--{strategy}: a {strategy} trains; {source} {modes} has no 'train'")
