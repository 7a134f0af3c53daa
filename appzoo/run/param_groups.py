"""Parameter groups: which parameters train at which peak learning rate.

``trainer.learning_rate`` is the encoder's peak rate. ``head_learning_rate`` sets the peak of every parameter
outside ``model.encoder`` (the classifier, a BiLSTM), ``crf_learning_rate`` that of a CRF (a model names its CRF
sublayer in :attr:`~appzoo.task.model.TaskModel.CRF`), and ``layerwise_decay`` (d) spreads the encoder's rate
over its depth: layer i of L (1-based, L the top) trains at ``learning_rate * d ** (L - i)``, the embeddings
at ``learning_rate * d ** (L + 1)``, the encoder's other parameters (the pooler) at ``learning_rate``.

Every group follows the one warmup-and-decay schedule: AdamW takes each as a Paddle parameter group whose
``learning_rate`` is a multiple of the schedule's (never ``lr_ratio``, which Paddle's CPU kernel lacks).
Groups of one multiple are merged, so the default (no key set) is one group, as before these keys.
Parameters with ``stop_gradient`` (a frozen layer) are left out of the optimizer; the listing shows them as
"frozen". The listing (:func:`rows`) goes into ``metrics.json``, ``run_record.json``, ``MODEL_CARD.md``
and ``report.md``.
"""
import dataclasses

import numpy as np

from appzoo.encoders.prune import transformer_layers
from appzoo.errors import ConfigError


@dataclasses.dataclass
class Group:
    """Parameters that train at one peak learning rate."""

    name: str  # "encoder", "embeddings", "encoder layer 3", "encoder other", "head", "crf", "frozen"
    holds: list  # the sublayers it is made of, by structured name ("encoder.embeddings", "classifier")
    names: list  # the structured names of its parameters
    params: list  # the parameters themselves
    positions: list  # where each stands in model.named_parameters()
    scale: float  # its peak rate over trainer.learning_rate (0: frozen, not optimised)
    peak: float  # its peak learning rate

    def row(self):
        """What the run's record lists: name, what it holds, its tensors and weights, its peak rate."""
        return {"name": self.name, "holds": list(self.holds), "tensors": len(self.params),
                "parameters": int(sum(int(np.prod(p.shape)) for p in self.params)),
                "peak_learning_rate": self.peak}


def check_plan(trainer, model_class, model_type):
    """Plan time: refuse ``trainer.crf_learning_rate`` for a model class that declares no CRF."""
    if trainer.crf_learning_rate is not None and model_class.CRF is None:
        raise _names_nothing("crf_learning_rate", trainer.crf_learning_rate, f"this model ({model_type}) has no CRF")


def _decay_parts(model, encoder, decay, role, holds):
    """``layerwise_decay``: ``[(key, sublayer, power)]`` of the embeddings and each transformer layer (the
    top one at power 0), their parameters marked in ``role`` and their paths put in ``holds``; what no part
    takes (the pooler) stays in the encoder's group."""
    layers = transformer_layers(encoder) if encoder is not None else None
    if not layers:
        raise _names_nothing("layerwise_decay", decay, f"this model's encoder ({type(encoder).__name__}) has "
                             f"no transformer layers to find (model.encoder.encoder.layers)")
    depth = len(layers)
    parts = [("embeddings", getattr(encoder, "embeddings", None), depth + 1)]
    parts += [(f"encoder layer {i}", layer, depth - i) for i, layer in enumerate(layers, 1)]
    for key, layer, power in parts:
        if layer is not None:
            for p in layer.parameters():
                role[id(p)] = key
            holds[key] = [_path(model, layer)]
    holds["encoder"] = []  # what no part took: the encoder's other parameters (its pooler)
    return parts


def groups(model, config):
    """The named groups of ``model``'s parameters under ``config`` (a TrainerConfig), in the order of
    ``model.named_parameters()``; empty groups are left out. ConfigError for a key that names no parameter."""
    lr, decay = config.learning_rate, config.layerwise_decay
    head_lr = config.head_learning_rate if config.head_learning_rate is not None else lr
    crf_lr = config.crf_learning_rate if config.crf_learning_rate is not None else head_lr
    kind = type(model).__name__
    named = list(model.named_parameters())
    role = {id(p): "head" for _, p in named}  # id(parameter) -> the group's key
    holds = {}  # the group's key -> the sublayers it holds
    encoder = getattr(model, "encoder", None)
    if encoder is not None:
        for p in encoder.parameters():
            role[id(p)] = "encoder"
        holds["encoder"] = ["encoder"]
    parts = _decay_parts(model, encoder, decay, role, holds) if decay != 1 else []
    crf = getattr(model, model.CRF) if getattr(model, "CRF", None) else None
    if crf is not None:
        for p in crf.parameters():
            role[id(p)] = "crf"
        holds["crf"] = [model.CRF]
    elif config.crf_learning_rate is not None:
        raise _names_nothing("crf_learning_rate", config.crf_learning_rate, f"this model ({kind}) has no CRF")
    if config.head_learning_rate is not None and not any(r == "head" for r in role.values()) and crf is None:
        raise _names_nothing("head_learning_rate", config.head_learning_rate,
                             f"this model ({kind}) has no parameter outside model.encoder")
    rates = {"encoder": (1.0, lr), "head": (head_lr / lr, head_lr), "crf": (crf_lr / lr, crf_lr)}
    rates.update({key: (decay ** power, lr * decay ** power) for key, _, power in parts})
    found = {}
    for position, (name, p) in enumerate(named):
        key = "frozen" if p.stop_gradient else role[id(p)]
        for column, value in zip(found.setdefault(key, ([], [], [])), (name, p, position)):
            column.append(value)
    out = []
    for key, (names, params, positions) in found.items():
        scale, peak = rates.get(key, (0.0, 0.0))
        where = holds.get(key) or _top_sublayers(names, 1 if key in ("head", "crf") else 2)
        label = "encoder other" if key == "encoder" and decay != 1 else key
        out.append(Group(label, where, names, params, positions, scale, peak))
    return sorted(out, key=lambda g: _order(g.name))


def optimizer_groups(named):
    """AdamW's ``parameters``: one Paddle parameter group per multiple of the schedule's rate (groups of one
    multiple merged, each in the model's order of parameters), frozen parameters left out."""
    merged = {}
    for group in named:
        if group.scale:
            merged.setdefault(group.scale, []).extend(zip(group.positions, group.params))
    return [{"params": [p for _, p in sorted(pairs, key=lambda pair: pair[0])], "learning_rate": scale}
            for scale, pairs in merged.items()]


def rows(named):
    """The listing of the groups for the run's files (:meth:`Group.row` each)."""
    return [group.row() for group in named]


def _order(name):
    """Bottom to top: embeddings, the layers, the encoder's rest, the head, the CRF, then what is frozen."""
    if name.startswith("encoder layer "):
        return (1, int(name.rsplit(" ", 1)[1]))
    return ({"embeddings": 0, "encoder": 2, "encoder other": 2, "head": 3, "crf": 4}.get(name, 5), 0)


def _path(model, layer):
    """The structured name of sublayer ``layer`` of ``model``."""
    return next(name for name, sub in model.named_sublayers() if sub is layer)


def _top_sublayers(names, depth):
    """The sublayers (the first ``depth`` parts of each parameter name) that ``names`` come from, in order."""
    return list(dict.fromkeys(".".join(n.split(".")[:depth]) if n.count(".") >= depth else n.rsplit(".", 1)[0]
                              for n in names))


def _names_nothing(key, value, why):
    return ConfigError(f"trainer.{key}: {value!r} names no parameter: {why}")
