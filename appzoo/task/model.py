"""The contract of a task model (:class:`TaskModel`) and the pieces every task's model shares: the encoder call and pooling."""
from typing import Annotated, Literal, Optional

import numpy as np
import paddle
import paddle.nn.functional as F

from appzoo.params.keys import Key
from appzoo.encoders.frozen_prefix import attached
from appzoo.data.encoding import encode_texts, pad
from appzoo.errors import ConfigError
from appzoo.losses import LOSSES, build_loss, losses_for
from appzoo.losses.base import from_training_labels
from appzoo.losses.objective import ModelLoss


class TaskModel(paddle.nn.Layer):
    """Base class of the registered task models: what the toolkit relies on.

    ``forward(**batch keys) -> dict`` with ``logits`` (or ``scores``) and,
    given labels, ``loss``; ``decode(outputs, batch) -> {key: array per row}``
    for the reader's ``decode``; ``input_spec()`` for the exported graph.
    The class attributes and :meth:`check_config` below are the defaults."""

    #: the readers (``dataset_reader.type``) this model takes; the first is the default
    READERS = ()
    #: constructor arguments the toolkit supplies (the encoder, the reader's model_args), never the param file
    MODEL_ARGS = ("encoder",)
    #: the call shape of the losses it takes (appzoo.losses.base.FAMILIES), or a tuple of them
    LOSS_FAMILY = "classification"
    #: what the loss averages over: "example", or "token" (length-grouped batches are then weighted by tokens)
    LOSS_PER = "example"
    #: what :meth:`text_embedding` gives, in a few words (``/v1/embeddings``, docs/serving.md), or None: the model
    #: embeds no text on its own (a cross-encoder reads two texts as one; a tagger gives a vector per token)
    EMBEDDING = None
    #: what a teacher's softened logits are matched on when the model is distilled (appzoo.run.teacher):
    #: "example" (one row of class logits per example), "word" (a row per word: a tagger's logits or CRF
    #: emissions, aligned by words), or None: its outputs are no class logits (a siamese model's scores)
    DISTILL = None
    #: the attribute that holds the model's CRF layer, whose parameters train at ``trainer.crf_learning_rate``
    #: (appzoo.run.param_groups), or None: the model has no CRF and the plan refuses that key
    CRF = None

    @classmethod
    def check_config(cls, model_kwargs, known):
        """Plan time: raise what ``__init__`` would refuse in ``model_kwargs`` (the
        ``model`` section), given the model arguments the reader's config fixes
        before any data is read (``known``)."""

    def decode(self, outputs, batch):
        raise NotImplementedError(f"{type(self).__name__}.decode")

    def input_spec(self):
        raise NotImplementedError(f"{type(self).__name__}.input_spec")

    def objective(self):
        """What the trainer back-propagates for this model (:mod:`appzoo.losses.objective`): its own loss. A
        model whose forward returns other parts to back-propagate (GradCache) overrides this."""
        return ModelLoss()

    def base_encoder(self):
        """The pretrained encoder this model is built on (the ``encoder`` the toolkit passed it), for what is
        measured on the encoder alone: a run's floor (:mod:`appzoo.task.floor`). A model that keeps it
        under another name overrides this."""
        return self.encoder

    def text_embedding(self, input_ids):
        """``[B, H]``: one vector per text of ``input_ids`` (``[B, T]``, each text alone, padded), for a model
        whose :attr:`EMBEDDING` says what it is."""
        raise NotImplementedError(f"{type(self).__name__} embeds no text on its own (EMBEDDING is None)")


def encode(encoder, input_ids, token_type_ids=None):
    """Token states ``[B, T, H]``, pooled [CLS] ``[B, H]`` and the padding mask
    ``[B, T]`` (True on real tokens) of a BERT-family encoder."""
    pad_id = encoder.config.pad_token_id if encoder.config.pad_token_id is not None else 0
    mask = input_ids != pad_id
    attention = paddle.unsqueeze((~mask).astype("float32") * -1e4, axis=[1, 2])
    frozen = attached(encoder)  # model.encoder.freeze_layers: the frozen prefix read from its cache
    if frozen is not None and paddle.in_dynamic_mode():  # an exported graph runs the whole encoder
        sequence, pooled = frozen(input_ids, token_type_ids, attention)
    else:
        sequence, pooled = encoder(input_ids, token_type_ids=token_type_ids, attention_mask=attention)[:2]
    return sequence, pooled, mask


def pool(sequence, pooled, mask, mode):
    """``cls``: the encoder's pooled [CLS]; ``mean``: mean of the real tokens."""
    if mode == "cls":
        return pooled
    weights = mask.astype(sequence.dtype).unsqueeze(-1)
    return (sequence * weights).sum(axis=1) / weights.sum(axis=1).clip(min=1.0)


def frozen_embedder(encoder, tokenizer, max_seq_len=None, batch_size=64):
    """``embed(texts) -> [N, H]`` float64: each text alone through the one tokenizer call
    (:func:`~appzoo.data.encoding.encode_texts`) and ``encoder`` as it is now, in eval mode and without
    gradients, mean-pooled over its real tokens and L2-normalised: a sentence encoder used as e5 and
    Sentence-BERT use theirs. Texts are batched by length, so little of a batch is padding."""
    def embed(texts):
        ids = encode_texts(tokenizer, texts, max_seq_len=max_seq_len, split="floor", what="texts")["input_ids"]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros((len(ids), encoder.config.hidden_size))
        was_training = encoder.training
        encoder.eval()
        try:
            with paddle.no_grad():
                for start in range(0, len(order), batch_size):
                    rows = order[start:start + batch_size]
                    batch = paddle.to_tensor(pad([ids[i] for i in rows], tokenizer.pad_token_id))
                    sequence, pooled, mask = encode(encoder, batch)
                    out[rows] = pool(sequence, pooled, mask, "mean").astype("float64").numpy()
        finally:
            if was_training:
                encoder.train()
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    return embed


# Keys several models share (see appzoo.params.keys.Key); a model's constructor
# carries @check_args("model"), so these hold when it is built from Python too.
Dropout = Annotated[float, Key("dropout on the encoder states before the classifier", ge=0, lt=1)]
LossSection = Annotated[Optional[dict], Key(
    "the loss, {\"name\": ..., its keys} (null: the model's default; see --describe loss.NAME)")]
Pooling = Annotated[Literal["cls", "mean"], Key(
    "text vector: the encoder's pooled [CLS] (cls) or the mean of the token states (mean)")]


def classification_loss(loss, class_counts=None, multi_label=False, head="this model", train_size=None):
    """The model's loss from ``model.loss`` for a classification head: the
    losses of the classification family whose targets fit the labels (one
    class index per example or token, or multi-hot rows) and, for a
    multi-label head (which decodes each class with its sigmoid against a
    threshold), whose activation is the sigmoid. ``head`` names the model in
    messages; ``class_counts`` and ``train_size`` (the number of training
    examples) are what the reader counted, for the losses built on them."""
    loss = loss or {"name": "bce" if multi_label else "ce"}
    loss_fn = build_loss(loss, key_path="model.loss", class_counts=class_counts, family="classification",
                         train_size=train_size)
    target = getattr(loss_fn, "TARGET", "both")
    if multi_label and target == "index":
        raise ConfigError(f"model.loss.name: {loss['name']!r} takes one class index per example; multi-label "
                          f"data needs a multi-hot loss (losses that fit: {_sigmoid_losses()})")
    if not multi_label and target == "multi_hot":
        raise ConfigError(f"model.loss.name: {loss['name']!r} takes multi-hot targets; this model has one "
                          f"label per example or token (use ce, focal, dice, ghm, ohem, bce)")
    # A single-label head decodes by argmax, which any activation ranks; a
    # multi-label head thresholds each class's sigmoid, which only a sigmoid
    # loss calibrates (ce would train, then decode nonsense).
    activation = getattr(loss_fn, "ACTIVATION", None)
    if multi_label and activation not in ("sigmoid", None):
        how = ""
        if isinstance(type(loss_fn).ACTIVATION, tuple):  # set by an argument, so name it
            how = (f" with mode {activation!r}" if hasattr(loss_fn, "mode")
                   else f" with base {loss.get('base', {}).get('name')!r}")
        raise ConfigError(
            f"model.loss.name: {loss['name']!r}{how} trains a softmax over the labels, but {head} with "
            f"dataset_reader.multi_label=true decodes each label by its sigmoid against "
            f"dataset_reader.threshold (losses that fit: {_sigmoid_losses()})")
    return loss_fn


def check_classification_loss(loss, multi_label=False, head="this model", train_size_known=False):
    """Plan time: build the loss as :func:`classification_loss` would, before
    any data is read. 'balanced' weights and the losses built on the
    training label counts need them, and only the data gives them; a
    placeholder stands in for them here (the count of classes is checked
    when the model is built). So it does for the number of training examples
    where the head's reader supplies it (``train_size_known``); elsewhere a
    loss that needs it is refused now."""
    counts = [1, 1] if _needs_counts(loss) else None
    # 3 examples, so neither placeholder class is in all of them (distribution_balanced's prior bias)
    return classification_loss(loss, counts, multi_label, head, train_size=3 if train_size_known else None)


def _needs_counts(value):
    """True when a loss section (or one nested in it, ohem's base) is built
    from the training label counts: 'balanced' or {"effective_number": beta}
    weights, or a loss that always is (``NEEDS_COUNTS``)."""
    if isinstance(value, dict):
        name = value.get("name")
        if isinstance(name, str) and name in LOSSES and getattr(LOSSES.get(name, "model.loss.name"),
                                                                 "NEEDS_COUNTS", False):
            return True
        return from_training_labels(value) or any(_needs_counts(v) for v in value.values())
    return from_training_labels(value)


def _sigmoid_losses():
    """The classification losses a multi-label (sigmoid-decoded) head accepts, for messages."""
    fits = []
    for name in losses_for("classification"):
        cls = LOSSES.get(name, "model.loss.name")
        if cls.TARGET == "index":
            continue
        if cls.ACTIVATION == "sigmoid":
            fits.append(name)
        elif isinstance(cls.ACTIVATION, tuple) and "sigmoid" in cls.ACTIVATION:
            fits.append(f"{name} with mode 'sigmoid'" if name != "ohem" else f"{name} with a sigmoid base")
    return ", ".join(fits)


class PooledClassifier(TaskModel):
    """Pooled [CLS] (or mean) -> dropout -> linear: the head of the text
    classifier and of the pointwise cross-encoder. Multi-class (softmax) or
    multi-label (sigmoid, one logit per class), the loss taken from ``model.loss``."""

    LOSS_FAMILY = "classification"
    DISTILL = "example"

    def __init__(self, encoder, num_labels, class_counts=None, multi_label=False,
                 loss: LossSection = None, dropout: Dropout = 0.1, pooling: Pooling = "cls", train_size=None):
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling
        self.multi_label = multi_label
        self.dropout = paddle.nn.Dropout(dropout)
        self.classifier = paddle.nn.Linear(encoder.config.hidden_size, num_labels)
        self.loss_fn = classification_loss(loss, class_counts, multi_label, head=type(self).__name__,
                                           train_size=train_size)

    @classmethod
    def check_config(cls, model_kwargs, known):
        """Plan time: raise what ``__init__`` would refuse in ``model_kwargs``
        (the ``model`` section), given the model arguments the reader's config
        fixes before any data is read (``known``: ``multi_label``)."""
        check_classification_loss(model_kwargs.get("loss"), known.get("multi_label", False), cls.__name__,
                                  train_size_known="train_size" in cls.MODEL_ARGS)

    def forward(self, input_ids, token_type_ids=None, labels=None):
        logits = self.classifier(self.dropout(self.text_embedding(input_ids, token_type_ids)))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = self.loss_fn(logits, labels)
        return out

    def text_embedding(self, input_ids, token_type_ids=None):
        sequence, pooled, mask = encode(self.encoder, input_ids, token_type_ids)
        return pool(sequence, pooled, mask, self.pooling)

    def decode(self, outputs, batch):
        logits = outputs["logits"]
        return {"probs": F.sigmoid(logits) if self.multi_label else F.softmax(logits, axis=-1)}

    def input_spec(self):
        return [paddle.static.InputSpec([None, None], "int64", "input_ids"),
                paddle.static.InputSpec([None, None], "int64", "token_type_ids")]
