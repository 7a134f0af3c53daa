"""Print the ``--set`` that lets a cluster job start or continue its run:
``trainer.resume=true`` when OUTPUT_DIR holds a complete checkpoint, else
``trainer.resume=false``.

    python deploy/resume_arg.py OUTPUT_DIR

A job that Kubernetes or Slurm starts again runs the same command as its first
start. A fixed ``trainer.resume=true`` would refuse that first start (there is
no checkpoint to continue yet); a fixed ``false`` would refuse every restart
(the folder already holds a run). The recipes in this folder ask here instead.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root

from appzoo.archive import RunFolder  # noqa: E402  (it owns what counts as a complete checkpoint)


def main(argv):
    if len(argv) != 1:
        sys.exit("usage: python deploy/resume_arg.py OUTPUT_DIR")
    resume = RunFolder(argv[0]).latest_checkpoint() is not None
    print(f"trainer.resume={str(resume).lower()}")


if __name__ == "__main__":
    main(sys.argv[1:])
