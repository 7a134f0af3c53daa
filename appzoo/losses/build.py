"""``build_loss``: a loss Layer from its param-file section."""
import inspect

from appzoo.params.keys import check_kwargs
from appzoo.errors import ConfigError
from appzoo.losses.base import FAMILIES, LossParamError
from appzoo.registry import LOSSES

SUPPLIED = ("class_counts", "train_size", "key_path")


def losses_for(family):
    """Sorted names of the registered losses whose call shape is ``family``."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    return [name for name in LOSSES.names() if LOSSES.get(name, "loss").FAMILY == family]


def build_loss(cfg, key_path="model.loss", class_counts=None, family=None, train_size=None):
    """Build the loss named by ``cfg["name"]`` with the other keys as arguments.

    Args:
        cfg: the param-file section, e.g. ``{"name": "focal", "gamma": 2.0}``.
        key_path: where ``cfg`` sits in the param file, for messages.
        class_counts: training label counts per class, used where the config
            says ``"balanced"`` or ``{"effective_number": beta}`` and by the
            losses built on them (``logit_adjusted_ce``, ...).
        family: the call shape the model needs (``"classification"``,
            ``"pair"``, ``"embedding"`` or ``"scored"``, or a tuple of those the model
            accepts); a loss of another family is refused.
        train_size: the number of training examples (``distribution_balanced``).

    Raises ConfigError naming the full key path for: a missing or unknown
    name, a loss that does not fit ``family``, unknown keys, wrong types and
    values out of range.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"{key_path}: expected an object with a 'name' key, got {cfg!r}")
    if "name" not in cfg:
        raise ConfigError(f"{key_path}.name: required key is missing "
                          f"(available: {', '.join(LOSSES.names())})")
    name = cfg["name"]
    cls = LOSSES.get(name, f"{key_path}.name")
    if family is not None:
        families = (family,) if isinstance(family, str) else tuple(family)
        for one in families:
            if one not in FAMILIES:
                raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {one!r}")
        if cls.FAMILY not in families:
            fits = sorted(n for one in families for n in losses_for(one))
            raise ConfigError(f"{key_path}.name: {name!r} does not fit a {' or '.join(families)} model "
                              f"(losses that fit: {', '.join(fits)})")
    kwargs = {k: v for k, v in cfg.items() if k != "name"}
    check_kwargs(cls, kwargs, key_path, supplied=SUPPLIED, label=name)
    accepted = inspect.signature(cls.__init__).parameters
    supplied = {"class_counts": class_counts, "train_size": train_size, "key_path": key_path}
    kwargs.update({k: v for k, v in supplied.items() if k in accepted})
    try:
        return in_float32(cls(**kwargs))
    except LossParamError as err:
        raise ConfigError(f"{key_path}.{err.param}: {err.reason}") from None


def in_float32(loss):
    """Make ``loss`` compute in float32 whatever autocast (``trainer.amp``)
    made of its inputs: low-precision logits are cast up and autocast is off
    inside the loss."""
    import paddle

    forward = loss.forward

    def float32_forward(*args, **kwargs):
        def up(value):
            return value.astype("float32") if isinstance(value, paddle.Tensor) and value.dtype in (
                paddle.float16, paddle.bfloat16) else value

        with paddle.amp.auto_cast(enable=False):
            return forward(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})

    loss.forward = float32_forward
    return loss
