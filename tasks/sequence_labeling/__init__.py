"""Sequence labeling: ERNIE softmax and CRF taggers."""
from tasks.sequence_labeling import model, reader  # noqa: F401
