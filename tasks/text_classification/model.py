"""ERNIE classifiers."""
from appzoo.params.keys import check_args
from appzoo.task.model import Dropout, LossSection, Pooling, PooledClassifier
from appzoo.registry import MODELS


@MODELS.register("ErnieFcClassification")
class ErnieFcClassification(PooledClassifier):
    """Pooled [CLS] -> dropout -> linear. Multi-class (softmax) or multi-label
    (sigmoid, one logit per class), the loss taken from ``model.loss``."""

    READERS = ("text_classification",)
    MODEL_ARGS = ("encoder", "num_labels", "class_counts", "multi_label", "train_size")
    EMBEDDING = "the pooled text vector the classifier reads (model.pooling)"

    @check_args("model")
    def __init__(self, encoder, num_labels, class_counts=None, multi_label=False,
                 loss: LossSection = None, dropout: Dropout = 0.1, pooling: Pooling = "cls", train_size=None):
        # train_size: the number of training examples (distribution_balanced); None in a model saved before it
        super().__init__(encoder, num_labels, class_counts, multi_label, loss=loss, dropout=dropout,
                         pooling=pooling, train_size=train_size)
