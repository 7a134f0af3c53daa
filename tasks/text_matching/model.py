"""ERNIE matchers: a cross-encoder, a siamese classifier, a siamese cosine
model trained on labelled pairs (CoSENT) and a siamese similarity model
("simnet") trained pairwise or with in-batch negatives."""
from typing import Annotated, Literal

import paddle
import paddle.nn.functional as F

from appzoo.params.keys import Key, check_args
from appzoo.errors import ConfigError
from appzoo.losses import build_loss
from appzoo.losses.grad_cache import grad_cache
from appzoo.losses.objective import GradCacheLoss
from appzoo.task.model import (
    Dropout, LossSection, Pooling, PooledClassifier, TaskModel, check_classification_loss, classification_loss,
    encode, pool,
)
from appzoo.registry import MODELS


@MODELS.register("ErnieMatchingFcPointwise")
class ErnieMatchingFcPointwise(PooledClassifier):
    """Cross-encoder: ``[CLS] a [SEP] b [SEP]`` -> pooled -> dropout -> linear
    over the two labels (the text classifier on a text pair); any single-label
    classification loss."""

    READERS = ("text_matching",)
    MODEL_ARGS = ("encoder", "num_labels", "class_counts")

    @check_args("model")
    def __init__(self, encoder, num_labels, class_counts=None, loss: LossSection = None,
                 dropout: Dropout = 0.1, pooling: Pooling = "cls"):
        super().__init__(encoder, num_labels, class_counts, multi_label=False, loss=loss, dropout=dropout,
                         pooling=pooling)


class _Siamese(TaskModel):
    """One encoder shared by both texts; ``embed`` pools a text's tokens."""

    def __init__(self, encoder, pooling):
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling

    EMBEDDING = "the pooled vector each text of a pair is encoded to alone (model.pooling)"

    def embed(self, input_ids):
        sequence, pooled, mask = encode(self.encoder, input_ids)
        return pool(sequence, pooled, mask, self.pooling)

    def text_embedding(self, input_ids):
        return self.embed(input_ids)

    def input_spec(self):
        return [paddle.static.InputSpec([None, None], "int64", "query_input_ids"),
                paddle.static.InputSpec([None, None], "int64", "title_input_ids")]


@MODELS.register("ErnieMatchingSiamesePointwise")
class ErnieMatchingSiamesePointwise(_Siamese):
    """Siamese classifier (Sentence-BERT's classification objective): each
    text pooled alone to ``u``, ``v``; ``[u, v, |u - v|, u * v]`` -> dropout
    -> linear over the two labels; any single-label classification loss."""

    READERS = ("text_matching_siamese",)
    MODEL_ARGS = ("encoder", "num_labels", "class_counts")
    LOSS_FAMILY = "classification"

    @check_args("model")
    def __init__(self, encoder, num_labels, class_counts=None, loss: LossSection = None,
                 dropout: Dropout = 0.1, pooling: Pooling = "mean"):
        super().__init__(encoder, pooling)
        self.dropout = paddle.nn.Dropout(dropout)
        self.classifier = paddle.nn.Linear(4 * encoder.config.hidden_size, num_labels)
        self.loss_fn = classification_loss(loss, class_counts, head=type(self).__name__)

    @classmethod
    def check_config(cls, model_kwargs, known):
        """Plan time: raise what ``__init__`` would refuse in ``model_kwargs``."""
        check_classification_loss(model_kwargs.get("loss"), head=cls.__name__)

    def forward(self, query_input_ids, title_input_ids, labels=None):
        u, v = self.embed(query_input_ids), self.embed(title_input_ids)
        features = paddle.concat([u, v, paddle.abs(u - v), u * v], axis=-1)
        logits = self.classifier(self.dropout(features))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = self.loss_fn(logits, labels)
        return out

    def decode(self, outputs, batch):
        return {"probs": F.softmax(outputs["logits"], axis=-1)}


@MODELS.register("ErnieMatchingSiameseCosine")
class ErnieMatchingSiameseCosine(_Siamese):
    """Siamese cosine model trained on labelled pairs: the score of a pair is
    the cosine of its two pooled texts (as ErnieMatchingSiamesePairwise's
    with similarity cosine), and a scored loss (``cosent``, Su 2022) orders
    the cosines of a batch's pairs by their labels, so the model learns from
    the same labelled pairs as the pointwise models, without triples or
    in-batch negatives."""

    READERS = ("text_matching_siamese",)
    MODEL_ARGS = ("encoder", "num_labels", "class_counts")  # what the siamese reader supplies; a label's order is used
    LOSS_FAMILY = "scored"
    EMBEDDING = ("the pooled vector of each text (model.pooling), L2-normalised: a pair's score is the dot product "
                 "(the cosine) of its two vectors")

    @check_args("model")
    def __init__(self, encoder, num_labels, class_counts=None,
                 loss: Annotated[LossSection, Key("a scored loss (null: cosent)")] = None,
                 pooling: Pooling = "mean"):
        super().__init__(encoder, pooling)
        self.loss_fn = self.check_config({"loss": loss}, {})

    @classmethod
    def check_config(cls, model_kwargs, known):
        """Plan time and ``__init__``: the loss, which must be a scored one; returns it built."""
        return build_loss(model_kwargs.get("loss") or {"name": "cosent"}, key_path="model.loss",
                          family=cls.LOSS_FAMILY)

    def text_embedding(self, input_ids):
        return F.normalize(self.embed(input_ids), axis=-1)

    def forward(self, query_input_ids, title_input_ids, labels=None):
        # labels: the reader's index into [negative_label, positive_label], so a match is the larger label
        scores = (self.text_embedding(query_input_ids) * self.text_embedding(title_input_ids)).sum(axis=-1)
        out = {"scores": scores}
        if labels is not None:
            out["loss"] = self.loss_fn(scores, labels)
        return out

    def decode(self, outputs, batch):
        return {"scores": outputs["scores"]}


@MODELS.register("ErnieMatchingSiamesePairwise")
class ErnieMatchingSiamesePairwise(_Siamese):
    """Siamese similarity model (SimNet): the score of a pair is the cosine
    (or dot product) of the two pooled texts.

    Trained on what the ``text_matching_pairwise`` reader gives:

    * triples (``negatives: "labelled"``): a pair loss (``pairwise_hinge``,
      ``circle``, ``nce``) on ``s(q, p)`` vs ``s(q, n)``, or an embedding loss
      on ``(q, p, n)`` (``triplet``; ``infonce`` / ``sum_hinge`` /
      ``max_hinge`` with the negatives as extra in-batch negatives);
    * positive pairs (``negatives: "in_batch"``): an embedding loss
      (``infonce``, ``sum_hinge``, ``max_hinge``) on ``(q, p)``, or a pair
      loss on the diagonal of the in-batch similarity matrix vs the rest of
      each row.

    With ``similarity: "cosine"`` the embeddings are L2-normalised before any
    loss, so euclidean triplet distances rank like the cosine scores.

    An embedding loss with ``cache_mini_batch_size`` trains by GradCache
    (:func:`appzoo.losses.grad_cache.grad_cache`) whenever gradients are on:
    ``forward`` then returns the loss detached and ``"loss_parts"``, a
    generator of the parts to back-propagate one after the other in place
    of the loss (the trainer does, by :meth:`objective`; so must a caller from
    Python).
    """

    READERS = ("text_matching_pairwise",)
    MODEL_ARGS = ("encoder", "negatives")
    LOSS_FAMILY = ("pair", "embedding")

    @check_args("model")
    def __init__(self, encoder, negatives="labelled",
                 loss: Annotated[LossSection, Key("a pair or embedding loss (null: circle)")] = None,
                 similarity: Annotated[Literal["cosine", "dot"], Key(
                     "score of a pair: cosine of the two text vectors, or their dot product")] = "cosine",
                 pooling: Pooling = "mean"):
        super().__init__(encoder, pooling)
        self.loss_fn = self.check_config({"loss": loss, "similarity": similarity}, {"negatives": negatives})
        self.similarity = similarity
        self.family = self.loss_fn.FAMILY

    @classmethod
    def check_config(cls, model_kwargs, known):
        """Raise what does not fit together in ``model_kwargs`` and the
        reader's ``negatives`` (in ``known``); returns the built loss. Called
        at plan time and by ``__init__``."""
        loss = model_kwargs.get("loss") or {"name": "circle"}
        loss_fn = build_loss(loss, key_path="model.loss", family=cls.LOSS_FAMILY)
        negatives = known.get("negatives", "labelled")
        similarity = model_kwargs.get("similarity", "cosine")
        if loss["name"] == "triplet" and negatives == "in_batch":
            raise ConfigError("model.loss.name: 'triplet' needs one labelled negative per pair, but "
                              "dataset_reader.negatives is 'in_batch'; set it to 'labelled' or use "
                              "infonce / sum_hinge / max_hinge")
        if loss.get("cache_mini_batch_size") is not None and paddle.distributed.get_world_size() > 1:
            raise ConfigError("model.loss.cache_mini_batch_size: GradCache back-propagates several times per "
                              "step, which data-parallel training does not synchronise; use one process, or "
                              "leave the key out")
        if loss["name"] == "circle" and similarity != "cosine":
            raise ConfigError(f"model.loss.name: 'circle' expects cosine similarities in [-1, 1], but "
                              f"model.similarity is {similarity!r}; set model.similarity to 'cosine'")
        return loss_fn

    def _embed(self, input_ids):
        emb = self.embed(input_ids)
        return F.normalize(emb, axis=-1) if self.similarity == "cosine" else emb

    @property
    def EMBEDDING(self):  # noqa: N802 - the TaskModel attribute, which here depends on model.similarity
        scored = ("L2-normalised: a pair's score is the dot product (the cosine) of its two vectors"
                  if self.similarity == "cosine" else "a pair's score is the dot product of its two vectors")
        return f"the pooled vector of each text (model.pooling), {scored}"

    def text_embedding(self, input_ids):
        return self._embed(input_ids)

    def forward(self, query_input_ids, title_input_ids=None, positive_input_ids=None, negative_input_ids=None):
        if positive_input_ids is None:  # scoring pairs
            scores = (self._embed(query_input_ids) * self._embed(title_input_ids)).sum(axis=-1)
            return {"scores": scores}
        if getattr(self.loss_fn, "cache_mini_batch_size", None) is not None and paddle.is_grad_enabled():
            return self._grad_cache(query_input_ids, positive_input_ids, negative_input_ids)
        q = self._embed(query_input_ids)
        p = self._embed(positive_input_ids)
        n = self._embed(negative_input_ids) if negative_input_ids is not None else None
        pos = (q * p).sum(axis=-1)
        if self.family == "embedding":
            loss = self.loss_fn(q, p, n)
        elif n is not None:
            loss = self.loss_fn(pos, (q * n).sum(axis=-1))
        else:  # in-batch: every other positive of the batch is a negative
            sim = paddle.matmul(q, p, transpose_y=True)
            size = sim.shape[0]
            off = paddle.eye(size, dtype="int32") == 0
            loss = self.loss_fn(pos, paddle.masked_select(sim, off).reshape([size, size - 1]))
        return {"scores": pos, "loss": loss}

    def objective(self):
        """With ``cache_mini_batch_size``: the parts :meth:`_grad_cache` returns are back-propagated."""
        if getattr(self.loss_fn, "cache_mini_batch_size", None) is not None:
            return GradCacheLoss()
        return super().objective()

    def _grad_cache(self, query_input_ids, positive_input_ids, negative_input_ids):
        """Training with ``cache_mini_batch_size``: the embedding loss of the whole batch, its encoder
        gradients left to ``loss_parts`` (see the class docstring)."""
        loss, (q, p, _), parts = grad_cache(self._embed, [query_input_ids, positive_input_ids, negative_input_ids],
                                            self.loss_fn, self.loss_fn.cache_mini_batch_size)
        return {"scores": (q * p).sum(axis=-1), "loss": loss, "loss_parts": parts}

    def decode(self, outputs, batch):
        return {"scores": outputs["scores"]}
