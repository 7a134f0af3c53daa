"""Sequence labeling: ERNIE softmax and CRF taggers."""
