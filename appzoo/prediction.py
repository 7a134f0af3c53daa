"""The one batched prediction loop: the trainer's eval and predict, the Predictor and a server run through it.

Features are batched longest first (little padding), shared out over the
data-parallel ranks, run through an engine, decoded by the model, and put
back in the examples' order before the reader decodes them into predictions.
"""
import numpy as np

from appzoo.data.sampler import length_order
from appzoo.progress import progress


def predict(engine, bundle, examples, features, *, batch_size, rank=0, world_size=1, bar=False,
            desc="predict"):
    """``(predictions, mean loss)`` of ``features`` (the loss: None unless the
    engine's outputs carry one, which a model given labels does).

    ``engine(batch, tensors)`` runs one collated batch (numpy arrays, and the
    same as paddle tensors) and returns the model's output dict;
    ``bundle.model.decode`` turns it into per-row arrays; with ``world_size``
    > 1 each rank runs its share and every rank gets every row."""
    import paddle

    model, reader = bundle.model, bundle.reader
    order = length_order(features)
    chunks = [order[i:i + batch_size] for i in range(0, len(order), batch_size)][rank::world_size]
    rows, outputs, losses, sizes = [], {}, [], []
    pad_id = bundle.tokenizer.pad_token_id
    with paddle.no_grad():
        for indices in progress(chunks, desc=desc, unit="batch", leave=False, disable=not bar):
            batch = reader.collate([features[i] for i in indices], pad_id)
            tensors = {k: paddle.to_tensor(v) for k, v in batch.items()}
            out = engine(batch, tensors)
            if "loss" in out:
                losses.append(float(out["loss"]))
                sizes.append(len(indices))
            for key, value in model.decode(out, tensors).items():
                outputs.setdefault(key, []).extend(list(value.numpy()))
            rows.extend(indices)
    if world_size > 1:
        rows, outputs, losses, sizes = _gather(rows, outputs, losses, sizes)
    if not examples:  # an empty predict file
        return [], None
    back = np.argsort(rows, kind="stable")  # row position of each feature, in the features' order
    outputs = {k: [v[j] for j in back] for k, v in outputs.items()}
    predictions = reader.decode(examples, features, outputs, bundle.labels)
    loss = float(np.average(losses, weights=sizes)) if losses else None
    return predictions, loss


def _gather(rows, outputs, losses, sizes):
    """Every rank's share, on every rank."""
    import paddle

    shares = []
    paddle.distributed.all_gather_object(shares, (rows, outputs, losses, sizes))
    rows = [i for share in shares for i in share[0]]
    keys = dict.fromkeys(k for share in shares for k in share[1])  # a rank with no batch has none
    outputs = {k: [v for share in shares for v in share[1].get(k, [])] for k in keys}
    losses = [v for share in shares for v in share[2]]
    sizes = [v for share in shares for v in share[3]]
    return rows, outputs, losses, sizes


def evaluate(engine, bundle, examples, features, *, fit=False, with_predictions=False, **options):
    """Metrics of one labelled split (with the mean loss when the engine gives
    one); ``fit`` lets the reader tune on it first (dev during training: a
    decision threshold, say). ``with_predictions``: ``(metrics,
    predictions)``, the predictions the metrics were computed from (for
    ``predictions/<split>.jsonl`` and ``errors.md``, without predicting twice)."""
    predictions, loss = predict(engine, bundle, examples, features, **options)
    if fit:
        bundle.reader.fit(examples, predictions, bundle.labels)
    metrics = bundle.reader.evaluate(examples, predictions, bundle.labels)
    metrics = metrics if loss is None else {"loss": loss, **metrics}
    return (metrics, predictions) if with_predictions else metrics
