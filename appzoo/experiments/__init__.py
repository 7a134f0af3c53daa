"""The floor under sweep and search: variants of a param file, one job per variant, local and Ray backends."""
