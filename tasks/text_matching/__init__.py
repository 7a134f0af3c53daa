"""Text matching: pointwise, pairwise and in-batch ERNIE matchers."""
from tasks.text_matching import model, reader, siamese, triples  # noqa: F401
