"""appzoo: config-driven ERNIE training for imbalanced NLP tasks.

Importing it changes nothing in the process: the CPU defaults of
:func:`appzoo.env.configure_cpu` are set by the command line (run_trainer.py).
"""
