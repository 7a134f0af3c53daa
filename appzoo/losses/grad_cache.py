"""GradCache: an in-batch embedding loss over a large batch at the memory of
a mini-batch (Gao et al. 2021, "Scaling Deep Contrastive Learning Batch Size
under Memory Limited Setup"; sentence-transformers' CachedMultipleNegativesRankingLoss).

The loss of a batch depends on the encoder only through the embeddings, so
``dL/dθ = Σ_rows dL/de_row · de_row/dθ``. Three passes:

1. embed every input in mini-batches without a graph, keeping the RNG state
   each mini-batch started from;
2. compute the loss of the whole batch on those embeddings (made leaves) and
   its gradient ``g`` with respect to them;
3. re-embed each mini-batch with a graph, from its saved RNG state (the same
   dropout masks as pass 1), and back-propagate ``Σ e · g`` (a "part").

The encoder's gradients are then those of the plain loss over the same
embeddings; only one mini-batch's activations are alive at a time.
"""
from typing import Annotated, Optional

import paddle

from appzoo.params.keys import Key
from appzoo.losses.base import LossParamError

CacheMiniBatchSize = Annotated[Optional[int], Key("GradCache: embed the batch in mini-batches of this many rows and back-propagate the loss of the "
              "whole batch through them, so a large batch of in-batch negatives trains at the memory of a "
              "mini-batch (null: off; ErnieMatchingSiamesePairwise, single process)", ge=1)]


def check_cache(mini_batch_size, reduction):
    """A loss's ``cache_mini_batch_size``: caching back-propagates one scalar loss."""
    if mini_batch_size is not None and reduction == "none":
        raise LossParamError("cache_mini_batch_size", "needs a scalar loss (reduction 'mean' or 'sum'), got "
                                                      "reduction 'none'")
    return mini_batch_size


def grad_cache(embed, inputs, loss_fn, mini_batch_size):
    """The loss of ``loss_fn(*embeddings)`` over the whole batch, with its
    encoder gradients deferred to parts computed one mini-batch at a time.

    Args:
        embed: ``embed(input_ids) -> [n, D]``, the encoder (and pooling,
            normalisation) whose parameters get the gradients.
        inputs: the tensors to embed, in ``loss_fn``'s argument order; None
            entries are passed to ``loss_fn`` as None.
        loss_fn: the loss, called once on the embeddings of the whole batch.
        mini_batch_size: rows embedded at once.

    Returns ``(loss, embeddings, parts)``: the loss (detached), the
    embeddings (detached) and a generator of scalar tensors, one per
    mini-batch, built lazily: back-propagating each as it comes gives the
    encoder the gradients of ``loss``. Consume it once, right away (it
    restores the RNG state of pass 1 for each mini-batch, and the state after
    pass 1 at its end). A caller scales the parts as it would the loss
    (gradient accumulation, a loss scaler): gradients are linear in them.
    """
    if mini_batch_size < 1:
        raise ValueError(f"mini_batch_size must be >= 1, got {mini_batch_size}")
    autocast = paddle.amp.is_autocast_enabled()
    dtype = paddle.amp.get_autocast_dtype() if autocast else None
    states, embedded = [], []
    with paddle.no_grad():
        for ids in inputs:
            if ids is None:
                embedded.append(None)
                continue
            chunks = []
            for start in range(0, ids.shape[0], mini_batch_size):
                states.append(paddle.get_rng_state())
                chunks.append(embed(ids[start:start + mini_batch_size]))
            embedded.append(paddle.concat(chunks, axis=0) if chunks else None)
    after = paddle.get_rng_state()
    leaves = []
    for emb in embedded:
        if emb is not None:
            emb = emb.detach()
            emb.stop_gradient = False
        leaves.append(emb)
    loss = loss_fn(*leaves)
    used = [leaf for leaf in leaves if leaf is not None]
    grads = paddle.grad([loss], used, allow_unused=True) if used else []
    grads = iter([paddle.zeros_like(leaf) if g is None else g for leaf, g in zip(used, grads)])

    def parts():
        saved = iter(states)
        for ids, leaf in zip(inputs, leaves):
            if leaf is None:
                continue
            grad = next(grads)
            for start in range(0, ids.shape[0], mini_batch_size):
                paddle.set_rng_state(next(saved))
                with paddle.amp.auto_cast(enable=autocast, dtype=dtype or "float16", level="O1"):
                    emb = embed(ids[start:start + mini_batch_size])
                yield (_up(emb) * _up(grad[start:start + mini_batch_size])).sum()
        paddle.set_rng_state(after)

    return _up(loss.detach()), [None if e is None else e.detach() for e in leaves], parts()


def _up(tensor):
    """float16 / bfloat16 (autocast) to float32; other dtypes as they are."""
    return tensor.astype("float32") if tensor.dtype in (paddle.float16, paddle.bfloat16) else tensor
