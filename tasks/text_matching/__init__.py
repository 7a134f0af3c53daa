"""Text matching: pointwise, pairwise and in-batch ERNIE matchers."""
