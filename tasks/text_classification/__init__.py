"""Text classification (multi-class and multi-label)."""
from tasks.text_classification import model, reader  # noqa: F401
