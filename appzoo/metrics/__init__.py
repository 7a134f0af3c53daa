"""Metrics, registered by name in METRICS; each module is imported here."""
from appzoo.metrics.classification import classification_metrics, multilabel_metrics
from appzoo.metrics.sequence_labeling import sequence_labeling_metrics
from appzoo.metrics.matching import best_f1_threshold, matching_metrics

__all__ = ["best_f1_threshold", "classification_metrics", "matching_metrics", "multilabel_metrics",
           "sequence_labeling_metrics"]
