"""Task packages; importing this registers their readers and models."""
from tasks import sequence_labeling, text_classification, text_matching  # noqa: F401
