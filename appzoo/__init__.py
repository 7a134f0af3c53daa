"""appzoo: config-driven ERNIE training for imbalanced NLP tasks.

Importing it changes nothing in the process: the CPU defaults of
:func:`appzoo.env.configure_cpu` are set by the command line (run_trainer.py).
"""
from appzoo.env import import_paddle_quietly

__all__ = ["Predictor"]


def __getattr__(name):
    # Lazy: ``import appzoo`` stays cheap; ``from appzoo import Predictor`` loads paddle, without its
    # import-time warnings and without touching the process's settings (appzoo.env).
    if name == "Predictor":
        import_paddle_quietly()
        from appzoo.inference.predictor import Predictor  # paddle: on first use only

        return Predictor
    raise AttributeError(f"module 'appzoo' has no attribute {name!r}")
