"""Metrics, registered by name in METRICS; each module is imported here."""
from appzoo.metrics.classification import classification_metrics, multilabel_metrics

__all__ = ["classification_metrics", "multilabel_metrics"]
