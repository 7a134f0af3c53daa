"""ERNIE classifiers."""

import paddle
import paddle.nn.functional as F

from appzoo.config import check_args
from appzoo.models import Dropout, LossSection, Pooling, check_classification_loss, classification_loss, encode, pool
from appzoo.registry import MODELS


@MODELS.register("ErnieFcClassification")
class ErnieFcClassification(paddle.nn.Layer):
    """Pooled [CLS] -> dropout -> linear. Multi-class (softmax) or multi-label
    (sigmoid, one logit per class), the loss taken from ``model.loss``."""

    READERS = ("text_classification",)
    INJECTED = ("encoder", "num_labels", "class_counts", "multi_label")
    LOSS_FAMILY = "classification"

    @check_args("model")
    def __init__(self, encoder, num_labels, class_counts=None, multi_label=False,
                 loss: LossSection = None, dropout: Dropout = 0.1, pooling: Pooling = "cls"):
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling
        self.multi_label = multi_label
        self.dropout = paddle.nn.Dropout(dropout)
        self.classifier = paddle.nn.Linear(encoder.config.hidden_size, num_labels)
        self.loss_fn = classification_loss(loss, class_counts, multi_label, head=type(self).__name__)

    @classmethod
    def check_config(cls, model_kwargs, known):
        """Plan time: raise what ``__init__`` would refuse in ``model_kwargs``
        (the ``model`` section), given the model arguments the reader's config
        fixes before any data is read (``known``: ``multi_label``)."""
        check_classification_loss(model_kwargs.get("loss"), known.get("multi_label", False), cls.__name__)

    def forward(self, input_ids, token_type_ids=None, labels=None):
        sequence, pooled, mask = encode(self.encoder, input_ids, token_type_ids)
        logits = self.classifier(self.dropout(pool(sequence, pooled, mask, self.pooling)))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = self.loss_fn(logits, labels)
        return out

    def decode(self, outputs, batch):
        logits = outputs["logits"]
        return {"probs": F.sigmoid(logits) if self.multi_label else F.softmax(logits, axis=-1)}

    def input_spec(self):
        return [paddle.static.InputSpec([None, None], "int64", "input_ids"),
                paddle.static.InputSpec([None, None], "int64", "token_type_ids")]
