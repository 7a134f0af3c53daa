"""The one batched prediction loop: the trainer's eval and predict, the Predictor and a server run through it.

Features are batched longest first (little padding), shared out over the
data-parallel ranks, run through an engine, decoded by the model, and put
back in the examples' order before the reader decodes them into predictions.
"""
import numpy as np

from appzoo.data.encoding import pad
from appzoo.data.sampler import length_order
from appzoo.utils.progress import progress


def predict(engine, bundle, examples, features, *, batch_size, rank=0, world_size=1, bar=False,
            desc="predict"):
    """``(predictions, mean loss)`` of ``features`` (the loss: None unless the
    engine's outputs carry one, which a model given labels does).

    ``engine(batch, tensors)`` runs one collated batch (numpy arrays, and the
    same as paddle tensors) and returns the model's output dict;
    ``bundle.model.decode`` turns it into per-row arrays; with ``world_size``
    > 1 each rank runs its share and every rank gets every row."""
    outputs, loss = _run(engine, bundle, features, batch_size=batch_size, rank=rank, world_size=world_size,
                         bar=bar, desc=desc)
    if not examples:  # an empty predict file
        return [], None
    return bundle.reader.decode(examples, features, outputs, bundle.labels), loss


def predict_groups(engine, bundle, groups, *, batch_size):
    """The predictions of each ``(examples, features)`` group (a server's
    requests), run through the engine together as one list of features and
    decoded group by group: a group's predictions are those :func:`predict`
    gives it alone (the features of one group refer to its own examples)."""
    features = [f for _, group_features in groups for f in group_features]
    outputs, _ = _run(engine, bundle, features, batch_size=batch_size)
    predictions, start = [], 0
    for examples, group_features in groups:
        end = start + len(group_features)
        share = {key: values[start:end] for key, values in outputs.items()}
        predictions.append(bundle.reader.decode(examples, group_features, share, bundle.labels) if examples else [])
        start = end
    return predictions


def logits(engine, bundle, features, *, batch_size, bar=False, desc="logits"):
    """The model's ``logits`` of each feature, in the features' order, as float32 arrays: ``[C]`` per example,
    or ``[words, C]`` per feature of a tagger (cut to its ``lengths``), batched as :func:`predict` does."""
    outputs, _ = _run(engine, bundle, features, batch_size=batch_size, bar=bar, desc=desc,
                      decode=lambda out, tensors: {"logits": out["logits"]})
    rows = [np.asarray(row, dtype="float32") for row in outputs.get("logits", [])]
    return [row[:feature["lengths"]] if row.ndim == 2 and "lengths" in feature else row
            for row, feature in zip(rows, features)]


def run_only(engine, bundle, features, *, batch_size, bar=False, desc="run"):
    """Run ``features`` through the engine, batched as :func:`predict` does, and keep nothing: for what the
    model does on the way (the frozen prefix's cache, :mod:`appzoo.encoders.frozen_prefix`, filled)."""
    _run(engine, bundle, features, batch_size=batch_size, bar=bar, desc=desc, decode=lambda out, tensors: {})


def _run(engine, bundle, features, *, batch_size, rank=0, world_size=1, bar=False, desc="predict", decode=None):
    """``(outputs, mean loss)``: the model's decoded outputs (``decode(out, tensors)``, by default the model's
    own), one row per feature in the features' order."""
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
            for key, value in (decode or model.decode)(out, tensors).items():
                outputs.setdefault(key, []).extend(list(value.numpy()))
            rows.extend(indices)
    if world_size > 1:
        rows, outputs, losses, sizes = _gather(rows, outputs, losses, sizes)
    back = np.argsort(rows, kind="stable")  # row position of each feature, in the features' order
    outputs = {k: [v[j] for j in back] for k, v in outputs.items()}
    loss = float(np.average(losses, weights=sizes)) if losses else None
    return outputs, loss


def embed(bundle, ids, *, batch_size):
    """``[N, H]`` float32: the model's vector of each text (:meth:`~appzoo.task.model.TaskModel.text_embedding`)
    of ``ids`` (one token-id list per text), batched longest first as :func:`predict` does, in their order.
    On the Paddle model whatever the engine: the exported graphs answer a task's outputs, not its vectors."""
    import paddle

    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    rows, pad_id = [None] * len(ids), bundle.tokenizer.pad_token_id
    with paddle.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            vectors = bundle.model.text_embedding(paddle.to_tensor(pad([ids[i] for i in chunk], pad_id)))
            for i, vector in zip(chunk, vectors.numpy().astype("float32")):
                rows[i] = vector
    return np.stack(rows) if rows else np.zeros((0, 0), "float32")


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


def label_units(rows):
    """The labels of prediction rows (``predictions.jsonl``'s), one per unit: a label
    (classification, matching), a tag (sequence labeling), or, multi-label, each
    label's yes or no (``label in row["labels"]``, for every label in ``row["probs"]``)."""
    if rows and "tags" in rows[0]:
        return [tag for row in rows for tag in row["tags"]]
    if rows and "labels" in rows[0]:
        return [(name, name in row["labels"]) for row in rows for name in row["probs"]]
    return [row["label"] for row in rows]


def agreement(rows, reference):
    """The share of :func:`label_units` two predictions of the same inputs agree on
    (another engine or precision against fp32, say)."""
    a, b = label_units(rows), label_units(reference)
    if len(a) != len(b):
        raise ValueError(f"predictions of different inputs: {len(a)} and {len(b)} labels")
    return sum(x == y for x, y in zip(a, b)) / max(1, len(b))
