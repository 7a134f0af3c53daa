"""Which of a batch's keys a model's ``forward`` takes: the one filter of the trainer, the prediction
warm-up and the dygraph engine (a reader's batch may carry more, for the model's ``decode``)."""
import inspect


def forward_inputs(model, labels=True):
    """``inputs(batch) -> dict``: the batch keys ``model.forward`` takes (all of them for a ``forward(**kwargs)``),
    as HF's Trainer hands a model only those: a reader's batch may carry more, for the model's ``decode``.
    Without ``labels``, the labels stay out too (a prediction: the exported graphs take none, so no engine
    computes a loss). The one filter of the trainer and the dygraph engine."""
    params = inspect.signature(model.forward).parameters.values()
    takes_all = any(p.kind == p.VAR_KEYWORD for p in params)
    names = {p.name for p in params}

    def inputs(batch):
        return {k: v for k, v in batch.items() if (takes_all or k in names) and (labels or k != "labels")}

    return inputs
