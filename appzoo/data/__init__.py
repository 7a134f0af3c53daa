"""Data utilities shared by every task: tabular files, batching, vocabularies."""
