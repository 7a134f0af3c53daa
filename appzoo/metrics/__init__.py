"""Metrics, registered by name in METRICS; each module is imported here."""
from appzoo.metrics.classification import classification_metrics, multilabel_metrics
from appzoo.metrics.sequence_labeling import sequence_labeling_metrics
from appzoo.metrics.matching import best_threshold, matching_metrics

__all__ = ["best_threshold", "classification_metrics", "matching_metrics", "multilabel_metrics",
           "scalars", "sequence_labeling_metrics"]


def scalars(metrics):
    """The numeric entries of a metrics dict (per-class tables and bools left out): what is logged and plotted."""
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
