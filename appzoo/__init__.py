"""appzoo: config-driven ERNIE training for imbalanced NLP tasks.

Importing it changes nothing in the process: the CPU defaults of
:func:`appzoo.env.configure_cpu` are set by the command line (run_trainer.py).
"""

__all__ = ["Predictor"]


def __getattr__(name):
    # Lazy: ``from appzoo import Predictor`` stays cheap; paddle loads when one is built.
    if name == "Predictor":
        from appzoo.predictor import Predictor

        return Predictor
    raise AttributeError(f"module 'appzoo' has no attribute {name!r}")
