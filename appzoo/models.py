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
