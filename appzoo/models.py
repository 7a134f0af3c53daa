"""Pieces every task's model shares: the encoder call and pooling."""
import paddle


def encode(encoder, input_ids, token_type_ids=None):
    """Token states ``[B, T, H]``, pooled [CLS] ``[B, H]`` and the padding mask
    ``[B, T]`` (True on real tokens) of a BERT-family encoder."""
    pad_id = encoder.config.pad_token_id if encoder.config.pad_token_id is not None else 0
    mask = input_ids != pad_id
    attention = paddle.unsqueeze((~mask).astype("float32") * -1e4, axis=[1, 2])
    sequence, pooled = encoder(input_ids, token_type_ids=token_type_ids, attention_mask=attention)[:2]
    return sequence, pooled, mask


def pool(sequence, pooled, mask, mode):
    """``cls``: the encoder's pooled [CLS]; ``mean``: mean of the real tokens."""
    if mode == "cls":
        return pooled
    weights = mask.astype(sequence.dtype).unsqueeze(-1)
    return (sequence * weights).sum(axis=1) / weights.sum(axis=1).clip(min=1.0)


def dropout_layer(p):
    """``paddle.nn.Dropout(p)`` for ``model.dropout``, checked also when a
    model is built from Python rather than from a param file."""
    from appzoo.errors import ConfigError

    if not 0 <= p < 1:
        raise ConfigError(f"model.dropout: must be in [0, 1), got {p}")
    return paddle.nn.Dropout(p)


def classification_loss(loss, class_counts=None, multi_label=False):
    """The model's loss from ``model.loss`` for a classification head: the
    losses of the classification family whose targets fit the labels (one
    class index per example or token, or multi-hot rows)."""
    from appzoo.errors import ConfigError
    from appzoo.losses import build_loss

    loss = loss or {"name": "bce" if multi_label else "ce"}
    loss_fn = build_loss(loss, key_path="model.loss", class_counts=class_counts, family="classification")
    target = getattr(loss_fn, "TARGET", "both")
    if multi_label and target == "index":
        raise ConfigError(f"model.loss.name: {loss['name']!r} takes one class index per example; multi-label "
                          f"data needs a multi-hot loss (bce, focal, dice, ghm, multilabel_ce, kl)")
    if not multi_label and target == "multi_hot":
        raise ConfigError(f"model.loss.name: {loss['name']!r} takes multi-hot targets; this model has one "
                          f"label per example or token (use ce, focal, dice, ghm, ohem, bce)")
    return loss_fn
