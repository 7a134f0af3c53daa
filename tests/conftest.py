import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.chdir(ROOT)  # param files use paths relative to the repo root

import appzoo.env  # noqa: E402

appzoo.env.configure_cpu()  # as run_trainer.py does, before paddle is imported
appzoo.env.import_paddle_quietly()
import appzoo.losses  # noqa: E402,F401
import appzoo.metrics  # noqa: E402,F401
import tasks  # noqa: E402,F401
