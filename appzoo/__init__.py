"""appzoo: config-driven ERNIE training for imbalanced NLP tasks."""
from appzoo.env import configure_cpu

# Must run before anything imports paddle (see appzoo/env.py).
CPU_SETTINGS = configure_cpu()
