"""ERNIE taggers: a softmax head and a linear-chain CRF head.

Both read the encoder's state at the first word piece of each input token
(``positions``), so their logits and tags are over tokens, not pieces; either
may put a bidirectional LSTM over those token states before its head
(``lstm_hidden``: BERT-BiLSTM-CRF).
"""
from typing import Annotated, Optional

import paddle

from appzoo.errors import ConfigError
from appzoo.params.keys import Key, check_args
from appzoo.task.model import (
    Dropout, LossSection, TaskModel, check_classification_loss, classification_loss, encode,
)
from appzoo.registry import MODELS
from tasks.sequence_labeling.bilstm import BiLstm
from tasks.sequence_labeling.crf import LinearChainCrf
from tasks.sequence_labeling.schemes import transition_masks


LstmHidden = Annotated[Optional[int], Key(
    "hidden units per direction of a bidirectional LSTM over the token states, between the encoder and the "
    "head (BERT-BiLSTM-CRF); null or 0: none", ge=1, also={0: "none"})]
LstmLayers = Annotated[int, Key("stacked BiLSTM layers (with lstm_hidden)", ge=1)]
TaggerDropout = Annotated[Dropout, Key("dropout on the token states before the classifier, and with a BiLSTM "
                                       "on its input and between its layers", ge=0, lt=1)]


def check_lstm(lstm_hidden, lstm_layers):
    """Raise when ``lstm_layers`` is set without a BiLSTM to stack (the keys' own ranges are checked by
    their annotations)."""
    if not lstm_hidden and lstm_layers != 1:
        raise ConfigError(f"model.lstm_layers: {lstm_layers} layers of no BiLSTM; set model.lstm_hidden (hidden "
                          f"units per direction) or leave lstm_layers at 1")


class _Tagger(TaskModel):
    READERS = ("sequence_labeling",)
    MODEL_ARGS = ("encoder", "num_labels", "class_counts", "tag_names", "scheme")
    LOSS_FAMILY = "classification"
    DISTILL = "word"  # the first piece of each word's logits (a CRF's emissions)

    def __init__(self, encoder, num_labels, dropout, lstm_hidden=None, lstm_layers=1):
        super().__init__()
        check_lstm(lstm_hidden, lstm_layers)
        self.encoder = encoder
        self.dropout = paddle.nn.Dropout(dropout)
        width = encoder.config.hidden_size
        self.lstm = None  # without one the parameters are those of before the key, so older best/ folders load
        if lstm_hidden:
            # a layer of the model, not of model.encoder: trained as a head parameter (head_learning_rate,
            # and while the encoder is frozen)
            self.lstm = BiLstm(width, lstm_hidden, lstm_layers, dropout)
            width = 2 * lstm_hidden
        self.classifier = paddle.nn.Linear(width, num_labels)

    @classmethod
    def check_config(cls, model_kwargs, known):
        """Plan time: the BiLSTM's keys together (each alone is checked by its annotation)."""
        check_lstm(model_kwargs.get("lstm_hidden"), model_kwargs.get("lstm_layers", 1))

    def emissions(self, input_ids, positions):
        """Per-token tag scores ``[B, N, C]`` read at the first piece of each token."""
        sequence, _, _ = encode(self.encoder, input_ids)
        index = positions.unsqueeze(-1).expand([-1, -1, sequence.shape[-1]])
        states = self.dropout(paddle.take_along_axis(sequence, index, axis=1))
        if self.lstm is not None:
            # a row's real tokens have positions > 0 (piece 0 is [CLS]; padding is 0)
            states = self.dropout(self.lstm(states, positions > 0))
        return self.classifier(states)

    def input_spec(self):
        """The exported graph maps ``input_ids`` and ``positions`` to the
        per-token ``logits`` (emissions); CRF decoding stays in Python."""
        spec = paddle.static.InputSpec
        return [spec([None, None], "int64", "input_ids"), spec([None, None], "int64", "positions")]

@MODELS.register("ErnieFcSeqLabel")
class ErnieFcSeqLabel(_Tagger):
    """Token states -> dropout (-> BiLSTM -> dropout, with ``lstm_hidden``) -> linear, one softmax per token; the loss
    (``ce``, weighted ``ce``, ``focal``, ``dice``, ``ghm``, ``ohem``, ...) comes
    from ``model.loss`` and sees only real tokens."""

    LOSS_PER = "token"  # the loss averages over tokens: length-grouped batches are weighted by their tokens

    @check_args("model")
    def __init__(self, encoder, num_labels, class_counts=None, tag_names=None, scheme=None,
                 loss: LossSection = None, dropout: TaggerDropout = 0.1, lstm_hidden: LstmHidden = None,
                 lstm_layers: LstmLayers = 1):
        super().__init__(encoder, num_labels, dropout, lstm_hidden, lstm_layers)
        self.loss_fn = classification_loss(loss, class_counts, head=type(self).__name__)

    @classmethod
    def check_config(cls, model_kwargs, known):
        """Plan time: raise what ``__init__`` would refuse in ``model_kwargs``."""
        super().check_config(model_kwargs, known)
        check_classification_loss(model_kwargs.get("loss"), head=cls.__name__)

    def forward(self, input_ids, positions, labels=None):
        logits = self.emissions(input_ids, positions)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = self.loss_fn(logits, labels)  # padding carries -100
        return out

    def decode(self, outputs, batch):
        return {"tags": outputs["logits"].argmax(axis=-1)}


@MODELS.register("ErnieCrfSeqLabel")
class ErnieCrfSeqLabel(_Tagger):
    """Token states -> dropout (-> BiLSTM -> dropout, with ``lstm_hidden``) -> linear emissions -> linear-chain
    CRF.

    Trained on the CRF negative log-likelihood (mean over sequences), plus
    ``loss_weight`` times a token loss on the emissions when ``model.loss`` is
    given (e.g. dice). Decoded with Viterbi. With ``constrained`` (default)
    transitions the tag scheme forbids (``O`` -> ``I-X`` under BIO, ``B-X`` ->
    ``O`` under BIOES, ...) are excluded from both the likelihood and
    decoding; gold sequences that break the scheme are left out of the CRF loss.
    """

    CRF = "crf"  # its transitions train at trainer.crf_learning_rate

    @check_args("model")
    def __init__(self, encoder, num_labels, class_counts=None, tag_names=None, scheme=None,
                 loss: Annotated[LossSection, Key("a token loss on the emissions added to the CRF "
                                                  "likelihood (null: none)")] = None,
                 loss_weight: Annotated[float, Key("weight of the token loss", ge=0)] = 1.0,
                 dropout: TaggerDropout = 0.1,
                 constrained: Annotated[bool, Key("exclude the transitions the tag scheme forbids from the "
                                                  "likelihood and from decoding")] = True,
                 lstm_hidden: LstmHidden = None, lstm_layers: LstmLayers = 1):
        super().__init__(encoder, num_labels, dropout, lstm_hidden, lstm_layers)
        allowed = transition_masks(tag_names, scheme) if constrained and tag_names and scheme else None
        self.crf = LinearChainCrf(num_labels, allowed)
        self.loss_fn = classification_loss(loss, class_counts, head=type(self).__name__) if loss else None
        self.loss_weight = loss_weight

    @classmethod
    def check_config(cls, model_kwargs, known):
        """Plan time: raise what ``__init__`` would refuse in ``model_kwargs``
        (the token loss is optional here: the CRF likelihood is the loss)."""
        super().check_config(model_kwargs, known)
        if model_kwargs.get("loss"):
            check_classification_loss(model_kwargs["loss"], head=cls.__name__)

    def forward(self, input_ids, positions, lengths=None, sentence_edges=None, labels=None):
        logits = self.emissions(input_ids, positions)
        out = {"logits": logits}
        if labels is not None:
            if lengths is None:  # every position is a real token
                lengths = paddle.full([labels.shape[0]], labels.shape[1], dtype="int64")
            log_likelihood = self.crf.log_likelihood(logits, labels, lengths, sentence_edges)
            keep = self.crf.path_allowed(labels, lengths, sentence_edges).astype(logits.dtype)
            loss = -(log_likelihood * keep).sum() / keep.sum().clip(min=1.0)
            if self.loss_fn is not None:
                loss = loss + self.loss_weight * self.loss_fn(logits, labels)
            out["loss"] = loss
        return out

    def decode(self, outputs, batch):
        return {"tags": self.crf.viterbi(outputs["logits"], batch["lengths"], batch.get("sentence_edges"))}
